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

package hpagenerator

import (
	"testing"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/utils/ptr"
)

// The expectations are written out from kube-apiserver's autoscaling/v2
// defaulting, not computed.
func TestWithDefaults(t *testing.T) {
	maxPolicy := ptr.To(autoscalingv2.MaxChangePolicySelect)
	upPolicies := []autoscalingv2.HPAScalingPolicy{
		{Type: autoscalingv2.PodsScalingPolicy, Value: 4, PeriodSeconds: 15},
		{Type: autoscalingv2.PercentScalingPolicy, Value: 100, PeriodSeconds: 15},
	}
	downPolicies := []autoscalingv2.HPAScalingPolicy{{Type: autoscalingv2.PercentScalingPolicy, Value: 100, PeriodSeconds: 15}}
	defaultUp := &autoscalingv2.HPAScalingRules{StabilizationWindowSeconds: ptr.To[int32](0), SelectPolicy: maxPolicy, Policies: upPolicies}
	defaultDown := &autoscalingv2.HPAScalingRules{SelectPolicy: maxPolicy, Policies: downPolicies}
	custom := []autoscalingv2.HPAScalingPolicy{{Type: autoscalingv2.PodsScalingPolicy, Value: 1, PeriodSeconds: 60}}

	for _, tc := range []struct {
		name string
		in   *autoscalingv2.HorizontalPodAutoscalerBehavior
		want *autoscalingv2.HorizontalPodAutoscalerBehavior
	}{
		{name: "nil stays nil"},
		{name: "empty gets both directions",
			in:   &autoscalingv2.HorizontalPodAutoscalerBehavior{},
			want: &autoscalingv2.HorizontalPodAutoscalerBehavior{ScaleUp: defaultUp, ScaleDown: defaultDown}},
		{name: "scale-down window stays unset",
			in: &autoscalingv2.HorizontalPodAutoscalerBehavior{ScaleDown: &autoscalingv2.HPAScalingRules{SelectPolicy: ptr.To(autoscalingv2.MinChangePolicySelect)}},
			want: &autoscalingv2.HorizontalPodAutoscalerBehavior{ScaleUp: defaultUp,
				ScaleDown: &autoscalingv2.HPAScalingRules{SelectPolicy: ptr.To(autoscalingv2.MinChangePolicySelect), Policies: downPolicies}}},
		{name: "set fields are kept, missing ones filled",
			in: &autoscalingv2.HorizontalPodAutoscalerBehavior{
				ScaleUp:   &autoscalingv2.HPAScalingRules{StabilizationWindowSeconds: ptr.To[int32](30)},
				ScaleDown: &autoscalingv2.HPAScalingRules{StabilizationWindowSeconds: ptr.To[int32](60), Policies: custom},
			},
			want: &autoscalingv2.HorizontalPodAutoscalerBehavior{
				ScaleUp:   &autoscalingv2.HPAScalingRules{StabilizationWindowSeconds: ptr.To[int32](30), SelectPolicy: maxPolicy, Policies: upPolicies},
				ScaleDown: &autoscalingv2.HPAScalingRules{StabilizationWindowSeconds: ptr.To[int32](60), SelectPolicy: maxPolicy, Policies: custom},
			}},
		{name: "empty policies are unset",
			in:   &autoscalingv2.HorizontalPodAutoscalerBehavior{ScaleUp: &autoscalingv2.HPAScalingRules{Policies: []autoscalingv2.HPAScalingPolicy{}}},
			want: &autoscalingv2.HorizontalPodAutoscalerBehavior{ScaleUp: defaultUp, ScaleDown: defaultDown}},
		{name: "tolerance is kept and not defaulted",
			in: &autoscalingv2.HorizontalPodAutoscalerBehavior{ScaleUp: &autoscalingv2.HPAScalingRules{Tolerance: ptr.To(resourceQuantity("50m"))}},
			want: &autoscalingv2.HorizontalPodAutoscalerBehavior{
				ScaleUp:   &autoscalingv2.HPAScalingRules{StabilizationWindowSeconds: ptr.To[int32](0), SelectPolicy: maxPolicy, Policies: upPolicies, Tolerance: ptr.To(resourceQuantity("50m"))},
				ScaleDown: defaultDown,
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			spec := &autoscalingv2.HorizontalPodAutoscalerSpec{MaxReplicas: 3, Metrics: []autoscalingv2.MetricSpec{cpuMetric(70)}, Behavior: tc.in}
			in := spec.DeepCopy()
			got := withDefaults(spec)
			if !equality.Semantic.DeepEqual(got.Behavior, tc.want) {
				t.Errorf("behavior = %+v\nwant %+v", got.Behavior, tc.want)
			}
			if ptr.Deref(got.MinReplicas, -1) != 1 {
				t.Errorf("minReplicas = %v, want 1", got.MinReplicas)
			}
			if !equality.Semantic.DeepEqual(spec, in) {
				t.Error("withDefaults changed its argument")
			}
			if again := withDefaults(got); !equality.Semantic.DeepEqual(again, got) {
				t.Errorf("not idempotent: %+v", again)
			}
		})
	}

	// The default metric; set minReplicas is kept.
	got := withDefaults(&autoscalingv2.HorizontalPodAutoscalerSpec{MinReplicas: ptr.To[int32](2), MaxReplicas: 3})
	if *got.MinReplicas != 2 || !equality.Semantic.DeepEqual(got.Metrics, []autoscalingv2.MetricSpec{cpuMetric(80)}) {
		t.Errorf("defaults of a bare spec: %+v", got)
	}
}
