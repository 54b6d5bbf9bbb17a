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

// Package lwsfixture holds the LeaderWorkerSets that the hpa-generator's two
// integration packages (HPA output, and FederatedHPA output on Karmada's CRDs)
// both create and change, so that both test the same objects.
package lwsfixture

import (
	"context"
	"testing"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"

	lwsv1 "github.com/scaleplane/scaleplane/pkg/apis/leaderworkerset/v1"
	"github.com/scaleplane/scaleplane/test/integration/framework"
)

// CPUMetric is a scale policy metric on the pods' CPU utilization.
func CPUMetric(utilization int32) autoscalingv2.MetricSpec {
	return autoscalingv2.MetricSpec{
		Type: autoscalingv2.ResourceMetricSourceType,
		Resource: &autoscalingv2.ResourceMetricSource{
			Name:   corev1.ResourceCPU,
			Target: autoscalingv2.MetricTarget{Type: autoscalingv2.UtilizationMetricType, AverageUtilization: ptr.To(utilization)},
		},
	}
}

// LeaderWorkerSet is one group of two pods with the given scale policy.
func LeaderWorkerSet(ns, name string, policy *lwsv1.ScalePolicy) *lwsv1.LeaderWorkerSet {
	tmpl := corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": name}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{
			Name: "main", Image: "registry.example/llm:1",
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")}},
		}}},
	}
	return &lwsv1.LeaderWorkerSet{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: lwsv1.LeaderWorkerSetSpec{
			Replicas:             ptr.To[int32](1),
			LeaderWorkerTemplate: lwsv1.LeaderWorkerTemplate{Size: ptr.To[int32](2), WorkerTemplate: tmpl},
			RolloutStrategy:      lwsv1.RolloutStrategy{Type: lwsv1.RollingUpdateStrategyType},
			StartupPolicy:        lwsv1.LeaderCreatedStartupPolicy,
			ScalePolicy:          policy,
		},
	}
}

// Create creates lws and returns it as stored.
func Create(t *testing.T, cp *framework.ControlPlane, lws *lwsv1.LeaderWorkerSet) *lwsv1.LeaderWorkerSet {
	t.Helper()
	created, err := cp.Client().LeaderworkersetV1().LeaderWorkerSets(lws.Namespace).Create(context.Background(), lws, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating LeaderWorkerSet %s: %v", lws.Name, err)
	}
	return created
}

// Update applies change to the newest LeaderWorkerSet, retrying on conflict.
func Update(t *testing.T, cp *framework.ControlPlane, ns, name string, change func(*lwsv1.LeaderWorkerSet)) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		lws, err := cp.Client().LeaderworkersetV1().LeaderWorkerSets(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		change(lws)
		_, err = cp.Client().LeaderworkersetV1().LeaderWorkerSets(ns).Update(ctx, lws, metav1.UpdateOptions{})
		if apierrors.IsConflict(err) {
			return false, nil
		}
		return err == nil, err
	})
	if err != nil {
		t.Fatalf("updating LeaderWorkerSet %s: %v", name, err)
	}
}
