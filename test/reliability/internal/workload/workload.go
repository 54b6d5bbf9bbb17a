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

// Package workload is what the reliability tests scale: a Deployment at one
// replica and a CronFederatedHPA of the same name whose two rules set it to
// EvenReplicas on even minutes and OddReplicas on odd ones, so that every
// minute boundary is a slot and every write names its slot.
package workload

import (
	"context"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	autoscalingv1alpha1 "github.com/scaleplane/scaleplane/pkg/apis/autoscaling/v1alpha1"
	"github.com/scaleplane/scaleplane/pkg/generated/clientset/versioned"
)

// The replicas the even-minute and odd-minute rules set.
const EvenReplicas, OddReplicas = 2, 3

// Create creates the Deployment name and its CronFederatedHPA in ns, both
// rules with maxDelay and status histories of historyLimit entries.
func Create(ctx context.Context, kube kubernetes.Interface, client versioned.Interface, ns, name string, maxDelay time.Duration, historyLimit int32) error {
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](1),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": name}},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "example.invalid/c"}}},
			},
		},
	}
	if _, err := kube.AppsV1().Deployments(ns).Create(ctx, d, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("creating Deployment %s: %w", name, err)
	}
	rule := func(name, schedule string, replicas int32) autoscalingv1alpha1.CronFederatedHPARule {
		return autoscalingv1alpha1.CronFederatedHPARule{
			Name: name, Schedule: schedule, TargetReplicas: ptr.To(replicas),
			SuccessfulHistoryLimit: ptr.To(historyLimit), FailedHistoryLimit: ptr.To(historyLimit),
			MaxDelaySeconds: ptr.To(int32(maxDelay / time.Second)),
		}
	}
	cron := &autoscalingv1alpha1.CronFederatedHPA{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: autoscalingv1alpha1.CronFederatedHPASpec{
			ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: name},
			Rules: []autoscalingv1alpha1.CronFederatedHPARule{
				rule("even", "0-58/2 * * * *", EvenReplicas),
				rule("odd", "1-59/2 * * * *", OddReplicas),
			},
		},
	}
	if _, err := client.AutoscalingV1alpha1().CronFederatedHPAs(ns).Create(ctx, cron, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("creating CronFederatedHPA %s: %w", name, err)
	}
	return nil
}
