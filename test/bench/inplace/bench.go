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
	"context"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	scaleplanev1alpha1 "github.com/scaleplane/scaleplane/pkg/apis/scaleplane/v1alpha1"
	"github.com/scaleplane/scaleplane/pkg/generated/clientset/versioned"
	"github.com/scaleplane/scaleplane/test/bench/internal/benchutil"
	"github.com/scaleplane/scaleplane/test/integration/framework"
)

const (
	modeRollout = string(scaleplanev1alpha1.UpdateModeRollout)
	modeInPlace = string(scaleplanev1alpha1.UpdateModeInPlace)

	addon     = "addon"
	container = "addon"
	replicas  = 3
	kwokNode  = "kwok-addons"

	// The add-on is sized as the metrics-server example sizes
	// metrics-server (artifacts/examples/addonresizer/metrics-server.yaml):
	// 40m + 0.5m and 40Mi + 4Mi per node, exponential buckets from 16
	// (16, 24, 36, 54, 81, 121, ...), threshold 5 %, requests only.
	minClusterSize = 16
)

// bench is the cluster the runs share: one kwok node the add-ons' pods run
// on, and plain Node objects that only make the cluster bigger.
type bench struct {
	kube     kubernetes.Interface
	client   versioned.Interface
	nodes    int   // Node objects, the kwok node included
	minReady int32 // the add-on Deployment's minReadySeconds
}

func newBench(ctx context.Context, cp *framework.ControlPlane, minReady int32) (*bench, error) {
	b := &bench{kube: cp.KubeClient(), client: cp.Client(), minReady: minReady}
	if err := cp.CreateFakeNode(ctx, kwokNode); err != nil {
		return nil, err
	}
	list, err := b.kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	b.nodes = len(list.Items)
	return b, nil
}

// bucket is the resizer's exponential bucket of size (estimator.go): the
// first of minClusterSize, ×1.5 truncated, ... that is at least size.
func bucket(size int) int {
	b := minClusterSize
	for b < size {
		b += b / 2
	}
	return b
}

// estimate is the add-on's requests for a cluster of units nodes (its
// bucket): cpu rounded up to whole millicores.
func estimate(units int) corev1.ResourceList {
	return corev1.ResourceList{
		corev1.ResourceCPU:    *resource.NewMilliQuantity(int64(40+(units+1)/2), resource.DecimalSI),
		corev1.ResourceMemory: *resource.NewQuantity(int64(40+4*units)*1024*1024, resource.BinarySI),
	}
}

// growTo adds plain Node objects until the cluster has n nodes.
func (b *bench) growTo(ctx context.Context, n int) error {
	for b.nodes < n {
		node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("node-%04d", b.nodes)}}
		if _, err := b.kube.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("creating node %s: %w", node.Name, err)
		}
		b.nodes++
	}
	return nil
}

// result is one measured resize.
type result struct {
	mode          string
	run           int
	from, to      int // cluster size before and after the node that crossed the bucket
	oldSize, size corev1.ResourceList
	created       int // pods created during the resize (recreated)
	deleted       int // pods of before the resize deleted
	firstChange   time.Duration
	atSize        time.Duration // every pod running at the new size
	oldGone       time.Duration // no pod of before left (Rollout), or 0
	loadAvg       string
}

// measure sets up one add-on at the top of the current bucket, lets it
// settle, adds the one node that crosses into the next bucket and times
// the resize.
func (b *bench) measure(ctx context.Context, mode string, run int, timeout time.Duration) (result, error) {
	top := bucket(b.nodes)
	if err := b.growTo(ctx, top); err != nil {
		return result{}, err
	}
	r := result{mode: mode, run: run + 1, from: top, to: top + 1, oldSize: estimate(top), size: estimate(bucket(top + 1))}
	ns := fmt.Sprintf("bench-%s-%d", map[string]string{modeRollout: "rollout", modeInPlace: "inplace"}[mode], run+1)
	benchutil.Logf("%s run %d: %d nodes, requests %s; namespace %s", mode, run+1, top, list(r.oldSize), ns)
	if err := b.setUp(ctx, ns, mode, r.oldSize); err != nil {
		return r, err
	}
	if err := b.settle(ctx, ns, mode, r.oldSize, timeout); err != nil {
		return r, err
	}

	pods, err := b.kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return r, err
	}
	tr := newTracker(pods.Items, r.size)
	watchCtx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	if err := benchutil.Watch(watchCtx, pods.ResourceVersion, b.kube.CoreV1().Pods(ns).Watch, tr.handle); err != nil {
		return r, err
	}
	r.loadAvg = benchutil.LoadAvg()
	start := time.Now()
	if err := b.growTo(ctx, top+1); err != nil {
		return r, err
	}
	select {
	case <-tr.done:
	case <-time.After(timeout):
		return r, fmt.Errorf("the pods were not all at %v %s after the node was added: %s", r.size, timeout, tr.describe())
	case <-ctx.Done():
		return r, ctx.Err()
	}
	tr.mu.Lock()
	r.created, r.deleted = tr.created, tr.deleted
	r.firstChange, r.atSize = tr.firstChange.Sub(start), tr.atSize.Sub(start)
	if !tr.oldGone.IsZero() {
		r.oldGone = tr.oldGone.Sub(start)
	}
	tr.mu.Unlock()

	// The next run's add-on must be the only one that the next nodes
	// resize.
	if err := b.client.ScaleplaneV1alpha1().AddonResizers(ns).Delete(ctx, addon, metav1.DeleteOptions{}); err != nil {
		return r, err
	}
	bg := metav1.DeletePropagationBackground
	if err := b.kube.AppsV1().Deployments(ns).Delete(ctx, addon, metav1.DeleteOptions{PropagationPolicy: &bg}); err != nil {
		return r, err
	}
	return r, nil
}

// setUp creates the namespace, the add-on's Deployment at size (its pods
// bound to the kwok node: no scheduler runs) and its AddonResizer.
func (b *bench) setUp(ctx context.Context, ns, mode string, size corev1.ResourceList) error {
	if _, err := b.kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		return err
	}
	labels := map[string]string{"app": addon}
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: addon, Namespace: ns},
		Spec: appsv1.DeploymentSpec{
			Replicas:        ptr.To[int32](replicas),
			MinReadySeconds: b.minReady,
			Selector:        &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					NodeName: kwokNode,
					Containers: []corev1.Container{{
						Name: container, Image: "registry.example/addon:1",
						Resources: corev1.ResourceRequirements{Requests: size.DeepCopy()},
					}},
				},
			},
		},
	}
	if _, err := b.kube.AppsV1().Deployments(ns).Create(ctx, d, metav1.CreateOptions{}); err != nil {
		return err
	}
	ar := &scaleplanev1alpha1.AddonResizer{
		ObjectMeta: metav1.ObjectMeta{Name: addon, Namespace: ns},
		Spec: scaleplanev1alpha1.AddonResizerSpec{
			TargetRef:     scaleplanev1alpha1.TargetReference{Kind: scaleplanev1alpha1.TargetKindDeployment, Name: addon},
			ContainerName: container,
			Resources: []scaleplanev1alpha1.ResourceScaling{
				{Name: corev1.ResourceCPU, Base: resource.MustParse("40m"), ExtraPerUnit: resource.MustParse("0.5m")},
				{Name: corev1.ResourceMemory, Base: resource.MustParse("40Mi"), ExtraPerUnit: resource.MustParse("4Mi")},
			},
			ScalingMode: scaleplanev1alpha1.NodeProportional,
			Source:      scaleplanev1alpha1.SourceAPIServer,
			Estimator:   scaleplanev1alpha1.Estimator{Type: scaleplanev1alpha1.ExponentialEstimator, MinClusterSize: minClusterSize},
			Threshold:   5,
			SetLimits:   ptr.To(false),
			UpdateMode:  scaleplanev1alpha1.UpdateMode(mode),
		},
	}
	_, err := b.client.ScaleplaneV1alpha1().AddonResizers(ns).Create(ctx, ar, metav1.CreateOptions{})
	return err
}

// settle waits until the Deployment is rolled out, its pods run at size,
// and the AddonResizer recommends size (the benchmark's estimate is the
// resizer's) and finds the add-on up to date.
func (b *bench) settle(ctx context.Context, ns, mode string, size corev1.ResourceList, timeout time.Duration) error {
	var last string
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		ar, err := b.client.ScaleplaneV1alpha1().AddonResizers(ns).Get(ctx, addon, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		if ar.Status.Recommendation == nil {
			last = "no recommendation yet"
			return false, nil
		}
		if !sameRequests(ar.Status.Recommendation.Requests, size) {
			return false, fmt.Errorf("the resizer recommends %v at %v nodes, the benchmark expected %v", ar.Status.Recommendation.Requests, ptr.Deref(ar.Status.ClusterSize, 0), size)
		}
		if !conditionTrue(ar.Status.Conditions, scaleplanev1alpha1.ConditionUpToDate) ||
			(mode == modeInPlace && !conditionTrue(ar.Status.Conditions, scaleplanev1alpha1.ConditionInPlaceResized)) {
			last = fmt.Sprintf("conditions %v", ar.Status.Conditions)
			return false, nil
		}
		d, err := b.kube.AppsV1().Deployments(ns).Get(ctx, addon, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		if d.Status.ObservedGeneration != d.Generation || d.Status.UpdatedReplicas != replicas || d.Status.AvailableReplicas != replicas || d.Status.Replicas != replicas {
			last = fmt.Sprintf("deployment status %+v", d.Status)
			return false, nil
		}
		pods, err := b.kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		tr := newTracker(pods.Items, size)
		if !tr.allAtSize() || len(pods.Items) != replicas {
			last = "pods: " + tr.describe()
			return false, nil
		}
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("the add-on did not settle: %w; last: %s", err, last)
	}
	return nil
}

func conditionTrue(conds []metav1.Condition, typ string) bool {
	for _, c := range conds {
		if c.Type == typ {
			return c.Status == metav1.ConditionTrue
		}
	}
	return false
}

// sameRequests reports whether a has the cpu and memory of want.
func sameRequests(a, want corev1.ResourceList) bool {
	for name, q := range want {
		got, ok := a[name]
		if !ok || got.Cmp(q) != 0 {
			return false
		}
	}
	return true
}

// uids returns the uids of pods.
func uids(pods []corev1.Pod) map[types.UID]bool {
	out := map[types.UID]bool{}
	for i := range pods {
		out[pods[i].UID] = true
	}
	return out
}
