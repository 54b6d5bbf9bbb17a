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

// Package resizer tests the resizer against a real kube-apiserver, with the
// real scaleplane-controller-manager binary: nodes added and removed change a
// container's resources (NodeProportional); pods added and completed change
// them (ContainerProportional), the target's own pods not counted; a
// StatefulSet and a DaemonSet are resized; and the Metrics source reads node
// and container counts from a real metrics-server scraping kwok's emulated
// kubelets.
//
// Nodes and pods are cluster-wide and the tests share one control plane, so
// expectations are computed from a full list at the time of the check, the way
// the resizer's own counting must come out.
package resizer

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"

	scaleplanev1alpha1 "github.com/scaleplane/scaleplane/pkg/apis/scaleplane/v1alpha1"
	"github.com/scaleplane/scaleplane/test/integration/framework"
)

func TestMain(m *testing.M) {
	framework.Main(m, framework.Options{Metrics: true})
}

const waitTimeout = 60 * time.Second

func podSpec(app string, containers int) corev1.PodTemplateSpec {
	spec := corev1.PodSpec{}
	for i := range containers {
		spec.Containers = append(spec.Containers, corev1.Container{
			Name:  fmt.Sprintf("c%d", i),
			Image: "registry.example/" + app + ":1",
			Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("5m")},
				// Not managed by the resizer: must survive every resize.
				Limits: corev1.ResourceList{"example.com/gpu": resource.MustParse("1")},
			},
		})
	}
	return corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": app}}, Spec: spec}
}

func selector(app string) *metav1.LabelSelector {
	return &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}}
}

// resizerFor sizes container c0 of the target: cpu 100m + 10m per unit,
// memory 50Mi + 1Mi per unit, requests only (limits of listed resources are
// set too only when setLimits, the default).
func resizerFor(ns, name string, kind scaleplanev1alpha1.TargetKind, mode scaleplanev1alpha1.ScalingMode, source scaleplanev1alpha1.SizeSource) *scaleplanev1alpha1.AddonResizer {
	return &scaleplanev1alpha1.AddonResizer{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: scaleplanev1alpha1.AddonResizerSpec{
			TargetRef:     scaleplanev1alpha1.TargetReference{Kind: kind, Name: name},
			ContainerName: "c0",
			Resources: []scaleplanev1alpha1.ResourceScaling{
				{Name: corev1.ResourceCPU, Base: resource.MustParse("100m"), ExtraPerUnit: resource.MustParse("10m")},
				{Name: corev1.ResourceMemory, Base: resource.MustParse("50Mi"), ExtraPerUnit: resource.MustParse("1Mi")},
			},
			ScalingMode: mode,
			Source:      source,
			SetLimits:   ptr.To(false),
		},
	}
}

func createResizer(t *testing.T, cp *framework.ControlPlane, ar *scaleplanev1alpha1.AddonResizer) {
	t.Helper()
	if _, err := cp.Client().ScaleplaneV1alpha1().AddonResizers(ar.Namespace).Create(context.Background(), ar, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating AddonResizer %s: %v", ar.Name, err)
	}
}

// expected is the linear estimate of resizerFor at size.
func expected(size int64) (cpu, mem resource.Quantity) {
	cpu = *resource.NewMilliQuantity(100+10*size, resource.DecimalSI)
	mem = *resource.NewQuantity((50+size)*1024*1024, resource.BinarySI)
	return cpu, mem
}

// templateOf reads the pod template of the target.
func templateOf(ctx context.Context, cp *framework.ControlPlane, ns, name string, kind scaleplanev1alpha1.TargetKind) (*corev1.PodTemplateSpec, error) {
	apps := cp.KubeClient().AppsV1()
	switch kind {
	case scaleplanev1alpha1.TargetKindStatefulSet:
		s, err := apps.StatefulSets(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return nil, err
		}
		return &s.Spec.Template, nil
	case scaleplanev1alpha1.TargetKindDaemonSet:
		d, err := apps.DaemonSets(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return nil, err
		}
		return &d.Spec.Template, nil
	default:
		d, err := apps.Deployments(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return nil, err
		}
		return &d.Spec.Template, nil
	}
}

// waitSized waits until container c0 of the target requests exactly the
// estimate for size(), recomputed on every poll, with its unmanaged limit and
// the other container untouched.
func waitSized(t *testing.T, cp *framework.ControlPlane, ns, name string, kind scaleplanev1alpha1.TargetKind, size func(context.Context) (int64, error)) int64 {
	t.Helper()
	var last string
	var n int64
	err := wait.PollUntilContextTimeout(context.Background(), 250*time.Millisecond, waitTimeout, true, func(ctx context.Context) (bool, error) {
		var err error
		if n, err = size(ctx); err != nil {
			return false, err
		}
		tmpl, err := templateOf(ctx, cp, ns, name, kind)
		if err != nil {
			last = err.Error()
			return false, nil
		}
		c := tmpl.Spec.Containers[0]
		wantCPU, wantMem := expected(n)
		gotCPU, gotMem := c.Resources.Requests[corev1.ResourceCPU], c.Resources.Requests[corev1.ResourceMemory]
		last = fmt.Sprintf("size %d: requests cpu %s memory %s, want %s %s; limits %v", n, gotCPU.String(), gotMem.String(), wantCPU.String(), wantMem.String(), c.Resources.Limits)
		if gpu := c.Resources.Limits["example.com/gpu"]; gpu.Cmp(resource.MustParse("1")) != 0 {
			return false, fmt.Errorf("the unmanaged limit example.com/gpu was changed: %s", last)
		}
		if _, ok := c.Resources.Limits[corev1.ResourceCPU]; ok {
			return false, fmt.Errorf("setLimits false, but a cpu limit was set: %s", last)
		}
		if len(tmpl.Spec.Containers) > 1 {
			other := tmpl.Spec.Containers[1].Resources.Requests[corev1.ResourceCPU]
			if other.Cmp(resource.MustParse("5m")) != 0 {
				return false, fmt.Errorf("the other container was changed: %v", tmpl.Spec.Containers[1].Resources)
			}
		}
		return gotCPU.Cmp(wantCPU) == 0 && gotMem.Cmp(wantMem) == 0, nil
	})
	if err != nil {
		t.Fatalf("%s %s/%s was not resized: %v; last: %s", kind, ns, name, err, last)
	}
	return n
}

func nodeCount(cp *framework.ControlPlane) func(context.Context) (int64, error) {
	return func(ctx context.Context) (int64, error) {
		nodes, err := cp.KubeClient().CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			return 0, err
		}
		return int64(len(nodes.Items)), nil
	}
}

// containerCount counts, as KEP-5546 does, the init, regular and ephemeral
// containers of every pod not Succeeded or Failed, except the pods of the
// target (selected by sel in ns).
func containerCount(cp *framework.ControlPlane, ns string, sel labels.Selector) func(context.Context) (int64, error) {
	return func(ctx context.Context) (int64, error) {
		pods, err := cp.KubeClient().CoreV1().Pods("").List(ctx, metav1.ListOptions{})
		if err != nil {
			return 0, err
		}
		var n int64
		for _, p := range pods.Items {
			if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
				continue
			}
			if p.Namespace == ns && sel.Matches(labels.Set(p.Labels)) {
				continue
			}
			n += int64(len(p.Spec.InitContainers) + len(p.Spec.Containers) + len(p.Spec.EphemeralContainers))
		}
		return n, nil
	}
}

func createNode(t *testing.T, cp *framework.ControlPlane, name string) {
	t.Helper()
	// A plain Node object: the APIServer source counts objects, whatever
	// runs them (no kwok annotation, so kwok leaves it alone).
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if _, err := cp.KubeClient().CoreV1().Nodes().Create(context.Background(), node, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cp.KubeClient().CoreV1().Nodes().Delete(context.Background(), name, metav1.DeleteOptions{})
	})
}

func createDeployment(t *testing.T, cp *framework.ControlPlane, ns, name string) {
	t.Helper()
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec:       appsv1.DeploymentSpec{Replicas: ptr.To[int32](1), Selector: selector(name), Template: podSpec(name, 2)},
	}
	if _, err := cp.KubeClient().AppsV1().Deployments(ns).Create(context.Background(), d, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// TestNodeProportional: nodes added and removed change the container's
// requests to base + extra × nodes.
func TestNodeProportional(t *testing.T) {
	cp := framework.Get(t)
	ns := cp.CreateNamespace(t)
	ctx := context.Background()
	framework.StartManager(t, cp.KubeconfigPath(), "resizer")
	createDeployment(t, cp, ns, "addon")
	createResizer(t, cp, resizerFor(ns, "addon", scaleplanev1alpha1.TargetKindDeployment, scaleplanev1alpha1.NodeProportional, scaleplanev1alpha1.SourceAPIServer))
	first := waitSized(t, cp, ns, "addon", scaleplanev1alpha1.TargetKindDeployment, nodeCount(cp))

	for i := range 3 {
		createNode(t, cp, fmt.Sprintf("np-%s-%d", ns, i))
	}
	if n := waitSized(t, cp, ns, "addon", scaleplanev1alpha1.TargetKindDeployment, nodeCount(cp)); n != first+3 {
		t.Errorf("sized for %d nodes, want %d", n, first+3)
	}
	if err := cp.KubeClient().CoreV1().Nodes().Delete(ctx, fmt.Sprintf("np-%s-0", ns), metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if n := waitSized(t, cp, ns, "addon", scaleplanev1alpha1.TargetKindDeployment, nodeCount(cp)); n != first+2 {
		t.Errorf("sized for %d nodes, want %d", n, first+2)
	}

	// The status write follows the target's patch.
	var ar *scaleplanev1alpha1.AddonResizer
	err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, waitTimeout, true, func(ctx context.Context) (bool, error) {
		var err error
		ar, err = cp.Client().ScaleplaneV1alpha1().AddonResizers(ns).Get(ctx, "addon", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return ptr.Deref(ar.Status.ClusterSize, -1) == int32(first+2) && ar.Status.ObservedGeneration == ar.Generation, nil
	})
	if err != nil {
		t.Errorf("status: clusterSize %v observedGeneration %d (generation %d), want size %d: %v", ptr.Deref(ar.Status.ClusterSize, -1), ar.Status.ObservedGeneration, ar.Generation, first+2, err)
	}
	cp.WaitForEvent(t, ns, "addon", "Resized", "", waitTimeout)
}

// TestContainerProportional: pods added and completed change the requests;
// the target's own pods are not counted.
func TestContainerProportional(t *testing.T) {
	cp := framework.Get(t)
	ns := cp.CreateNamespace(t)
	ctx := context.Background()
	framework.StartManager(t, cp.KubeconfigPath(), "resizer")
	createDeployment(t, cp, ns, "addon")
	// Pods of the target itself (as its ReplicaSet would make them): not
	// counted.
	for i := range 2 {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("addon-%d", i), Namespace: ns, Labels: map[string]string{"app": "addon"}}, Spec: podSpec("addon", 2).Spec}
		if _, err := cp.KubeClient().CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	sel := labels.SelectorFromSet(labels.Set{"app": "addon"})
	createResizer(t, cp, resizerFor(ns, "addon", scaleplanev1alpha1.TargetKindDeployment, scaleplanev1alpha1.ContainerProportional, scaleplanev1alpha1.SourceAPIServer))
	first := waitSized(t, cp, ns, "addon", scaleplanev1alpha1.TargetKindDeployment, containerCount(cp, ns, sel))

	// Five workload pods with an init container and two containers each.
	for i := range 5 {
		spec := podSpec("work", 2).Spec
		spec.InitContainers = []corev1.Container{{Name: "init", Image: "registry.example/init:1"}}
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("work-%d", i), Namespace: ns, Labels: map[string]string{"app": "work"}}, Spec: spec}
		if _, err := cp.KubeClient().CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if n := waitSized(t, cp, ns, "addon", scaleplanev1alpha1.TargetKindDeployment, containerCount(cp, ns, sel)); n != first+15 {
		t.Errorf("sized for %d containers, want %d", n, first+15)
	}
	// Two complete: their containers no longer count.
	for _, name := range []string{"work-0", "work-1"} {
		p, err := cp.KubeClient().CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		p.Status.Phase = corev1.PodSucceeded
		if _, err := cp.KubeClient().CoreV1().Pods(ns).UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if n := waitSized(t, cp, ns, "addon", scaleplanev1alpha1.TargetKindDeployment, containerCount(cp, ns, sel)); n != first+9 {
		t.Errorf("sized for %d containers, want %d", n, first+9)
	}
}

// TestStatefulSetAndDaemonSet: the other two target kinds are resized too.
func TestStatefulSetAndDaemonSet(t *testing.T) {
	cp := framework.Get(t)
	ns := cp.CreateNamespace(t)
	ctx := context.Background()
	framework.StartManager(t, cp.KubeconfigPath(), "resizer")
	sts := &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: "store", Namespace: ns},
		Spec:       appsv1.StatefulSetSpec{Replicas: ptr.To[int32](1), Selector: selector("store"), Template: podSpec("store", 1)},
	}
	if _, err := cp.KubeClient().AppsV1().StatefulSets(ns).Create(ctx, sts, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	ds := &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Name: "agent", Namespace: ns},
		Spec:       appsv1.DaemonSetSpec{Selector: selector("agent"), Template: podSpec("agent", 1)},
	}
	if _, err := cp.KubeClient().AppsV1().DaemonSets(ns).Create(ctx, ds, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	createResizer(t, cp, resizerFor(ns, "store", scaleplanev1alpha1.TargetKindStatefulSet, scaleplanev1alpha1.NodeProportional, scaleplanev1alpha1.SourceAPIServer))
	createResizer(t, cp, resizerFor(ns, "agent", scaleplanev1alpha1.TargetKindDaemonSet, scaleplanev1alpha1.NodeProportional, scaleplanev1alpha1.SourceAPIServer))
	waitSized(t, cp, ns, "store", scaleplanev1alpha1.TargetKindStatefulSet, nodeCount(cp))
	waitSized(t, cp, ns, "agent", scaleplanev1alpha1.TargetKindDaemonSet, nodeCount(cp))
}

// TestMetricsSource: with source Metrics, the container count is the
// containers of metrics-server's pod metrics (kwok's fake pods give them),
// and the node count is still the Node objects: metrics-server's NodeMetrics
// lose a node for every missed scrape (issue 18, item 8).
func TestMetricsSource(t *testing.T) {
	cp := framework.Get(t)
	ns := cp.CreateNamespace(t)
	ctx := context.Background()
	framework.StartManager(t, cp.KubeconfigPath(), "resizer", "--resizer-metrics-interval=2s")
	node := "metrics-" + ns
	if err := cp.CreateFakeNode(ctx, node); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("busy-%d", i), Namespace: ns, Labels: map[string]string{"app": "busy"}}, Spec: podSpec("busy", 2).Spec}
		p.Spec.NodeName = node
		if _, err := cp.KubeClient().CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	createDeployment(t, cp, ns, "nodes")
	createDeployment(t, cp, ns, "containers")
	createResizer(t, cp, resizerFor(ns, "nodes", scaleplanev1alpha1.TargetKindDeployment, scaleplanev1alpha1.NodeProportional, scaleplanev1alpha1.SourceMetrics))
	createResizer(t, cp, resizerFor(ns, "containers", scaleplanev1alpha1.TargetKindDeployment, scaleplanev1alpha1.ContainerProportional, scaleplanev1alpha1.SourceMetrics))

	// Every Node object counts, the plain ones of other tests without a
	// kubelet too (metrics-server reports only the kwok-run node); the
	// containers are the three pods' six, once scraped.
	nodes := waitSized(t, cp, ns, "nodes", scaleplanev1alpha1.TargetKindDeployment, nodeCount(cp))
	containers := waitSized(t, cp, ns, "containers", scaleplanev1alpha1.TargetKindDeployment, func(context.Context) (int64, error) { return 6, nil })
	t.Logf("sized for %d nodes (the API server's) and %d containers (the metrics API's)", nodes, containers)
	// The resizer writes the target first and its status after: on a loaded
	// machine the status may come a moment after the template is seen sized.
	var conditions []metav1.Condition
	err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, waitTimeout, true, func(ctx context.Context) (bool, error) {
		ar, err := cp.Client().ScaleplaneV1alpha1().AddonResizers(ns).Get(ctx, "containers", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		conditions = ar.Status.Conditions
		return conditionTrue(conditions, scaleplanev1alpha1.ConditionMetricsAvailable), nil
	})
	if err != nil {
		t.Errorf("MetricsAvailable is not True: %v; conditions: %+v", err, conditions)
	}
}

// TestSetLimitsFalseCapsAtTheLimit: with setLimits false and an estimate
// above the container's own limit, the API server would reject the request
// (a request may not exceed its limit); the request is sized to the limit
// instead, and UpToDate says so (CappedAtLimit) with a Warning event
// (issue 18, item 6).
func TestSetLimitsFalseCapsAtTheLimit(t *testing.T) {
	cp := framework.Get(t)
	ns := cp.CreateNamespace(t)
	ctx := context.Background()
	framework.StartManager(t, cp.KubeconfigPath(), "resizer")
	tmpl := podSpec("capped", 1)
	// Below the cpu estimate's base, 100m: capped at any cluster size.
	tmpl.Spec.Containers[0].Resources.Limits[corev1.ResourceCPU] = resource.MustParse("50m")
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "capped", Namespace: ns},
		Spec:       appsv1.DeploymentSpec{Replicas: ptr.To[int32](1), Selector: selector("capped"), Template: tmpl},
	}
	if _, err := cp.KubeClient().AppsV1().Deployments(ns).Create(ctx, d, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	createResizer(t, cp, resizerFor(ns, "capped", scaleplanev1alpha1.TargetKindDeployment, scaleplanev1alpha1.NodeProportional, scaleplanev1alpha1.SourceAPIServer))

	var last string
	err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, waitTimeout, true, func(ctx context.Context) (bool, error) {
		n, err := nodeCount(cp)(ctx)
		if err != nil {
			return false, err
		}
		tmpl, err := templateOf(ctx, cp, ns, "capped", scaleplanev1alpha1.TargetKindDeployment)
		if err != nil {
			return false, err
		}
		r := tmpl.Spec.Containers[0].Resources
		_, wantMem := expected(n)
		cpu, mem, limit := r.Requests[corev1.ResourceCPU], r.Requests[corev1.ResourceMemory], r.Limits[corev1.ResourceCPU]
		last = fmt.Sprintf("requests cpu %s memory %s, cpu limit %s; want cpu 50m, memory %s", cpu.String(), mem.String(), limit.String(), wantMem.String())
		return cpu.Cmp(resource.MustParse("50m")) == 0 && limit.Cmp(resource.MustParse("50m")) == 0 && mem.Cmp(wantMem) == 0, nil
	})
	if err != nil {
		t.Fatalf("the request was not capped at the limit: %v; last: %s", err, last)
	}
	err = wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, waitTimeout, true, func(ctx context.Context) (bool, error) {
		ar, err := cp.Client().ScaleplaneV1alpha1().AddonResizers(ns).Get(ctx, "capped", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		last = fmt.Sprintf("%+v", ar.Status.Conditions)
		for _, c := range ar.Status.Conditions {
			if c.Type == scaleplanev1alpha1.ConditionUpToDate {
				return c.Status == metav1.ConditionFalse && c.Reason == "CappedAtLimit" && strings.Contains(c.Message, "limit 50m"), nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("UpToDate is not False/CappedAtLimit naming the limit: %v; conditions: %s", err, last)
	}
	cp.WaitForEvent(t, ns, "capped", "CappedAtLimit", "", waitTimeout)
}

func conditionTrue(conditions []metav1.Condition, typ string) bool {
	for _, c := range conditions {
		if c.Type == typ {
			return c.Status == metav1.ConditionTrue
		}
	}
	return false
}
