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

package karmada

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"

	autoscalingv1alpha1 "github.com/scaleplane/scaleplane/pkg/apis/autoscaling/v1alpha1"
	lwsv1 "github.com/scaleplane/scaleplane/pkg/apis/leaderworkerset/v1"
	"github.com/scaleplane/scaleplane/test/integration/framework"
	"github.com/scaleplane/scaleplane/test/integration/hpagenerator/lwsfixture"
)

const (
	managedByLabel = "app.kubernetes.io/managed-by"
	managedByValue = "scaleplane-hpa-generator"
	waitTimeout    = 60 * time.Second
)

// The LeaderWorkerSets both hpa-generator packages test (lwsfixture).
var (
	cpuMetric       = lwsfixture.CPUMetric
	leaderWorkerSet = lwsfixture.LeaderWorkerSet
	createLWS       = lwsfixture.Create
	updateLWS       = lwsfixture.Update
)

// updateFHPA applies change to the newest FederatedHPA (its status too, with
// status true), retrying on conflict.
func updateFHPA(t *testing.T, cp *framework.ControlPlane, ns, name string, status bool, change func(*autoscalingv1alpha1.FederatedHPA)) {
	t.Helper()
	client := cp.Client().AutoscalingV1alpha1().FederatedHPAs(ns)
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		f, err := client.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		change(f)
		if status {
			_, err = client.UpdateStatus(ctx, f, metav1.UpdateOptions{})
		} else {
			_, err = client.Update(ctx, f, metav1.UpdateOptions{})
		}
		if apierrors.IsConflict(err) {
			return false, nil
		}
		return err == nil, err
	})
	if err != nil {
		t.Fatalf("updating FederatedHPA %s: %v", name, err)
	}
}

// waitFHPA reads the FederatedHPA until check returns "" and fails the test
// with the last complaint otherwise.
func waitFHPA(t *testing.T, cp *framework.ControlPlane, ns, name string, check func(*autoscalingv1alpha1.FederatedHPA, error) string) *autoscalingv1alpha1.FederatedHPA {
	t.Helper()
	return framework.WaitObject(t, waitTimeout, fmt.Sprintf("FederatedHPA %s/%s", ns, name), func(ctx context.Context) (*autoscalingv1alpha1.FederatedHPA, error) {
		return cp.Client().AutoscalingV1alpha1().FederatedHPAs(ns).Get(ctx, name, metav1.GetOptions{})
	}, check)
}

func fhpaGone(_ *autoscalingv1alpha1.FederatedHPA, err error) string {
	if apierrors.IsNotFound(err) {
		return ""
	}
	if err != nil {
		return err.Error()
	}
	return "still exists"
}

// generated checks the FederatedHPA the generator keeps for lws.
func generated(lws *lwsv1.LeaderWorkerSet, min, max, cpu int32) func(*autoscalingv1alpha1.FederatedHPA, error) string {
	return func(f *autoscalingv1alpha1.FederatedHPA, err error) string {
		if err != nil {
			return err.Error()
		}
		var problems []string
		ref := f.Spec.ScaleTargetRef
		if ref.APIVersion != "leaderworkerset.x-k8s.io/v1" || ref.Kind != "LeaderWorkerSet" || ref.Name != lws.Name {
			problems = append(problems, fmt.Sprintf("scaleTargetRef %+v", ref))
		}
		if ptr.Deref(f.Spec.MinReplicas, 0) != min || f.Spec.MaxReplicas != max {
			problems = append(problems, fmt.Sprintf("min/max %d/%d, want %d/%d", ptr.Deref(f.Spec.MinReplicas, 0), f.Spec.MaxReplicas, min, max))
		}
		if len(f.Spec.Metrics) != 1 || f.Spec.Metrics[0].Resource == nil || ptr.Deref(f.Spec.Metrics[0].Resource.Target.AverageUtilization, 0) != cpu {
			problems = append(problems, fmt.Sprintf("metrics %+v, want cpu %d%%", f.Spec.Metrics, cpu))
		}
		if f.Labels[managedByLabel] != managedByValue {
			problems = append(problems, fmt.Sprintf("label %s=%q", managedByLabel, f.Labels[managedByLabel]))
		}
		owner := metav1.GetControllerOf(f)
		if owner == nil || owner.UID != lws.UID || owner.Kind != "LeaderWorkerSet" || !ptr.Deref(owner.BlockOwnerDeletion, false) {
			problems = append(problems, fmt.Sprintf("controller %+v, want the LeaderWorkerSet %s", owner, lws.UID))
		}
		return strings.Join(problems, "; ")
	}
}

func hpaExists(t *testing.T, cp *framework.ControlPlane, ns, name string) bool {
	t.Helper()
	_, err := cp.KubeClient().AutoscalingV2().HorizontalPodAutoscalers(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	return err == nil
}

// metric reads a metric of the manager, summed over the series that carry
// every one of labels; 0 when there is none.
func metric(t *testing.T, m *framework.Manager, name string, labels ...string) float64 {
	t.Helper()
	v, _, err := m.Metric(name, labels...)
	if err != nil {
		t.Fatalf("reading %s: %v", name, err)
	}
	return v
}

// waitIdle waits until the generator has finished every sync it was asked
// for (see framework.Manager.WaitQueueIdle).
func waitIdle(t *testing.T, m *framework.Manager) {
	t.Helper()
	m.WaitQueueIdle(t, waitTimeout, "hpa_generator")
}

// waitLog waits for a line of the manager's log holding every one of want.
func waitLog(t *testing.T, m *framework.Manager, want ...string) {
	t.Helper()
	m.WaitLog(t, waitTimeout, want...)
}
