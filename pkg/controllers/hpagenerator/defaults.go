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
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
)

// The defaults kube-apiserver applies to an autoscaling/v2
// HorizontalPodAutoscaler before storing it (k8s.io/kubernetes
// pkg/apis/autoscaling/v2/defaults.go, unchanged in substance since
// behavior was added in 1.18). The generator compares what it wants with what
// is stored through them, so that a field it leaves unset and the apiserver
// fills in is not seen as drift: without this a steady state would write on
// every sync.
const (
	defaultMinReplicas        int32 = 1
	defaultCPUUtilization     int32 = 80
	defaultScaleUpWindow      int32 = 0
	defaultScaleUpPods        int32 = 4
	defaultScaleUpPercent     int32 = 100
	defaultScaleDownPercent   int32 = 100
	defaultScalePeriodSeconds int32 = 15
)

// withDefaults returns a copy of spec with the apiserver's defaults applied.
// It is idempotent: applied to a stored spec it changes nothing.
func withDefaults(spec *autoscalingv2.HorizontalPodAutoscalerSpec) *autoscalingv2.HorizontalPodAutoscalerSpec {
	out := spec.DeepCopy()
	if out.MinReplicas == nil {
		out.MinReplicas = ptr.To(defaultMinReplicas)
	}
	if len(out.Metrics) == 0 {
		// Never the case for a generated HPA (no metrics means no HPA), but
		// it is what the apiserver does, and a user may empty them.
		out.Metrics = []autoscalingv2.MetricSpec{{
			Type: autoscalingv2.ResourceMetricSourceType,
			Resource: &autoscalingv2.ResourceMetricSource{
				Name: corev1.ResourceCPU,
				Target: autoscalingv2.MetricTarget{
					Type:               autoscalingv2.UtilizationMetricType,
					AverageUtilization: ptr.To(defaultCPUUtilization),
				},
			},
		}}
	}
	// A nil behavior stays nil: the HPA controller then uses its built-in
	// rules and the apiserver stores nothing.
	if out.Behavior != nil {
		out.Behavior.ScaleUp = rulesWithDefaults(out.Behavior.ScaleUp, scaleUpDefaults())
		out.Behavior.ScaleDown = rulesWithDefaults(out.Behavior.ScaleDown, scaleDownDefaults())
	}
	return out
}

// rulesWithDefaults fills what rules leaves unset from defaults, field by
// field; nil rules become the defaults. Empty policies count as unset: the
// clients omit an empty list (omitempty), so the apiserver receives none and
// fills in its own.
func rulesWithDefaults(rules, defaults *autoscalingv2.HPAScalingRules) *autoscalingv2.HPAScalingRules {
	if rules == nil {
		return defaults
	}
	out := rules.DeepCopy()
	if out.StabilizationWindowSeconds == nil {
		out.StabilizationWindowSeconds = defaults.StabilizationWindowSeconds
	}
	if out.SelectPolicy == nil {
		out.SelectPolicy = defaults.SelectPolicy
	}
	if len(out.Policies) == 0 {
		out.Policies = defaults.Policies
	}
	// Tolerance has no default: unset means the HPA controller's flag.
	return out
}

// scaleUpDefaults: no stabilization, and per 15 s the larger of 4 pods and
// 100%.
func scaleUpDefaults() *autoscalingv2.HPAScalingRules {
	return &autoscalingv2.HPAScalingRules{
		StabilizationWindowSeconds: ptr.To(defaultScaleUpWindow),
		SelectPolicy:               ptr.To(autoscalingv2.MaxChangePolicySelect),
		Policies: []autoscalingv2.HPAScalingPolicy{
			{Type: autoscalingv2.PodsScalingPolicy, Value: defaultScaleUpPods, PeriodSeconds: defaultScalePeriodSeconds},
			{Type: autoscalingv2.PercentScalingPolicy, Value: defaultScaleUpPercent, PeriodSeconds: defaultScalePeriodSeconds},
		},
	}
}

// scaleDownDefaults: 100% per 15 s. The stabilization window stays unset on
// purpose, as in the apiserver: the HPA controller then applies its
// --horizontal-pod-autoscaler-downscale-stabilization flag (5 minutes by
// default), which the apiserver cannot know.
func scaleDownDefaults() *autoscalingv2.HPAScalingRules {
	return &autoscalingv2.HPAScalingRules{
		SelectPolicy: ptr.To(autoscalingv2.MaxChangePolicySelect),
		Policies: []autoscalingv2.HPAScalingPolicy{
			{Type: autoscalingv2.PercentScalingPolicy, Value: defaultScaleDownPercent, PeriodSeconds: defaultScalePeriodSeconds},
		},
	}
}
