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

// updateMode InPlace against the real kube-apiserver: its pods/resize
// subresource, its validation of resizes and its RBAC are real. No kubelet
// runs here, so the test plays one (kubelet, in inplace_kubelet_test.go):
// the test creates the target's pods itself (no kube-controller-manager),
// binds them to plain Node objects, writes them Running with
// status.containerStatuses[].resources (without it the API server refuses
// every resize: "Pod running on node without support for resize"), and
// answers each resize as the node's kind says: apply it, defer it, or find
// it infeasible.

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"

	scaleplanev1alpha1 "github.com/scaleplane/scaleplane/pkg/apis/scaleplane/v1alpha1"
	"github.com/scaleplane/scaleplane/test/integration/framework"
)

func inPlaceResizer(ns, name string, kind scaleplanev1alpha1.TargetKind) *scaleplanev1alpha1.AddonResizer {
	ar := resizerFor(ns, name, kind, scaleplanev1alpha1.NodeProportional, scaleplanev1alpha1.SourceAPIServer)
	ar.Spec.UpdateMode = scaleplanev1alpha1.UpdateModeInPlace
	return ar
}

// waitPodsSized waits until every pod of app runs container c0 at the
// estimate for the current node count, in its spec and as its kubelet
// reports it, with the same uid it was created with, and the target's pod
// template still at its own size.
func waitPodsSized(t *testing.T, cp *framework.ControlPlane, ns, app string, kind scaleplanev1alpha1.TargetKind, uids map[string]types.UID) {
	t.Helper()
	var last string
	err := wait.PollUntilContextTimeout(context.Background(), 250*time.Millisecond, waitTimeout, true, func(ctx context.Context) (bool, error) {
		n, err := nodeCount(cp)(ctx)
		if err != nil {
			return false, err
		}
		wantCPU, wantMem := expected(n)
		pods, err := cp.KubeClient().CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=" + app})
		if err != nil {
			return false, err
		}
		if len(pods.Items) != len(uids) {
			return false, fmt.Errorf("%d pods of %s, want %d: a pod was added or removed", len(pods.Items), app, len(uids))
		}
		var off []string
		for _, p := range pods.Items {
			if p.UID != uids[p.Name] {
				return false, fmt.Errorf("pod %s was recreated: uid %s, was %s", p.Name, p.UID, uids[p.Name])
			}
			spec := p.Spec.Containers[0].Resources
			if gpu := spec.Limits["example.com/gpu"]; gpu.Cmp(resource.MustParse("1")) != 0 {
				return false, fmt.Errorf("the unmanaged limit of pod %s was changed: %v", p.Name, spec.Limits)
			}
			var running corev1.ResourceList
			if len(p.Status.ContainerStatuses) > 0 && p.Status.ContainerStatuses[0].Resources != nil {
				running = p.Status.ContainerStatuses[0].Resources.Requests
			}
			for _, l := range []corev1.ResourceList{spec.Requests, running} {
				cpu, mem := l[corev1.ResourceCPU], l[corev1.ResourceMemory]
				if cpu.Cmp(wantCPU) != 0 || mem.Cmp(wantMem) != 0 {
					off = append(off, fmt.Sprintf("%s: spec %v, status %v", p.Name, spec.Requests, running))
					break
				}
			}
		}
		last = fmt.Sprintf("size %d, want cpu %s memory %s; off: %s", n, wantCPU.String(), wantMem.String(), strings.Join(off, "; "))
		return len(off) == 0, nil
	})
	if err != nil {
		t.Fatalf("the pods of %s were not resized in place: %v; last: %s; InPlaceResized: %s", app, err, last, inPlaceResizedOf(cp, ns, app))
	}
	tmpl, err := templateOf(context.Background(), cp, ns, app, kind)
	if err != nil {
		t.Fatal(err)
	}
	if cpu := tmpl.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU]; cpu.Cmp(resource.MustParse("5m")) != 0 {
		t.Errorf("InPlace changed the pod template of %s %s (a rollout): cpu request %s", kind, app, cpu.String())
	}
}

// inPlaceResizedOf says the InPlaceResized condition of AddonResizer name,
// for a failure's message.
func inPlaceResizedOf(cp *framework.ControlPlane, ns, name string) string {
	ar, err := cp.Client().ScaleplaneV1alpha1().AddonResizers(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		return err.Error()
	}
	c := meta.FindStatusCondition(ar.Status.Conditions, scaleplanev1alpha1.ConditionInPlaceResized)
	if c == nil {
		return "not set"
	}
	return fmt.Sprintf("%s %s: %s", c.Status, c.Reason, c.Message)
}

// waitCondition waits until the AddonResizer's InPlaceResized condition has
// status and reason, and returns it.
func waitCondition(t *testing.T, cp *framework.ControlPlane, ns, name string, status metav1.ConditionStatus, reason string) *scaleplanev1alpha1.AddonResizer {
	t.Helper()
	var ar *scaleplanev1alpha1.AddonResizer
	var last string
	err := wait.PollUntilContextTimeout(context.Background(), 250*time.Millisecond, waitTimeout, true, func(ctx context.Context) (bool, error) {
		var err error
		if ar, err = cp.Client().ScaleplaneV1alpha1().AddonResizers(ns).Get(ctx, name, metav1.GetOptions{}); err != nil {
			return false, err
		}
		c := meta.FindStatusCondition(ar.Status.Conditions, scaleplanev1alpha1.ConditionInPlaceResized)
		if c == nil {
			return false, nil
		}
		last = fmt.Sprintf("%s %s: %s", c.Status, c.Reason, c.Message)
		return c.Status == status && c.Reason == reason, nil
	})
	if err != nil {
		t.Fatalf("InPlaceResized of %s is not %s %s: %v; last: %s", name, status, reason, err, last)
	}
	return ar
}

func createStatefulSet(t *testing.T, cp *framework.ControlPlane, ns, name string) {
	t.Helper()
	sts := &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec:       appsv1.StatefulSetSpec{Replicas: ptr.To[int32](2), Selector: selector(name), Template: podSpec(name, 1)},
	}
	if _, err := cp.KubeClient().AppsV1().StatefulSets(ns).Create(context.Background(), sts, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func createDaemonSet(t *testing.T, cp *framework.ControlPlane, ns, name string) {
	t.Helper()
	ds := &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec:       appsv1.DaemonSetSpec{Selector: selector(name), Template: podSpec(name, 1)},
	}
	if _, err := cp.KubeClient().AppsV1().DaemonSets(ns).Create(context.Background(), ds, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// TestInPlaceDeployment: a Deployment's running pods are resized through
// pods/resize, none recreated and the template unchanged; a pod created
// afterwards runs at the current size; a bigger cluster resizes them all
// again in place.
func TestInPlaceDeployment(t *testing.T) {
	cp := framework.Get(t)
	ns := cp.CreateNamespace(t)
	framework.StartManager(t, cp.KubeconfigPath(), "resizer")
	kubelet(t, cp, ns)
	node := roomyNode + "-" + ns
	createNodeWithRoom(t, cp, node)
	createDeployment(t, cp, ns, "addon")
	uids := createPods(t, cp, ns, "addon", node, 0, 3, nil)
	createResizer(t, cp, inPlaceResizer(ns, "addon", scaleplanev1alpha1.TargetKindDeployment))

	waitPodsSized(t, cp, ns, "addon", scaleplanev1alpha1.TargetKindDeployment, uids)
	ar := waitCondition(t, cp, ns, "addon", metav1.ConditionTrue, "AtSize")
	if ar.Status.InPlace == nil || ar.Status.InPlace.Pods != 3 || ar.Status.InPlace.AtSize != 3 {
		t.Errorf("status.inPlace %+v, want 3 pods at size", ar.Status.InPlace)
	}
	cp.WaitForEvent(t, ns, "addon", "Resized", "in place", waitTimeout)

	// Scale-up: a pod created from the template starts at its size and is
	// resized once it runs.
	for name, uid := range createPods(t, cp, ns, "addon", node, 3, 1, nil) {
		uids[name] = uid
	}
	waitPodsSized(t, cp, ns, "addon", scaleplanev1alpha1.TargetKindDeployment, uids)

	// The cluster grows: every pod is resized again, in place.
	createNodeWithRoom(t, cp, roomyNode+"-"+ns+"-2")
	waitPodsSized(t, cp, ns, "addon", scaleplanev1alpha1.TargetKindDeployment, uids)
	waitCondition(t, cp, ns, "addon", metav1.ConditionTrue, "AtSize")
}

// TestInPlaceStatefulSetAndDaemonSet: the other two kinds are resized in
// place the same way, none of their pods recreated.
func TestInPlaceStatefulSetAndDaemonSet(t *testing.T) {
	cp := framework.Get(t)
	ns := cp.CreateNamespace(t)
	framework.StartManager(t, cp.KubeconfigPath(), "resizer")
	kubelet(t, cp, ns)
	node := roomyNode + "-" + ns
	createNodeWithRoom(t, cp, node)
	createStatefulSet(t, cp, ns, "store")
	createDaemonSet(t, cp, ns, "agent")
	storeUIDs := createPods(t, cp, ns, "store", node, 0, 2, nil)
	agentUIDs := createPods(t, cp, ns, "agent", node, 0, 1, nil)
	createResizer(t, cp, inPlaceResizer(ns, "store", scaleplanev1alpha1.TargetKindStatefulSet))
	createResizer(t, cp, inPlaceResizer(ns, "agent", scaleplanev1alpha1.TargetKindDaemonSet))
	waitPodsSized(t, cp, ns, "store", scaleplanev1alpha1.TargetKindStatefulSet, storeUIDs)
	waitPodsSized(t, cp, ns, "agent", scaleplanev1alpha1.TargetKindDaemonSet, agentUIDs)
	waitCondition(t, cp, ns, "store", metav1.ConditionTrue, "AtSize")
	waitCondition(t, cp, ns, "agent", metav1.ConditionTrue, "AtSize")
}

// TestInPlaceDeferredPaced: a node without room defers the resize; it is
// reported (condition, Warning event), and only two pods are resized at a
// time, so the third is not taken into a pending state.
func TestInPlaceDeferredPaced(t *testing.T) {
	cp := framework.Get(t)
	ns := cp.CreateNamespace(t)
	framework.StartManager(t, cp.KubeconfigPath(), "resizer")
	kubelet(t, cp, ns)
	node := fullNode + "-" + ns
	createNodeWithRoom(t, cp, node)
	createDeployment(t, cp, ns, "addon")
	createPods(t, cp, ns, "addon", node, 0, 3, nil)
	createResizer(t, cp, inPlaceResizer(ns, "addon", scaleplanev1alpha1.TargetKindDeployment))

	ar := waitCondition(t, cp, ns, "addon", metav1.ConditionFalse, "Deferred")
	if c := meta.FindStatusCondition(ar.Status.Conditions, scaleplanev1alpha1.ConditionInPlaceResized); !strings.Contains(c.Message, kubeletMessage) {
		t.Errorf("the condition does not carry the kubelet's message: %s", c.Message)
	}
	cp.WaitForEvent(t, ns, "addon", "Deferred", "", waitTimeout)
	pods, err := cp.KubeClient().CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: "app=addon"})
	if err != nil {
		t.Fatal(err)
	}
	resized := 0
	for _, p := range pods.Items {
		if cpu := p.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU]; cpu.Cmp(resource.MustParse("5m")) != 0 {
			resized++
		}
	}
	if resized != 2 {
		t.Errorf("%d of 3 pods resized while their node defers, want 2 (the pacing)", resized)
	}
}

// TestInPlaceInfeasible: a node that can never fit the size: reported
// (condition, Warning event), abandoned at that size.
func TestInPlaceInfeasible(t *testing.T) {
	cp := framework.Get(t)
	ns := cp.CreateNamespace(t)
	framework.StartManager(t, cp.KubeconfigPath(), "resizer")
	kubelet(t, cp, ns)
	node := tooSmallNode + "-" + ns
	createNodeWithRoom(t, cp, node)
	createDeployment(t, cp, ns, "addon")
	createPods(t, cp, ns, "addon", node, 0, 1, nil)
	createResizer(t, cp, inPlaceResizer(ns, "addon", scaleplanev1alpha1.TargetKindDeployment))
	ar := waitCondition(t, cp, ns, "addon", metav1.ConditionFalse, "Infeasible")
	if c := meta.FindStatusCondition(ar.Status.Conditions, scaleplanev1alpha1.ConditionInPlaceResized); !strings.Contains(c.Message, "abandoned") || !strings.Contains(c.Message, node) {
		t.Errorf("the condition does not say the node and that the resize is abandoned: %s", c.Message)
	}
	cp.WaitForEvent(t, ns, "addon", "Infeasible", "", waitTimeout)
}

// TestInPlaceRestartContainer: a container whose resize policy for memory
// is RestartContainer is resized in the same pod, restarted by its kubelet
// as the user chose.
func TestInPlaceRestartContainer(t *testing.T) {
	cp := framework.Get(t)
	ns := cp.CreateNamespace(t)
	framework.StartManager(t, cp.KubeconfigPath(), "resizer")
	kubelet(t, cp, ns)
	node := roomyNode + "-" + ns
	createNodeWithRoom(t, cp, node)
	createDeployment(t, cp, ns, "addon")
	uids := createPods(t, cp, ns, "addon", node, 0, 1, func(spec *corev1.PodSpec) {
		spec.Containers[0].ResizePolicy = []corev1.ContainerResizePolicy{
			{ResourceName: corev1.ResourceCPU, RestartPolicy: corev1.NotRequired},
			{ResourceName: corev1.ResourceMemory, RestartPolicy: corev1.RestartContainer},
		}
	})
	createResizer(t, cp, inPlaceResizer(ns, "addon", scaleplanev1alpha1.TargetKindDeployment))
	waitPodsSized(t, cp, ns, "addon", scaleplanev1alpha1.TargetKindDeployment, uids)
	p, err := cp.KubeClient().CoreV1().Pods(ns).Get(context.Background(), "addon-0", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if n := p.Status.ContainerStatuses[0].RestartCount; n != 1 {
		t.Errorf("restart count %d, want 1 (memory resized with RestartContainer)", n)
	}
	if got := p.Spec.Containers[0].ResizePolicy; len(got) != 2 || got[1].RestartPolicy != corev1.RestartContainer {
		t.Errorf("resize policy %v was changed", got)
	}
}

// TestInPlaceQoSChangeRejected: the API server refuses a resize that would
// change the pod's QoS class (a Guaranteed pod whose requests alone would
// be raised); the refusal is reported, not retried in a loop.
func TestInPlaceQoSChangeRejected(t *testing.T) {
	cp := framework.Get(t)
	ns := cp.CreateNamespace(t)
	framework.StartManager(t, cp.KubeconfigPath(), "resizer")
	kubelet(t, cp, ns)
	node := roomyNode + "-" + ns
	createNodeWithRoom(t, cp, node)
	guaranteed := func(spec *corev1.PodSpec) {
		r := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("1Gi")}
		spec.Containers[0].Resources = corev1.ResourceRequirements{Requests: r, Limits: r.DeepCopy()}
	}
	tmpl := podSpec("addon", 1)
	guaranteed(&tmpl.Spec)
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "addon", Namespace: ns},
		Spec:       appsv1.DeploymentSpec{Replicas: ptr.To[int32](1), Selector: selector("addon"), Template: tmpl},
	}
	if _, err := cp.KubeClient().AppsV1().Deployments(ns).Create(context.Background(), d, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	createPods(t, cp, ns, "addon", node, 0, 1, guaranteed)
	// setLimits false: requests below the limits make the pod Burstable.
	createResizer(t, cp, inPlaceResizer(ns, "addon", scaleplanev1alpha1.TargetKindDeployment))
	ar := waitCondition(t, cp, ns, "addon", metav1.ConditionFalse, "ResizeRejected")
	if c := meta.FindStatusCondition(ar.Status.Conditions, scaleplanev1alpha1.ConditionInPlaceResized); !strings.Contains(c.Message, "QOS") {
		t.Errorf("the condition does not carry the API server's reason: %s", c.Message)
	}
	cp.WaitForEvent(t, ns, "addon", "ResizeRejected", "", waitTimeout)
}

// TestInPlaceOnKwok: on a kwok node, whose kubelet kwok emulates with its
// published pod stages and the project's hack/kwok/pod-resize.yaml (which
// reports the containers' resources and applies each resize), pods are
// resized in place: same uids, the new size in their status; and again
// when the cluster grows. kwok's pod-ready stage makes a pod Running before
// the resize stage reports its resources, and the API server refuses to
// resize a pod in between: the resizer waits for them (it once sent the
// resize, was refused, and left that pod at its old size for good).
func TestInPlaceOnKwok(t *testing.T) {
	cp := framework.Get(t)
	ns := cp.CreateNamespace(t)
	ctx := context.Background()
	framework.StartManager(t, cp.KubeconfigPath(), "resizer")
	node := "kwok-inplace-" + ns
	if err := cp.CreateFakeNode(ctx, node); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cp.KubeClient().CoreV1().Nodes().Delete(context.Background(), node, metav1.DeleteOptions{})
	})
	createDeployment(t, cp, ns, "addon")
	createResizer(t, cp, inPlaceResizer(ns, "addon", scaleplanev1alpha1.TargetKindDeployment))
	uids := createPods(t, cp, ns, "addon", node, 0, 3, nil)
	waitPodsSized(t, cp, ns, "addon", scaleplanev1alpha1.TargetKindDeployment, uids)
	waitCondition(t, cp, ns, "addon", metav1.ConditionTrue, "AtSize")

	// The cluster grows: kwok answers the second resize of each pod too.
	grown := "kwok-inplace-" + ns + "-2"
	if err := cp.CreateFakeNode(ctx, grown); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cp.KubeClient().CoreV1().Nodes().Delete(context.Background(), grown, metav1.DeleteOptions{})
	})
	waitPodsSized(t, cp, ns, "addon", scaleplanev1alpha1.TargetKindDeployment, uids)
	waitCondition(t, cp, ns, "addon", metav1.ConditionTrue, "AtSize")
}

// TestInPlaceDaemonSetWithNotReadyNodes: a DaemonSet's pods on nodes that
// are not Ready stay Running and accept a resize their kubelet never
// answers. Two of them, resized first and then cut off with their nodes,
// held both places of the pacing for good; now they hold none, the pods on
// the Ready nodes are resized, and InPlaceResized says which pods wait for
// which node.
func TestInPlaceDaemonSetWithNotReadyNodes(t *testing.T) {
	cp := framework.Get(t)
	ns := cp.CreateNamespace(t)
	framework.StartManager(t, cp.KubeconfigPath(), "resizer")
	kubelet(t, cp, ns)
	dead := []string{deadNode + "-" + ns + "-1", deadNode + "-" + ns + "-2"}
	live := []string{roomyNode + "-" + ns + "-1", roomyNode + "-" + ns + "-2"}
	for _, node := range append(append([]string{}, dead...), live...) {
		createNodeWithRoom(t, cp, node)
		setNodeReady(t, cp, node, corev1.ConditionTrue)
	}
	createDaemonSet(t, cp, ns, "agent")
	// By name, the pods on the nodes about to die come first: the pacing
	// sends them the first two resizes.
	uids := map[string]types.UID{}
	for i, node := range append(append([]string{}, dead...), live...) {
		for name, uid := range createPods(t, cp, ns, "agent", node, i, 1, nil) {
			uids[name] = uid
		}
	}
	waitPodsRunning(t, cp, ns, "agent", 4)
	createResizer(t, cp, inPlaceResizer(ns, "agent", scaleplanev1alpha1.TargetKindDaemonSet))

	// agent-0 and agent-1 are resized; their kubelets never answer.
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, waitTimeout, true, func(ctx context.Context) (bool, error) {
		resized := 0
		for _, name := range []string{"agent-0", "agent-1"} {
			p, err := cp.KubeClient().CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			if cpu := p.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU]; cpu.Cmp(resource.MustParse("5m")) != 0 {
				resized++
			}
		}
		return resized == 2, nil
	})
	if err != nil {
		t.Fatalf("agent-0 and agent-1 were not resized first: %v; InPlaceResized: %s", err, inPlaceResizedOf(cp, ns, "agent"))
	}
	// Their nodes stop answering: the node lifecycle controller marks them.
	setNodeReady(t, cp, dead[0], corev1.ConditionUnknown)
	setNodeReady(t, cp, dead[1], corev1.ConditionFalse)

	// The pods on the Ready nodes are resized, in place.
	var last string
	err = wait.PollUntilContextTimeout(context.Background(), 250*time.Millisecond, waitTimeout, true, func(ctx context.Context) (bool, error) {
		n, err := nodeCount(cp)(ctx)
		if err != nil {
			return false, err
		}
		wantCPU, wantMem := expected(n)
		var off []string
		for _, name := range []string{"agent-2", "agent-3"} {
			p, err := cp.KubeClient().CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			if p.UID != uids[name] {
				return false, fmt.Errorf("pod %s was recreated", name)
			}
			spec := p.Spec.Containers[0].Resources.Requests
			var running corev1.ResourceList
			if r := p.Status.ContainerStatuses[0].Resources; r != nil {
				running = r.Requests
			}
			for _, l := range []corev1.ResourceList{spec, running} {
				cpu, mem := l[corev1.ResourceCPU], l[corev1.ResourceMemory]
				if cpu.Cmp(wantCPU) != 0 || mem.Cmp(wantMem) != 0 {
					off = append(off, fmt.Sprintf("%s: spec %v, status %v", name, spec, running))
					break
				}
			}
		}
		last = fmt.Sprintf("size %d; off: %s", n, strings.Join(off, "; "))
		return len(off) == 0, nil
	})
	if err != nil {
		t.Fatalf("the pods on Ready nodes were not resized while two pods wait on nodes that are not Ready: %v; last: %s; InPlaceResized: %s", err, last, inPlaceResizedOf(cp, ns, "agent"))
	}
	// The condition is NodeNotReady from the moment the nodes are cut off,
	// before the kubelets of the Ready nodes answer; the status that counts
	// agent-2 and agent-3 at size is a later write.
	ar := waitCondition(t, cp, ns, "agent", metav1.ConditionFalse, "NodeNotReady")
	err = wait.PollUntilContextTimeout(context.Background(), 250*time.Millisecond, waitTimeout, true, func(ctx context.Context) (bool, error) {
		if ar, err = cp.Client().ScaleplaneV1alpha1().AddonResizers(ns).Get(ctx, "agent", metav1.GetOptions{}); err != nil {
			return false, err
		}
		return ar.Status.InPlace != nil && ar.Status.InPlace.Pods == 4 && ar.Status.InPlace.AtSize == 2, nil
	})
	if err != nil {
		t.Fatalf("status.inPlace %+v, want 4 pods, 2 at size: %v", ar.Status.InPlace, err)
	}
	c := meta.FindStatusCondition(ar.Status.Conditions, scaleplanev1alpha1.ConditionInPlaceResized)
	if c == nil || c.Reason != "NodeNotReady" {
		t.Fatalf("InPlaceResized is %+v with 2 of 4 pods at size, want NodeNotReady", c)
	}
	for _, want := range []string{"agent-0", dead[0], "agent-1", dead[1], "2 of 4 pods at size"} {
		if !strings.Contains(c.Message, want) {
			t.Errorf("InPlaceResized does not name %s: %s", want, c.Message)
		}
	}
}
