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

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"

	autoscalingv1alpha1 "github.com/scaleplane/scaleplane/pkg/apis/autoscaling/v1alpha1"
	lwsv1 "github.com/scaleplane/scaleplane/pkg/apis/leaderworkerset/v1"
	"github.com/scaleplane/scaleplane/test/integration/framework"
)

// ControllersTogether is issue 18's "controllers together" on the real
// apiserver, with the real controller manager running the cron-scaler and
// the hpa-generator, at a real slot (up to 70 s):
//   - a rule's targetMinReplicas/targetMaxReplicas on a LeaderWorkerSet move
//     its scalePolicy's bounds, and the hpa-generator's HPA follows;
//   - a rule aimed at that generated HPA sets the same scalePolicy bounds
//     (the cron-scaler never writes a generated HPA, which the generator
//     would put back; issue 35) and is recorded as applied;
//   - a rule's targetReplicas on a Deployment an HPA also scales is applied,
//     with an AutoscalerConflict Warning naming the HPA.
func ControllersTogether(t *testing.T, cp *framework.ControlPlane) {
	ctx := context.Background()
	ns := cp.CreateNamespace(t)
	lws := leaderWorkerSet("vllm", 1)
	lws.Spec.ScalePolicy = &lwsv1.ScalePolicy{MinReplicas: ptr.To[int32](1), MaxReplicas: 5, Metrics: []autoscalingv2.MetricSpec{{
		Type:     autoscalingv2.ResourceMetricSourceType,
		Resource: &autoscalingv2.ResourceMetricSource{Name: "cpu", Target: autoscalingv2.MetricTarget{Type: autoscalingv2.UtilizationMetricType, AverageUtilization: ptr.To[int32](70)}},
	}}}
	if _, err := cp.Client().LeaderworkersetV1().LeaderWorkerSets(ns).Create(ctx, lws, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cp.KubeClient().AppsV1().Deployments(ns).Create(ctx, deployment("web", 1), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	webHPA := &autoscalingv2.HorizontalPodAutoscaler{
		ObjectMeta: metav1.ObjectMeta{Name: "web-hpa"},
		Spec: autoscalingv2.HorizontalPodAutoscalerSpec{MinReplicas: ptr.To[int32](1), MaxReplicas: 5,
			ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"}},
	}
	if _, err := cp.KubeClient().AutoscalingV2().HorizontalPodAutoscalers(ns).Create(ctx, webHPA, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	m := framework.StartManager(t, cp.KubeconfigPath(), "cron-scaler,hpa-generator")
	hpas := cp.KubeClient().AutoscalingV2().HorizontalPodAutoscalers(ns)
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		_, err := hpas.Get(ctx, "vllm", metav1.GetOptions{})
		return err == nil, nil
	})
	if err != nil {
		t.Fatalf("the hpa-generator made no HPA for the LeaderWorkerSet: %v\n%s", err, m.Tail(30))
	}

	slot := time.Now().UTC().Add(10 * time.Second).Truncate(time.Minute).Add(time.Minute)
	schedule := fmt.Sprintf("%d %d * * *", slot.Minute(), slot.Hour())
	bounds := autoscalingv1alpha1.CronFederatedHPARule{Name: "peak", Schedule: schedule, TimeZone: ptr.To("UTC"),
		TargetMinReplicas: ptr.To[int32](3), TargetMaxReplicas: ptr.To[int32](10)}
	crons := cp.Client().AutoscalingV1alpha1().CronFederatedHPAs(ns)
	for _, c := range []*autoscalingv1alpha1.CronFederatedHPA{
		cronOf("policy", autoscalingv2.CrossVersionObjectReference{APIVersion: "leaderworkerset.x-k8s.io/v1", Kind: "LeaderWorkerSet", Name: "vllm"}, bounds),
		cronOf("generated", autoscalingv2.CrossVersionObjectReference{APIVersion: "autoscaling/v2", Kind: "HorizontalPodAutoscaler", Name: "vllm"}, bounds),
		cronOf("fight", deploymentRef("web"), replicasRule("peak", schedule, 4)),
	} {
		if _, err := crons.Create(ctx, c, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		_ = crons.DeleteCollection(context.Background(), metav1.DeleteOptions{}, metav1.ListOptions{})
	})

	wait70 := time.Until(slot) + 30*time.Second
	waitForStatus(ctx, t, cp, ns, "policy", wait70, "the policy's bounds moved", succeededAt(slot))
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		hpa, err := hpas.Get(ctx, "vllm", metav1.GetOptions{})
		return err == nil && ptr.Deref(hpa.Spec.MinReplicas, 0) == 3 && hpa.Spec.MaxReplicas == 10, nil
	})
	if err != nil {
		t.Errorf("the generated HPA did not follow the scalePolicy's new bounds 3/10: %v", err)
	}

	// Both rules set 3/10 at the same slot: whichever comes second finds the
	// bounds there and writes nothing; both are applied.
	h := waitForStatus(ctx, t, cp, ns, "generated", 30*time.Second, "the bounds aimed at the generated HPA applied", succeededAt(slot))
	if f := h.FailedExecutions; len(f) > 0 {
		t.Errorf("failed executions %+v for the rule aimed at the generated HPA; want it applied to the scalePolicy", f)
	}

	waitForStatus(ctx, t, cp, ns, "fight", 30*time.Second, "the replicas applied", succeededAt(slot))
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		events, err := cp.KubeClient().CoreV1().Events(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		for _, e := range events.Items {
			if e.Reason == "AutoscalerConflict" && e.InvolvedObject.Name == "fight" && strings.Contains(e.Message, "HorizontalPodAutoscaler/web-hpa") {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Errorf("no AutoscalerConflict event naming HorizontalPodAutoscaler/web-hpa: %v", err)
	}
}
