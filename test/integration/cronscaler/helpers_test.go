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
	"context"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"

	autoscalingv1alpha1 "github.com/scaleplane/scaleplane/pkg/apis/autoscaling/v1alpha1"
	lwsv1 "github.com/scaleplane/scaleplane/pkg/apis/leaderworkerset/v1"
	"github.com/scaleplane/scaleplane/test/integration/framework"
)

func podTemplate(app string) corev1.PodTemplateSpec {
	return corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": app}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "registry.k8s.io/pause:3.10"}}},
	}
}

func deployment(name string, replicas int32) *appsv1.Deployment {
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}},
			Template: podTemplate(name),
		},
	}
}

func statefulSet(name string, replicas int32) *appsv1.StatefulSet {
	return &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: appsv1.StatefulSetSpec{
			Replicas: ptr.To(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}},
			Template: podTemplate(name),
		},
	}
}

func leaderWorkerSet(name string, replicas int32) *lwsv1.LeaderWorkerSet {
	return &lwsv1.LeaderWorkerSet{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: lwsv1.LeaderWorkerSetSpec{
			Replicas:             ptr.To(replicas),
			LeaderWorkerTemplate: lwsv1.LeaderWorkerTemplate{Size: ptr.To[int32](2), WorkerTemplate: podTemplate(name)},
			// Typed clients send the struct even when empty; the schema wants
			// a type.
			RolloutStrategy: lwsv1.RolloutStrategy{Type: lwsv1.RollingUpdateStrategyType},
			StartupPolicy:   lwsv1.LeaderCreatedStartupPolicy,
		},
	}
}

func everyMinute(name string, ref autoscalingv2.CrossVersionObjectReference, r autoscalingv1alpha1.CronFederatedHPARule) *autoscalingv1alpha1.CronFederatedHPA {
	r.Name = "every-minute"
	r.Schedule = "* * * * *"
	r.TimeZone = ptr.To("UTC")
	return &autoscalingv1alpha1.CronFederatedHPA{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       autoscalingv1alpha1.CronFederatedHPASpec{ScaleTargetRef: ref, Rules: []autoscalingv1alpha1.CronFederatedHPARule{r}},
	}
}

func deploymentRef(name string) autoscalingv2.CrossVersionObjectReference {
	return autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: name}
}

// waitForStatus polls the CronFederatedHPA until cond holds.
func waitForStatus(ctx context.Context, t *testing.T, cp *framework.ControlPlane, ns, name string, timeout time.Duration, what string, cond func(*autoscalingv1alpha1.ExecutionHistory) bool) *autoscalingv1alpha1.ExecutionHistory {
	t.Helper()
	var last *autoscalingv1alpha1.ExecutionHistory
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		obj, err := cp.Client().AutoscalingV1alpha1().CronFederatedHPAs(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil || len(obj.Status.ExecutionHistories) == 0 {
			return false, nil
		}
		last = &obj.Status.ExecutionHistories[0]
		return cond(last), nil
	})
	if err != nil {
		t.Fatalf("%s/%s: waiting for %s: %v; last history %+v", ns, name, what, err, last)
	}
	return last
}

func deploymentReplicas(ctx context.Context, t *testing.T, cp *framework.ControlPlane, ns, name string) int32 {
	t.Helper()
	d, err := cp.KubeClient().AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return ptr.Deref(d.Spec.Replicas, 1)
}

// untilSecond waits until the wall clock is at least from and at most to
// seconds into a minute, so a test can act well clear of a "* * * * *" slot.
func untilSecond(from, to int) {
	for {
		s := time.Now().Second()
		if s >= from && s <= to {
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
}
