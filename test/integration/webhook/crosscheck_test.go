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

package webhook

import (
	"context"
	"fmt"
	"strings"
	"testing"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	lwsv1 "github.com/scaleplane/scaleplane/pkg/apis/leaderworkerset/v1"
)

// generatedHPA is the HorizontalPodAutoscaler the hpa-generator builds from
// a LeaderWorkerSet's scale policy (DESIGN.md): named after the
// LeaderWorkerSet, targeting it by constants, minReplicas defaulting to 1.
func generatedHPA(name string, policy *lwsv1.ScalePolicy) *autoscalingv2.HorizontalPodAutoscaler {
	minReplicas := policy.MinReplicas
	if minReplicas == nil {
		minReplicas = ptr.To[int32](1)
	}
	return &autoscalingv2.HorizontalPodAutoscaler{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: autoscalingv2.HorizontalPodAutoscalerSpec{
			ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{
				APIVersion: lwsv1.SchemeGroupVersion.String(), Kind: "LeaderWorkerSet", Name: name,
			},
			MinReplicas: minReplicas,
			MaxReplicas: policy.MaxReplicas,
			Metrics:     policy.Metrics,
			Behavior:    policy.Behavior,
		},
	}
}

type policyCase struct {
	name   string
	policy *lwsv1.ScalePolicy
	// stricter, when set, says why scaleplane refuses a policy whose HPA the
	// apiserver would accept: it could never work.
	stricter string
}

func q(s string) *resource.Quantity { return ptr.To(resource.MustParse(s)) }

func metricWith(m autoscalingv2.MetricSpec, mutate func(*autoscalingv2.MetricSpec)) autoscalingv2.MetricSpec {
	mutate(&m)
	return m
}

func objectMetric(ref autoscalingv2.CrossVersionObjectReference, target autoscalingv2.MetricTarget) autoscalingv2.MetricSpec {
	return autoscalingv2.MetricSpec{Type: autoscalingv2.ObjectMetricSourceType, Object: &autoscalingv2.ObjectMetricSource{
		DescribedObject: ref, Metric: autoscalingv2.MetricIdentifier{Name: "requests-per-second"}, Target: target,
	}}
}

func externalMetric(target autoscalingv2.MetricTarget) autoscalingv2.MetricSpec {
	return autoscalingv2.MetricSpec{Type: autoscalingv2.ExternalMetricSourceType, External: &autoscalingv2.ExternalMetricSource{
		Metric: autoscalingv2.MetricIdentifier{Name: "queue_messages_ready",
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"queue": "tasks"}}},
		Target: target,
	}}
}

func containerMetric(resourceName corev1.ResourceName, container string) autoscalingv2.MetricSpec {
	return autoscalingv2.MetricSpec{Type: autoscalingv2.ContainerResourceMetricSourceType, ContainerResource: &autoscalingv2.ContainerResourceMetricSource{
		Name: resourceName, Container: container,
		Target: autoscalingv2.MetricTarget{Type: autoscalingv2.UtilizationMetricType, AverageUtilization: ptr.To[int32](60)},
	}}
}

func withBehavior(rules *autoscalingv2.HPAScalingRules) *lwsv1.ScalePolicy {
	p := policyWithMetrics(cpuMetric(80))
	p.Behavior = &autoscalingv2.HorizontalPodAutoscalerBehavior{ScaleDown: rules}
	return p
}

func scalePolicyCases() []policyCase {
	service := autoscalingv2.CrossVersionObjectReference{APIVersion: "v1", Kind: "Service", Name: "frontend"}
	pods := policyWithMetrics
	return []policyCase{
		{name: "cpu utilization", policy: pods(cpuMetric(80))},
		{name: "min unset", policy: &lwsv1.ScalePolicy{MaxReplicas: 2, Metrics: []autoscalingv2.MetricSpec{cpuMetric(50)}}},
		{name: "min equals max", policy: &lwsv1.ScalePolicy{MinReplicas: ptr.To[int32](3), MaxReplicas: 3, Metrics: []autoscalingv2.MetricSpec{cpuMetric(50)}}},
		{name: "memory average value", policy: pods(metricWith(cpuMetric(1), func(m *autoscalingv2.MetricSpec) {
			m.Resource.Name = corev1.ResourceMemory
			m.Resource.Target = autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageValue: q("1Gi")}
		}))},
		{name: "type not matching the value set", policy: pods(metricWith(cpuMetric(1), func(m *autoscalingv2.MetricSpec) {
			m.Resource.Target = autoscalingv2.MetricTarget{Type: autoscalingv2.UtilizationMetricType, AverageValue: q("500m")}
		}))},
		{name: "container resource", policy: pods(containerMetric(corev1.ResourceCPU, "server"))},
		{name: "pods metric", policy: pods(podsMetric("requests_per_second", "10"))},
		{name: "object metric", policy: pods(objectMetric(service, autoscalingv2.MetricTarget{Type: autoscalingv2.ValueMetricType, Value: q("100")}))},
		{name: "external metric", policy: pods(externalMetric(autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageValue: q("30")}))},
		{name: "several metrics", policy: pods(cpuMetric(80), podsMetric("qps", "100"))},
		{name: "behavior", policy: withBehavior(&autoscalingv2.HPAScalingRules{
			StabilizationWindowSeconds: ptr.To[int32](3600), SelectPolicy: ptr.To(autoscalingv2.MinChangePolicySelect),
			Policies: []autoscalingv2.HPAScalingPolicy{
				{Type: autoscalingv2.PodsScalingPolicy, Value: 1, PeriodSeconds: 1800},
				{Type: autoscalingv2.PercentScalingPolicy, Value: 10, PeriodSeconds: 1},
			},
			Tolerance: q("0.05"),
		})},
		{name: "behavior rules without policies", policy: withBehavior(&autoscalingv2.HPAScalingRules{StabilizationWindowSeconds: ptr.To[int32](0)})},
		{name: "max zero", policy: &lwsv1.ScalePolicy{Metrics: []autoscalingv2.MetricSpec{cpuMetric(50)}}},
		{name: "max below min", policy: &lwsv1.ScalePolicy{MinReplicas: ptr.To[int32](4), MaxReplicas: 3, Metrics: []autoscalingv2.MetricSpec{cpuMetric(50)}}},
		{
			name:     "min zero with an external metric",
			policy:   &lwsv1.ScalePolicy{MinReplicas: ptr.To[int32](0), MaxReplicas: 3, Metrics: []autoscalingv2.MetricSpec{externalMetric(autoscalingv2.MetricTarget{Type: autoscalingv2.ValueMetricType, Value: q("1")})}},
			stricter: "HPAScaleToZero lets an HPA scale to zero, but a LeaderWorkerSet at zero groups has no leader pods to read metrics from",
		},
		{name: "metric type missing", policy: pods(metricWith(cpuMetric(50), func(m *autoscalingv2.MetricSpec) { m.Type = "" }))},
		{name: "metric type unknown", policy: pods(metricWith(cpuMetric(50), func(m *autoscalingv2.MetricSpec) { m.Type = "Cpu" }))},
		{name: "source of another type", policy: pods(metricWith(cpuMetric(50), func(m *autoscalingv2.MetricSpec) { m.Type = autoscalingv2.PodsMetricSourceType }))},
		{name: "two sources", policy: pods(metricWith(cpuMetric(50), func(m *autoscalingv2.MetricSpec) { m.Pods = podsMetric("qps", "1").Pods }))},
		{name: "no source", policy: pods(metricWith(cpuMetric(50), func(m *autoscalingv2.MetricSpec) { m.Resource = nil }))},
		{name: "resource name missing", policy: pods(metricWith(cpuMetric(50), func(m *autoscalingv2.MetricSpec) { m.Resource.Name = "" }))},
		{
			name:     "resource name unknown",
			policy:   pods(metricWith(cpuMetric(50), func(m *autoscalingv2.MetricSpec) { m.Resource.Name = "gpu" })),
			stricter: "the apiserver only requires a Resource metric's name; no container can request a resource named gpu, so it never has metrics",
		},
		{name: "target type missing", policy: pods(metricWith(cpuMetric(50), func(m *autoscalingv2.MetricSpec) { m.Resource.Target.Type = "" }))},
		{name: "target type unknown", policy: pods(metricWith(cpuMetric(50), func(m *autoscalingv2.MetricSpec) { m.Resource.Target.Type = "Percent" }))},
		{name: "utilization zero", policy: pods(cpuMetric(0))},
		{name: "resource target both values", policy: pods(metricWith(cpuMetric(50), func(m *autoscalingv2.MetricSpec) { m.Resource.Target.AverageValue = q("1") }))},
		{name: "average value negative", policy: pods(podsMetric("qps", "-1"))},
		{name: "pods metric without average value", policy: pods(podsMetric("qps", ""))},
		{name: "pods metric name with a slash", policy: pods(podsMetric("a/b", "1"))},
		{name: "pods metric name missing", policy: pods(podsMetric("", "1"))},
		{
			name: "metric selector that does not parse",
			policy: pods(metricWith(podsMetric("qps", "1"), func(m *autoscalingv2.MetricSpec) {
				m.Pods.Metric.Selector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "app", Operator: "Is"}}}
			})),
			stricter: "the apiserver does not check metric selectors; the HPA controller cannot parse this one and would only report it in the HPA's status",
		},
		{name: "object value zero", policy: pods(objectMetric(service, autoscalingv2.MetricTarget{Type: autoscalingv2.ValueMetricType, Value: q("0")}))},
		{name: "object without value", policy: pods(objectMetric(service, autoscalingv2.MetricTarget{Type: autoscalingv2.ValueMetricType}))},
		{name: "object reference apiVersion", policy: pods(objectMetric(autoscalingv2.CrossVersionObjectReference{APIVersion: "a/b/c", Kind: "Service", Name: "frontend"},
			autoscalingv2.MetricTarget{Type: autoscalingv2.ValueMetricType, Value: q("1")}))},
		{name: "object reference kind missing", policy: pods(objectMetric(autoscalingv2.CrossVersionObjectReference{APIVersion: "v1", Name: "frontend"},
			autoscalingv2.MetricTarget{Type: autoscalingv2.ValueMetricType, Value: q("1")}))},
		{name: "external both values", policy: pods(externalMetric(autoscalingv2.MetricTarget{Type: autoscalingv2.ValueMetricType, Value: q("1"), AverageValue: q("1")}))},
		{name: "external without value", policy: pods(externalMetric(autoscalingv2.MetricTarget{Type: autoscalingv2.ValueMetricType}))},
		{name: "container name not a label", policy: pods(containerMetric(corev1.ResourceCPU, "Server"))},
		{name: "container resource not for containers", policy: pods(containerMetric("pods", "server"))},
		{name: "container missing", policy: pods(containerMetric(corev1.ResourceCPU, ""))},
		{name: "stabilization window too long", policy: withBehavior(&autoscalingv2.HPAScalingRules{StabilizationWindowSeconds: ptr.To[int32](3601)})},
		{name: "stabilization window negative", policy: withBehavior(&autoscalingv2.HPAScalingRules{StabilizationWindowSeconds: ptr.To[int32](-1)})},
		{name: "select policy unknown", policy: withBehavior(&autoscalingv2.HPAScalingRules{SelectPolicy: ptr.To[autoscalingv2.ScalingPolicySelect]("Fastest")})},
		{name: "policy type unknown", policy: withBehavior(&autoscalingv2.HPAScalingRules{Policies: []autoscalingv2.HPAScalingPolicy{{Type: "Replicas", Value: 1, PeriodSeconds: 60}}})},
		{name: "policy value zero", policy: withBehavior(&autoscalingv2.HPAScalingRules{Policies: []autoscalingv2.HPAScalingPolicy{{Type: autoscalingv2.PodsScalingPolicy, Value: 0, PeriodSeconds: 60}}})},
		{name: "policy period zero", policy: withBehavior(&autoscalingv2.HPAScalingRules{Policies: []autoscalingv2.HPAScalingPolicy{{Type: autoscalingv2.PodsScalingPolicy, Value: 1, PeriodSeconds: 0}}})},
		{name: "policy period too long", policy: withBehavior(&autoscalingv2.HPAScalingRules{Policies: []autoscalingv2.HPAScalingPolicy{{Type: autoscalingv2.PercentScalingPolicy, Value: 1, PeriodSeconds: 1801}}})},
		{name: "tolerance negative", policy: withBehavior(&autoscalingv2.HPAScalingRules{Tolerance: q("-0.1")})},
	}
}

// testScalePolicyCrossCheck creates, with dryRun=All, the HPA the generator
// would build from each policy, and the LeaderWorkerSet carrying the policy:
// the apiserver's verdict on the HPA and scaleplane's (CRD schema plus
// webhook) on the LeaderWorkerSet must agree, except where scaleplane is
// stricter on purpose.
func testScalePolicyCrossCheck(t *testing.T, env *webhookEnv) {
	ns := env.cp.CreateNamespace(t)
	hpas := env.cp.KubeClient().AutoscalingV2().HorizontalPodAutoscalers(ns)
	lwss := env.cp.Client().LeaderworkersetV1().LeaderWorkerSets(ns)
	for i, tc := range scalePolicyCases() {
		t.Run(tc.name, func(t *testing.T) {
			name := fmt.Sprintf("policy-%d", i)
			ctx := context.Background()
			_, hpaErr := hpas.Create(ctx, generatedHPA(name, tc.policy), dryRun)
			if hpaErr != nil && !apierrors.IsInvalid(hpaErr) {
				t.Fatalf("HPA dry run failed for another reason than validation: %v", hpaErr)
			}
			_, lwsErr := lwss.Create(ctx, lws(name, tc.policy), dryRun)
			if lwsErr != nil && !apierrors.IsInvalid(lwsErr) && !strings.Contains(lwsErr.Error(), denial(lwsWebhook, "")) {
				t.Fatalf("LeaderWorkerSet dry run failed for another reason than validation: %v", lwsErr)
			}
			apiserverAccepts, scaleplaneAccepts := hpaErr == nil, lwsErr == nil
			switch {
			case tc.stricter != "":
				if !apiserverAccepts || scaleplaneAccepts {
					t.Errorf("want the HPA accepted and the policy refused (%s); HPA: %v; LeaderWorkerSet: %v", tc.stricter, hpaErr, lwsErr)
				}
			case apiserverAccepts != scaleplaneAccepts:
				t.Errorf("verdicts differ:\n  HPA: %v\n  LeaderWorkerSet: %v", orAccepted(hpaErr), orAccepted(lwsErr))
			default:
				t.Logf("both %s; HPA: %v; LeaderWorkerSet: %v", verdict(apiserverAccepts), orAccepted(hpaErr), orAccepted(lwsErr))
			}
		})
	}
}

func orAccepted(err error) any {
	if err == nil {
		return "accepted"
	}
	return err
}

func verdict(accepted bool) string {
	if accepted {
		return "accept"
	}
	return "refuse"
}
