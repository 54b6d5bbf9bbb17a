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
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/wait"
	kubefake "k8s.io/client-go/kubernetes/fake"
	metadatafake "k8s.io/client-go/metadata/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/klog/v2/ktesting"

	scaleplanev1alpha1 "github.com/scaleplane/scaleplane/pkg/apis/scaleplane/v1alpha1"
	"github.com/scaleplane/scaleplane/pkg/gcpace"
)

func nodeMeta(name string) *metav1.PartialObjectMetadata {
	return &metav1.PartialObjectMetadata{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Node"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{"a": "b"}, ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubelet"}}},
	}
}

// eventually polls cond until it holds: the informers run in their own
// goroutines against the fake clientsets.
func eventually(t *testing.T, ctx context.Context, what string, cond func() bool) {
	t.Helper()
	err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		return cond(), nil
	})
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// The real informers: started lazily, one per mode, counting through the
// transforms and the event handlers, and stopped with the context.
func TestAPIServerCountsInformers(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	addon := map[string]string{addonLabel: addonName}
	kube := kubefake.NewClientset(
		pod("apps", "a", corev1.PodRunning, nil, 2),
		pod(ns, "addon-1", corev1.PodRunning, addon, 3),
		pod("apps", "done", corev1.PodSucceeded, nil, 5),
	)
	scheme := metadatafake.NewTestScheme()
	if err := metav1.AddMetaToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	meta := metadatafake.NewSimpleMetadataClient(scheme, nodeMeta("n1"), nodeMeta("n2"))
	var containerChanges, nodeChanges atomic.Int32
	counts := newAPIServerCounts(kube, meta, func() { containerChanges.Add(1) }, func() { nodeChanges.Add(1) })
	gcBefore := gcpace.Percent()

	// Nothing starts before the controller runs.
	if ok, err := counts.ready(scaleplanev1alpha1.ContainerProportional); ok || err != nil {
		t.Fatalf("ready before start: %v, %v", ok, err)
	}
	if n := len(kube.Actions()); n != 0 {
		t.Fatalf("%d pod API calls before start", n)
	}
	counts.start(ctx)

	// The first container-mode AddonResizer starts the pod informer only.
	eventually(t, ctx, "pod informer synced", func() bool {
		ok, err := counts.ready(scaleplanev1alpha1.ContainerProportional)
		return ok && err == nil
	})
	if n := len(meta.Actions()); n != 0 {
		t.Errorf("the node informer started with the pod informer: %d node API calls", n)
	}
	if got := counts.size(scaleplanev1alpha1.ContainerProportional, ns, selectAddon); got != 2 {
		t.Errorf("containers excluding the add-on = %d; want 2", got)
	}
	if got := counts.containers.total(); got != 5 {
		t.Errorf("containers = %d; want 5", got)
	}
	// The initial list tells the controller once, when it is complete, so
	// the AddonResizers waiting for it sync at once.
	eventually(t, ctx, "told once the pods are counted", func() bool { return containerChanges.Load() == 1 })
	// The garbage collector is back to its own pace once the list is in.
	if got := gcpace.Percent(); got != gcBefore {
		t.Errorf("GOGC after the initial list = %d; want it restored to %d", got, gcBefore)
	}
	// The pods are listed without the terminal ones.
	for _, a := range kube.Actions() {
		if a.GetVerb() == "list" {
			if fs, want := a.(clienttesting.ListAction).GetListRestrictions().Fields.String(), fields.ParseSelectorOrDie(activePods).String(); fs != want {
				t.Errorf("pods listed with field selector %q; want %q", fs, want)
			}
		}
	}
	// The counter is the reflector's store: it keeps no pod objects.
	if objs := counts.containers.List(); len(objs) != 0 {
		t.Errorf("the counter returned %d objects; it keeps none", len(objs))
	}

	// Events adjust the total and tell the controller.
	p := pod("apps", "new", corev1.PodPending, nil, 4)
	_, err := kube.CoreV1().Pods("apps").Create(ctx, p, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, ctx, "pod add counted", func() bool { return counts.containers.total() == 9 && containerChanges.Load() == 2 })
	p.Status.Phase = corev1.PodSucceeded
	if _, err := kube.CoreV1().Pods("apps").UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, ctx, "pod success uncounted", func() bool { return counts.containers.total() == 5 && containerChanges.Load() == 3 })
	if err := kube.CoreV1().Pods("apps").Delete(ctx, "a", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, ctx, "pod delete uncounted", func() bool { return counts.containers.total() == 3 && containerChanges.Load() == 4 })

	// The first node-mode AddonResizer starts the node informer.
	eventually(t, ctx, "node informer synced", func() bool {
		ok, err := counts.ready(scaleplanev1alpha1.NodeProportional)
		return ok && err == nil
	})
	if got := counts.size(scaleplanev1alpha1.NodeProportional, ns, labels.Everything()); got != 2 {
		t.Errorf("nodes = %d; want 2", got)
	}
	for _, obj := range counts.nodeStore.List() {
		m := obj.(*metav1.PartialObjectMetadata)
		if m.Annotations != nil || m.ManagedFields != nil {
			t.Errorf("node stored with %v, %v", m.Annotations, m.ManagedFields)
		}
	}
	if err := meta.Tracker().Add(nodeMeta("n3")); err != nil {
		t.Fatal(err)
	}
	eventually(t, ctx, "node add counted", func() bool { return counts.nodes.count() == 3 && nodeChanges.Load() == 2 })

	cancel()
	counts.wait() // returns: both informers stopped
}
