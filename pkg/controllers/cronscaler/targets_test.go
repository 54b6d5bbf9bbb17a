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
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"

	autoscalingv1alpha1 "github.com/scaleplane/scaleplane/pkg/apis/autoscaling/v1alpha1"
)

func TestTargetConflictRetried(t *testing.T) {
	h := newHarness(t, utc("2024-05-01 07:00:00"), cron("c", rule("r", "0 8 * * *", 10)))
	h.scales.set("deployments", "web", 1)
	h.scales.conflicts = 2
	h.syncAt(utc("2024-05-01 07:00:00"), "c")
	h.syncAt(utc("2024-05-01 08:00:00.100"), "c")
	if h.scales.get("deployments", "web") != 10 {
		t.Errorf("conflicts were not retried")
	}
}

func TestMissingTarget(t *testing.T) {
	h := newHarness(t, utc("2024-05-01 07:00:00"), cron("c", rule("r", "0 8 * * *", 10)))
	h.syncAt(utc("2024-05-01 07:00:00"), "c")
	h.syncAt(utc("2024-05-01 08:00:00.100"), "c")
	hist := h.history("c", "r")
	if len(hist.FailedExecutions) != 1 || !strings.Contains(hist.FailedExecutions[0].Message, "not found") {
		t.Errorf("failed executions = %+v", hist.FailedExecutions)
	}
	h.expectEvent("Warning ScaleFailed")
}

func TestScaleFromZero(t *testing.T) {
	h := newHarness(t, utc("2024-05-01 07:00:00"), cron("c", rule("r", "0 8 * * *", 4)))
	h.scales.set("deployments", "web", 0)
	h.syncAt(utc("2024-05-01 07:00:00"), "c")
	h.syncAt(utc("2024-05-01 08:00:00.100"), "c")
	if got := h.scales.get("deployments", "web"); got != 4 {
		t.Errorf("replicas = %d; want 4", got)
	}
}

func TestUnknownKindResetsMapperOnce(t *testing.T) {
	// A custom resource whose CRD was installed after discovery was cached.
	widget := schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Widget"}
	obj := cron("c", rule("r", "0 8 * * *", 2))
	obj.Spec.ScaleTargetRef = autoscalingv2.CrossVersionObjectReference{APIVersion: "example.com/v1", Kind: "Widget", Name: "w"}
	h := newHarness(t, utc("2024-05-01 07:00:00"), obj)
	h.mapper.onReset = []schema.GroupVersionKind{widget}
	h.scales.set("widgets", "w", 0)
	h.syncAt(utc("2024-05-01 07:00:00"), "c")
	h.syncAt(utc("2024-05-01 08:00:00.100"), "c")
	if h.mapper.resets != 1 || h.scales.get("widgets", "w") != 2 {
		t.Errorf("resets = %d, replicas = %d; want 1 reset and 2 replicas", h.mapper.resets, h.scales.get("widgets", "w"))
	}

	obj = cron("d", rule("r", "0 8 * * *", 2))
	obj.Spec.ScaleTargetRef = autoscalingv2.CrossVersionObjectReference{APIVersion: "example.com/v1", Kind: "Nope", Name: "x"}
	h = newHarness(t, utc("2024-05-01 07:00:00"), obj)
	h.syncAt(utc("2024-05-01 07:00:00"), "d")
	h.syncAt(utc("2024-05-01 08:00:00.100"), "d")
	hist := h.history("d", "r")
	if h.mapper.resets != 1 || len(hist.FailedExecutions) != 1 || !strings.Contains(hist.FailedExecutions[0].Message, "CRD installed") {
		t.Errorf("resets = %d, history = %+v", h.mapper.resets, hist)
	}
}

func TestAutoscalerTargets(t *testing.T) {
	minMax := func(name string, min, max *int32) autoscalingv1alpha1.CronFederatedHPARule {
		return autoscalingv1alpha1.CronFederatedHPARule{Name: name, Schedule: "0 8 * * *", TimeZone: ptr.To("UTC"), TargetMinReplicas: min, TargetMaxReplicas: max}
	}
	t.Run("FederatedHPA with nil minReplicas", func(t *testing.T) {
		obj := cron("c", minMax("r", ptr.To[int32](5), nil))
		obj.Spec.ScaleTargetRef = autoscalingv2.CrossVersionObjectReference{APIVersion: "autoscaling.karmada.io/v1alpha1", Kind: "FederatedHPA", Name: "f"}
		fhpa := &autoscalingv1alpha1.FederatedHPA{ObjectMeta: metav1.ObjectMeta{Name: "f", Namespace: ns}, Spec: autoscalingv1alpha1.FederatedHPASpec{MaxReplicas: 20}}
		h := newHarness(t, utc("2024-05-01 07:00:00"), obj, fhpa)
		h.syncAt(utc("2024-05-01 07:00:00"), "c")
		h.syncAt(utc("2024-05-01 08:00:00.100"), "c")
		got, err := h.client.AutoscalingV1alpha1().FederatedHPAs(ns).Get(h.ctx, "f", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if ptr.Deref(got.Spec.MinReplicas, 0) != 5 || got.Spec.MaxReplicas != 20 {
			t.Errorf("FederatedHPA min/max = %v/%d; want 5/20", got.Spec.MinReplicas, got.Spec.MaxReplicas)
		}
		if e := h.history("c", "r").SuccessfulExecutions; len(e) != 1 || *e[0].AppliedMinReplicas != 5 || e[0].AppliedMaxReplicas != nil {
			t.Errorf("executions = %+v", e)
		}
	})
	t.Run("HorizontalPodAutoscaler", func(t *testing.T) {
		obj := cron("c", minMax("r", ptr.To[int32](2), ptr.To[int32](50)))
		obj.Spec.ScaleTargetRef = autoscalingv2.CrossVersionObjectReference{APIVersion: "autoscaling/v2", Kind: "HorizontalPodAutoscaler", Name: "hpa"}
		hpa := &autoscalingv2.HorizontalPodAutoscaler{ObjectMeta: metav1.ObjectMeta{Name: "hpa", Namespace: ns}, Spec: autoscalingv2.HorizontalPodAutoscalerSpec{MinReplicas: ptr.To[int32](1), MaxReplicas: 10}}
		h := newHarness(t, utc("2024-05-01 07:00:00"), obj, hpa)
		h.syncAt(utc("2024-05-01 07:00:00"), "c")
		h.syncAt(utc("2024-05-01 08:00:00.100"), "c")
		got, err := h.kube.AutoscalingV2().HorizontalPodAutoscalers(ns).Get(h.ctx, "hpa", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if *got.Spec.MinReplicas != 2 || got.Spec.MaxReplicas != 50 {
			t.Errorf("HPA min/max = %d/%d; want 2/50", *got.Spec.MinReplicas, got.Spec.MaxReplicas)
		}
	})
	t.Run("rule without values for the target kind fails, no panic", func(t *testing.T) {
		obj := cron("c", autoscalingv1alpha1.CronFederatedHPARule{Name: "r", Schedule: "0 8 * * *", TimeZone: ptr.To("UTC")})
		h := newHarness(t, utc("2024-05-01 07:00:00"), obj)
		h.scales.set("deployments", "web", 1)
		h.syncAt(utc("2024-05-01 07:00:00"), "c")
		h.syncAt(utc("2024-05-01 08:00:00.100"), "c")
		if f := h.history("c", "r").FailedExecutions; len(f) != 1 || !strings.Contains(f[0].Message, "targetReplicas is not set") {
			t.Errorf("failed executions = %+v", f)
		}
	})
}
