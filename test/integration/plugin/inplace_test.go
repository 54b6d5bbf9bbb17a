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

package plugin

import (
	"context"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"

	"github.com/scaleplane/scaleplane/cmd/kubectl-scaleplane/app"
	scaleplanev1alpha1 "github.com/scaleplane/scaleplane/pkg/apis/scaleplane/v1alpha1"
	"github.com/scaleplane/scaleplane/test/integration/framework"
)

// TestExplainPodsInPlace runs the resizer in place on three pods the test
// plays the kubelet of: two on a Ready node, which the resizer resizes (the
// test applies the first, as its kubelet would, and leaves the second
// unanswered), and one on a node that is not Ready, which it leaves alone.
// explain says of each pod what the controller's status says of them all:
// one at the size, one resizing, one waiting for its node.
func TestExplainPodsInPlace(t *testing.T) {
	cp := framework.Get(t)
	ns := cp.CreateNamespace(t)
	ctx := context.Background()
	kube := cp.KubeClient()
	ready, dead := "ready-"+ns, "dead-"+ns
	for name, status := range map[string]corev1.ConditionStatus{ready: corev1.ConditionTrue, dead: corev1.ConditionFalse} {
		createNode(t, cp, name, status)
		t.Cleanup(func() { _ = kube.CoreV1().Nodes().Delete(context.Background(), name, metav1.DeleteOptions{}) })
	}
	old := corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10m"), corev1.ResourceMemory: resource.MustParse("10Mi")}}
	labels := map[string]string{"app": "addon"}
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "addon"},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](0),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "addon", Image: "addon", Resources: old}}},
			},
		},
	}
	if _, err := kube.AppsV1().Deployments(ns).Create(ctx, d, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for name, node := range map[string]string{"addon-0": ready, "addon-1": ready, "addon-2": dead} {
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels},
			Spec:       corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "addon", Image: "addon", Resources: old}}},
		}
		p, err := kube.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		now := metav1.Now()
		p.Status = corev1.PodStatus{Phase: corev1.PodRunning, StartTime: &now, ObservedGeneration: p.Generation, ContainerStatuses: []corev1.ContainerStatus{{
			Name: "addon", Image: "addon", Ready: true, Started: ptr.To(true),
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}}, Resources: old.DeepCopy(),
		}}}
		if _, err := kube.CoreV1().Pods(ns).UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	ar := &scaleplanev1alpha1.AddonResizer{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "addon"},
		Spec: scaleplanev1alpha1.AddonResizerSpec{
			TargetRef:     scaleplanev1alpha1.TargetReference{Kind: scaleplanev1alpha1.TargetKindDeployment, Name: "addon"},
			ContainerName: "addon",
			Resources: []scaleplanev1alpha1.ResourceScaling{
				{Name: corev1.ResourceCPU, Base: resource.MustParse("100m"), ExtraPerUnit: resource.MustParse("1m")},
				{Name: corev1.ResourceMemory, Base: resource.MustParse("50Mi"), ExtraPerUnit: resource.MustParse("1Mi")},
			},
			SetLimits:  ptr.To(false),
			UpdateMode: scaleplanev1alpha1.UpdateModeInPlace,
		},
	}
	if _, err := cp.Client().ScaleplaneV1alpha1().AddonResizers(ns).Create(ctx, ar, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	framework.StartManager(t, cp.KubeconfigPath(), "resizer")

	// The resizer holds the pods at the estimate and resizes the two on
	// the Ready node; the test's kubelet applies addon-0's resize.
	var held scaleplanev1alpha1.InPlaceStatus
	waitFor(t, "the resizer to resize addon-0 and addon-1 in place", func(ctx context.Context) (bool, error) {
		got, err := cp.Client().ScaleplaneV1alpha1().AddonResizers(ns).Get(ctx, "addon", metav1.GetOptions{})
		if err != nil || got.Status.InPlace == nil || len(got.Status.InPlace.Resources.Requests) == 0 {
			return false, err
		}
		held = *got.Status.InPlace
		for _, name := range []string{"addon-0", "addon-1"} {
			p, err := kube.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			if q := p.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU]; q.Cmp(held.Resources.Requests[corev1.ResourceCPU]) != 0 {
				return false, nil
			}
		}
		return true, nil
	})
	p, err := kube.CoreV1().Pods(ns).Get(ctx, "addon-0", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	p.Status.ContainerStatuses[0].Resources = p.Spec.Containers[0].Resources.DeepCopy()
	p.Status.ObservedGeneration = p.Generation
	if _, err := kube.CoreV1().Pods(ns).UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	var status scaleplanev1alpha1.AddonResizerStatus
	waitFor(t, "the resizer to count addon-0 at its size", func(ctx context.Context) (bool, error) {
		got, err := cp.Client().ScaleplaneV1alpha1().AddonResizers(ns).Get(ctx, "addon", metav1.GetOptions{})
		if err != nil || got.Status.InPlace == nil {
			return false, err
		}
		status = got.Status
		return got.Status.InPlace.AtSize == 1 && got.Status.InPlace.Pods == 3, nil
	})

	e := decode[app.Explanation](t, kubectlScaleplane(t, cp, "explain", "addonresizer", "addon", "-n", ns, "-o", "json"))
	want := map[string]string{"addon-0": "at_size", "addon-1": "resizing", "addon-2": "node_not_ready"}
	if len(e.Pods) != len(want) {
		t.Fatalf("explain lists %d pods, want 3: %+v", len(e.Pods), e.Pods)
	}
	atSize := 0
	for _, p := range e.Pods {
		if p.State != want[p.Name] {
			t.Errorf("%s: explain says %s (%s); want %s", p.Name, p.State, p.Next, want[p.Name])
		}
		if p.State == "at_size" {
			atSize++
		}
		if p.Target == nil || !sameRequests(p.Target.Requests, status.InPlace.Resources.Requests) {
			t.Errorf("%s: explain's target %v; the controller holds %v", p.Name, p.Target, status.InPlace.Resources.Requests)
		}
	}
	if atSize != int(status.InPlace.AtSize) {
		t.Errorf("explain has %d pods at the size, the controller's status %d", atSize, status.InPlace.AtSize)
	}
	for _, r := range e.Resources {
		if !r.InBand {
			t.Errorf("%s: out of the band in explain, while the controller holds the pods at the estimate (explain must compare the held size, not the template)", r.Name)
		}
	}
	table := string(kubectlScaleplane(t, cp, "explain", "addonresizer", "addon", "-n", ns))
	for _, s := range []string{"addon-2", "node_not_ready", "waits for node " + dead} {
		if !strings.Contains(table, s) {
			t.Errorf("explain's table does not say %q:\n%s", s, table)
		}
	}
	checkExplainWithoutNodes(t, cp, ns)
}

// checkExplainWithoutNodes: bound to the plugin's ClusterRole by a
// RoleBinding in the namespace alone, as docs/kubectl-plugin.md shows, the
// plugin cannot read Nodes. explain still answers, and says that it took
// every node as Ready, instead of showing addon-2 as resized next without a
// word.
func checkExplainWithoutNodes(t *testing.T, cp *framework.ControlPlane, ns string) {
	t.Helper()
	ctx := context.Background()
	kube := cp.KubeClient()
	if _, err := kube.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "team-reader"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	binding := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "scaleplane-plugin-readers"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "scaleplane:kubectl-plugin"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: "team-reader"}},
	}
	if _, err := kube.RbacV1().RoleBindings(ns).Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The plugin's reader, bound cluster-wide, applied the ClusterRole.
	readerKubeconfig(t, cp)
	asTeam := cp.ServiceAccountKubeconfig(t, ns, "team-reader")
	e := decode[app.Explanation](t, kubectlScaleplaneAs(t, asTeam, "explain", "addonresizer", "addon", "-n", ns, "-o", "json"))
	if len(e.Warnings) != 1 || !strings.Contains(e.Warnings[0], "nodes cannot be read") {
		t.Errorf("explain without Nodes warns %q; want that nodes cannot be read", e.Warnings)
	}
	table := string(kubectlScaleplaneAs(t, asTeam, "explain", "addonresizer", "addon", "-n", ns))
	if !strings.Contains(table, "WARNING: nodes cannot be read") {
		t.Errorf("explain's table without Nodes has no warning:\n%s", table)
	}
}

func sameRequests(a, b corev1.ResourceList) bool {
	if len(a) != len(b) {
		return false
	}
	for name, q := range a {
		if q.Cmp(b[name]) != 0 {
			return false
		}
	}
	return true
}

// createNode creates a node with room for the resizes (the API server's
// PodResizeValidator compares with its allocatable) and a Ready condition
// of status.
func createNode(t *testing.T, cp *framework.ControlPlane, name string, status corev1.ConditionStatus) {
	t.Helper()
	ctx := context.Background()
	node, err := cp.KubeClient().CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	room := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourceMemory: resource.MustParse("8Gi"), corev1.ResourcePods: resource.MustParse("110")}
	node.Status.Capacity, node.Status.Allocatable = room, room.DeepCopy()
	node.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: status, Reason: "Emulated", LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now()}}
	if _, err := cp.KubeClient().CoreV1().Nodes().UpdateStatus(ctx, node, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func waitFor(t *testing.T, what string, cond wait.ConditionWithContextFunc) {
	t.Helper()
	if err := wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, 60*time.Second, true, cond); err != nil {
		t.Fatalf("waiting for %s: %v", what, err)
	}
}
