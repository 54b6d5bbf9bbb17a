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

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/component-base/metrics/testutil"
	"k8s.io/utils/ptr"

	autoscalingv1alpha1 "github.com/scaleplane/scaleplane/pkg/apis/autoscaling/v1alpha1"
	lwsv1 "github.com/scaleplane/scaleplane/pkg/apis/leaderworkerset/v1"
)

// Issue 18, the controllers together: the cron-scaler and the hpa-generator
// compose instead of fighting, and a firing an autoscaler will undo says so.

func lwsTarget(name string) autoscalingv2.CrossVersionObjectReference {
	return autoscalingv2.CrossVersionObjectReference{APIVersion: "leaderworkerset.x-k8s.io/v1", Kind: "LeaderWorkerSet", Name: name}
}

func boundsRule(name, schedule string, minReplicas, maxReplicas int32) autoscalingv1alpha1.CronFederatedHPARule {
	return autoscalingv1alpha1.CronFederatedHPARule{Name: name, Schedule: schedule, TimeZone: ptr.To("UTC"),
		TargetMinReplicas: ptr.To(minReplicas), TargetMaxReplicas: ptr.To(maxReplicas)}
}

func leaderWorkerSet(name string, policy *lwsv1.ScalePolicy) *lwsv1.LeaderWorkerSet {
	return &lwsv1.LeaderWorkerSet{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Spec: lwsv1.LeaderWorkerSetSpec{ScalePolicy: policy}}
}

// A rule's targetMinReplicas/targetMaxReplicas on a LeaderWorkerSet move the
// bounds of its scalePolicy, which the hpa-generator's HPA follows; on
// one without a policy the firing fails, saying why.
func TestLeaderWorkerSetPolicyBounds(t *testing.T) {
	forEachSchema(t, func(t *testing.T, crd schemaVariant) {
		obj := cron("c", boundsRule("peak", "0 8 * * *", 3, 10))
		obj.Spec.ScaleTargetRef = lwsTarget("vllm")
		bare := cron("d", boundsRule("peak", "0 8 * * *", 3, 10))
		bare.Spec.ScaleTargetRef = lwsTarget("bare")
		h := newHarnessOn(t, crd, utc("2024-05-01 07:00:00"), obj, bare,
			leaderWorkerSet("vllm", &lwsv1.ScalePolicy{MinReplicas: ptr.To[int32](1), MaxReplicas: 5}), leaderWorkerSet("bare", nil))
		for _, name := range []string{"c", "d"} {
			h.syncAt(utc("2024-05-01 07:00:00"), name)
			h.syncAt(utc("2024-05-01 08:00:00.100"), name)
		}
		got, err := h.client.LeaderworkersetV1().LeaderWorkerSets(ns).Get(h.ctx, "vllm", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if p := got.Spec.ScalePolicy; ptr.Deref(p.MinReplicas, 0) != 3 || p.MaxReplicas != 10 {
			t.Errorf("scalePolicy bounds %v/%d; want 3/10", p.MinReplicas, p.MaxReplicas)
		}
		if e := h.history("c", "peak").SuccessfulExecutions; len(e) != 1 || ptr.Deref(e[0].AppliedMinReplicas, 0) != 3 || ptr.Deref(e[0].AppliedMaxReplicas, 0) != 10 {
			t.Errorf("successful executions %+v; want min 3 and max 10 applied", e)
		}
		if f := h.history("d", "peak").FailedExecutions; len(f) != 1 || !strings.Contains(f[0].Message, "LeaderWorkerSet bare has no spec.scalePolicy") {
			t.Errorf("failed executions %+v; want the missing scalePolicy named", f)
		}
	})
}

// targetReplicas on a workload that an HPA also scales is applied, and a
// Warning says the HPA will undo it and what to target instead, at most every
// six hours; the gauge counts the object while its firings conflict.
func TestAutoscalerConflictReported(t *testing.T) {
	hpa := &autoscalingv2.HorizontalPodAutoscaler{
		ObjectMeta: metav1.ObjectMeta{Name: "web-hpa", Namespace: ns},
		Spec: autoscalingv2.HorizontalPodAutoscalerSpec{MaxReplicas: 5,
			ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"}},
	}
	h := newHarness(t, utc("2024-05-01 06:30:00"), cron("c", rule("r", "0 * * * *", 10)), hpa)
	h.scales.set("deployments", "web", 1)
	h.syncAt(utc("2024-05-01 06:30:00"), "c")
	h.syncAt(utc("2024-05-01 07:00:00.100"), "c")
	if got := h.scales.get("deployments", "web"); got != 10 {
		t.Errorf("replicas = %d; the firing is applied all the same", got)
	}
	h.expectEvent(`Warning AutoscalerConflict HorizontalPodAutoscaler/web-hpa also scales Deployment/web and will undo targetReplicas`)
	if v, _ := testutil.GetGaugeMetricValue(autoscalerConflicts); v != 1 {
		t.Errorf("cron_scaler_autoscaler_conflicts = %v; want 1", v)
	}
	h.syncAt(utc("2024-05-01 08:00:00.100"), "c")
	for _, e := range h.events() {
		if strings.Contains(e, "AutoscalerConflict") {
			t.Errorf("reported again within six hours: %q", e)
		}
	}
	// The HPA goes away: the next firing clears the conflict.
	if err := h.kube.AutoscalingV2().HorizontalPodAutoscalers(ns).Delete(h.ctx, "web-hpa", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	h.refresh()
	h.syncAt(utc("2024-05-01 09:00:00.100"), "c")
	if v, _ := testutil.GetGaugeMetricValue(autoscalerConflicts); v != 0 {
		t.Errorf("cron_scaler_autoscaler_conflicts = %v after the HPA went away; want 0", v)
	}
}
