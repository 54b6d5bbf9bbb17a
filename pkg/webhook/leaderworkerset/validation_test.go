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

package leaderworkerset

import (
	"strings"
	"testing"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	lwsv1 "github.com/scaleplane/scaleplane/pkg/apis/leaderworkerset/v1"
)

func cpuMetric(util int32) autoscalingv2.MetricSpec {
	return autoscalingv2.MetricSpec{
		Type: autoscalingv2.ResourceMetricSourceType,
		Resource: &autoscalingv2.ResourceMetricSource{
			Name:   corev1.ResourceCPU,
			Target: autoscalingv2.MetricTarget{Type: autoscalingv2.UtilizationMetricType, AverageUtilization: ptr.To(util)},
		},
	}
}

func validPolicy() *lwsv1.ScalePolicy {
	return &lwsv1.ScalePolicy{
		MinReplicas: ptr.To[int32](1),
		MaxReplicas: 4,
		Metrics:     []autoscalingv2.MetricSpec{cpuMetric(80)},
	}
}

func qty(s string) *resource.Quantity { return ptr.To(resource.MustParse(s)) }

// TestValidateScalePolicy runs each rule with a valid and an invalid policy,
// and checks the full message of every error.
func TestValidateScalePolicy(t *testing.T) {
	tests := []struct {
		name     string
		mutate   func(p *lwsv1.ScalePolicy)
		want     []string
		warnings []string
	}{
		{name: "valid", mutate: func(*lwsv1.ScalePolicy) {}},
		{name: "min unset", mutate: func(p *lwsv1.ScalePolicy) { p.MinReplicas = nil }},
		{name: "min equals max", mutate: func(p *lwsv1.ScalePolicy) { p.MinReplicas = ptr.To[int32](4) }},
		{name: "no metrics", mutate: func(p *lwsv1.ScalePolicy) { p.Metrics = nil }},
		{
			name:   "min zero",
			mutate: func(p *lwsv1.ScalePolicy) { p.MinReplicas = ptr.To[int32](0) },
			want:   []string{"spec.scalePolicy.minReplicas: Invalid value: 0: must be greater than or equal to 1"},
		},
		{
			name:   "max zero",
			mutate: func(p *lwsv1.ScalePolicy) { p.MaxReplicas = 0; p.MinReplicas = nil },
			want:   []string{"spec.scalePolicy.maxReplicas: Invalid value: 0: must be greater than or equal to 1"},
		},
		{
			name:   "max below min",
			mutate: func(p *lwsv1.ScalePolicy) { p.MinReplicas = ptr.To[int32](5) },
			want:   []string{"spec.scalePolicy.maxReplicas: Invalid value: 4: must be greater than or equal to minReplicas"},
		},
		{
			name:   "metric type missing",
			mutate: func(p *lwsv1.ScalePolicy) { p.Metrics[0].Type = "" },
			want: []string{
				"spec.scalePolicy.metrics[0].type: Required value: must name the metric source type",
				`spec.scalePolicy.metrics[0].resource: Forbidden: must not be set when type is "": set only the source of the metric's type`,
			},
		},
		{
			name:   "metric type unknown",
			mutate: func(p *lwsv1.ScalePolicy) { p.Metrics[0].Type = "Cpu" },
			want: []string{
				`spec.scalePolicy.metrics[0].type: Unsupported value: "Cpu": supported values: "ContainerResource", "External", "Object", "Pods", "Resource"`,
				`spec.scalePolicy.metrics[0].resource: Forbidden: must not be set when type is "Cpu": set only the source of the metric's type`,
			},
		},
		{
			name:   "source of the type missing",
			mutate: func(p *lwsv1.ScalePolicy) { p.Metrics[0].Type = autoscalingv2.PodsMetricSourceType },
			want: []string{
				`spec.scalePolicy.metrics[0].resource: Forbidden: must not be set when type is "Pods": set only the source of the metric's type`,
				`spec.scalePolicy.metrics[0].pods: Required value: must be set when type is "Pods"`,
			},
		},
		{
			name: "two sources",
			mutate: func(p *lwsv1.ScalePolicy) {
				p.Metrics[0].Pods = &autoscalingv2.PodsMetricSource{
					Metric: autoscalingv2.MetricIdentifier{Name: "qps"},
					Target: autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageValue: qty("10")},
				}
			},
			want: []string{`spec.scalePolicy.metrics[0].pods: Forbidden: must not be set when type is "Resource": set only the source of the metric's type`},
		},
		{
			name:   "no source at all",
			mutate: func(p *lwsv1.ScalePolicy) { p.Metrics[0].Resource = nil },
			want:   []string{`spec.scalePolicy.metrics[0].resource: Required value: must be set when type is "Resource"`},
		},
		{
			name:   "resource name missing",
			mutate: func(p *lwsv1.ScalePolicy) { p.Metrics[0].Resource.Name = "" },
			want:   []string{"spec.scalePolicy.metrics[0].resource.name: Required value: must name a resource"},
		},
		{
			name:   "resource name unknown",
			mutate: func(p *lwsv1.ScalePolicy) { p.Metrics[0].Resource.Name = "gpu" },
			want:   []string{`spec.scalePolicy.metrics[0].resource.name: Invalid value: "gpu": must be a standard container resource (cpu, memory, ephemeral-storage, hugepages-<size>) or an extended resource name`},
		},
		{name: "resource name extended", mutate: func(p *lwsv1.ScalePolicy) {
			p.Metrics[0].Resource.Name = "example.com/gpu"
		}},
		{name: "resource name hugepages", mutate: func(p *lwsv1.ScalePolicy) {
			p.Metrics[0].Resource.Name = "hugepages-2Mi"
		}},
		{
			name:   "resource name not qualified",
			mutate: func(p *lwsv1.ScalePolicy) { p.Metrics[0].Resource.Name = "a/b/c" },
			want:   []string{`spec.scalePolicy.metrics[0].resource.name: Invalid value: "a/b/c": a valid label key must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]') with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')`},
		},
		{
			name:   "resource name with requests prefix",
			mutate: func(p *lwsv1.ScalePolicy) { p.Metrics[0].Resource.Name = "requests.example.com/gpu" },
			want:   []string{`spec.scalePolicy.metrics[0].resource.name: Invalid value: "requests.example.com/gpu": is not a valid extended resource name`},
		},
		{
			name: "resource target missing",
			mutate: func(p *lwsv1.ScalePolicy) {
				p.Metrics[0].Resource.Target = autoscalingv2.MetricTarget{Type: autoscalingv2.UtilizationMetricType}
			},
			want: []string{"spec.scalePolicy.metrics[0].resource.target.averageUtilization: Required value: a resource metric needs a target averageUtilization or averageValue"},
			warnings: []string{
				"spec.scalePolicy.metrics[0].resource.target.type: type Utilization expects averageUtilization to be set",
			},
		},
		{
			name: "resource target both",
			mutate: func(p *lwsv1.ScalePolicy) {
				p.Metrics[0].Resource.Target.AverageValue = qty("100m")
			},
			want: []string{"spec.scalePolicy.metrics[0].resource.target.averageValue: Forbidden: a resource metric takes a target averageUtilization or averageValue, not both"},
		},
		{
			name:   "utilization zero",
			mutate: func(p *lwsv1.ScalePolicy) { p.Metrics[0].Resource.Target.AverageUtilization = ptr.To[int32](0) },
			want:   []string{"spec.scalePolicy.metrics[0].resource.target.averageUtilization: Invalid value: 0: must be greater than 0"},
		},
		{
			name:   "target type missing",
			mutate: func(p *lwsv1.ScalePolicy) { p.Metrics[0].Resource.Target.Type = "" },
			want:   []string{"spec.scalePolicy.metrics[0].resource.target.type: Required value: must name the target type"},
		},
		{
			name:   "target type unknown",
			mutate: func(p *lwsv1.ScalePolicy) { p.Metrics[0].Resource.Target.Type = "Percent" },
			want:   []string{`spec.scalePolicy.metrics[0].resource.target.type: Unsupported value: "Percent": supported values: "Utilization", "Value", "AverageValue"`},
		},
		{
			name: "target type does not match the value: warning only",
			mutate: func(p *lwsv1.ScalePolicy) {
				p.Metrics[0].Resource.Target = autoscalingv2.MetricTarget{Type: autoscalingv2.UtilizationMetricType, AverageValue: qty("500m")}
			},
			warnings: []string{"spec.scalePolicy.metrics[0].resource.target.type: type Utilization expects averageUtilization to be set"},
		},
		{
			name: "container resource valid",
			mutate: func(p *lwsv1.ScalePolicy) {
				p.Metrics[0] = autoscalingv2.MetricSpec{
					Type: autoscalingv2.ContainerResourceMetricSourceType,
					ContainerResource: &autoscalingv2.ContainerResourceMetricSource{
						Name: corev1.ResourceMemory, Container: "server",
						Target: autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageValue: qty("1Gi")},
					},
				}
			},
		},
		{
			name: "container resource without container, bad name",
			mutate: func(p *lwsv1.ScalePolicy) {
				p.Metrics[0] = autoscalingv2.MetricSpec{
					Type: autoscalingv2.ContainerResourceMetricSourceType,
					ContainerResource: &autoscalingv2.ContainerResourceMetricSource{
						Name:   "pods",
						Target: autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageValue: qty("-1")},
					},
				}
			},
			want: []string{
				`spec.scalePolicy.metrics[0].containerResource.name: Invalid value: "pods": must be a standard container resource (cpu, memory, ephemeral-storage, hugepages-<size>) or an extended resource name`,
				"spec.scalePolicy.metrics[0].containerResource.container: Required value: must name a container",
				`spec.scalePolicy.metrics[0].containerResource.target.averageValue: Invalid value: "-1": must be greater than 0`,
			},
		},
		{
			name: "container name not a label",
			mutate: func(p *lwsv1.ScalePolicy) {
				p.Metrics[0] = autoscalingv2.MetricSpec{
					Type: autoscalingv2.ContainerResourceMetricSourceType,
					ContainerResource: &autoscalingv2.ContainerResourceMetricSource{
						Name: corev1.ResourceCPU, Container: "Server",
						Target: autoscalingv2.MetricTarget{Type: autoscalingv2.UtilizationMetricType, AverageUtilization: ptr.To[int32](50)},
					},
				}
			},
			want: []string{`spec.scalePolicy.metrics[0].containerResource.container: Invalid value: "Server": a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')`},
		},
		{
			name: "pods metric valid",
			mutate: func(p *lwsv1.ScalePolicy) {
				p.Metrics[0] = podsMetric("requests_per_second", qty("10"))
			},
		},
		{
			name: "pods metric without averageValue, bad name",
			mutate: func(p *lwsv1.ScalePolicy) {
				p.Metrics[0] = podsMetric("a/b", nil)
			},
			want: []string{
				`spec.scalePolicy.metrics[0].pods.metric.name: Invalid value: "a/b": may not contain '/'`,
				"spec.scalePolicy.metrics[0].pods.target.averageValue: Required value: a pods metric needs a target averageValue",
			},
			warnings: []string{"spec.scalePolicy.metrics[0].pods.target.type: type AverageValue expects averageValue to be set"},
		},
		{
			name: "pods metric name missing, selector invalid",
			mutate: func(p *lwsv1.ScalePolicy) {
				m := podsMetric("", qty("10"))
				m.Pods.Metric.Selector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "app", Operator: "Is"}}}
				p.Metrics[0] = m
			},
			want: []string{
				"spec.scalePolicy.metrics[0].pods.metric.name: Required value: must name the metric",
				`spec.scalePolicy.metrics[0].pods.metric.selector.matchExpressions[0].operator: Invalid value: "Is": not a valid selector operator`,
			},
		},
		{
			name: "object metric valid",
			mutate: func(p *lwsv1.ScalePolicy) {
				p.Metrics[0] = objectMetric(autoscalingv2.CrossVersionObjectReference{APIVersion: "v1", Kind: "Service", Name: "frontend"},
					autoscalingv2.MetricTarget{Type: autoscalingv2.ValueMetricType, Value: qty("100")})
			},
		},
		{
			name: "object metric with bad reference and no value",
			mutate: func(p *lwsv1.ScalePolicy) {
				p.Metrics[0] = objectMetric(autoscalingv2.CrossVersionObjectReference{APIVersion: "a/b/c", Name: ".."},
					autoscalingv2.MetricTarget{Type: autoscalingv2.ValueMetricType, AverageUtilization: ptr.To[int32](3)})
			},
			want: []string{
				"spec.scalePolicy.metrics[0].object.describedObject.kind: Required value",
				`spec.scalePolicy.metrics[0].object.describedObject.name: Invalid value: "..": may not be '..'`,
				`spec.scalePolicy.metrics[0].object.describedObject.apiVersion: Invalid value: "a/b/c": unexpected GroupVersion string: a/b/c`,
				"spec.scalePolicy.metrics[0].object.target.averageValue: Required value: an object metric needs a target value or averageValue",
			},
			warnings: []string{"spec.scalePolicy.metrics[0].object.target.type: type Value expects value to be set"},
		},
		{
			name: "object metric value zero",
			mutate: func(p *lwsv1.ScalePolicy) {
				p.Metrics[0] = objectMetric(autoscalingv2.CrossVersionObjectReference{APIVersion: "v1", Kind: "Service", Name: "frontend"},
					autoscalingv2.MetricTarget{Type: autoscalingv2.ValueMetricType, Value: qty("0")})
			},
			want: []string{`spec.scalePolicy.metrics[0].object.target.value: Invalid value: "0": must be greater than 0`},
		},
		{
			name: "external metric valid",
			mutate: func(p *lwsv1.ScalePolicy) {
				p.Metrics[0] = externalMetric(autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageValue: qty("30")})
			},
		},
		{
			name: "external metric without target value",
			mutate: func(p *lwsv1.ScalePolicy) {
				p.Metrics[0] = externalMetric(autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType})
			},
			want:     []string{"spec.scalePolicy.metrics[0].external.target.averageValue: Required value: an external metric needs a target value or a per-pod averageValue"},
			warnings: []string{"spec.scalePolicy.metrics[0].external.target.type: type AverageValue expects averageValue to be set"},
		},
		{
			name: "external metric with both values",
			mutate: func(p *lwsv1.ScalePolicy) {
				p.Metrics[0] = externalMetric(autoscalingv2.MetricTarget{Type: autoscalingv2.ValueMetricType, Value: qty("1"), AverageValue: qty("1")})
			},
			want: []string{"spec.scalePolicy.metrics[0].external.target.value: Forbidden: an external metric takes a target value or a per-pod averageValue, not both"},
		},
		{
			name: "second metric is checked with its index",
			mutate: func(p *lwsv1.ScalePolicy) {
				p.Metrics = append(p.Metrics, cpuMetric(-5))
			},
			want: []string{"spec.scalePolicy.metrics[1].resource.target.averageUtilization: Invalid value: -5: must be greater than 0"},
		},
		{
			name: "behavior valid",
			mutate: func(p *lwsv1.ScalePolicy) {
				p.Behavior = &autoscalingv2.HorizontalPodAutoscalerBehavior{
					ScaleUp: &autoscalingv2.HPAScalingRules{
						StabilizationWindowSeconds: ptr.To[int32](3600),
						SelectPolicy:               ptr.To(autoscalingv2.DisabledPolicySelect),
						Policies: []autoscalingv2.HPAScalingPolicy{
							{Type: autoscalingv2.PodsScalingPolicy, Value: 1, PeriodSeconds: 1800},
							{Type: autoscalingv2.PercentScalingPolicy, Value: 100, PeriodSeconds: 1},
						},
						Tolerance: qty("0"),
					},
					// Rules without policies get the default ones from the apiserver.
					ScaleDown: &autoscalingv2.HPAScalingRules{StabilizationWindowSeconds: ptr.To[int32](0)},
				}
			},
		},
		{
			name: "behavior invalid everywhere",
			mutate: func(p *lwsv1.ScalePolicy) {
				p.Behavior = &autoscalingv2.HorizontalPodAutoscalerBehavior{
					ScaleUp: &autoscalingv2.HPAScalingRules{
						StabilizationWindowSeconds: ptr.To[int32](3601),
						SelectPolicy:               ptr.To[autoscalingv2.ScalingPolicySelect]("Fastest"),
						Policies: []autoscalingv2.HPAScalingPolicy{
							{Type: "Replicas", Value: 0, PeriodSeconds: 0},
							{Type: autoscalingv2.PodsScalingPolicy, Value: 1, PeriodSeconds: 1801},
						},
						Tolerance: qty("-0.1"),
					},
					ScaleDown: &autoscalingv2.HPAScalingRules{StabilizationWindowSeconds: ptr.To[int32](-1)},
				}
			},
			want: []string{
				"spec.scalePolicy.behavior.scaleUp.stabilizationWindowSeconds: Invalid value: 3601: must be between 0 and 3600 seconds",
				`spec.scalePolicy.behavior.scaleUp.selectPolicy: Unsupported value: "Fastest": supported values: "Max", "Min", "Disabled"`,
				`spec.scalePolicy.behavior.scaleUp.policies[0].type: Unsupported value: "Replicas": supported values: "Percent", "Pods"`,
				"spec.scalePolicy.behavior.scaleUp.policies[0].value: Invalid value: 0: must be greater than 0",
				"spec.scalePolicy.behavior.scaleUp.policies[0].periodSeconds: Invalid value: 0: must be between 1 and 1800 seconds",
				"spec.scalePolicy.behavior.scaleUp.policies[1].periodSeconds: Invalid value: 1801: must be between 1 and 1800 seconds",
				`spec.scalePolicy.behavior.scaleUp.tolerance: Invalid value: "-100m": must be greater than or equal to 0`,
				"spec.scalePolicy.behavior.scaleDown.stabilizationWindowSeconds: Invalid value: -1: must be between 0 and 3600 seconds",
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := validPolicy()
			tc.mutate(p)
			lws := &lwsv1.LeaderWorkerSet{Spec: lwsv1.LeaderWorkerSetSpec{ScalePolicy: p}}
			got := ValidateLeaderWorkerSet(lws)
			var msgs []string
			for _, err := range got.Errs {
				msgs = append(msgs, err.Error())
			}
			assertStrings(t, "errors", msgs, tc.want)
			assertStrings(t, "warnings", got.Warnings, tc.warnings)
		})
	}
}

func TestValidateLeaderWorkerSetWithoutScalePolicy(t *testing.T) {
	got := ValidateLeaderWorkerSet(&lwsv1.LeaderWorkerSet{})
	if len(got.Errs) != 0 || len(got.Warnings) != 0 {
		t.Errorf("a LeaderWorkerSet without scalePolicy got %+v, want nothing", got)
	}
}

func assertStrings(t *testing.T, what string, got, want []string) {
	t.Helper()
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("%s:\n got: %q\nwant: %q", what, got, want)
	}
}

func podsMetric(name string, avg *resource.Quantity) autoscalingv2.MetricSpec {
	return autoscalingv2.MetricSpec{
		Type: autoscalingv2.PodsMetricSourceType,
		Pods: &autoscalingv2.PodsMetricSource{
			Metric: autoscalingv2.MetricIdentifier{Name: name},
			Target: autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageValue: avg},
		},
	}
}

func objectMetric(ref autoscalingv2.CrossVersionObjectReference, target autoscalingv2.MetricTarget) autoscalingv2.MetricSpec {
	return autoscalingv2.MetricSpec{
		Type: autoscalingv2.ObjectMetricSourceType,
		Object: &autoscalingv2.ObjectMetricSource{
			DescribedObject: ref,
			Metric:          autoscalingv2.MetricIdentifier{Name: "requests-per-second"},
			Target:          target,
		},
	}
}

func externalMetric(target autoscalingv2.MetricTarget) autoscalingv2.MetricSpec {
	return autoscalingv2.MetricSpec{
		Type: autoscalingv2.ExternalMetricSourceType,
		External: &autoscalingv2.ExternalMetricSource{
			Metric: autoscalingv2.MetricIdentifier{
				Name:     "queue_messages_ready",
				Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"queue": "worker_tasks"}},
			},
			Target: target,
		},
	}
}
