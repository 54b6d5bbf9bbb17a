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
	"errors"
	"testing"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"

	lwsv1 "github.com/scaleplane/scaleplane/pkg/apis/leaderworkerset/v1"
)

func TestCreate(t *testing.T) {
	behavior := &autoscalingv2.HorizontalPodAutoscalerBehavior{
		ScaleDown: &autoscalingv2.HPAScalingRules{StabilizationWindowSeconds: ptr.To[int32](60)},
	}
	for _, tc := range []struct {
		name     string
		policy   *lwsv1.ScalePolicy
		wantMin  int32
		behavior *autoscalingv2.HorizontalPodAutoscalerBehavior
	}{
		{name: "minReplicas set", policy: policy(ptr.To[int32](3), 10, cpuMetric(70), podsMetric("qps", "500m")), wantMin: 3},
		{name: "minReplicas unset defaults to 1", policy: policy(nil, 4, cpuMetric(70)), wantMin: 1},
		{name: "with behavior", policy: func() *lwsv1.ScalePolicy {
			p := policy(nil, 4, cpuMetric(70))
			p.Behavior = behavior.DeepCopy()
			return p
		}(), wantMin: 1, behavior: behavior},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, lws("web", tc.policy))
			creates := counterValue(t, "hpa_generator_writes_total", "verb", verbCreate)
			h.sync("web")
			h.expectWrites("create")
			if got := counterValue(t, "hpa_generator_writes_total", "verb", verbCreate) - creates; got != 1 {
				t.Errorf("writes_total{verb=create} grew by %v, want 1", got)
			}
			hpa := h.getHPA("web")
			if hpa.Namespace != ns {
				t.Errorf("namespace = %q", hpa.Namespace)
			}
			want := metav1.OwnerReference{
				APIVersion: "leaderworkerset.x-k8s.io/v1", Kind: "LeaderWorkerSet", Name: "web", UID: "uid-web",
				Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true),
			}
			if len(hpa.OwnerReferences) != 1 || !equality.Semantic.DeepEqual(hpa.OwnerReferences[0], want) {
				t.Errorf("ownerReferences = %+v, want [%+v]", hpa.OwnerReferences, want)
			}
			if got := hpa.Labels["app.kubernetes.io/managed-by"]; got != "scaleplane-hpa-generator" {
				t.Errorf("managed-by label = %q", got)
			}
			wantRef := autoscalingv2.CrossVersionObjectReference{APIVersion: "leaderworkerset.x-k8s.io/v1", Kind: "LeaderWorkerSet", Name: "web"}
			if hpa.Spec.ScaleTargetRef != wantRef {
				t.Errorf("scaleTargetRef = %+v, want %+v", hpa.Spec.ScaleTargetRef, wantRef)
			}
			if ptr.Deref(hpa.Spec.MinReplicas, -1) != tc.wantMin || hpa.Spec.MaxReplicas != tc.policy.MaxReplicas {
				t.Errorf("min/max = %v/%d, want %d/%d", ptr.Deref(hpa.Spec.MinReplicas, -1), hpa.Spec.MaxReplicas, tc.wantMin, tc.policy.MaxReplicas)
			}
			if !equality.Semantic.DeepEqual(hpa.Spec.Metrics, tc.policy.Metrics) {
				t.Errorf("metrics = %+v, want %+v", hpa.Spec.Metrics, tc.policy.Metrics)
			}
			if tc.behavior == nil && hpa.Spec.Behavior != nil {
				t.Errorf("behavior = %+v, want none", hpa.Spec.Behavior)
			}
			if tc.behavior != nil && (hpa.Spec.Behavior == nil || ptr.Deref(hpa.Spec.Behavior.ScaleDown.StabilizationWindowSeconds, -1) != 60) {
				t.Errorf("behavior = %+v, want the policy's", hpa.Spec.Behavior)
			}
			h.expectEvent("Normal HPACreated", "web")
		})
	}
}

func TestUpdateOnPolicyChange(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(*lwsv1.ScalePolicy)
		field  string
		check  func(*autoscalingv2.HorizontalPodAutoscalerSpec) bool
	}{
		{name: "minReplicas", field: "minReplicas",
			change: func(p *lwsv1.ScalePolicy) { p.MinReplicas = ptr.To[int32](2) },
			check:  func(s *autoscalingv2.HorizontalPodAutoscalerSpec) bool { return *s.MinReplicas == 2 }},
		{name: "minReplicas unset again", field: "minReplicas",
			change: func(p *lwsv1.ScalePolicy) { p.MinReplicas = nil },
			check:  func(s *autoscalingv2.HorizontalPodAutoscalerSpec) bool { return *s.MinReplicas == 1 }},
		{name: "maxReplicas", field: "maxReplicas",
			change: func(p *lwsv1.ScalePolicy) { p.MaxReplicas = 20 },
			check:  func(s *autoscalingv2.HorizontalPodAutoscalerSpec) bool { return s.MaxReplicas == 20 }},
		{name: "metric target", field: "metrics",
			change: func(p *lwsv1.ScalePolicy) { p.Metrics[0] = cpuMetric(60) },
			check: func(s *autoscalingv2.HorizontalPodAutoscalerSpec) bool {
				return *s.Metrics[0].Resource.Target.AverageUtilization == 60
			}},
		{name: "metric added", field: "metrics",
			change: func(p *lwsv1.ScalePolicy) { p.Metrics = append(p.Metrics, podsMetric("qps", "10")) },
			check:  func(s *autoscalingv2.HorizontalPodAutoscalerSpec) bool { return len(s.Metrics) == 2 }},
		{name: "behavior added", field: "behavior",
			change: func(p *lwsv1.ScalePolicy) {
				p.Behavior = &autoscalingv2.HorizontalPodAutoscalerBehavior{ScaleUp: &autoscalingv2.HPAScalingRules{StabilizationWindowSeconds: ptr.To[int32](30)}}
			},
			check: func(s *autoscalingv2.HorizontalPodAutoscalerSpec) bool {
				return s.Behavior != nil && *s.Behavior.ScaleUp.StabilizationWindowSeconds == 30
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, lws("web", policy(ptr.To[int32](3), 10, cpuMetric(70))))
			h.sync("web")
			h.kube.ClearActions()
			h.events()
			h.updateLWS("web", func(l *lwsv1.LeaderWorkerSet) { tc.change(l.Spec.ScalePolicy) })
			h.sync("web")
			h.expectWrites("update")
			if hpa := h.getHPA("web"); !tc.check(&hpa.Spec) {
				t.Errorf("spec after the update: %+v", hpa.Spec)
			}
			h.expectEvent("Normal HPAUpdated", "web", tc.field)
			h.sync("web")
			h.expectWrites()
		})
	}
}

func TestBehaviorRemovedFromPolicy(t *testing.T) {
	p := policy(nil, 5, cpuMetric(70))
	p.Behavior = &autoscalingv2.HorizontalPodAutoscalerBehavior{ScaleDown: &autoscalingv2.HPAScalingRules{SelectPolicy: ptr.To(autoscalingv2.MinChangePolicySelect)}}
	h := newHarness(t, lws("web", p))
	h.sync("web")
	h.kube.ClearActions()
	h.updateLWS("web", func(l *lwsv1.LeaderWorkerSet) { l.Spec.ScalePolicy.Behavior = nil })
	h.sync("web")
	h.expectWrites("update")
	if b := h.getHPA("web").Spec.Behavior; b != nil {
		t.Errorf("behavior = %+v, want none", b)
	}
}

func TestDriftRepair(t *testing.T) {
	for _, tc := range []struct {
		name  string
		edit  func(*autoscalingv2.HorizontalPodAutoscaler)
		field string
	}{
		{name: "maxReplicas", field: "maxReplicas", edit: func(hpa *autoscalingv2.HorizontalPodAutoscaler) { hpa.Spec.MaxReplicas = 99 }},
		{name: "minReplicas", field: "minReplicas", edit: func(hpa *autoscalingv2.HorizontalPodAutoscaler) { hpa.Spec.MinReplicas = ptr.To[int32](5) }},
		{name: "scaleTargetRef", field: "scaleTargetRef", edit: func(hpa *autoscalingv2.HorizontalPodAutoscaler) {
			hpa.Spec.ScaleTargetRef = autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"}
		}},
		{name: "metrics", field: "metrics", edit: func(hpa *autoscalingv2.HorizontalPodAutoscaler) {
			hpa.Spec.Metrics = []autoscalingv2.MetricSpec{cpuMetric(10)}
		}},
		{name: "behavior added", field: "behavior", edit: func(hpa *autoscalingv2.HorizontalPodAutoscaler) {
			hpa.Spec.Behavior = &autoscalingv2.HorizontalPodAutoscalerBehavior{}
		}},
		{name: "label removed", field: "label", edit: func(hpa *autoscalingv2.HorizontalPodAutoscaler) {
			delete(hpa.Labels, "app.kubernetes.io/managed-by")
		}},
		{name: "label changed", field: "label", edit: func(hpa *autoscalingv2.HorizontalPodAutoscaler) {
			hpa.Labels["app.kubernetes.io/managed-by"] = "someone"
		}},
		{name: "blockOwnerDeletion cleared", field: "ownerReference", edit: func(hpa *autoscalingv2.HorizontalPodAutoscaler) {
			hpa.OwnerReferences[0].BlockOwnerDeletion = nil
		}},
		{name: "controller flag cleared", field: "ownerReference", edit: func(hpa *autoscalingv2.HorizontalPodAutoscaler) {
			hpa.OwnerReferences[0].Controller = ptr.To(false)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, lws("web", policy(ptr.To[int32](3), 10, cpuMetric(70))))
			h.sync("web")
			want := h.getHPA("web")
			status := autoscalingv2.HorizontalPodAutoscalerStatus{CurrentReplicas: 4, DesiredReplicas: 5}
			h.setHPAStatus("web", status)
			h.editHPA("web", func(hpa *autoscalingv2.HorizontalPodAutoscaler) {
				hpa.Labels["team"] = "inference"
				hpa.Annotations = map[string]string{"note": "keep me"}
				hpa.OwnerReferences = append(hpa.OwnerReferences, metav1.OwnerReference{APIVersion: "v1", Kind: "ConfigMap", Name: "extra", UID: "uid-cm"})
			})
			h.sync("web")
			h.expectWrites() // Foreign labels, annotations and owners are not drift.
			h.events()

			h.editHPA("web", tc.edit)
			h.sync("web")
			h.expectWrites("update")
			h.expectEvent("Normal HPAUpdated", tc.field)
			got := h.getHPA("web")
			if !equality.Semantic.DeepEqual(got.Spec, want.Spec) {
				t.Errorf("spec = %+v, want it put back to %+v", got.Spec, want.Spec)
			}
			if got.Labels["app.kubernetes.io/managed-by"] != "scaleplane-hpa-generator" || got.Labels["team"] != "inference" {
				t.Errorf("labels = %v", got.Labels)
			}
			if got.Annotations["note"] != "keep me" {
				t.Errorf("annotations = %v", got.Annotations)
			}
			if len(got.OwnerReferences) != 2 || !equality.Semantic.DeepEqual(got.OwnerReferences[0], want.OwnerReferences[0]) || got.OwnerReferences[1].Name != "extra" {
				t.Errorf("ownerReferences = %+v", got.OwnerReferences)
			}
			if !equality.Semantic.DeepEqual(got.Status, status) {
				t.Errorf("status = %+v, want untouched %+v", got.Status, status)
			}
			h.sync("web")
			h.expectWrites()
		})
	}
}

// A steady state makes no writes: the HPA as the apiserver stores it (JSON
// round trip, defaults) compares equal to what the policy asks for.
func TestSteadyStateMakesNoWrites(t *testing.T) {
	for _, tc := range []struct {
		name     string
		behavior *autoscalingv2.HorizontalPodAutoscalerBehavior
	}{
		{name: "no behavior"},
		{name: "empty behavior", behavior: &autoscalingv2.HorizontalPodAutoscalerBehavior{}},
		{name: "only a scale-down window", behavior: &autoscalingv2.HorizontalPodAutoscalerBehavior{
			ScaleDown: &autoscalingv2.HPAScalingRules{StabilizationWindowSeconds: ptr.To[int32](120)},
		}},
		{name: "scale-up policies, empty scale-down policies", behavior: &autoscalingv2.HorizontalPodAutoscalerBehavior{
			ScaleUp: &autoscalingv2.HPAScalingRules{Policies: []autoscalingv2.HPAScalingPolicy{
				{Type: autoscalingv2.PodsScalingPolicy, Value: 2, PeriodSeconds: 30},
			}},
			ScaleDown: &autoscalingv2.HPAScalingRules{SelectPolicy: ptr.To(autoscalingv2.DisabledPolicySelect), Policies: []autoscalingv2.HPAScalingPolicy{}},
		}},
		{name: "full behavior with tolerance", behavior: &autoscalingv2.HorizontalPodAutoscalerBehavior{
			ScaleUp: &autoscalingv2.HPAScalingRules{
				StabilizationWindowSeconds: ptr.To[int32](0), SelectPolicy: ptr.To(autoscalingv2.MinChangePolicySelect),
				Policies:  []autoscalingv2.HPAScalingPolicy{{Type: autoscalingv2.PercentScalingPolicy, Value: 50, PeriodSeconds: 60}},
				Tolerance: ptr.To(resourceQuantity("0.05")),
			},
			ScaleDown: &autoscalingv2.HPAScalingRules{
				StabilizationWindowSeconds: ptr.To[int32](600), SelectPolicy: ptr.To(autoscalingv2.MaxChangePolicySelect),
				Policies: []autoscalingv2.HPAScalingPolicy{{Type: autoscalingv2.PodsScalingPolicy, Value: 1, PeriodSeconds: 60}},
			},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// "0.5" is stored as "500m": quantities compare by value.
			p := policy(nil, 8, cpuMetric(70), podsMetric("qps", "0.5"))
			p.Behavior = tc.behavior
			h := newHarness(t, lws("web", p))
			h.sync("web")
			h.expectWrites("create")
			for i := 0; i < 3; i++ {
				h.sync("web")
			}
			h.expectWrites()
			h.events()

			// A status write by the HPA controller changes nothing either.
			h.setHPAStatus("web", autoscalingv2.HorizontalPodAutoscalerStatus{CurrentReplicas: 3, DesiredReplicas: 3})
			h.sync("web")
			h.expectWrites()
			h.expectNoEvents()
		})
	}
}

func TestDeleteWhenPolicyGoes(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(*lwsv1.LeaderWorkerSet)
		why    string
	}{
		{name: "scalePolicy removed", change: func(l *lwsv1.LeaderWorkerSet) { l.Spec.ScalePolicy = nil }, why: "removed"},
		{name: "metrics emptied", change: func(l *lwsv1.LeaderWorkerSet) { l.Spec.ScalePolicy.Metrics = nil }, why: "no metrics"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, lws("web", policy(nil, 10, cpuMetric(70))))
			h.sync("web")
			uid := h.getHPA("web").UID
			h.kube.ClearActions()
			h.events()

			h.updateLWS("web", tc.change)
			h.sync("web")
			writes := h.writes()
			if len(writes) != 1 || writes[0].GetVerb() != "delete" {
				t.Fatalf("writes = %v, want one delete", writes)
			}
			opts := writes[0].(clienttesting.DeleteAction).GetDeleteOptions()
			if opts.Preconditions == nil || opts.Preconditions.UID == nil || *opts.Preconditions.UID != uid {
				t.Errorf("delete preconditions = %+v, want UID %s", opts.Preconditions, uid)
			}
			if h.hpaExists("web") {
				t.Error("HPA still exists")
			}
			h.expectEvent("Normal HPADeleted", "web", tc.why)
			h.kube.ClearActions()
			h.sync("web")
			h.expectWrites()
		})
	}
}

// The delete's UID precondition fails when the HPA in the cache is not the
// one stored: the sync retries instead of deleting the newer one.
func TestDeleteOfReplacedHPARetries(t *testing.T) {
	h := newHarness(t, lws("web", policy(nil, 10, cpuMetric(70))))
	h.sync("web")
	stale := h.getHPA("web")
	stale.UID = "uid-of-an-older-one"
	if err := h.hpaIndexer.Update(stale); err != nil {
		t.Fatal(err)
	}
	h.updateLWS("web", func(l *lwsv1.LeaderWorkerSet) { l.Spec.ScalePolicy = nil })
	if err := h.hpaIndexer.Update(stale); err != nil {
		t.Fatal(err)
	}
	err := h.trySync("web")
	if !apierrors.IsConflict(err) {
		t.Errorf("sync error = %v, want a conflict to retry", err)
	}
	if !h.hpaExists("web") {
		t.Error("the stored HPA was deleted")
	}
}

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
	h.expectEvent("Warning HPATargetConflict", "custom", "fights with web")
	if h.getHPA("custom").Spec.MaxReplicas != 7 {
		t.Error("the other HPA was changed")
	}
}

func TestLeaderWorkerSetGone(t *testing.T) {
	hpa := foreignHPA("web", lwsOwner("web", "uid-web"))
	h := newHarness(t, hpa)
	if err := h.trySync("web"); err != nil {
		t.Fatalf("sync of a missing LeaderWorkerSet: %v", err)
	}
	h.expectWrites()
	h.expectNoEvents()

	// Being deleted: nothing either.
	l := lws("web", policy(nil, 10, cpuMetric(70)))
	l.DeletionTimestamp = &metav1.Time{}
	l.Finalizers = []string{"foregroundDeletion"}
	h = newHarness(t, l)
	h.sync("web")
	h.expectWrites()
}

// An invalid HPA is reported and not retried: only a policy change can fix
// it.
func TestRejectedCreate(t *testing.T) {
	h := newHarness(t, lws("web", policy(nil, 10, cpuMetric(70))))
	h.server.createErr = apierrors.NewInvalid(schema.GroupKind{Group: "autoscaling", Kind: "HorizontalPodAutoscaler"}, "web",
		field.ErrorList{field.Invalid(field.NewPath("spec", "metrics").Index(0).Child("resource", "target", "averageUtilization"), 0, "must be greater than 0")})
	if err := h.trySync("web"); err != nil {
		t.Errorf("sync = %v, want nil: retrying cannot help", err)
	}
	h.expectEvent("Warning HPARejected", "web", string(metav1.StatusReasonInvalid), "must be greater than 0", "spec.scalePolicy")
}

// A Forbidden answer is not final: permissions get granted (update on
// leaderworkersets/finalizers, which OwnerReferencesPermissionEnforcement
// asks for blockOwnerDeletion) and quotas freed without any change the
// generator would see. It is reported and retried with backoff — issue 18,
// item 3.
func TestForbiddenWriteIsRetried(t *testing.T) {
	ownerRefDenied := apierrors.NewForbidden(hpaResource.GroupResource(), "web",
		errors.New(`cannot set blockOwnerDeletion if an ownerReference refers to a resource you can't set finalizers on: , <nil>`))
	for _, tc := range []struct {
		name  string
		setup func(h *harness, err error)
		verb  string
	}{
		{name: "create", verb: "create", setup: func(h *harness, err error) { h.server.createErr = err }},
		{name: "update", verb: "update", setup: func(h *harness, err error) {
			h.sync("web")
			h.updateLWS("web", func(l *lwsv1.LeaderWorkerSet) { l.Spec.ScalePolicy.MaxReplicas = 12 })
			h.server.updateErr = err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, lws("web", policy(nil, 10, cpuMetric(70))))
			tc.setup(h, ownerRefDenied)
			h.events()
			err := h.trySync("web")
			if !apierrors.IsForbidden(err) {
				t.Errorf("sync = %v, want the Forbidden error, to retry with backoff", err)
			}
			h.expectEvent("Warning HPARejected", "web", tc.verb, "Forbidden", "leaderworkersets/finalizers", "retrying")

			// Granted meanwhile: the retry goes through.
			h.server.createErr, h.server.updateErr = nil, nil
			h.refresh()
			h.sync("web")
			if got := h.getHPA("web"); got.Spec.MaxReplicas != h.getLWS("web").Spec.ScalePolicy.MaxReplicas {
				t.Errorf("after the retry maxReplicas = %d", got.Spec.MaxReplicas)
			}
		})
	}

	// The work loop backs the key off instead of forgetting it.
	h := newHarness(t, lws("web", policy(nil, 10, cpuMetric(70))))
	h.server.createErr = ownerRefDenied
	key := keys("web")[0]
	h.c.queue.Add(key)
	h.c.processNextWorkItem(h.ctx)
	if got := h.c.queue.NumRequeues(key); got != 1 {
		t.Errorf("requeues after a Forbidden create = %d, want 1", got)
	}
}

// AlreadyExists means the cache is behind: retry.
func TestCreateAlreadyExistsRetries(t *testing.T) {
	h := newHarness(t, lws("web", policy(nil, 10, cpuMetric(70))))
	h.server.createErr = apierrors.NewAlreadyExists(hpaResource.GroupResource(), "web")
	if err := h.trySync("web"); !apierrors.IsAlreadyExists(err) {
		t.Errorf("sync = %v, want an AlreadyExists error to retry", err)
	}
	h.expectNoEvents()
}

// An update from a stale cache conflicts and is retried; it never overwrites
// the newer object.
func TestUpdateFromStaleCacheConflicts(t *testing.T) {
	h := newHarness(t, lws("web", policy(nil, 10, cpuMetric(70))))
	h.sync("web")
	stale := h.getHPA("web")
	h.editHPA("web", func(hpa *autoscalingv2.HorizontalPodAutoscaler) { hpa.Annotations = map[string]string{"new": "yes"} })
	if err := h.hpaIndexer.Update(stale); err != nil {
		t.Fatal(err)
	}
	h.updateLWS("web", func(l *lwsv1.LeaderWorkerSet) { l.Spec.ScalePolicy.MaxReplicas = 11 })
	if err := h.hpaIndexer.Update(stale); err != nil {
		t.Fatal(err)
	}
	if err := h.trySync("web"); !apierrors.IsConflict(err) {
		t.Fatalf("sync = %v, want a conflict", err)
	}
	h.refresh()
	h.sync("web")
	got := h.getHPA("web")
	if got.Spec.MaxReplicas != 11 || got.Annotations["new"] != "yes" {
		t.Errorf("after the retry: maxReplicas %d, annotations %v", got.Spec.MaxReplicas, got.Annotations)
	}
}

func TestSyncRecoversFromPanics(t *testing.T) {
	h := newHarness(t)
	h.c.lwsLister = nil
	if err := h.trySync("web"); err == nil {
		t.Error("a panicking sync returned nil")
	}
}

// The work loop: a synced key is forgotten, a failed one is retried with
// backoff, and a shut-down queue ends the worker.
func TestProcessNextWorkItem(t *testing.T) {
	h := newHarness(t, lws("web", policy(nil, 10, cpuMetric(70))), lws("api", policy(nil, 10, cpuMetric(70))))
	web := keys("web")[0]
	h.c.queue.Add(web)
	if !h.c.processNextWorkItem(h.ctx) {
		t.Fatal("worker stopped")
	}
	if !h.hpaExists("web") || h.c.queue.NumRequeues(web) != 0 {
		t.Errorf("after a good sync: HPA exists %v, requeues %d", h.hpaExists("web"), h.c.queue.NumRequeues(web))
	}

	api := keys("api")[0]
	h.server.createErr = apierrors.NewAlreadyExists(hpaResource.GroupResource(), "api")
	h.c.queue.Add(api)
	h.c.processNextWorkItem(h.ctx)
	if got := h.c.queue.NumRequeues(api); got != 1 {
		t.Errorf("requeues after a failed sync = %d, want 1", got)
	}

	h.c.queue.ShutDown()
	for h.c.processNextWorkItem(h.ctx) {
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

// An API server that drops behavior's tolerance (HPAConfigurableTolerance
// off) stores the HPA without it: the generator compares with what the
// server keeps, so it writes once, not on every sync, and says once that the
// field is not honoured — issue 18, item 5.
func TestToleranceDroppedByTheServer(t *testing.T) {
	p := policy(nil, 8, cpuMetric(70))
	p.Behavior = &autoscalingv2.HorizontalPodAutoscalerBehavior{
		ScaleUp: &autoscalingv2.HPAScalingRules{Tolerance: ptr.To(resourceQuantity("0.05"))},
	}
	for _, tc := range []struct {
		name  string
		setup func(h *harness)
	}{
		{name: "learned at create", setup: func(h *harness) {}},
		{name: "learned at the first update after a restart", setup: func(h *harness) {
			// An HPA stored by that server before this process started.
			hpa := stored(desiredHPA(h.getLWS("web")))
			hpa.Spec.Behavior.ScaleUp.Tolerance = nil
			hpa.UID, hpa.ResourceVersion = "uid-hpa", "5"
			recordManager(hpa, fieldManager)
			if err := h.kube.Tracker().Add(hpa); err != nil {
				t.Fatal(err)
			}
			h.refresh()
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, lws("web", p.DeepCopy()), lws("api", p.DeepCopy()))
			h.server.dropTolerance = true
			tc.setup(h)
			h.sync("web")
			h.kube.ClearActions()
			h.expectEvent("Warning HPAToleranceIgnored", "tolerance")
			for range 3 {
				h.sync("web")
			}
			h.expectWrites()
			h.expectNoEvents()

			// Another LeaderWorkerSet with a tolerance is told too, once.
			h.sync("api")
			h.kube.ClearActions()
			h.expectEvent("Warning HPAToleranceIgnored")
			h.sync("api")
			h.expectWrites()
			h.expectNoEvents()
		})
	}
}
