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
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	scaleplanev1alpha1 "github.com/scaleplane/scaleplane/pkg/apis/scaleplane/v1alpha1"
)

// withBounds sets minAllowed and maxAllowed of the resources, by name; ""
// leaves a bound unset.
func withBounds(name corev1.ResourceName, lo, hi string) option {
	return func(ar *scaleplanev1alpha1.AddonResizer) {
		// A copy: options such as cpuOnly share their slice.
		ar.Spec.Resources = append([]scaleplanev1alpha1.ResourceScaling(nil), ar.Spec.Resources...)
		for i := range ar.Spec.Resources {
			r := &ar.Spec.Resources[i]
			if r.Name != name {
				continue
			}
			if lo != "" {
				q := resource.MustParse(lo)
				r.MinAllowed = &q
			}
			if hi != "" {
				q := resource.MustParse(hi)
				r.MaxAllowed = &q
			}
		}
	}
}

// TestBoundsHoldAtBothEnds: minAllowed and maxAllowed bound the estimate
// after the estimator (the Exponential bucket too) and before the threshold,
// at both ends and with both estimators; Bounded says which holds what.
// cpu is 100m + 10m per node within 300m..500m; memory 100Mi + 10Mi per
// node, unbounded.
func TestBoundsHoldAtBothEnds(t *testing.T) {
	for _, tc := range []struct {
		name     string
		opt      option
		nodes    int
		cpu, mem string
		reason   string
		message  string
	}{
		{"linear, small", nil, 1, "300m", "110Mi", reasonRaisedToMinAllowed, "cpu estimate 110m raised to minAllowed 300m"},
		{"linear, within", nil, 30, "400m", "400Mi", reasonWithinBounds, "Every estimate is within its minAllowed and maxAllowed"},
		{"linear, big", nil, 100, "500m", "1100Mi", reasonCappedAtMaxAllowed, "cpu estimate 1100m capped at maxAllowed 500m"},
		{"linear, 5000 nodes", nil, 5000, "500m", "50100Mi", reasonCappedAtMaxAllowed, "cpu estimate 50100m capped at maxAllowed 500m"},
		// Exponential from 16: 1 node is bucket 16 (260m), 30 is 36 (460m),
		// 100 is 121 (1310m).
		{"exponential, small", withExponential(16), 1, "300m", "260Mi", reasonRaisedToMinAllowed, "cpu estimate 260m raised to minAllowed 300m"},
		{"exponential, within", withExponential(16), 30, "460m", "460Mi", reasonWithinBounds, "Every estimate"},
		{"exponential, big", withExponential(16), 100, "500m", "1310Mi", reasonCappedAtMaxAllowed, "cpu estimate 1310m capped at maxAllowed 500m"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opts := []option{withBounds(corev1.ResourceCPU, "300m", "500m")}
			if tc.opt != nil {
				opts = append(opts, tc.opt)
			}
			h := newHarness(t, addonResizer("ar", opts...), deployment(addonName, resources("cpu=1m", "memory=1Mi")))
			h.setNodes(tc.nodes)
			h.syncAt(t0, "ar")
			got := h.deploymentResources(addonName)
			mustQuantity(t, got.Requests, corev1.ResourceCPU, tc.cpu)
			mustQuantity(t, got.Limits, corev1.ResourceCPU, tc.cpu)
			mustQuantity(t, got.Requests, corev1.ResourceMemory, tc.mem)
			mustQuantity(t, h.get("ar").Status.Recommendation.Requests, corev1.ResourceCPU, tc.cpu)
			c := h.condition("ar", scaleplanev1alpha1.ConditionBounded)
			if c == nil || c.Reason != tc.reason || !strings.HasPrefix(c.Message, tc.message) {
				t.Errorf("Bounded %+v; want %s %q", c, tc.reason, tc.message)
			}
			if want := metav1.ConditionTrue; tc.reason == reasonWithinBounds && c != nil && c.Status != metav1.ConditionFalse || tc.reason != reasonWithinBounds && c != nil && c.Status != want {
				t.Errorf("Bounded status %s", c.Status)
			}
			// A bound is the user's choice: no Warning, UpToDate as ever.
			h.expectEvents("Normal Resized")
			h.expectCondition("ar", scaleplanev1alpha1.ConditionUpToDate, metav1.ConditionTrue, reasonResized)
		})
	}
}

// TestBoundsBeforeTheThreshold: the threshold compares the container with
// the bounded estimate, so a cluster that grows past maxAllowed writes
// nothing more, and one that shrinks below minAllowed nothing either.
func TestBoundsBeforeTheThreshold(t *testing.T) {
	h := newHarness(t, addonResizer("ar", withBounds(corev1.ResourceCPU, "300m", "500m"), withBounds(corev1.ResourceMemory, "200Mi", "1Gi")),
		deployment(addonName, resources("cpu=1m", "memory=1Mi")))
	at := t0
	for i, nodes := range []int{100, 200, 5000, 150, 1, 0, 2} {
		h.setNodes(nodes)
		at = at.Add(time.Minute)
		h.syncAt(at, "ar")
		if target, _ := h.writes(); (i == 0 || i == 4) != (target > 0) {
			t.Errorf("%d nodes: %d target writes", nodes, target)
		}
		h.kube.ClearActions()
	}
	got := h.deploymentResources(addonName)
	mustQuantity(t, got.Requests, corev1.ResourceCPU, "300m")
	mustQuantity(t, got.Requests, corev1.ResourceMemory, "200Mi")
	h.expectCondition("ar", scaleplanev1alpha1.ConditionBounded, metav1.ConditionTrue, reasonRaisedToMinAllowed)
	h.setNodes(5000)
	h.syncAt(at.Add(time.Hour), "ar")
	c := h.condition("ar", scaleplanev1alpha1.ConditionBounded)
	if c == nil || c.Reason != reasonCappedAtMaxAllowed || c.Message != "cpu estimate 50100m capped at maxAllowed 500m, memory estimate 50100Mi capped at maxAllowed 1Gi" {
		t.Errorf("Bounded %+v", c)
	}
}

// TestNoBoundsNoCondition: an AddonResizer without bounds has no Bounded
// condition, so its status is as before bounds existed; bounds removed, the
// condition goes.
func TestNoBoundsNoCondition(t *testing.T) {
	h := newHarness(t, addonResizer("ar", withBounds(corev1.ResourceCPU, "1", "")), deployment(addonName, resources("cpu=1m")))
	h.setNodes(1)
	h.syncAt(t0, "ar")
	h.expectCondition("ar", scaleplanev1alpha1.ConditionBounded, metav1.ConditionTrue, reasonRaisedToMinAllowed)
	ar := h.get("ar")
	ar.Spec.Resources[0].MinAllowed = nil
	ar.Generation++
	_, err := h.client.ScaleplaneV1alpha1().AddonResizers(ns).Update(h.ctx, ar, metav1.UpdateOptions{})
	h.check(err)
	h.refresh()
	h.syncAt(t0.Add(time.Minute), "ar")
	if c := h.condition("ar", scaleplanev1alpha1.ConditionBounded); c != nil {
		t.Errorf("Bounded %+v without bounds", c)
	}
}

// TestBoundsPerMemberOnKarmada: on Karmada each member is bounded on its
// own count, and the condition names the members a bound holds.
func TestBoundsPerMemberOnKarmada(t *testing.T) {
	k := newKarmadaHarness(t)
	k.setNodes(0)
	k.createAR(addonResizer("ar", withSetLimits(false), cpuOnly, withBounds(corev1.ResourceCPU, "150m", "400m")))
	k.setClusters(member("small", 3, 3, metav1.ConditionTrue), member("mid", 20, 20, metav1.ConditionTrue), member("big", 50, 50, metav1.ConditionTrue))
	k.setPlacement("small", "mid", "big")
	k.sync(t0)
	if got := ruleValues(k.policy()); got != `big:cpu="400m" mid:cpu="300m" small:cpu="150m"` {
		t.Errorf("rules: %s", got)
	}
	for name, want := range map[string]string{"small": "150m", "mid": "300m", "big": "400m"} {
		m := k.memberState(name)
		if m.Recommendation == nil {
			t.Fatalf("%s: no recommendation", name)
		}
		mustQuantity(t, m.Recommendation.Requests, corev1.ResourceCPU, want)
	}
	if m := k.memberState("big"); !strings.Contains(m.Message, "cpu estimate 600m capped at maxAllowed 400m") {
		t.Errorf("big: %q", m.Message)
	}
	c := k.condition("ar", scaleplanev1alpha1.ConditionBounded)
	if c == nil || c.Reason != reasonMinAndMaxAllowed || c.Message != "big: cpu estimate 600m capped at maxAllowed 400m; small: cpu estimate 130m raised to minAllowed 150m" {
		t.Errorf("Bounded %+v", c)
	}
	k.expectCondition("ar", scaleplanev1alpha1.ConditionUpToDate, metav1.ConditionTrue, reasonAllClustersSized)
}

// TestKarmadaUpdateModeOff: on Karmada, Off recommends per member and
// writes no OverridePolicy; the members' recommendations follow their
// counts. One switched from Rollout keeps its policy holding the sizes it
// held (deleting it would resize every member to the template), fitted to
// the template, and writes nothing more while nothing but counts change.
func TestKarmadaUpdateModeOff(t *testing.T) {
	k := newKarmadaHarness(t)
	k.setNodes(0)
	k.createAR(addonResizer("ar", withSetLimits(false), cpuOnly, withThreshold(5), withUpdateMode(scaleplanev1alpha1.UpdateModeOff)))
	k.setPlacement("a", "b")
	at := t0
	for _, step := range []struct{ a, b int32 }{{3, 50}, {10, 50}, {10, 2}} {
		k.setClusters(member("a", step.a, step.a, metav1.ConditionTrue), member("b", step.b, step.b, metav1.ConditionTrue))
		at = at.Add(time.Minute)
		k.sync(at)
		for name, nodes := range map[string]int32{"a": step.a, "b": step.b} {
			m := k.memberState(name)
			if m.State != scaleplanev1alpha1.MemberRecommended || m.Resources != nil || m.Recommendation == nil || *m.Nodes != nodes {
				t.Fatalf("%s: %+v", name, m)
			}
			mustQuantity(t, m.Recommendation.Requests, corev1.ResourceCPU, fmt.Sprintf("%dm", 100+10*nodes))
		}
	}
	if n := k.policyWrites(); n != 0 || k.policy() != nil {
		t.Errorf("Off wrote the OverridePolicy %d times", n)
	}
	if n := k.templateWrites(); n != 0 {
		t.Errorf("Off wrote the template %d times", n)
	}
	c := k.condition("ar", scaleplanev1alpha1.ConditionUpToDate)
	if c == nil || c.Status != metav1.ConditionFalse || c.Reason != reasonRecommendationOnly || !strings.Contains(c.Message, "it would change a, b") {
		t.Errorf("UpToDate %+v", c)
	}
	if m := k.memberState("a"); !strings.Contains(m.Message, "cpu request 100m -> 200m") {
		t.Errorf("a: %q", m.Message)
	}

	// Rollout sizes them, then Off again: the policy stays as it was.
	k.editAR("ar", func(ar *scaleplanev1alpha1.AddonResizer) { ar.Spec.UpdateMode = scaleplanev1alpha1.UpdateModeRollout })
	k.sync(at.Add(time.Minute))
	if got := ruleValues(k.policy()); got != `a:cpu="200m" b:cpu="120m"` {
		t.Fatalf("rules under Rollout: %s", got)
	}
	k.editAR("ar", func(ar *scaleplanev1alpha1.AddonResizer) { ar.Spec.UpdateMode = scaleplanev1alpha1.UpdateModeOff })
	writes := k.policyWrites()
	k.setClusters(member("a", 40, 40, metav1.ConditionTrue), member("b", 2, 2, metav1.ConditionTrue))
	k.sync(at.Add(2 * time.Minute))
	if got := ruleValues(k.policy()); got != `a:cpu="200m" b:cpu="120m"` || k.policyWrites() != writes {
		t.Errorf("Off changed the policy it had: %s, %d writes", got, k.policyWrites()-writes)
	}
	a := k.memberState("a")
	mustQuantity(t, a.Resources.Requests, corev1.ResourceCPU, "200m")
	mustQuantity(t, a.Recommendation.Requests, corev1.ResourceCPU, "500m")
	if c := k.condition("ar", scaleplanev1alpha1.ConditionUpToDate); c == nil || !strings.Contains(c.Message, "OverridePolicy ar-resizer, from before updateMode Off, keeps holding the sizes it held") {
		t.Errorf("UpToDate %+v", c)
	}
	if st := k.get("ar").Status; *st.SizedClusters != 1 || *st.MemberClusters != 2 {
		t.Errorf("sized %d of %d; want b only", *st.SizedClusters, *st.MemberClusters)
	}
	// The template's limit drops below a's held request: the policy is
	// fitted (Karmada would render a request above its limit).
	k.setTemplateResources(resources("cpu=100m", "limit:cpu=150m"))
	k.sync(at.Add(3 * time.Minute))
	if got := ruleValues(k.policy()); got != `a:cpu="150m" b:cpu="120m"` {
		t.Errorf("rules after the limit dropped: %s", got)
	}
}
