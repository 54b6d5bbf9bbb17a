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
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"

	scaleplanev1alpha1 "github.com/scaleplane/scaleplane/pkg/apis/scaleplane/v1alpha1"
	"github.com/scaleplane/scaleplane/test/integration/framework"
)

// writeWatch records every change the API server reports on a watch opened
// after the objects were created: with nothing else running against them
// (no kube-controller-manager, no scheduler, no kubelet for their node),
// each is a write by the resizer.
type writeWatch struct {
	mu     sync.Mutex
	events []string
}

func (w *writeWatch) record(what string, wi watch.Interface) {
	go func() {
		for ev := range wi.ResultChan() {
			if ev.Type == watch.Bookmark {
				continue
			}
			name := "?"
			if o, ok := ev.Object.(metav1.Object); ok {
				name = o.GetName()
			}
			w.mu.Lock()
			w.events = append(w.events, fmt.Sprintf("%s %s %s", ev.Type, what, name))
			w.mu.Unlock()
		}
	}()
}

func (w *writeWatch) seen() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.events...)
}

// TestUpdateModeOffWritesNothing: an AddonResizer with updateMode Off, over
// a run in which nodes are added and removed, writes nothing to its
// Deployment or to the Deployment's pods (a watch on each sees no event),
// while its status tracks the count and the recommendation, with UpToDate
// reason RecommendationOnly. Before that, the CRD's own rule refuses a
// maxAllowed below minAllowed (no webhook runs here).
func TestUpdateModeOffWritesNothing(t *testing.T) {
	cp := framework.Get(t)
	ns := cp.CreateNamespace(t)
	ctx := context.Background()
	ars := cp.Client().ScaleplaneV1alpha1().AddonResizers(ns)

	bad := resizerFor(ns, "bad-bounds", scaleplanev1alpha1.TargetKindDeployment, scaleplanev1alpha1.NodeProportional, scaleplanev1alpha1.SourceAPIServer)
	bad.Spec.Resources[0].MinAllowed, bad.Spec.Resources[0].MaxAllowed = ptr.To(resource.MustParse("2")), ptr.To(resource.MustParse("500m"))
	if _, err := ars.Create(ctx, bad, metav1.CreateOptions{}); err == nil || !strings.Contains(err.Error(), "maxAllowed must be greater than or equal to minAllowed") {
		t.Fatalf("creating an AddonResizer with maxAllowed below minAllowed: %v; want the CRD's rule to refuse it", err)
	}

	framework.StartManager(t, cp.KubeconfigPath(), "resizer")
	createDeployment(t, cp, ns, "off")
	// The Deployment's pods, as its ReplicaSet would make them, on a plain
	// Node that nothing runs: only a resize would touch them.
	node := "off-" + ns
	createNode(t, cp, node)
	for i := range 2 {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("off-%d", i), Namespace: ns, Labels: map[string]string{"app": "off"}}, Spec: podSpec("off", 2).Spec}
		p.Spec.NodeName = node
		if _, err := cp.KubeClient().CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	writes := &writeWatch{}
	deploys, err := cp.KubeClient().AppsV1().Deployments(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	dw, err := cp.KubeClient().AppsV1().Deployments(ns).Watch(ctx, metav1.ListOptions{ResourceVersion: deploys.ResourceVersion, FieldSelector: fields.OneTermEqualSelector("metadata.name", "off").String()})
	if err != nil {
		t.Fatal(err)
	}
	defer dw.Stop()
	writes.record("deployment", dw)
	pods, err := cp.KubeClient().CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=off"})
	if err != nil {
		t.Fatal(err)
	}
	pw, err := cp.KubeClient().CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{ResourceVersion: pods.ResourceVersion, LabelSelector: "app=off"})
	if err != nil {
		t.Fatal(err)
	}
	defer pw.Stop()
	writes.record("pod", pw)

	ar := resizerFor(ns, "off", scaleplanev1alpha1.TargetKindDeployment, scaleplanev1alpha1.NodeProportional, scaleplanev1alpha1.SourceAPIServer)
	ar.Spec.UpdateMode = scaleplanev1alpha1.UpdateModeOff
	ar.Spec.Resources[0].MaxAllowed = ptr.To(resource.MustParse("100")) // a bound that never holds
	createResizer(t, cp, ar)

	// waitTracks waits until status says the current node count and its
	// estimate, and that it would set them (the template's requests are 5m).
	waitTracks := func(what string) int64 {
		t.Helper()
		var last string
		var n int64
		err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, waitTimeout, true, func(ctx context.Context) (bool, error) {
			if n, err = nodeCount(cp)(ctx); err != nil {
				return false, err
			}
			got, err := ars.Get(ctx, "off", metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			st := got.Status
			last = fmt.Sprintf("clusterSize %v recommendation %v conditions %+v", ptr.Deref(st.ClusterSize, -1), st.Recommendation, st.Conditions)
			if ptr.Deref(st.ClusterSize, -1) != int32(n) || st.Recommendation == nil {
				return false, nil
			}
			wantCPU, wantMem := expected(n)
			cpu, mem := st.Recommendation.Requests[corev1.ResourceCPU], st.Recommendation.Requests[corev1.ResourceMemory]
			if cpu.Cmp(wantCPU) != 0 || mem.Cmp(wantMem) != 0 {
				return false, nil
			}
			for _, c := range st.Conditions {
				if c.Type == scaleplanev1alpha1.ConditionUpToDate {
					return c.Status == metav1.ConditionFalse && c.Reason == "RecommendationOnly" &&
						strings.Contains(c.Message, "nothing is written") && strings.Contains(c.Message, "cpu request 5m -> "+wantCPU.String()), nil
				}
			}
			return false, nil
		})
		if err != nil {
			t.Fatalf("%s: status does not track the recommendation: %v; last: %s", what, err, last)
		}
		return n
	}
	first := waitTracks("created")
	for i := range 3 {
		createNode(t, cp, fmt.Sprintf("off-%s-%d", ns, i))
	}
	if n := waitTracks("3 nodes added"); n != first+3 {
		t.Errorf("tracked %d nodes, want %d", n, first+3)
	}
	if err := cp.KubeClient().CoreV1().Nodes().Delete(ctx, fmt.Sprintf("off-%s-0", ns), metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if n := waitTracks("a node removed"); n != first+2 {
		t.Errorf("tracked %d nodes, want %d", n, first+2)
	}

	// The resizer has synced after the last change (status says so); a
	// write of its would have reached the watches before that status.
	// Give a late one a moment to show anyway.
	time.Sleep(2 * time.Second)
	if seen := writes.seen(); len(seen) != 0 {
		t.Errorf("updateMode Off wrote to the workload or its pods: %v", seen)
	}
	tmpl, err := templateOf(ctx, cp, ns, "off", scaleplanev1alpha1.TargetKindDeployment)
	if err != nil {
		t.Fatal(err)
	}
	if cpu := tmpl.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU]; cpu.Cmp(resource.MustParse("5m")) != 0 {
		t.Errorf("the template's cpu request is %s, want 5m as created", cpu.String())
	}
}
