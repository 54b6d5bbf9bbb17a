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

package main

import (
	"fmt"
	"strings"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	lwsv1 "github.com/scaleplane/scaleplane/pkg/apis/leaderworkerset/v1"
)

const (
	namespace      = "bench"
	lwsAPIVersion  = "leaderworkerset.x-k8s.io/v1"
	lwsKind        = "LeaderWorkerSet"
	managedByKey   = "app.kubernetes.io/managed-by"
	managedByValue = "scaleplane-hpa-generator"
)

func lwsName(i int) string { return fmt.Sprintf("llm-%05d", i) }

// leaderWorkerSet is the i-th LeaderWorkerSet: one group of two pods, with
// the i-th scale policy.
func leaderWorkerSet(i int) *lwsv1.LeaderWorkerSet {
	name := lwsName(i)
	tmpl := corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": name}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{
			Name: "main", Image: "registry.example/llm:1",
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")}},
		}}},
	}
	return &lwsv1.LeaderWorkerSet{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
		Spec: lwsv1.LeaderWorkerSetSpec{
			Replicas:             ptr.To[int32](1),
			LeaderWorkerTemplate: lwsv1.LeaderWorkerTemplate{Size: ptr.To[int32](2), WorkerTemplate: tmpl},
			RolloutStrategy:      lwsv1.RolloutStrategy{Type: lwsv1.RollingUpdateStrategyType},
			StartupPolicy:        lwsv1.LeaderCreatedStartupPolicy,
			ScalePolicy:          scalePolicy(i),
		},
	}
}

// scalePolicy varies with i so that the generator meets every shape it has
// to compare with the stored HPA in a steady state: minReplicas set or left
// to the default, one metric or two (one of them a quantity), and no
// behavior, a complete one, or a partial one that the apiserver fills in.
// minReplicas is always 1 and maxReplicas at least 4, so the churn's 1 <-> 2
// replicas stay in range and the HPA controller never rescales.
func scalePolicy(i int) *lwsv1.ScalePolicy {
	p := &lwsv1.ScalePolicy{
		MaxReplicas: int32(4 + i%5),
		Metrics:     []autoscalingv2.MetricSpec{cpuMetric(int32(50 + i%40))},
	}
	if i%2 == 0 {
		p.MinReplicas = ptr.To[int32](1)
	}
	if i%5 == 0 {
		p.Metrics = append(p.Metrics, memoryMetric("512Mi"))
	}
	switch i % 3 {
	case 1:
		p.Behavior = completeBehavior()
	case 2:
		p.Behavior = partialBehavior()
	}
	return p
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

func memoryMetric(average string) autoscalingv2.MetricSpec {
	return autoscalingv2.MetricSpec{
		Type: autoscalingv2.ResourceMetricSourceType,
		Resource: &autoscalingv2.ResourceMetricSource{
			Name:   corev1.ResourceMemory,
			Target: autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageValue: ptr.To(resource.MustParse(average))},
		},
	}
}

// completeBehavior sets every field, so the apiserver stores it unchanged.
func completeBehavior() *autoscalingv2.HorizontalPodAutoscalerBehavior {
	return &autoscalingv2.HorizontalPodAutoscalerBehavior{
		ScaleUp: &autoscalingv2.HPAScalingRules{
			StabilizationWindowSeconds: ptr.To[int32](30),
			SelectPolicy:               ptr.To(autoscalingv2.MaxChangePolicySelect),
			Policies:                   []autoscalingv2.HPAScalingPolicy{{Type: autoscalingv2.PodsScalingPolicy, Value: 2, PeriodSeconds: 60}},
		},
		ScaleDown: &autoscalingv2.HPAScalingRules{
			StabilizationWindowSeconds: ptr.To[int32](300),
			SelectPolicy:               ptr.To(autoscalingv2.MinChangePolicySelect),
			Policies:                   []autoscalingv2.HPAScalingPolicy{{Type: autoscalingv2.PercentScalingPolicy, Value: 50, PeriodSeconds: 60}},
		},
	}
}

// partialBehavior sets only the scale-down window; the apiserver fills in
// the rest when it stores the HPA (see storedPartialBehavior).
func partialBehavior() *autoscalingv2.HorizontalPodAutoscalerBehavior {
	return &autoscalingv2.HorizontalPodAutoscalerBehavior{
		ScaleDown: &autoscalingv2.HPAScalingRules{StabilizationWindowSeconds: ptr.To[int32](60)},
	}
}

// storedPartialBehavior is partialBehavior as the apiserver stores it in an
// HPA: kube-apiserver's autoscaling/v2 defaults, written out here so that the
// benchmark checks the generator's output against an independent statement
// of them.
func storedPartialBehavior() *autoscalingv2.HorizontalPodAutoscalerBehavior {
	return &autoscalingv2.HorizontalPodAutoscalerBehavior{
		ScaleUp: &autoscalingv2.HPAScalingRules{
			StabilizationWindowSeconds: ptr.To[int32](0),
			SelectPolicy:               ptr.To(autoscalingv2.MaxChangePolicySelect),
			Policies: []autoscalingv2.HPAScalingPolicy{
				{Type: autoscalingv2.PodsScalingPolicy, Value: 4, PeriodSeconds: 15},
				{Type: autoscalingv2.PercentScalingPolicy, Value: 100, PeriodSeconds: 15},
			},
		},
		ScaleDown: &autoscalingv2.HPAScalingRules{
			StabilizationWindowSeconds: ptr.To[int32](60),
			SelectPolicy:               ptr.To(autoscalingv2.MaxChangePolicySelect),
			Policies:                   []autoscalingv2.HPAScalingPolicy{{Type: autoscalingv2.PercentScalingPolicy, Value: 100, PeriodSeconds: 15}},
		},
	}
}

// expectation is what the HPA of one LeaderWorkerSet must look like.
type expectation struct {
	uid  types.UID
	spec autoscalingv2.HorizontalPodAutoscalerSpec
}

// expect returns the HPA spec the i-th LeaderWorkerSet should get, as
// stored (with the apiserver's defaults), and its owner's UID.
func expect(i int, uid types.UID) expectation {
	p := scalePolicy(i)
	spec := autoscalingv2.HorizontalPodAutoscalerSpec{
		ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: lwsAPIVersion, Kind: lwsKind, Name: lwsName(i)},
		MinReplicas:    ptr.To(ptr.Deref(p.MinReplicas, 1)),
		MaxReplicas:    p.MaxReplicas,
		Metrics:        p.Metrics,
		Behavior:       p.Behavior,
	}
	if i%3 == 2 {
		spec.Behavior = storedPartialBehavior()
	}
	return expectation{uid: uid, spec: spec}
}

// problems lists what is wrong with hpa; empty means correct: the whole spec,
// the managed-by label and the controller owner reference.
func (e expectation) problems(hpa *autoscalingv2.HorizontalPodAutoscaler) string {
	var out []string
	if !equality.Semantic.DeepEqual(hpa.Spec, e.spec) {
		out = append(out, "spec differs")
	}
	if hpa.Labels[managedByKey] != managedByValue {
		out = append(out, fmt.Sprintf("label %s=%q", managedByKey, hpa.Labels[managedByKey]))
	}
	owner := metav1.GetControllerOfNoCopy(hpa)
	if owner == nil || owner.UID != e.uid || owner.APIVersion != lwsAPIVersion || owner.Kind != lwsKind ||
		owner.Name != e.spec.ScaleTargetRef.Name || !ptr.Deref(owner.BlockOwnerDeletion, false) {
		out = append(out, fmt.Sprintf("controller %+v, want the LeaderWorkerSet %s", owner, e.uid))
	}
	return strings.Join(out, "; ")
}
