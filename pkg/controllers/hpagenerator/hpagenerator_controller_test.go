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
			creates := writeCount(t, verbCreate, OutputHorizontalPodAutoscaler)
			h.sync("web")
			h.expectWrites("create")
			if got := writeCount(t, verbCreate, OutputHorizontalPodAutoscaler) - creates; got != 1 {
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
