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
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clienttesting "k8s.io/client-go/testing"
	metricsv1beta1 "k8s.io/metrics/pkg/apis/metrics/v1beta1"

	scaleplanev1alpha1 "github.com/scaleplane/scaleplane/pkg/apis/scaleplane/v1alpha1"
)

func TestMetricsSource(t *testing.T) {
	h := newHarness(t, addonResizer("containers", withSource(scaleplanev1alpha1.SourceMetrics), withMode(scaleplanev1alpha1.ContainerProportional)),
		deployment(addonName, resources()))
	addon := map[string]string{addonLabel: addonName}
	h.addMetrics(podMetrics(ns, "addon-1", addon, 2))
	h.addMetrics(podMetrics(ns, "dns", nil, 1))
	h.addMetrics(podMetrics("apps", "web", addon, 3))

	if d := h.syncAt(t0, "containers"); d != testInterval {
		t.Errorf("requeue after %v; want the interval", d)
	}
	if s := h.get("containers").Status.ClusterSize; s == nil || *s != 4 {
		t.Errorf("container count %v; want 4 (the target's pod left out)", s)
	}
	h.expectCondition("containers", scaleplanev1alpha1.ConditionMetricsAvailable, metav1.ConditionTrue, reasonMetricsRead)

	// Within the interval the last read serves.
	lists := h.metricsLists()
	if d := h.syncAt(t0.Add(10*time.Second), "containers"); d != 5*time.Second {
		t.Errorf("requeue after %v; want the rest of the interval, 5s", d)
	}
	if h.metricsLists() != lists {
		t.Errorf("read again within the interval")
	}
	h.syncAt(t0.Add(testInterval), "containers")
	if h.metricsLists() != lists+1 {
		t.Errorf("not read again after the interval")
	}
}

// Source Metrics with NodeProportional counts the Node objects, as Addon
// Resizer 1.8's --use-metrics did (the API server's object count), not the
// NodeMetrics metrics-server happened to scrape: a missed kubelet scrape
// drops a node from NodeMetrics and must not cut the add-on — issue 18,
// item 8.
func TestMetricsSourceCountsNodesFromTheAPIServer(t *testing.T) {
	h := newHarness(t, addonResizer("nodes", withSource(scaleplanev1alpha1.SourceMetrics)),
		deployment(addonName, resources("cpu=130m", "memory=130Mi", "limit:cpu=130m", "limit:memory=130Mi")))
	h.setNodes(3)
	// node-2's kubelet missed its scrapes: metrics-server lists two.
	h.addMetrics(nodeMetrics("node-0"))
	h.addMetrics(nodeMetrics("node-1"))
	h.syncAt(t0, "nodes")
	if s := h.get("nodes").Status.ClusterSize; s == nil || *s != 3 {
		t.Errorf("node count %v; want the 3 Node objects", s)
	}
	if target, _ := h.writes(); target != 0 {
		t.Errorf("%d target writes; want none, the add-on is sized for 3 nodes", target)
	}
	if h.metricsLists() != 0 {
		t.Errorf("%d metrics API lists; want none for a node count", h.metricsLists())
	}
	if c := h.condition("nodes", scaleplanev1alpha1.ConditionMetricsAvailable); c != nil {
		t.Errorf("MetricsAvailable %+v; want none, the metrics API is not read", c)
	}
}

// A pod missing from one PodMetrics read (its kubelet's scrape failed) is
// counted from the read before, so the gap does not resize; missing from the
// next read too, it is gone — issue 18, item 8.
func TestMetricsSourceHoldsPodsAcrossAScrapeGap(t *testing.T) {
	// Base 100m + 10m per container: 5 containers are 150m.
	h := newHarness(t, addonResizer("containers", withSource(scaleplanev1alpha1.SourceMetrics), withMode(scaleplanev1alpha1.ContainerProportional)),
		deployment(addonName, resources("cpu=150m", "memory=150Mi", "limit:cpu=150m", "limit:memory=150Mi")))
	h.addMetrics(podMetrics("apps", "web", nil, 2))
	h.addMetrics(podMetrics("apps", "api", nil, 3))
	h.syncAt(t0, "containers")
	if s := h.get("containers").Status.ClusterSize; s == nil || *s != 5 {
		t.Fatalf("container count %v; want 5", s)
	}

	gv := metricsv1beta1.SchemeGroupVersion
	h.check(h.metrics.Tracker().Delete(gv.WithResource("pods"), "apps", "api"))
	h.syncAt(t0.Add(testInterval), "containers")
	if s := h.get("containers").Status.ClusterSize; s == nil || *s != 5 {
		t.Errorf("container count %v after one missed scrape; want 5, held", s)
	}
	if target, _ := h.writes(); target != 0 {
		t.Errorf("%d target writes after one missed scrape; want none", target)
	}

	h.syncAt(t0.Add(2*testInterval), "containers")
	if s := h.get("containers").Status.ClusterSize; s == nil || *s != 2 {
		t.Errorf("container count %v after two reads without the pod; want 2", s)
	}
	if target, _ := h.writes(); target != 1 {
		t.Errorf("%d target writes once the pod is gone; want 1", target)
	}
}

func TestMetricsUnavailable(t *testing.T) {
	h := newHarness(t, addonResizer("ar", withSource(scaleplanev1alpha1.SourceMetrics), withMode(scaleplanev1alpha1.ContainerProportional)),
		deployment(addonName, resources("cpu=100m", "memory=100Mi", "limit:cpu=100m", "limit:memory=100Mi")))
	h.metrics.PrependReactor("list", "pods", func(clienttesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewServiceUnavailable("the server is currently unable to handle the request")
	})
	if d := h.syncAt(t0, "ar"); d != testInterval {
		t.Errorf("requeue after %v; want the interval", d)
	}
	h.expectCondition("ar", scaleplanev1alpha1.ConditionMetricsAvailable, metav1.ConditionFalse, reasonMetricsUnavailable)
	h.expectCondition("ar", scaleplanev1alpha1.ConditionUpToDate, metav1.ConditionFalse, reasonMetricsUnavailable)
	h.expectEvents("Warning MetricsUnavailable")
	if target, _ := h.writes(); target != 0 {
		t.Errorf("%d target writes without a cluster size", target)
	}
	h.syncAt(t0.Add(testInterval), "ar")
	h.expectEvents()
}

// TestMetricsEmptyIsNotSizeZero: right after metrics-server starts the
// metrics API answers with empty lists; that must not size the add-on for an
// empty cluster.
func TestMetricsEmptyIsNotSizeZero(t *testing.T) {
	h := newHarness(t, addonResizer("containers", withSource(scaleplanev1alpha1.SourceMetrics), withMode(scaleplanev1alpha1.ContainerProportional)),
		deployment(addonName, resources("cpu=100m", "memory=100Mi", "limit:cpu=100m", "limit:memory=100Mi")))
	h.syncAt(t0, "containers")
	h.expectCondition("containers", scaleplanev1alpha1.ConditionMetricsAvailable, metav1.ConditionFalse, reasonMetricsUnavailable)
	if s := h.get("containers").Status.ClusterSize; s != nil {
		t.Errorf("cluster size %d from an empty metrics list", *s)
	}
	if target, _ := h.writes(); target != 0 {
		t.Errorf("%d target writes from empty metrics", target)
	}
}

func (h *harness) metricsLists() int {
	n := 0
	for _, a := range h.metrics.Actions() {
		if a.GetVerb() == "list" {
			n++
		}
	}
	return n
}

func TestMetricsAvailableRemovedForAPIServer(t *testing.T) {
	ar := addonResizer("ar")
	ar.Status.Conditions = []metav1.Condition{{Type: scaleplanev1alpha1.ConditionMetricsAvailable, Status: metav1.ConditionTrue, Reason: reasonMetricsRead}}
	h := newHarness(t, ar, deployment(addonName, resources()))
	h.setNodes(1)
	h.syncAt(t0, "ar")
	if c := h.condition("ar", scaleplanev1alpha1.ConditionMetricsAvailable); c != nil {
		t.Errorf("MetricsAvailable kept after switching to APIServer: %+v", c)
	}
}
