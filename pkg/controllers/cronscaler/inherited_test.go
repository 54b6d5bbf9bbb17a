/*
Copyright The scaleplane Authors.

Licensed under the Apache License, Version 2.0 (the "License");
you may not use this file except in compliance with the License.
You may obtain a copy of the License at

    http://www.apache.org/licenses/LICENSE-2.0

Unless required by applicable law or agreed to in writing, software
distributed under the License is distributed on an "AS IS" BASIS,
WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
See the License for the specific language governing permissions and
limitations under the License.
*/

package cronscaler

import (
	"strings"
	"testing"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	autoscalingv1alpha1 "github.com/scaleplane/scaleplane/pkg/apis/autoscaling/v1alpha1"
)

// crashAfterTargetWrite applies the 08:00 slot of c (web: 1 → 10) and ends
// the process before its status is written, as a crash would; the test then
// starts the successor with newController.
func crashAfterTargetWrite(t *testing.T, crd schemaVariant) *harness {
	h := newHarnessOn(t, crd, utc("2024-05-01 07:59:59"), cron("c", rule("r", "0 8 * * *", 10)))
	h.scales.set("deployments", "web", 1)
	h.syncAt(utc("2024-05-01 07:59:59"), "c")
	h.client.ClearActions()
	h.clock.SetTime(utc("2024-05-01 08:00:00.100"))
	if _, record, err := h.c.fireSync(h.ctx, cache.ObjectName{Namespace: ns, Name: "c"}); err != nil || !record {
		t.Fatalf("fire phase: record %v, err %v", record, err)
	}
	if got := h.scales.get("deployments", "web"); got != 10 {
		t.Fatalf("replicas = %d; want 10", got)
	}
	return h
}

// Issue 17, the crash window: a process that dies after the target write and
// before the status write leaves the firing to its successor. On a target
// written through its scale subresource the apiserver keeps no time of the
// write, only that the cron-scaler was the last to change replicas: the
// successor writes the same value again (undoing nobody's change) and
// records the slot once.
func TestInheritedFiringOnAScaleTargetWeWroteLast(t *testing.T) {
	forEachSchema(t, func(t *testing.T, crd schemaVariant) {
		h := crashAfterTargetWrite(t, crd)
		h.clock.SetTime(utc("2024-05-01 08:00:01"))
		h.newController()
		h.syncAt(utc("2024-05-01 08:00:02"), "c")
		if got := h.scales.get("deployments", "web"); got != 10 {
			t.Errorf("replicas = %d; want 10", got)
		}
		hist := h.history("c", "r")
		if len(hist.SuccessfulExecutions) != 1 || !hist.SuccessfulExecutions[0].ScheduleTime.Time.Equal(utc("2024-05-01 08:00:00")) {
			t.Errorf("successful executions %+v; want 08:00 recorded once", hist.SuccessfulExecutions)
		}
		h.syncAt(utc("2024-05-01 08:00:03"), "c")
		if n, w := h.scales.updateCount(), h.statusWrites(); n != 2 || w != 1 {
			t.Errorf("%d target writes and %d status writes; want 2 (the same value once more) and 1", n, w)
		}
	})
}

// Issue 17, the crash window: when someone changed the target through the
// object after the predecessor's write (kubectl edit, apply, a GitOps tool),
// applying the slot again would undo that change. It is not applied; the
// slot is recorded as failed, naming who changed what and when.
func TestInheritedFiringNeverUndoesALaterChange(t *testing.T) {
	forEachSchema(t, func(t *testing.T, crd schemaVariant) {
		h := crashAfterTargetWrite(t, crd)
		h.clock.SetTime(utc("2024-05-01 08:00:01"))
		h.scales.scaleBy("kubectl-edit", "", "deployments", "web", 3)
		h.newController()
		h.syncAt(utc("2024-05-01 08:00:05"), "c")
		if got := h.scales.get("deployments", "web"); got != 3 {
			t.Errorf("replicas = %d; the successor undid the change made after the predecessor's write", got)
		}
		hist := h.history("c", "r")
		if len(hist.FailedExecutions) != 1 || !strings.Contains(hist.FailedExecutions[0].Message, "spec.replicas changed by kubectl-edit at 2024-05-01T08:00:01Z") {
			t.Errorf("failed executions %+v; want 08:00 recorded as not applied again, naming kubectl-edit", hist.FailedExecutions)
		}
		h.expectEvent(`Warning NotReapplied Rule "r" (scheduled 2024-05-01T08:00:00Z): not applied`)
	})
}

// What remains of the crash window, as the README says: a change through the
// scale subresource (kubectl scale) has no time in managedFields, so the
// successor cannot tell it came after the predecessor's write, and applies
// the slot again.
func TestInheritedFiringAfterAScaleSubresourceChange(t *testing.T) {
	h := crashAfterTargetWrite(t, projectSchema)
	h.clock.SetTime(utc("2024-05-01 08:00:01"))
	h.scales.scaleBy("kubectl-scale", "scale", "deployments", "web", 3)
	h.newController()
	h.syncAt(utc("2024-05-01 08:00:05"), "c")
	if got := h.scales.get("deployments", "web"); got != 10 {
		t.Errorf("replicas = %d; want 10, the documented remaining window", got)
	}
}

// An inherited firing that the predecessor did not apply (it was down at the
// slot) runs, also when the target was changed before the slot.
func TestInheritedFiringNotAppliedRuns(t *testing.T) {
	forEachSchema(t, func(t *testing.T, crd schemaVariant) {
		h := newHarnessOn(t, crd, utc("2024-05-01 07:00:00"), cron("c", rule("r", "0 8 * * *", 10)))
		h.scales.set("deployments", "web", 1)
		h.syncAt(utc("2024-05-01 07:00:00"), "c")
		h.clock.SetTime(utc("2024-05-01 07:30:00"))
		h.scales.scaleBy("kubectl-edit", "", "deployments", "web", 2)
		h.clock.SetTime(utc("2024-05-01 08:00:30"))
		h.newController()
		h.syncAt(utc("2024-05-01 08:00:31"), "c")
		if got := h.scales.get("deployments", "web"); got != 10 {
			t.Errorf("replicas = %d; want 10: the slot missed while down runs", got)
		}
		if hist := h.history("c", "r"); len(hist.SuccessfulExecutions) != 1 {
			t.Errorf("successful executions %+v; want 08:00", hist.SuccessfulExecutions)
		}
	})
}

// The check reads an autoscaler target's managedFields from the read it
// makes anyway: an HPA whose maxReplicas the cron-scaler set at the slot, and
// which holds the slot's value, is not updated again by the successor.
func TestInheritedFiringOnAnHPA(t *testing.T) {
	obj := cron("c", autoscalingv1alpha1.CronFederatedHPARule{Name: "r", Schedule: "0 8 * * *", TimeZone: ptr.To("UTC"), TargetMaxReplicas: ptr.To[int32](50)})
	obj.Spec.ScaleTargetRef = autoscalingv2.CrossVersionObjectReference{APIVersion: "autoscaling/v2", Kind: "HorizontalPodAutoscaler", Name: "hpa"}
	at := metav1.NewTime(utc("2024-05-01 08:00:00"))
	hpa := &autoscalingv2.HorizontalPodAutoscaler{
		ObjectMeta: metav1.ObjectMeta{Name: "hpa", Namespace: ns, ManagedFields: []metav1.ManagedFieldsEntry{{
			Manager: FieldManager, Operation: metav1.ManagedFieldsOperationUpdate, Time: &at,
			FieldsType: "FieldsV1", FieldsV1: metav1.NewFieldsV1(`{"f:spec":{"f:maxReplicas":{}}}`),
		}}},
		Spec: autoscalingv2.HorizontalPodAutoscalerSpec{MinReplicas: ptr.To[int32](1), MaxReplicas: 50},
	}
	h := newHarness(t, utc("2024-05-01 07:00:00"), obj, hpa)
	h.syncAt(utc("2024-05-01 07:00:00"), "c")
	h.clock.SetTime(utc("2024-05-01 08:00:01"))
	h.newController()
	h.kube.ClearActions()
	h.syncAt(utc("2024-05-01 08:00:02"), "c")
	for _, a := range h.kube.Actions() {
		if a.GetVerb() == "update" && a.GetResource().Resource == "horizontalpodautoscalers" {
			t.Errorf("the successor wrote the HPA again: %v", a)
		}
	}
	if e := h.history("c", "r").SuccessfulExecutions; len(e) != 1 || !e[0].ExecutionTime.Time.Equal(at.Time) {
		t.Errorf("successful executions %+v; want 08:00 recorded as applied at 08:00", e)
	}
}

// inspectManagedFields on the shapes the apiserver writes.
func TestInspectManagedFields(t *testing.T) {
	slot := utc("2024-05-01 08:00:00")
	entry := func(manager, sub string, at string, fields string) metav1.ManagedFieldsEntry {
		tm := metav1.NewTime(utc(at))
		return metav1.ManagedFieldsEntry{Manager: manager, Operation: metav1.ManagedFieldsOperationUpdate, Subresource: sub, Time: &tm,
			FieldsType: "FieldsV1", FieldsV1: metav1.NewFieldsV1(fields)}
	}
	replicas := `{"f:spec":{"f:replicas":{}}}`
	cases := []struct {
		name    string
		entries []metav1.ManagedFieldsEntry
		want    string
	}{
		{"no entries", nil, ""},
		{"ours before the slot", []metav1.ManagedFieldsEntry{entry(FieldManager, "scale", "2024-05-01 07:00:00", replicas)}, ""},
		{"ours in the slot's second", []metav1.ManagedFieldsEntry{entry(FieldManager, "scale", "2024-05-01 08:00:00", replicas)}, "applied"},
		{"another's before the slot", []metav1.ManagedFieldsEntry{entry("kubectl", "", "2024-05-01 07:59:59", replicas)}, ""},
		{"another's after the slot, other fields", []metav1.ManagedFieldsEntry{entry("kubectl", "", "2024-05-01 08:01:00", `{"f:metadata":{"f:labels":{}}}`)}, ""},
		{"another's after the slot", []metav1.ManagedFieldsEntry{entry("kube-controller-manager", "", "2024-05-01 08:01:00", replicas)}, "kube-controller-manager"},
		{"ours without a time (scale subresource)", []metav1.ManagedFieldsEntry{{Manager: FieldManager, Subresource: "scale",
			FieldsV1: metav1.NewFieldsV1(replicas)}}, ""},
	}
	for _, tc := range cases {
		w := inspectManagedFields(tc.entries, []string{"spec.replicas"}, slot)
		got := w.by
		if w.applied {
			got = "applied"
		}
		if got != tc.want {
			t.Errorf("%s: %+v; want %q", tc.name, w, tc.want)
		}
	}
}

// Issue 17, a new leader's first list: client-go may list from the
// apiserver's watch cache, which can be behind the status the predecessor
// wrote last. Before applying a firing due before it started, the controller
// reads the object from the apiserver and plans from it when it is newer.
func TestInheritedFiringPlansFromAFreshRead(t *testing.T) {
	forEachSchema(t, func(t *testing.T, crd schemaVariant) {
		h := newHarnessOn(t, crd, utc("2024-05-01 07:59:59"), cron("c", rule("r", "0 8 * * *", 10)))
		h.scales.set("deployments", "web", 1)
		h.syncAt(utc("2024-05-01 07:59:59"), "c")
		before := h.get("c")
		h.syncAt(utc("2024-05-01 08:00:00.100"), "c") // applied and recorded
		h.clock.SetTime(utc("2024-05-01 08:00:01"))
		h.newController()
		// The new leader's first list missed the last status write.
		if err := h.indexer.Update(before); err != nil {
			t.Fatal(err)
		}
		h.client.ClearActions()
		if _, err := h.trySyncAt(utc("2024-05-01 08:00:02"), "c"); err != nil {
			t.Fatal(err)
		}
		reads := 0
		for _, a := range h.client.Actions() {
			if a.GetVerb() == "get" && a.GetResource().Resource == "cronfederatedhpas" {
				reads++
			}
		}
		if reads != 1 {
			t.Errorf("%d reads of the object; want 1 before the inherited firing", reads)
		}
		if n, w := h.scales.updateCount(), h.statusWrites(); n != 1 || w != 0 {
			t.Errorf("%d target writes, %d status writes; want 1 and 0: the fresh object already records 08:00", n, w)
		}
		if hist := h.history("c", "r"); len(hist.SuccessfulExecutions) != 1 {
			t.Errorf("successful executions %+v; want 08:00 once", hist.SuccessfulExecutions)
		}
	})
}

// trackHPAManagedFields makes HPA updates in the fake clientset move the
// time of the writer's managedFields entry to the clock's (in seconds), as
// the apiserver does for a write that changes something: a field manager
// has one Update entry, whatever fields each write changed, and it keeps
// owning what it set before.
func (h *harness) trackHPAManagedFields() {
	h.kube.PrependReactor("update", "horizontalpodautoscalers", func(action clienttesting.Action) (bool, runtime.Object, error) {
		update := action.(clienttesting.UpdateActionImpl)
		hpa := update.GetObject().(*autoscalingv2.HorizontalPodAutoscaler)
		at := metav1.NewTime(h.clock.Now().UTC().Truncate(time.Second))
		for i := range hpa.ManagedFields {
			if hpa.ManagedFields[i].Manager == update.UpdateOptions.FieldManager {
				hpa.ManagedFields[i].Time = &at
			}
		}
		return false, nil, nil
	})
}

// Issue 26, case 4: two CronFederatedHPAs on one HPA, one setting
// minReplicas and the other maxReplicas, both due at 08:00, the controller
// down from 07:55 to 08:05. The successor writes the first; the
// cron-scaler's one managedFields entry on the HPA then says it changed the
// HPA after 08:00, and owns maxReplicas from an earlier day: the second
// firing must not be taken as applied on that alone, since maxReplicas does
// not hold its value.
func TestInheritedFiringsOfTwoObjectsOnOneHPA(t *testing.T) {
	onHPA := func(name string, r autoscalingv1alpha1.CronFederatedHPARule) *autoscalingv1alpha1.CronFederatedHPA {
		obj := cron(name, r)
		obj.Spec.ScaleTargetRef = autoscalingv2.CrossVersionObjectReference{APIVersion: "autoscaling/v2", Kind: "HorizontalPodAutoscaler", Name: "hpa"}
		return obj
	}
	yesterday := metav1.NewTime(utc("2024-04-30 20:00:00"))
	hpa := &autoscalingv2.HorizontalPodAutoscaler{
		ObjectMeta: metav1.ObjectMeta{Name: "hpa", Namespace: ns, ManagedFields: []metav1.ManagedFieldsEntry{{
			Manager: FieldManager, Operation: metav1.ManagedFieldsOperationUpdate, Time: &yesterday,
			FieldsType: "FieldsV1", FieldsV1: metav1.NewFieldsV1(`{"f:spec":{"f:maxReplicas":{},"f:minReplicas":{}}}`),
		}}},
		Spec: autoscalingv2.HorizontalPodAutoscalerSpec{MinReplicas: ptr.To[int32](1), MaxReplicas: 10},
	}
	h := newHarness(t, utc("2024-05-01 07:55:00"), hpa,
		onHPA("min", autoscalingv1alpha1.CronFederatedHPARule{Name: "r", Schedule: "0 8 * * *", TimeZone: ptr.To("UTC"), TargetMinReplicas: ptr.To[int32](5)}),
		onHPA("max", autoscalingv1alpha1.CronFederatedHPARule{Name: "r", Schedule: "0 8 * * *", TimeZone: ptr.To("UTC"), TargetMaxReplicas: ptr.To[int32](50)}))
	h.trackHPAManagedFields()
	h.syncAt(utc("2024-05-01 07:55:00"), "min")
	h.syncAt(utc("2024-05-01 07:55:00"), "max")
	h.clock.SetTime(utc("2024-05-01 08:05:00"))
	h.newController()
	h.syncAt(utc("2024-05-01 08:05:00"), "min")
	h.syncAt(utc("2024-05-01 08:05:01"), "max")
	got, err := h.kube.AutoscalingV2().HorizontalPodAutoscalers(ns).Get(h.ctx, "hpa", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if ptr.Deref(got.Spec.MinReplicas, 0) != 5 || got.Spec.MaxReplicas != 50 {
		t.Errorf("minReplicas %d, maxReplicas %d; want 5 and 50: both 08:00 firings applied", ptr.Deref(got.Spec.MinReplicas, 0), got.Spec.MaxReplicas)
	}
	for _, name := range []string{"min", "max"} {
		if e := h.history(name, "r").SuccessfulExecutions; len(e) != 1 {
			t.Errorf("%s: successful executions %+v; want 08:00", name, e)
		}
	}
}

// A firing that sets both bounds of an HPA, applied at 08:00 by a
// predecessor that died before recording it; at 08:00:30 a GitOps tool sets
// maxReplicas through the object. The cron-scaler's entry still owns
// minReplicas, with 08:00 as its time, and maxReplicas no longer holds the
// firing's value: the firing is not taken as applied, and argocd's change
// must still be found and kept (the simulator's seeds 12959, 13031, 14998
// and 15167 found the successor writing maxReplicas back).
func TestInheritedFiringOfBothBoundsKeepsAnotherManagersChange(t *testing.T) {
	obj := cron("c", autoscalingv1alpha1.CronFederatedHPARule{Name: "r", Schedule: "0 8 * * *", TimeZone: ptr.To("UTC"),
		TargetMinReplicas: ptr.To[int32](5), TargetMaxReplicas: ptr.To[int32](50)})
	obj.Spec.ScaleTargetRef = autoscalingv2.CrossVersionObjectReference{APIVersion: "autoscaling/v2", Kind: "HorizontalPodAutoscaler", Name: "hpa"}
	ours := metav1.NewTime(utc("2024-05-01 08:00:00"))
	theirs := metav1.NewTime(utc("2024-05-01 08:00:30"))
	hpa := &autoscalingv2.HorizontalPodAutoscaler{
		ObjectMeta: metav1.ObjectMeta{Name: "hpa", Namespace: ns, ManagedFields: []metav1.ManagedFieldsEntry{{
			Manager: FieldManager, Operation: metav1.ManagedFieldsOperationUpdate, Time: &ours,
			FieldsType: "FieldsV1", FieldsV1: metav1.NewFieldsV1(`{"f:spec":{"f:minReplicas":{}}}`),
		}, {
			Manager: "argocd", Operation: metav1.ManagedFieldsOperationUpdate, Time: &theirs,
			FieldsType: "FieldsV1", FieldsV1: metav1.NewFieldsV1(`{"f:spec":{"f:maxReplicas":{}}}`),
		}}},
		Spec: autoscalingv2.HorizontalPodAutoscalerSpec{MinReplicas: ptr.To[int32](5), MaxReplicas: 20},
	}
	h := newHarness(t, utc("2024-05-01 07:00:00"), obj, hpa)
	h.syncAt(utc("2024-05-01 07:00:00"), "c")
	h.clock.SetTime(utc("2024-05-01 08:01:00"))
	h.newController()
	h.kube.ClearActions()
	h.syncAt(utc("2024-05-01 08:01:01"), "c")
	got, err := h.kube.AutoscalingV2().HorizontalPodAutoscalers(ns).Get(h.ctx, "hpa", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got.Spec.MaxReplicas != 20 {
		t.Errorf("maxReplicas = %d; want 20: the successor undid argocd's change made after the slot", got.Spec.MaxReplicas)
	}
	hist := h.history("c", "r")
	if len(hist.FailedExecutions) != 1 || !strings.Contains(hist.FailedExecutions[0].Message, "spec.maxReplicas changed by argocd at 2024-05-01T08:00:30Z") {
		t.Errorf("failed executions %+v; want 08:00 recorded as not applied again, naming argocd", hist.FailedExecutions)
	}
	h.expectEvent(`Warning NotReapplied Rule "r" (scheduled 2024-05-01T08:00:00Z): not applied`)
}

// The stated limit of managedFields' one time per manager (issue 26, found
// by the simulator, seeds 23142, 34784 and 42911): argocd set minReplicas
// the day before and maxReplicas at 08:00:30, after the slot; its one entry
// owns both with 08:00:30 as its time. The inherited 08:00 firing of
// minReplicas cannot tell that minReplicas was changed before the slot: it
// is not applied (NotReapplied), and the next slot applies it.
func TestInheritedFiringStoppedByAnotherFieldsLaterChange(t *testing.T) {
	obj := cron("c", autoscalingv1alpha1.CronFederatedHPARule{Name: "r", Schedule: "0 8 * * *", TimeZone: ptr.To("UTC"),
		TargetMinReplicas: ptr.To[int32](5)})
	obj.Spec.ScaleTargetRef = autoscalingv2.CrossVersionObjectReference{APIVersion: "autoscaling/v2", Kind: "HorizontalPodAutoscaler", Name: "hpa"}
	theirs := metav1.NewTime(utc("2024-05-01 08:00:30"))
	hpa := &autoscalingv2.HorizontalPodAutoscaler{
		ObjectMeta: metav1.ObjectMeta{Name: "hpa", Namespace: ns, ManagedFields: []metav1.ManagedFieldsEntry{{
			Manager: "argocd", Operation: metav1.ManagedFieldsOperationUpdate, Time: &theirs,
			FieldsType: "FieldsV1", FieldsV1: metav1.NewFieldsV1(`{"f:spec":{"f:maxReplicas":{},"f:minReplicas":{}}}`),
		}}},
		Spec: autoscalingv2.HorizontalPodAutoscalerSpec{MinReplicas: ptr.To[int32](2), MaxReplicas: 20},
	}
	h := newHarness(t, utc("2024-05-01 07:00:00"), obj, hpa)
	h.syncAt(utc("2024-05-01 07:00:00"), "c")
	h.clock.SetTime(utc("2024-05-01 08:01:00"))
	h.newController()
	h.syncAt(utc("2024-05-01 08:01:01"), "c")
	got, err := h.kube.AutoscalingV2().HorizontalPodAutoscalers(ns).Get(h.ctx, "hpa", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if ptr.Deref(got.Spec.MinReplicas, 0) != 2 {
		t.Errorf("minReplicas = %d; want 2: argocd's entry says it changed minReplicas after the slot", ptr.Deref(got.Spec.MinReplicas, 0))
	}
	h.expectEvent(`Warning NotReapplied Rule "r" (scheduled 2024-05-01T08:00:00Z): not applied`)
	h.syncAt(utc("2024-05-02 08:00:00.100"), "c")
	got, err = h.kube.AutoscalingV2().HorizontalPodAutoscalers(ns).Get(h.ctx, "hpa", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if ptr.Deref(got.Spec.MinReplicas, 0) != 5 {
		t.Errorf("minReplicas = %d; want 5 from the next slot", ptr.Deref(got.Spec.MinReplicas, 0))
	}
}
