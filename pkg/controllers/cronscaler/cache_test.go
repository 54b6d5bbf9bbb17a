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
	"unsafe"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	autoscalingv1alpha1 "github.com/scaleplane/scaleplane/pkg/apis/autoscaling/v1alpha1"
	"github.com/scaleplane/scaleplane/pkg/cronplan"
)

// The cache keeps what planning and the guard read, and drops the rest.
func TestStripForCache(t *testing.T) {
	obj := cron("c", rule("r", "0 8 * * *", 10))
	at := metav1Time("2024-05-01 07:00:00")
	earlier, later := metav1Time("2024-05-01 06:00:00"), metav1Time("2024-05-01 07:30:00")
	obj.ManagedFields = []metav1.ManagedFieldsEntry{{
		Manager: "helm", Operation: metav1.ManagedFieldsOperationUpdate, Time: &earlier,
		FieldsType: "FieldsV1", FieldsV1: metav1.NewFieldsV1(`{"f:spec":{"f:scaleTargetRef":{}}}`),
	}, {
		Manager: "kubectl-client-side-apply", Operation: metav1.ManagedFieldsOperationUpdate, Time: &at,
		FieldsType: "FieldsV1", FieldsV1: metav1.NewFieldsV1(`{"f:spec":{"f:rules":{}}}`),
	}, {
		Manager: "karmada-controller-manager", Operation: metav1.ManagedFieldsOperationUpdate, Time: &earlier, Subresource: "status",
		FieldsType: "FieldsV1", FieldsV1: metav1.NewFieldsV1(`{"f:status":{}}`),
	}, {
		Manager: FieldManager, Operation: metav1.ManagedFieldsOperationUpdate, Time: &later, Subresource: "status",
		FieldsType: "FieldsV1", FieldsV1: metav1.NewFieldsV1(`{"f:status":{}}`),
	}}
	obj.Annotations = map[string]string{lastAppliedAnnotation: `{"spec":{}}`, "team": "web"}
	out, err := stripForCache(obj)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := cronOf(out)
	if len(got.ManagedFields) != 2 {
		t.Fatalf("managedFields %+v; want the newest entry of the object and the newest of its status", got.ManagedFields)
	}
	if e := got.ManagedFields[0]; e.FieldsV1 != nil || e.Manager != "kubectl-client-side-apply" || e.Time == nil || !e.Time.Equal(&at) || e.Subresource != "" {
		t.Errorf("object entry %+v; want the newest one, manager and time kept, field set dropped", e)
	}
	if e := got.ManagedFields[1]; e.FieldsV1 != nil || e.Manager != FieldManager || !e.Time.Equal(&later) || e.Subresource != "status" {
		t.Errorf("status entry %+v; want the newest one, field set dropped", e)
	}
	if at := cronplan.LastSpecChange(got, metav1Time("2024-05-02 00:00:00").Time); !at.Equal(metav1Time("2024-05-01 07:00:00").Time) {
		t.Errorf("cronplan.LastSpecChange of the cached object = %v; want 07:00, as on the whole object", at)
	}
	if m, _ := timelineOf(got).newestStatusWrite(); m != FieldManager {
		t.Errorf("newestStatusWrite of the cached object = %q; want %q, as on the whole object", m, FieldManager)
	}
	if _, ok := got.Annotations[lastAppliedAnnotation]; ok || got.Annotations["team"] != "web" {
		t.Errorf("annotations %v; want the last-applied copy dropped, the rest kept", got.Annotations)
	}
	if len(got.Spec.Rules) != 1 {
		t.Errorf("spec lost: %+v", got.Spec)
	}
	// Another cron controller wrote status last: the cron-scaler's own
	// status entry is kept too, for cronplan.OwnStatusWrite.
	foreign := cron("c", rule("r", "0 8 * * *", 10))
	newest := metav1Time("2024-05-01 08:00:00")
	foreign.ManagedFields = []metav1.ManagedFieldsEntry{
		{Manager: FieldManager, Operation: metav1.ManagedFieldsOperationUpdate, Time: &later, Subresource: "status"},
		{Manager: "karmada-controller-manager", Operation: metav1.ManagedFieldsOperationUpdate, Time: &newest, Subresource: "status"},
	}
	out, _ = stripForCache(foreign)
	got, _ = cronOf(out)
	if m, _ := timelineOf(got).newestStatusWrite(); m != "karmada-controller-manager" {
		t.Errorf("newestStatusWrite of the cached object = %q; want karmada-controller-manager", m)
	}
	if at := cronplan.OwnStatusWrite(got); !at.Equal(later.Time) {
		t.Errorf("cronplan.OwnStatusWrite of the cached object = %v; want 07:30, the cron-scaler's own entry", at)
	}
	tombstone := cache.DeletedFinalStateUnknown{Key: "default/c"}
	if out, err := stripForCache(tombstone); err != nil || out != tombstone {
		t.Errorf("a tombstone came out as %v, %v", out, err)
	}
}

// Strings every object repeats are stored once, whichever object they came
// from.
func TestStripForCacheSharesRepeatedStrings(t *testing.T) {
	decode := func(name string) *autoscalingv1alpha1.CronFederatedHPA {
		// As decoded from the apiserver: each object's strings apart.
		obj := cron(name, rule("r", "0 8 * * *", 10))
		obj.Namespace = strings.Clone("team-a")
		obj.Spec.ScaleTargetRef.Kind = strings.Clone("Deployment")
		out, err := stripForCache(obj)
		if err != nil {
			t.Fatal(err)
		}
		got, _ := cronOf(out)
		return got
	}
	a, b := decode("a"), decode("b")
	if unsafe.StringData(a.Namespace) != unsafe.StringData(b.Namespace) {
		t.Error("two cached objects hold their namespace apart")
	}
	if unsafe.StringData(a.Spec.ScaleTargetRef.Kind) != unsafe.StringData(b.Spec.ScaleTargetRef.Kind) {
		t.Error("two cached objects hold their target's kind apart")
	}
	if a.Namespace != "team-a" || a.Spec.ScaleTargetRef.Kind != "Deployment" || a.Name != "a" || b.Name != "b" {
		t.Errorf("values changed: %q %q %q %q", a.Namespace, a.Spec.ScaleTargetRef.Kind, a.Name, b.Name)
	}
}
