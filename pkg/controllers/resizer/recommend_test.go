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
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	scaleplanev1alpha1 "github.com/scaleplane/scaleplane/pkg/apis/scaleplane/v1alpha1"
	"github.com/scaleplane/scaleplane/pkg/internal/testkit"
)

func withUpdateMode(m scaleplanev1alpha1.UpdateMode) option {
	return func(ar *scaleplanev1alpha1.AddonResizer) { ar.Spec.UpdateMode = m }
}

// kubeWrites counts every write action on the kube clientset: the target,
// its pods (pods/resize), anything.
func (h *harness) kubeWrites() []string {
	var out []string
	for _, a := range h.kube.Actions() {
		if isWrite(a) {
			out = append(out, a.GetVerb()+" "+a.GetResource().Resource+"/"+a.GetSubresource())
		}
	}
	return out
}

// TestUpdateModeOffWritesNothing: with updateMode Off the resizer writes
// nothing to the workload (nor to any pod) over a run in which the node
// count changes up and down, while status, UpToDate (RecommendationOnly),
// the metric and the events follow the recommendation.
func TestUpdateModeOffWritesNothing(t *testing.T) {
	ar := addonResizer("off-writes-nothing", withUpdateMode(scaleplanev1alpha1.UpdateModeOff), withThreshold(10), withDelays(time.Hour, time.Hour))
	h := newHarness(t, ar, deployment(addonName, resources("cpu=200m", "memory=200Mi", "limit:cpu=200m", "limit:memory=200Mi")))
	at := t0
	for _, step := range []struct {
		nodes    int
		cpu, mem string
		upToDate metav1.ConditionStatus
		would    string
	}{
		{nodes: 10, cpu: "200m", mem: "200Mi", upToDate: metav1.ConditionTrue},
		{nodes: 30, cpu: "400m", mem: "400Mi", upToDate: metav1.ConditionFalse, would: "cpu request 200m -> 400m, limit 200m -> 400m; memory request 200Mi -> 400Mi, limit 200Mi -> 400Mi"},
		{nodes: 11, cpu: "210m", mem: "210Mi", upToDate: metav1.ConditionTrue},
		{nodes: 3, cpu: "130m", mem: "130Mi", upToDate: metav1.ConditionFalse, would: "cpu request 200m -> 130m, limit 200m -> 130m"},
		{nodes: 0, cpu: "100m", mem: "100Mi", upToDate: metav1.ConditionFalse, would: "cpu request 200m -> 100m"},
	} {
		h.setNodes(step.nodes)
		at = at.Add(time.Minute) // past observationInterval: every change is written
		h.syncAt(at, "off-writes-nothing")
		st := h.get("off-writes-nothing").Status
		if ptr.Deref(st.ClusterSize, -1) != int32(step.nodes) || st.Recommendation == nil {
			t.Fatalf("%d nodes: status clusterSize %v recommendation %v", step.nodes, st.ClusterSize, st.Recommendation)
		}
		mustQuantity(t, st.Recommendation.Requests, corev1.ResourceCPU, step.cpu)
		mustQuantity(t, st.Recommendation.Limits, corev1.ResourceMemory, step.mem)
		if st.PendingResize != nil {
			t.Errorf("%d nodes: pendingResize %+v; Off holds no change", step.nodes, st.PendingResize)
		}
		c := h.condition("off-writes-nothing", scaleplanev1alpha1.ConditionUpToDate)
		if c == nil || c.Status != step.upToDate || c.Reason != reasonRecommendationOnly || !strings.HasPrefix(c.Message, offNote) || !strings.Contains(c.Message, step.would) {
			t.Errorf("%d nodes: UpToDate %+v; want %s %s saying %q", step.nodes, c, step.upToDate, reasonRecommendationOnly, step.would)
		}
		for _, kind := range []string{"request", "limit"} {
			labels := map[string]string{"namespace": ns, "name": "off-writes-nothing", "cluster": "", "resource": "cpu", "kind": kind}
			want := st.Recommendation.Requests.Cpu().AsApproximateFloat64()
			if v, ok := testkit.MetricValue(t, "resizer_recommendation", labels); !ok || v != want {
				t.Errorf("%d nodes: resizer_recommendation%v = %v, %v; want %v", step.nodes, labels, v, ok, want)
			}
		}
	}
	if w := h.kubeWrites(); len(w) != 0 {
		t.Errorf("updateMode Off wrote %v", w)
	}
	mustQuantity(t, h.deploymentResources(addonName).Requests, corev1.ResourceCPU, "200m")
	h.expectEvents() // no Resized, no Warning
	if v, ok := testkit.MetricValue(t, "resizer_decisions_total", map[string]string{"outcome": outcomeRecommended}); !ok || v < 5 {
		t.Errorf("resizer_decisions_total{outcome=recommended} = %v, %v; want at least 5", v, ok)
	}

	// A change of the count within observationInterval is written once the
	// interval has passed, not at every sync.
	_, before := h.writes()
	h.setNodes(40)
	h.syncAt(at.Add(time.Second), "off-writes-nothing")
	if _, after := h.writes(); after != before {
		t.Errorf("a recommendation-only change wrote status within observationInterval")
	}
	h.syncAt(at.Add(observationInterval+time.Second), "off-writes-nothing")
	if got := ptr.Deref(h.get("off-writes-nothing").Status.ClusterSize, -1); got != 40 {
		t.Errorf("clusterSize %d after observationInterval; want 40", got)
	}

	// Deleted: its series go.
	h.check(h.client.ScaleplaneV1alpha1().AddonResizers(ns).Delete(h.ctx, "off-writes-nothing", metav1.DeleteOptions{}))
	h.refresh()
	h.syncAt(at.Add(time.Hour), "off-writes-nothing")
	if _, ok := testkit.MetricValue(t, "resizer_recommendation", map[string]string{"namespace": ns, "name": "off-writes-nothing"}); ok {
		t.Error("resizer_recommendation outlived the AddonResizer")
	}
}

// TestUpdateModeOffThenRollout: switched from Off to Rollout the resizer
// acts, and its delay starts at the switch (Off held none); back to Off it
// stops. An InPlace AddonResizer switched to Off drops its held size.
func TestUpdateModeOffThenRollout(t *testing.T) {
	ar := addonResizer("ar", withUpdateMode(scaleplanev1alpha1.UpdateModeOff), withDelays(10*time.Minute, 0))
	h := newHarness(t, ar, deployment(addonName, resources("cpu=100m", "memory=100Mi")))
	h.setNodes(10)
	h.syncAt(t0, "ar")
	h.expectCondition("ar", scaleplanev1alpha1.ConditionUpToDate, metav1.ConditionFalse, reasonRecommendationOnly)

	switchMode := func(m scaleplanev1alpha1.UpdateMode) {
		cur := h.get("ar")
		cur.Spec.UpdateMode = m
		cur.Generation++
		_, err := h.client.ScaleplaneV1alpha1().AddonResizers(ns).Update(h.ctx, cur, metav1.UpdateOptions{})
		h.check(err)
		h.refresh()
	}
	switchMode(scaleplanev1alpha1.UpdateModeRollout)
	at := t0.Add(time.Hour)
	if d := h.syncAt(at, "ar"); d != 10*time.Minute {
		t.Errorf("requeue %v; want the whole scaleUpDelay from the switch", d)
	}
	h.expectCondition("ar", scaleplanev1alpha1.ConditionUpToDate, metav1.ConditionFalse, reasonPostponed)
	h.syncAt(at.Add(10*time.Minute), "ar")
	mustQuantity(t, h.deploymentResources(addonName).Requests, corev1.ResourceCPU, "200m")
	h.expectEvents("Normal Resized")

	switchMode(scaleplanev1alpha1.UpdateModeOff)
	h.kube.ClearActions()
	h.setNodes(50)
	h.syncAt(at.Add(time.Hour), "ar")
	if w := h.kubeWrites(); len(w) != 0 {
		t.Errorf("back in Off, wrote %v", w)
	}
	h.expectCondition("ar", scaleplanev1alpha1.ConditionUpToDate, metav1.ConditionFalse, reasonRecommendationOnly)

	// From InPlace: what InPlace held is dropped.
	st := h.get("ar")
	st.Status.InPlace = &scaleplanev1alpha1.InPlaceStatus{Resources: resources("cpu=600m"), Pods: 1, AtSize: 1}
	st.Status.Conditions = append(st.Status.Conditions, metav1.Condition{Type: scaleplanev1alpha1.ConditionInPlaceResized, Status: metav1.ConditionTrue, Reason: reasonAtSize, LastTransitionTime: metav1.NewTime(t0)})
	_, err := h.client.ScaleplaneV1alpha1().AddonResizers(ns).UpdateStatus(h.ctx, st, metav1.UpdateOptions{})
	h.check(err)
	h.refresh()
	h.syncAt(at.Add(2*time.Hour), "ar")
	if got := h.get("ar").Status; got.InPlace != nil || h.condition("ar", scaleplanev1alpha1.ConditionInPlaceResized) != nil {
		t.Errorf("Off kept InPlace's status: %+v", got.InPlace)
	}
}

// TestUpdateModeOffIsNoRival: an Off AddonResizer beside one that sizes the
// same container (a migration watched side by side) is no rival: the other
// resizes, the Off one recommends, neither says AmbiguousTarget.
func TestUpdateModeOffIsNoRival(t *testing.T) {
	h := newHarness(t,
		addonResizer("sizer"),
		addonResizer("watcher", withUpdateMode(scaleplanev1alpha1.UpdateModeOff), withThreshold(5)),
		deployment(addonName, resources("cpu=100m", "memory=100Mi")))
	h.setNodes(10)
	h.syncAt(t0, "watcher")
	h.expectCondition("watcher", scaleplanev1alpha1.ConditionUpToDate, metav1.ConditionFalse, reasonRecommendationOnly)
	h.syncAt(t0, "sizer")
	mustQuantity(t, h.deploymentResources(addonName).Requests, corev1.ResourceCPU, "200m")
	h.syncAt(t0.Add(time.Minute), "watcher")
	h.expectCondition("watcher", scaleplanev1alpha1.ConditionUpToDate, metav1.ConditionTrue, reasonRecommendationOnly)
	if c := h.condition("watcher", scaleplanev1alpha1.ConditionUpToDate); !strings.Contains(c.Message, "is within 5% of the recommendation") {
		t.Errorf("UpToDate message %q", c.Message)
	}
	h.expectCondition("sizer", scaleplanev1alpha1.ConditionUpToDate, metav1.ConditionTrue, reasonResized)
}

// TestUpdateModeOffCappedAtTheLimit: with setLimits false, what Off would
// set is capped at the container's limit as Rollout would, and it says so.
func TestUpdateModeOffCappedAtTheLimit(t *testing.T) {
	h := newHarness(t, addonResizer("ar", withUpdateMode(scaleplanev1alpha1.UpdateModeOff), withSetLimits(false)),
		deployment(addonName, resources("cpu=100m", "memory=200Mi", "limit:cpu=150m")))
	h.setNodes(10)
	h.syncAt(t0, "ar")
	c := h.condition("ar", scaleplanev1alpha1.ConditionUpToDate)
	if c == nil || c.Reason != reasonRecommendationOnly || !strings.Contains(c.Message, "cpu request 100m -> 150m") || !strings.Contains(c.Message, "cpu estimate 200m, limit 150m") {
		t.Errorf("UpToDate %+v", c)
	}
	if w := h.kubeWrites(); len(w) != 0 {
		t.Errorf("wrote %v", w)
	}
	h.expectEvents()
}

// TestRecommendationMetricFollowsTheSpec: resizer_recommendation is
// exported in every mode (Rollout here), per member cluster on Karmada, and
// a series goes with what it was for: limits no longer set, a resource
// dropped from the spec, a member no longer placed, the AddonResizer.
func TestRecommendationMetricFollowsTheSpec(t *testing.T) {
	series := func(name, cluster, resource, kind string) bool {
		_, ok := testkit.MetricValue(t, "resizer_recommendation", map[string]string{"namespace": ns, "name": name, "cluster": cluster, "resource": resource, "kind": kind})
		return ok
	}
	expect := func(what, name, cluster, resource, kind string, want bool) {
		t.Helper()
		if got := series(name, cluster, resource, kind); got != want {
			t.Errorf("%s: series %s %q %s %s exported %v; want %v", what, name, cluster, resource, kind, got, want)
		}
	}

	h := newHarness(t, addonResizer("rec-metric"), deployment(addonName, resources("cpu=100m", "memory=100Mi")))
	h.setNodes(10)
	h.syncAt(t0, "rec-metric")
	for _, r := range []string{"cpu", "memory"} {
		for _, k := range []string{"request", "limit"} {
			expect("Rollout", "rec-metric", "", r, k, true)
		}
	}
	edit := func(at time.Time, change func(*scaleplanev1alpha1.AddonResizer)) {
		ar := h.get("rec-metric")
		change(ar)
		ar.Generation++
		_, err := h.client.ScaleplaneV1alpha1().AddonResizers(ns).Update(h.ctx, ar, metav1.UpdateOptions{})
		h.check(err)
		h.refresh()
		h.syncAt(at, "rec-metric")
	}
	edit(t0.Add(time.Minute), func(ar *scaleplanev1alpha1.AddonResizer) { ar.Spec.SetLimits = ptr.To(false) })
	expect("setLimits false", "rec-metric", "", "cpu", "request", true)
	expect("setLimits false", "rec-metric", "", "cpu", "limit", false)
	expect("setLimits false", "rec-metric", "", "memory", "limit", false)
	edit(t0.Add(2*time.Minute), func(ar *scaleplanev1alpha1.AddonResizer) {
		ar.Spec.Resources = []scaleplanev1alpha1.ResourceScaling{ar.Spec.Resources[0]}
	})
	expect("memory dropped", "rec-metric", "", "cpu", "request", true)
	expect("memory dropped", "rec-metric", "", "memory", "request", false)

	k := newKarmadaHarness(t)
	k.setNodes(0)
	k.createAR(addonResizer("rec-members", cpuOnly, withUpdateMode(scaleplanev1alpha1.UpdateModeOff)))
	k.setClusters(member("a", 3, 3, metav1.ConditionTrue), member("b", 50, 50, metav1.ConditionTrue))
	k.setPlacement("a", "b")
	k.syncAt(t0, "rec-members")
	expect("placed on a and b", "rec-members", "a", "cpu", "request", true)
	expect("placed on a and b", "rec-members", "b", "cpu", "request", true)
	expect("placed on a and b", "rec-members", "", "cpu", "request", false)
	k.setPlacement("a")
	k.syncAt(t0.Add(time.Minute), "rec-members")
	expect("b no longer placed", "rec-members", "a", "cpu", "request", true)
	expect("b no longer placed", "rec-members", "b", "cpu", "request", false)
	h.check(k.client.ScaleplaneV1alpha1().AddonResizers(ns).Delete(k.ctx, "rec-members", metav1.DeleteOptions{}))
	k.refresh()
	k.syncAt(t0.Add(time.Hour), "rec-members")
	expect("deleted", "rec-members", "a", "cpu", "request", false)
}
