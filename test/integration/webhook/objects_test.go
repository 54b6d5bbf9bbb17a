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
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	autoscalingv1alpha1 "github.com/scaleplane/scaleplane/pkg/apis/autoscaling/v1alpha1"
	lwsv1 "github.com/scaleplane/scaleplane/pkg/apis/leaderworkerset/v1"
	scaleplanev1alpha1 "github.com/scaleplane/scaleplane/pkg/apis/scaleplane/v1alpha1"
)

func deploymentRef() autoscalingv2.CrossVersionObjectReference {
	return autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"}
}

func cronFHPA(name string, ref autoscalingv2.CrossVersionObjectReference, rules ...autoscalingv1alpha1.CronFederatedHPARule) *autoscalingv1alpha1.CronFederatedHPA {
	return &autoscalingv1alpha1.CronFederatedHPA{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       autoscalingv1alpha1.CronFederatedHPASpec{ScaleTargetRef: ref, Rules: rules},
	}
}

func replicasRule(name, schedule string, replicas int32) autoscalingv1alpha1.CronFederatedHPARule {
	return autoscalingv1alpha1.CronFederatedHPARule{Name: name, Schedule: schedule, TargetReplicas: ptr.To(replicas)}
}

func boundsRule(name string, minRep, maxRep *int32) autoscalingv1alpha1.CronFederatedHPARule {
	return autoscalingv1alpha1.CronFederatedHPARule{Name: name, Schedule: "0 8 * * *", TargetMinReplicas: minRep, TargetMaxReplicas: maxRep}
}

func lws(name string, policy *lwsv1.ScalePolicy) *lwsv1.LeaderWorkerSet {
	return &lwsv1.LeaderWorkerSet{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: lwsv1.LeaderWorkerSetSpec{
			LeaderWorkerTemplate: lwsv1.LeaderWorkerTemplate{
				WorkerTemplate: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
					Containers: []corev1.Container{{Name: "server", Image: "registry.k8s.io/pause:3.10"}},
				}},
			},
			// The struct is not a pointer, so a Go client always sends it;
			// the schema's default only applies when it is absent.
			RolloutStrategy: lwsv1.RolloutStrategy{Type: lwsv1.RollingUpdateStrategyType},
			ScalePolicy:     policy,
		},
	}
}

func policyWithMetrics(metrics ...autoscalingv2.MetricSpec) *lwsv1.ScalePolicy {
	return &lwsv1.ScalePolicy{MinReplicas: ptr.To[int32](1), MaxReplicas: 4, Metrics: metrics}
}

func cpuMetric(utilization int32) autoscalingv2.MetricSpec {
	return autoscalingv2.MetricSpec{
		Type: autoscalingv2.ResourceMetricSourceType,
		Resource: &autoscalingv2.ResourceMetricSource{
			Name:   corev1.ResourceCPU,
			Target: autoscalingv2.MetricTarget{Type: autoscalingv2.UtilizationMetricType, AverageUtilization: ptr.To(utilization)},
		},
	}
}

func podsMetric(name, averageValue string) autoscalingv2.MetricSpec {
	m := autoscalingv2.MetricSpec{
		Type: autoscalingv2.PodsMetricSourceType,
		Pods: &autoscalingv2.PodsMetricSource{
			Metric: autoscalingv2.MetricIdentifier{Name: name},
			Target: autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType},
		},
	}
	if averageValue != "" {
		m.Pods.Target.AverageValue = ptr.To(resource.MustParse(averageValue))
	}
	return m
}

func addonResizer(name string) *scaleplanev1alpha1.AddonResizer {
	return &scaleplanev1alpha1.AddonResizer{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: scaleplanev1alpha1.AddonResizerSpec{
			TargetRef:     scaleplanev1alpha1.TargetReference{Kind: scaleplanev1alpha1.TargetKindDeployment, Name: "metrics-server"},
			ContainerName: "metrics-server",
			Resources: []scaleplanev1alpha1.ResourceScaling{
				{Name: corev1.ResourceCPU, Base: resource.MustParse("40m"), ExtraPerUnit: resource.MustParse("0.5m")},
				{Name: corev1.ResourceMemory, Base: resource.MustParse("40Mi"), ExtraPerUnit: resource.MustParse("4Mi")},
			},
			Threshold: 5,
		},
	}
}
