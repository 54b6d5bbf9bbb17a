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
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/wait"
	kubefake "k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2/ktesting"
)

// TestPodWatches: one informer per AddonResizer, listing with the target's
// selector, keeping stripped pods, enqueueing the AddonResizer on a pod
// event, replaced when the selector changes, stopped on request and with
// the context.
func TestPodWatches(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	mine := runningPod("addon-1", "100m", "50Mi")
	mine.Spec.Containers[0].Image = "addon:1"
	other := runningPod("other-1", "100m", "50Mi")
	other.Labels = map[string]string{addonLabel: "other"}
	kube := kubefake.NewClientset(mine, other)
	key := cache.ObjectName{Namespace: ns, Name: addonName}
	enqueued := make(chan cache.ObjectName, 100)
	p := newPodWatches(kube, func(k cache.ObjectName) { enqueued <- k })
	sel := labels.SelectorFromSet(labels.Set{addonLabel: addonName})

	if _, synced := p.pods(ctx, key, ns, sel, containerName); synced || p.watching(key) {
		t.Fatal("an informer started before start")
	}
	p.start(ctx)
	var pods []*corev1.Pod
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) { return cond(), nil })
		if err != nil {
			t.Fatalf("waiting for %s: %v", what, err)
		}
	}
	waitFor("the informer to sync", func() bool {
		var synced bool
		pods, synced = p.pods(ctx, key, ns, sel, containerName)
		return synced
	})
	if len(pods) != 1 || pods[0].Name != "addon-1" || pods[0].Spec.Containers[0].Image != "" {
		t.Fatalf("pods %+v, want addon-1 only, stripped", pods)
	}
	var listed bool
	for _, a := range kube.Actions() {
		if l, ok := a.(clienttesting.ListAction); ok && l.GetListRestrictions().Labels.String() == sel.String() {
			listed = true
		}
	}
	if !listed {
		t.Errorf("the pods were not listed with the target's selector: %v", kube.Actions())
	}
	select {
	case k := <-enqueued:
		if k != key {
			t.Errorf("enqueued %v, want %v", k, key)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("a pod event did not enqueue the AddonResizer")
	}

	// A pod created later is seen.
	later := runningPod("addon-2", "100m", "50Mi")
	if _, err := kube.CoreV1().Pods(ns).Create(ctx, later, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor("the new pod", func() bool {
		pods, _ = p.pods(ctx, key, ns, sel, containerName)
		return len(pods) == 2
	})

	// Another selector: a new informer.
	otherSel := labels.SelectorFromSet(labels.Set{addonLabel: "other"})
	waitFor("the new selector's informer", func() bool {
		pods, _ = p.pods(ctx, key, ns, otherSel, containerName)
		return len(pods) == 1 && pods[0].Name == "other-1"
	})

	p.stop(key)
	if p.watching(key) {
		t.Error("still watching after stop")
	}
	cancel()
	p.wait()
}
