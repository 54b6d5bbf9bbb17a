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

package hpagenerator

import (
	"testing"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"

	lwsv1 "github.com/scaleplane/scaleplane/pkg/apis/leaderworkerset/v1"
)

func TestForeignHPAOfTheSameName(t *testing.T) {
	for _, tc := range []struct {
		name       string
		hpa        *autoscalingv2.HorizontalPodAutoscaler
		controller string
	}{
		{name: "no owner", hpa: foreignHPA("web"), controller: "no controller"},
		{name: "owned by a Deployment", hpa: foreignHPA("web", deploymentOwner("web")), controller: "controller Deployment web"},
		{name: "owned by another LeaderWorkerSet", hpa: foreignHPA("web", lwsOwner("other", "uid-other")), controller: "controller LeaderWorkerSet other"},
		{name: "same LeaderWorkerSet target, no owner", hpa: targeting(foreignHPA("web"), "web"), controller: "no controller"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, lws("web", policy(nil, 10, cpuMetric(70))), tc.hpa)
			conflictsBefore := counterValue(t, "hpa_generator_conflicts_total", "kind", conflictName)
			h.sync("web")
			h.expectWrites()
			h.expectEvent("Warning HPAConflict", "web", tc.controller)
			if got := counterValue(t, "hpa_generator_conflicts_total", "kind", conflictName) - conflictsBefore; got != 1 {
				t.Errorf("conflicts_total{kind=name} grew by %v, want 1", got)
			}
			if got := h.getHPA("web"); !equality.Semantic.DeepEqual(got, tc.hpa) {
				t.Errorf("foreign HPA changed: %+v", got)
			}

			// Without a policy it is none of our business: no delete, no
			// event.
			h.updateLWS("web", func(l *lwsv1.LeaderWorkerSet) { l.Spec.ScalePolicy = nil })
			h.sync("web")
			h.expectWrites()
			h.expectNoEvents()
			if !h.hpaExists("web") {
				t.Error("foreign HPA deleted")
			}
		})
	}
}

// An HPA left by an earlier LeaderWorkerSet of the same name is the garbage
// collector's: no write, no warning.
func TestHPAOfAnEarlierLeaderWorkerSet(t *testing.T) {
	h := newHarness(t, lws("web", policy(nil, 10, cpuMetric(70))), foreignHPA("web", lwsOwner("web", "uid-web-before")))
	h.sync("web")
	h.expectWrites()
	h.expectNoEvents()
}

func TestFreedNameIsTakenOver(t *testing.T) {
	foreign := foreignHPA("web")
	h := newHarness(t, lws("web", policy(nil, 10, cpuMetric(70))), foreign)
	h.sync("web")
	h.expectEvent("Warning HPAConflict")
	h.expectWrites()

	if err := h.kube.AutoscalingV2().HorizontalPodAutoscalers(ns).Delete(h.ctx, "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	h.refresh()
	h.kube.ClearActions()
	h.c.onHPADelete(h.ctx, foreign)
	keys := h.queued()
	if len(keys) != 1 || keys[0].String() != "default/web" {
		t.Fatalf("queued %v, want default/web", keys)
	}
	h.sync("web")
	h.expectWrites("create")
	if !isOurs(h.getHPA("web"), h.getLWS("web")) {
		t.Error("the new HPA is not controlled by the LeaderWorkerSet")
	}
}

func TestAnotherHPATargetsTheLeaderWorkerSet(t *testing.T) {
	other := targeting(foreignHPA("custom"), "web")
	h := newHarness(t, lws("web", policy(nil, 10, cpuMetric(70))), other)
	before := counterValue(t, "hpa_generator_conflicts_total", "kind", conflictTarget)
	h.sync("web")
	h.expectWrites()
	h.expectEvent("Warning HPATargetConflict", "custom", "not creating")
	if h.hpaExists("web") {
		t.Error("created an HPA next to one that already scales the LeaderWorkerSet")
	}
	if got := counterValue(t, "hpa_generator_conflicts_total", "kind", conflictTarget) - before; got != 1 {
		t.Errorf("conflicts_total{kind=target} grew by %v, want 1", got)
	}

	// HPAs on other targets do not count, nor does an apiVersion of another
	// group.
	h = newHarness(t, lws("web", policy(nil, 10, cpuMetric(70))), foreignHPA("custom"),
		func() *autoscalingv2.HorizontalPodAutoscaler {
			o := targeting(foreignHPA("elsewhere"), "web")
			o.Spec.ScaleTargetRef.APIVersion = "example.com/v1"
			return o
		}())
	h.sync("web")
	h.expectWrites("create")
}

// When ours exists and someone adds another HPA on the LeaderWorkerSet, ours
// keeps being maintained and the other is reported.
func TestAnotherHPATargetsTheLeaderWorkerSetNextToOurs(t *testing.T) {
	h := newHarness(t, lws("web", policy(nil, 10, cpuMetric(70))))
	h.sync("web")
	h.events()
	if _, err := h.kube.AutoscalingV2().HorizontalPodAutoscalers(ns).Create(h.ctx, targeting(foreignHPA("custom"), "web"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	h.refresh()
	h.kube.ClearActions()
	h.updateLWS("web", func(l *lwsv1.LeaderWorkerSet) { l.Spec.ScalePolicy.MaxReplicas = 12 })
	h.sync("web")
	h.expectWrites("update")
	h.expectEvent("Warning HPATargetConflict", "HorizontalPodAutoscaler custom", "fights with HorizontalPodAutoscaler web")
	if h.getHPA("custom").Spec.MaxReplicas != 7 {
		t.Error("the other HPA was changed")
	}
}

// An HPA with a plain (not controller) owner reference to the
// LeaderWorkerSet, as controllerutil.SetOwnerReference writes it, belongs to
// whoever wrote it: it is neither deleted (no policy) nor overwritten (a
// policy) — issue 18, item 1.
func TestOwnedButNotControlledHPAIsNotOurs(t *testing.T) {
	plainOwner := lwsOwner("web", "uid-web")
	plainOwner.Controller = nil
	plainOwner.BlockOwnerDeletion = nil
	userHPA := func() *autoscalingv2.HorizontalPodAutoscaler {
		hpa := targeting(foreignHPA("web", plainOwner), "web")
		hpa.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "manager", Operation: metav1.ManagedFieldsOperationUpdate}}
		return hpa
	}

	t.Run("no policy: not deleted", func(t *testing.T) {
		h := newHarness(t, lws("web", nil), userHPA())
		h.sync("web")
		h.expectWrites()
		h.expectNoEvents()
		if !h.hpaExists("web") {
			t.Error("the user's HPA was deleted")
		}
	})
	t.Run("a policy: not overwritten", func(t *testing.T) {
		h := newHarness(t, lws("web", policy(nil, 10, cpuMetric(70))), userHPA())
		h.sync("web")
		h.expectWrites()
		h.expectEvent("Warning HPAConflict", "web", "not controlled")
		if got := h.getHPA("web"); !equality.Semantic.DeepEqual(got, userHPA()) {
			t.Errorf("the user's HPA changed: %+v", got)
		}
	})
}

// A user releases the HPA (removes its owner reference) and then removes the
// policy, while the HPA cache still shows the HPA as ours: the delete is
// conditional on the resourceVersion the decision was made from, so it
// fails, and the retry, from the caught-up cache, leaves the released HPA
// alone — issue 18, item 2.
func TestDeleteFromStaleCacheKeepsReleasedHPA(t *testing.T) {
	h := newHarness(t, lws("web", policy(nil, 10, cpuMetric(70))))
	h.sync("web")
	ours := h.getHPA("web")
	h.editHPA("web", func(hpa *autoscalingv2.HorizontalPodAutoscaler) { hpa.OwnerReferences = nil })
	h.updateLWS("web", func(l *lwsv1.LeaderWorkerSet) { l.Spec.ScalePolicy = nil })
	if err := h.hpaIndexer.Update(ours); err != nil { // The HPA cache lags.
		t.Fatal(err)
	}
	h.kube.ClearActions()
	err := h.trySync("web")
	if !apierrors.IsConflict(err) {
		t.Errorf("sync from the stale cache = %v, want a conflict to decide again", err)
	}
	writes := h.writes()
	if len(writes) != 1 {
		t.Fatalf("writes = %v, want one conditional delete", writes)
	}
	if pre := writes[0].(clienttesting.DeleteAction).GetDeleteOptions().Preconditions; pre == nil || ptr.Deref(pre.ResourceVersion, "") != ours.ResourceVersion {
		t.Errorf("delete preconditions = %+v, want resourceVersion %s", pre, ours.ResourceVersion)
	}
	if !h.hpaExists("web") {
		t.Fatal("the released HPA was deleted")
	}
	h.events()
	h.refresh()
	h.kube.ClearActions()
	h.sync("web")
	h.expectWrites()
	if !h.hpaExists("web") {
		t.Error("the released HPA was deleted after the cache caught up")
	}
}

// The HPA web belongs to another LeaderWorkerSet and blocks LeaderWorkerSet
// web; when it is deleted (as web's conflict event says to), web is
// enqueued and takes the name at once, not at the next resync — issue 18,
// item 4.
func TestNameFreedByAnotherLeaderWorkerSetsHPAIsTakenOver(t *testing.T) {
	other := targeting(foreignHPA("web", lwsOwner("other", "uid-other")), "other")
	h := newHarness(t, lws("web", policy(nil, 10, cpuMetric(70))), lws("other", nil), other)
	h.sync("web")
	h.expectEvent("Warning HPAConflict", "controller LeaderWorkerSet other")
	h.expectWrites()

	if err := h.kube.AutoscalingV2().HorizontalPodAutoscalers(ns).Delete(h.ctx, "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	h.refresh()
	h.kube.ClearActions()
	h.c.onHPADelete(h.ctx, other)
	queued := h.queued()
	if !equalKeys(queued, keys("other", "web")) {
		t.Fatalf("queued %v, want default/other and default/web", queued)
	}
	for _, key := range queued {
		h.sync(key.Name)
	}
	h.expectWrites("create")
	if !isOurs(h.getHPA("web"), h.getLWS("web")) {
		t.Error("the new HPA is not controlled by LeaderWorkerSet web")
	}
}
