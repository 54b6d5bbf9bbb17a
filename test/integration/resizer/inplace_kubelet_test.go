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

package resizer

// The kubelet the tests of updateMode InPlace play (inplace_test.go): what
// a node's kind makes of a resize, the emulated kubelet that starts pods and
// answers resizes, the target's pods it runs, the Nodes with room for them
// and their Ready condition, and the wait until the pods run.

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"

	"github.com/scaleplane/scaleplane/test/integration/framework"
)

// What the emulated kubelet of a node does with a resize, by the node's
// name prefix.
const (
	roomyNode      = "roomy"      // applies it
	fullNode       = "full"       // PodResizePending, Deferred
	tooSmallNode   = "small"      // PodResizePending, Infeasible
	deadNode       = "dead"       // starts pods, then never answers (a kubelet that is down)
	kubeletMessage = "emulated: " // prefix of the kubelet's messages
)

// kubelet plays the kubelet of the nodes the test's pods are bound to: it
// starts pods (phase Running, containers running, their resources in
// status) and answers resizes, until the test ends.
func kubelet(t *testing.T, cp *framework.ControlPlane, ns string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		_ = wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
			pods, err := cp.KubeClient().CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
			if err != nil {
				return false, nil
			}
			for i := range pods.Items {
				if status, ok := kubeletStatus(&pods.Items[i]); ok {
					p := pods.Items[i].DeepCopy()
					p.Status = status
					// A conflict is the next round's.
					_, _ = cp.KubeClient().CoreV1().Pods(ns).UpdateStatus(ctx, p, metav1.UpdateOptions{})
				}
			}
			return false, nil
		})
	}()
	t.Cleanup(func() {
		cancel()
		wg.Wait()
	})
}

// kubeletStatus is the status the emulated kubelet writes for pod, and
// whether it differs from the pod's.
func kubeletStatus(pod *corev1.Pod) (corev1.PodStatus, bool) {
	status := *pod.Status.DeepCopy()
	now := metav1.Now()
	if status.Phase != corev1.PodRunning {
		status.Phase = corev1.PodRunning
		status.StartTime = &now
		status.ContainerStatuses = nil
		for _, c := range pod.Spec.Containers {
			status.ContainerStatuses = append(status.ContainerStatuses, corev1.ContainerStatus{
				Name: c.Name, Image: c.Image, Ready: true, Started: ptr.To(true),
				State:     corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}},
				Resources: c.Resources.DeepCopy(),
			})
		}
		status.ObservedGeneration = pod.Generation
		return status, true
	}
	// The API server bumps a pod's generation on every change of its spec,
	// a resize included; the status's observedGeneration says which one
	// was answered. Comparing resources instead would loop: the API server
	// normalizes what the kubelet reports.
	if status.ObservedGeneration == pod.Generation || strings.HasPrefix(pod.Spec.NodeName, deadNode) {
		return status, false
	}
	status.ObservedGeneration = pod.Generation
	status.Conditions = nil
	for _, c := range pod.Status.Conditions {
		if c.Type != corev1.PodResizePending && c.Type != corev1.PodResizeInProgress {
			status.Conditions = append(status.Conditions, c)
		}
	}
	pending := func(reason string) (corev1.PodStatus, bool) {
		status.Conditions = append(status.Conditions, corev1.PodCondition{
			Type: corev1.PodResizePending, Status: corev1.ConditionTrue, Reason: reason, ObservedGeneration: pod.Generation,
			Message: kubeletMessage + "node " + pod.Spec.NodeName + " says " + reason, LastTransitionTime: now,
		})
		return status, true
	}
	switch {
	case strings.HasPrefix(pod.Spec.NodeName, fullNode):
		return pending(corev1.PodReasonDeferred)
	case strings.HasPrefix(pod.Spec.NodeName, tooSmallNode):
		return pending(corev1.PodReasonInfeasible)
	}
	for i, c := range pod.Spec.Containers {
		cs := &status.ContainerStatuses[i]
		if restarts(c, cs.Resources) {
			cs.RestartCount++
		}
		cs.Resources = c.Resources.DeepCopy()
	}
	return status, true
}

// restarts reports whether applying c's resources restarts it: a resource
// whose value changes has resize policy RestartContainer.
func restarts(c corev1.Container, current *corev1.ResourceRequirements) bool {
	for _, p := range c.ResizePolicy {
		if p.RestartPolicy != corev1.RestartContainer {
			continue
		}
		if current == nil {
			return true
		}
		want, have := c.Resources.Requests[p.ResourceName], current.Requests[p.ResourceName]
		if want.Cmp(have) != 0 {
			return true
		}
	}
	return false
}

// createPods creates n pods of the target app on node, as its controller
// would from the template, and returns their uids by name.
func createPods(t *testing.T, cp *framework.ControlPlane, ns, app, node string, first, n int, mutate func(*corev1.PodSpec)) map[string]types.UID {
	t.Helper()
	uids := map[string]types.UID{}
	for i := first; i < first+n; i++ {
		spec := podSpec(app, 1).Spec
		spec.NodeName = node
		if mutate != nil {
			mutate(&spec)
		}
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%d", app, i), Namespace: ns, Labels: map[string]string{"app": app}}, Spec: spec}
		created, err := cp.KubeClient().CoreV1().Pods(ns).Create(context.Background(), p, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		uids[created.Name] = created.UID
	}
	return uids
}

// createNodeWithRoom creates a plain Node, as createNode does, with room in
// its status: the API server refuses a resize that does not fit the node's
// allocatable resources ("node didn't have enough allocatable resources")
// before any kubelet sees it, so the emulated kubelets' nodes say what a
// real kubelet would report.
func createNodeWithRoom(t *testing.T, cp *framework.ControlPlane, name string) {
	t.Helper()
	createNode(t, cp, name)
	ctx := context.Background()
	node, err := cp.KubeClient().CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	room := corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse("4"),
		corev1.ResourceMemory: resource.MustParse("8Gi"),
		corev1.ResourcePods:   resource.MustParse("110"),
		"example.com/gpu":     resource.MustParse("8"),
	}
	node.Status.Capacity, node.Status.Allocatable = room, room.DeepCopy()
	if _, err := cp.KubeClient().CoreV1().Nodes().UpdateStatus(ctx, node, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// setNodeReady writes the Ready condition of node name, as its kubelet
// (status True) or the node lifecycle controller (False, Unknown) would.
func setNodeReady(t *testing.T, cp *framework.ControlPlane, name string, status corev1.ConditionStatus) {
	t.Helper()
	ctx := context.Background()
	node, err := cp.KubeClient().CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	reason := map[corev1.ConditionStatus]string{corev1.ConditionTrue: "KubeletReady", corev1.ConditionFalse: "KubeletNotReady", corev1.ConditionUnknown: "NodeStatusUnknown"}[status]
	node.Status.Conditions = []corev1.NodeCondition{{
		Type: corev1.NodeReady, Status: status, Reason: reason, Message: "emulated: " + reason,
		LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now(),
	}}
	if _, err := cp.KubeClient().CoreV1().Nodes().UpdateStatus(ctx, node, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// waitPodsRunning waits until n pods of app run with their resources
// reported, so that a resizer created next sees them all at once.
func waitPodsRunning(t *testing.T, cp *framework.ControlPlane, ns, app string, n int) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, waitTimeout, true, func(ctx context.Context) (bool, error) {
		pods, err := cp.KubeClient().CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=" + app})
		if err != nil {
			return false, err
		}
		running := 0
		for _, p := range pods.Items {
			if p.Status.Phase == corev1.PodRunning && len(p.Status.ContainerStatuses) > 0 && p.Status.ContainerStatuses[0].Resources != nil {
				running++
			}
		}
		return running == n, nil
	})
	if err != nil {
		t.Fatalf("the %d pods of %s do not run: %v", n, app, err)
	}
}
