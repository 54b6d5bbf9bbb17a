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

package scenarios

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/clock"

	autoscalingv1alpha1 "github.com/scaleplane/scaleplane/pkg/apis/autoscaling/v1alpha1"
	"github.com/scaleplane/scaleplane/pkg/controllers/cronscaler"
	"github.com/scaleplane/scaleplane/test/integration/framework"
)

// InheritedFiringNotReapplied is issue 17's crash window on the real
// apiserver, whose managedFields it relies on: a controller applies a slot to
// three Deployments and stops before it can record any (its status writes
// fail until its drain timeout). Then someone changes web-b through the
// object (as kubectl edit or a GitOps tool does) and web-c through the scale
// subresource (as kubectl scale does). The next controller:
//   - web-a: applies the slot again, the same value (the apiserver keeps no
//     time for scale-subresource writes, only that the cron-scaler was the
//     last to change replicas), which changes nothing;
//   - web-b: does not undo the change, and records why;
//   - web-c: applies the slot again, undoing the change: the remaining
//     window the README describes (a scale-subresource write has no time).
//
// Real time: it waits for a real minute boundary (up to 70 s) and the drain
// timeout (15 s).
func InheritedFiringNotReapplied(t *testing.T, cp *framework.ControlPlane) {
	ctx := context.Background()
	ns := cp.CreateNamespace(t)
	deployments := cp.KubeClient().AppsV1().Deployments(ns)
	names := []string{"a", "b", "c"}
	for _, name := range names {
		if _, err := deployments.Create(ctx, deployment("web-"+name, 1), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	slot := time.Now().UTC().Add(10 * time.Second).Truncate(time.Minute).Add(time.Minute)
	schedule := fmt.Sprintf("%d %d * * *", slot.Minute(), slot.Hour())
	crons := cp.Client().AutoscalingV1alpha1().CronFederatedHPAs(ns)
	for _, name := range names {
		if _, err := crons.Create(ctx, cronOf(name, deploymentRef("web-"+name), replicasRule("r", schedule, 10)), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		_ = crons.DeleteCollection(context.Background(), metav1.DeleteOptions{}, metav1.ListOptions{})
	})

	first := StartController(t, cp, ns, clock.RealClock{})
	first.RefuseStatusWrites(true)
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Until(slot)+30*time.Second, true, func(ctx context.Context) (bool, error) {
		for _, name := range names {
			if deploymentReplicas(ctx, t, cp, ns, "web-"+name) != 10 {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		t.Fatalf("the first controller did not apply the %s slot: %v", slot.Format(time.RFC3339), err)
	}
	first.Stop()
	if h := history(ctx, cp, ns, "a"); h != nil && len(h.SuccessfulExecutions) > 0 {
		t.Fatalf("the slot was recorded although every status write failed: %+v", h)
	}

	// The premise, as the apiserver keeps it: the cron-scaler's write through
	// the scale subresource is its entry, owning spec.replicas, and has no
	// time. (If a future apiserver keeps the time, the cron-scaler's check
	// uses it; this test then says the README's remaining window closed.)
	webA, err := deployments.Get(ctx, "web-a", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	entry := findEntry(webA.ManagedFields, cronscaler.FieldManager)
	if entry == nil || entry.Subresource != "scale" || entry.FieldsV1 == nil || !strings.Contains(entry.FieldsV1.GetRawString(), `"f:replicas"`) {
		t.Fatalf("web-a's managedFields %+v have no %s entry for the scale subresource owning spec.replicas", webA.ManagedFields, cronscaler.FieldManager)
	}
	if entry.Time != nil {
		t.Errorf("the scale-subresource entry has a time (%v): the README's remaining window may be closed; update it", entry.Time)
	}

	// web-b is changed through the object, web-c through its scale.
	patch := []byte(`{"spec":{"replicas":3}}`)
	if _, err := deployments.Patch(ctx, "web-b", types.MergePatchType, patch, metav1.PatchOptions{FieldManager: "kubectl-edit"}); err != nil {
		t.Fatal(err)
	}
	sc, err := deployments.GetScale(ctx, "web-c", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sc.Spec.Replicas = 3
	if _, err := deployments.UpdateScale(ctx, "web-c", sc, metav1.UpdateOptions{FieldManager: "kubectl-scale"}); err != nil {
		t.Fatal(err)
	}

	StartController(t, cp, ns, clock.RealClock{})
	for _, name := range []string{"a", "c"} {
		waitForStatus(ctx, t, cp, ns, name, 30*time.Second, "the inherited slot recorded", func(h *autoscalingv1alpha1.ExecutionHistory) bool {
			return len(h.SuccessfulExecutions) == 1 && h.SuccessfulExecutions[0].ScheduleTime.Time.Equal(slot)
		})
	}
	again, err := deployments.Get(ctx, "web-a", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if again.ResourceVersion != webA.ResourceVersion {
		t.Errorf("web-a changed (resourceVersion %s, was %s); writing the same replicas again must change nothing", again.ResourceVersion, webA.ResourceVersion)
	}
	if got := deploymentReplicas(ctx, t, cp, ns, "web-c"); got != 10 {
		t.Errorf("web-c has %d replicas; the remaining window (a scale-subresource change has no time) applies the slot again", got)
	}

	h := waitForStatus(ctx, t, cp, ns, "b", 30*time.Second, "the inherited slot refused", func(h *autoscalingv1alpha1.ExecutionHistory) bool {
		return len(h.FailedExecutions) == 1 && h.FailedExecutions[0].ScheduleTime.Time.Equal(slot)
	})
	if msg := h.FailedExecutions[0].Message; !strings.Contains(msg, "spec.replicas changed by kubectl-edit") {
		t.Errorf("failed execution %q; want it to name kubectl-edit's change", msg)
	}
	if got := deploymentReplicas(ctx, t, cp, ns, "web-b"); got != 3 {
		t.Errorf("web-b has %d replicas; the second controller undid the change made through the object", got)
	}
}

// findEntry returns manager's managedFields entry, if any.
func findEntry(entries []metav1.ManagedFieldsEntry, manager string) *metav1.ManagedFieldsEntry {
	for i := range entries {
		if entries[i].Manager == manager {
			return &entries[i]
		}
	}
	return nil
}

// AnotherStatusWriterReported is issue 16's guard on the real apiserver: when
// something else writes a CronFederatedHPA's status with its own field
// manager (Karmada's cron controller, switched back on), the cron-scaler
// says so with a Warning event naming it, at the sync that follows.
func AnotherStatusWriterReported(t *testing.T, cp *framework.ControlPlane) {
	s := startFakeTime(t, cp, cronOf("guarded", deploymentRef("web"), replicasRule("r", "0 * * * *", 10)), 0)
	h1 := s.clock.Now().Truncate(time.Hour).Add(time.Hour)
	s.waitFor("the first plan", nextIs(h1))
	s.settle()

	crons := cp.Client().AutoscalingV1alpha1().CronFederatedHPAs(s.ns)
	err := wait.PollUntilContextTimeout(s.ctx, 50*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		obj, err := crons.Get(ctx, s.name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		obj.Status.ExecutionHistories[0].SuccessfulExecutions = []autoscalingv1alpha1.SuccessfulExecution{{
			ScheduleTime: &metav1.Time{Time: h1.Add(-time.Hour)}, ExecutionTime: &metav1.Time{Time: h1.Add(-time.Hour)},
		}}
		_, err = crons.UpdateStatus(ctx, obj, metav1.UpdateOptions{FieldManager: "karmada-controller-manager"})
		return err == nil, nil
	})
	if err != nil {
		t.Fatalf("writing status as karmada-controller-manager: %v", err)
	}
	err = wait.PollUntilContextTimeout(s.ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		s.clock.Step(time.Millisecond)
		events, err := cp.KubeClient().CoreV1().Events(s.ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		for _, e := range events.Items {
			if e.Reason == "ManagedByAnotherController" && e.InvolvedObject.Name == s.name && strings.Contains(e.Message, "karmada-controller-manager") {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("no ManagedByAnotherController event naming karmada-controller-manager: %v", err)
	}
}
