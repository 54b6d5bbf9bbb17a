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

import (
	"context"
	"sort"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubeinformers "k8s.io/client-go/informers"
	kubefake "k8s.io/client-go/kubernetes/fake"
	metadatafake "k8s.io/client-go/metadata/fake"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2/ktesting"
	metricsfake "k8s.io/metrics/pkg/client/clientset/versioned/fake"
	testingclock "k8s.io/utils/clock/testing"

	scaleplanev1alpha1 "github.com/scaleplane/scaleplane/pkg/apis/scaleplane/v1alpha1"
	"github.com/scaleplane/scaleplane/pkg/generated/clientset/versioned/fake"
	"github.com/scaleplane/scaleplane/pkg/generated/informers/externalversions"
)

// queued drains the queue and returns the names in it, sorted.
func (h *harness) queued() []string {
	var out []string
	for h.c.queue.Len() > 0 {
		key, _ := h.c.queue.Get()
		out = append(out, key.Name)
		h.c.queue.Done(key)
		h.c.queue.Forget(key)
	}
	sort.Strings(out)
	return out
}

func (h *harness) expectQueued(what string, want ...string) {
	h.t.Helper()
	got := h.queued()
	if len(got) != len(want) {
		h.t.Errorf("%s: queued %v; want %v", what, got, want)
		return
	}
	for i := range got {
		if got[i] != want[i] {
			h.t.Errorf("%s: queued %v; want %v", what, got, want)
			return
		}
	}
}

func TestSpecEditEnqueues(t *testing.T) {
	h := newHarness(t, addonResizer("ar"))
	old := h.get("ar")
	edited := old.DeepCopy()
	edited.Spec.Threshold = 10
	edited.ResourceVersion = "2"
	h.c.onUpdate(old, edited)
	h.expectQueued("spec edit", "ar")
	h.c.onUpdate(old, old.DeepCopy())
	h.expectQueued("resync")
	h.c.onDelete(cache.DeletedFinalStateUnknown{Key: ns + "/ar", Obj: old})
	h.expectQueued("delete seen as a tombstone", "ar")
}

func TestWorkloadChangeEnqueuesItsAddonResizers(t *testing.T) {
	h := newHarness(t,
		addonResizer("cpu"),
		addonResizer("memory"),
		addonResizer("sts", withTarget(scaleplanev1alpha1.TargetKindStatefulSet, addonName)),
	)
	d := deployment(addonName, resources())
	h.c.onWorkload(scaleplanev1alpha1.TargetKindDeployment, d)
	h.expectQueued("Deployment created", "cpu", "memory")

	updated := d.DeepCopy()
	updated.Generation = 2
	h.c.onWorkloadUpdate(scaleplanev1alpha1.TargetKindDeployment, d, updated)
	h.expectQueued("Deployment spec changed", "cpu", "memory")

	statusOnly := d.DeepCopy()
	statusOnly.Status.Replicas = 3
	statusOnly.ResourceVersion = "8"
	h.c.onWorkloadUpdate(scaleplanev1alpha1.TargetKindDeployment, d, statusOnly)
	h.expectQueued("Deployment status changed")

	h.c.onWorkload(scaleplanev1alpha1.TargetKindStatefulSet, cache.DeletedFinalStateUnknown{Key: ns + "/" + addonName, Obj: statefulSet(addonName, resources())})
	h.expectQueued("StatefulSet deleted", "sts")

	h.c.onWorkload(scaleplanev1alpha1.TargetKindDaemonSet, daemonSet(addonName, resources()))
	h.expectQueued("unrelated DaemonSet")
}

func TestCountChangeEnqueuesItsMode(t *testing.T) {
	h := newHarness(t,
		addonResizer("nodes"),
		addonResizer("containers", withMode(scaleplanev1alpha1.ContainerProportional)),
		addonResizer("containers-metrics", withMode(scaleplanev1alpha1.ContainerProportional), withSource(scaleplanev1alpha1.SourceMetrics)),
		addonResizer("nodes-metrics", withSource(scaleplanev1alpha1.SourceMetrics)),
	)
	h.c.counts.onContainersChanged()
	h.c.counts.onContainersChanged()
	h.expectQueued("container count changed", "containers")
	h.c.counts.onNodesChanged()
	// Nodes are counted from the API server for either source.
	h.expectQueued("node count changed", "nodes", "nodes-metrics")
}

// Run end to end: the shared informers, the lazily started pod informer,
// the workers, a count change that resizes again, and a clean stop.
func TestRun(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	client := fake.NewSimpleClientset(addonResizer("ar", withMode(scaleplanev1alpha1.ContainerProportional)))
	kube := kubefake.NewClientset(deployment(addonName, resources()), pod("apps", "a", corev1.PodRunning, nil, 2))
	clk := testingclock.NewFakeClock(t0)
	factory := externalversions.NewSharedInformerFactory(client, 0)
	kubeFactory := kubeinformers.NewSharedInformerFactory(kube, 0)
	apps := kubeFactory.Apps().V1()
	c, err := NewController(ctx, Config{
		AddonResizers: factory.Scaleplane().V1alpha1().AddonResizers(), Deployments: apps.Deployments(), StatefulSets: apps.StatefulSets(), DaemonSets: apps.DaemonSets(),
		Client: client, KubeClient: kube, Metadata: metadatafake.NewSimpleMetadataClient(metadatafake.NewTestScheme()), Metrics: metricsfake.NewSimpleClientset(),
		Recorder: record.NewFakeRecorder(100), Clock: clk, Workers: 2, MetricsInterval: testInterval,
	})
	if err != nil {
		t.Fatal(err)
	}
	factory.Start(ctx.Done())
	kubeFactory.Start(ctx.Done())
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		c.Run(ctx)
	}()

	cpuRequest := func() string {
		d, err := kube.AppsV1().Deployments(ns).Get(ctx, addonName, metav1.GetOptions{})
		if err != nil {
			return err.Error()
		}
		q := containerOf(t, &d.Spec.Template).Resources.Requests[corev1.ResourceCPU]
		return q.String()
	}
	// Steps the fake clock so that the wait for the pod informer ends.
	eventually(t, ctx, "resized for 2 containers", func() bool {
		clk.Step(cacheRetry)
		return cpuRequest() == "120m"
	})
	if _, err := kube.CoreV1().Pods("apps").Create(ctx, pod("apps", "b", corev1.PodRunning, nil, 3), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, ctx, "resized for 5 containers", func() bool { return cpuRequest() == "150m" })
	c.counts.nodeInformer.mu.Lock()
	if c.counts.nodeInformer.synced != nil {
		t.Errorf("the node informer started without a NodeProportional AddonResizer")
	}
	c.counts.nodeInformer.mu.Unlock()

	cancel()
	select {
	case <-stopped:
	case <-time.After(30 * time.Second):
		t.Fatal("Run did not return after the context ended")
	}
}
