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

package karmada

import (
	"context"
	"fmt"
	"testing"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"

	autoscalingv1alpha1 "github.com/scaleplane/scaleplane/pkg/apis/autoscaling/v1alpha1"
	lwsv1 "github.com/scaleplane/scaleplane/pkg/apis/leaderworkerset/v1"
	"github.com/scaleplane/scaleplane/test/integration/framework"
)

// TestCronMovesFederatedHPABounds is issue 28's "three controllers together"
// on Karmada, with the real manager running the cron-scaler and the
// hpa-generator, at a real slot (up to 70 s), in the form
// docs/karmada/leaderworkerset.md gives (issue 35, item 15: the only form
// karmada-webhook admits for bounds without targetReplicas):
//   - a rule's targetMinReplicas/targetMaxReplicas aimed at the generated
//     FederatedHPA move the LeaderWorkerSet's scalePolicy bounds (the
//     cron-scaler never writes the generated FederatedHPA, which the
//     generator would put back), recorded as applied;
//   - the FederatedHPA follows from the LeaderWorkerSet's update event,
//     within seconds of it, not at a later resync.
//
// A rule aimed at the LeaderWorkerSet itself takes the same path on a plain
// cluster (test/integration/cronscaler, ControllersTogether).
func TestCronMovesFederatedHPABounds(t *testing.T) {
	cp := framework.Get(t)
	ns := cp.CreateNamespace(t)
	ctx := context.Background()
	lws := createLWS(t, cp, leaderWorkerSet(ns, "vllm", &lwsv1.ScalePolicy{MinReplicas: ptr.To[int32](1), MaxReplicas: 5, Metrics: []autoscalingv2.MetricSpec{cpuMetric(70)}}))
	framework.StartManager(t, cp.KubeconfigPath(), "cron-scaler,hpa-generator")
	waitFHPA(t, cp, ns, "vllm", generated(lws, 1, 5, 70))

	slot := time.Now().UTC().Add(10 * time.Second).Truncate(time.Minute).Add(time.Minute)
	schedule := fmt.Sprintf("%d %d * * *", slot.Minute(), slot.Hour())
	crons := cp.Client().AutoscalingV1alpha1().CronFederatedHPAs(ns)
	if _, err := crons.Create(ctx, &autoscalingv1alpha1.CronFederatedHPA{
		ObjectMeta: metav1.ObjectMeta{Name: "generated"},
		Spec: autoscalingv1alpha1.CronFederatedHPASpec{
			ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "autoscaling.karmada.io/v1alpha1", Kind: "FederatedHPA", Name: "vllm"},
			Rules: []autoscalingv1alpha1.CronFederatedHPARule{{Name: "peak", Schedule: schedule, TimeZone: ptr.To("UTC"),
				TargetMinReplicas: ptr.To[int32](3), TargetMaxReplicas: ptr.To[int32](10)}},
		},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = crons.DeleteCollection(context.Background(), metav1.DeleteOptions{}, metav1.ListOptions{})
	})

	// The policy's bounds move at the slot...
	var moved time.Time
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Until(slot)+30*time.Second, true, func(ctx context.Context) (bool, error) {
		l, err := cp.Client().LeaderworkersetV1().LeaderWorkerSets(ns).Get(ctx, "vllm", metav1.GetOptions{})
		if err != nil || ptr.Deref(l.Spec.ScalePolicy.MinReplicas, 0) != 3 || l.Spec.ScalePolicy.MaxReplicas != 10 {
			return false, nil
		}
		moved = time.Now()
		return true, nil
	})
	if err != nil {
		t.Fatalf("the rule on the generated FederatedHPA did not move the LeaderWorkerSet's scalePolicy bounds to 3/10: %v", err)
	}
	// ...and the FederatedHPA follows from that update's event, well within
	// the informers' resync (none is configured shorter than minutes).
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		f, err := cp.Client().AutoscalingV1alpha1().FederatedHPAs(ns).Get(ctx, "vllm", metav1.GetOptions{})
		return err == nil && ptr.Deref(f.Spec.MinReplicas, 0) == 3 && f.Spec.MaxReplicas == 10, nil
	})
	if err != nil {
		t.Fatalf("the generated FederatedHPA did not follow the scalePolicy's bounds 3/10 within 10 s: %v", err)
	}
	t.Logf("the FederatedHPA followed %v after the scalePolicy moved", time.Since(moved).Round(time.Millisecond))
	cp.WaitForEvent(t, ns, "vllm", "HPAUpdated", "Updated FederatedHPA vllm: minReplicas, maxReplicas", waitTimeout)

	// The firing is recorded as applied, with the bounds.
	var history autoscalingv1alpha1.ExecutionHistory
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		c, err := crons.Get(ctx, "generated", metav1.GetOptions{})
		if err != nil || len(c.Status.ExecutionHistories) == 0 {
			return false, nil
		}
		history = c.Status.ExecutionHistories[0]
		return len(history.SuccessfulExecutions)+len(history.FailedExecutions) > 0, nil
	})
	if err != nil {
		t.Fatalf("the rule on the generated FederatedHPA was not recorded: %v", err)
	}
	if f := history.FailedExecutions; len(f) > 0 {
		t.Errorf("failed executions %+v; want the firing applied", f)
	}
	if e := history.SuccessfulExecutions; len(e) != 1 || ptr.Deref(e[0].AppliedMinReplicas, 0) != 3 || ptr.Deref(e[0].AppliedMaxReplicas, 0) != 10 {
		t.Errorf("successful executions %+v; want min 3 and max 10 applied", e)
	}
}
