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
	"k8s.io/apimachinery/pkg/util/wait"
	kubefake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/klog/v2/ktesting"
)

// TestNodeReadiness: the node watch starts on first use once the
// controller runs, keeps each node stripped to its Ready condition, tells
// the nodes that are not Ready (False or Unknown; a node without the
// condition, or unknown, counts as Ready), and says when a node turns
// Ready or not, not at every status update.
func TestNodeReadiness(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	fresh := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "fresh"}}
	kube := kubefake.NewClientset(node("dead", corev1.ConditionUnknown), node("live", corev1.ConditionTrue), fresh)
	changes := make(chan struct{}, 100)
	n := newNodeReadiness(kube, func() { changes <- struct{}{} })
	if _, synced := n.lookup(ctx); synced {
		t.Fatal("synced before the controller runs")
	}
	n.start(ctx)
	var lookup notReadyLookup
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		if err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) { return cond(), nil }); err != nil {
			t.Fatalf("waiting for %s: %v", what, err)
		}
	}
	waitFor("the node watch to sync", func() bool {
		var synced bool
		lookup, synced = n.lookup(ctx)
		return synced
	})
	if c, ok := lookup("dead"); !ok || c.Status != corev1.ConditionUnknown || c.Reason != "NodeStatusUnknown" || !c.LastTransitionTime.Equal(&metav1.Time{Time: t0.Add(-time.Hour)}) {
		t.Errorf("dead: %+v, %v; want its Ready condition, Unknown", c, ok)
	}
	for _, name := range []string{"live", "fresh", "unknown"} {
		if c, ok := lookup(name); ok {
			t.Errorf("%s: not Ready (%+v), want Ready", name, c)
		}
	}
	obj, _, _ := n.informer.GetStore().GetByKey("live")
	if _, ok := obj.(*nodeReadyState); !ok {
		t.Errorf("the cache keeps %T, want a stripped nodeReadyState", obj)
	}
	select {
	case <-changes: // the sync once the watch has synced
	case <-time.After(30 * time.Second):
		t.Fatal("no sync once the node watch synced")
	}

	// A status update that does not change readiness says nothing; one
	// that does, says so.
	live := node("live", corev1.ConditionTrue)
	live.Status.Conditions[0].Message = "still posting"
	if _, err := kube.CoreV1().Nodes().UpdateStatus(ctx, live, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := kube.CoreV1().Nodes().UpdateStatus(ctx, node("dead", corev1.ConditionTrue), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor("dead to be Ready", func() bool {
		_, notReady := lookup("dead")
		return !notReady
	})
	select {
	case <-changes:
	case <-time.After(30 * time.Second):
		t.Fatal("dead turning Ready said nothing")
	}
	select {
	case <-changes:
		t.Error("a status update that kept live Ready said something")
	default:
	}
	cancel()
	n.wait()
}
