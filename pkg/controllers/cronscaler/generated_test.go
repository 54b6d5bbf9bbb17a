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

package cronscaler

import (
	"strings"
	"testing"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	autoscalingv1alpha1 "github.com/scaleplane/scaleplane/pkg/apis/autoscaling/v1alpha1"
	lwsv1 "github.com/scaleplane/scaleplane/pkg/apis/leaderworkerset/v1"
)

func controlledBy(apiVersion, kind, name string) metav1.OwnerReference {
	return metav1.OwnerReference{APIVersion: apiVersion, Kind: kind, Name: name, UID: types.UID("uid-" + name), Controller: ptr.To(true)}
}

var lwsController = func(name string) metav1.OwnerReference {
	return controlledBy("leaderworkerset.x-k8s.io/v1", "LeaderWorkerSet", name)
}

// generatedAutoscaler is one kind of autoscaler the hpa-generator keeps: a
// FederatedHPA on a Karmada control plane, an HPA elsewhere.
type generatedAutoscaler struct {
	kind   string
	ref    func(name string) autoscalingv2.CrossVersionObjectReference
	object func(name string, owners ...metav1.OwnerReference) runtime.Object
	bounds func(h *harness, name string) (int32, int32)
}

var generatedAutoscalers = []generatedAutoscaler{{
	kind: "FederatedHPA",
	ref: func(name string) autoscalingv2.CrossVersionObjectReference {
		return autoscalingv2.CrossVersionObjectReference{APIVersion: "autoscaling.karmada.io/v1alpha1", Kind: "FederatedHPA", Name: name}
	},
	object: func(name string, owners ...metav1.OwnerReference) runtime.Object {
		return &autoscalingv1alpha1.FederatedHPA{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, OwnerReferences: owners},
			Spec:       autoscalingv1alpha1.FederatedHPASpec{MinReplicas: ptr.To[int32](2), MaxReplicas: 8},
		}
	},
	bounds: func(h *harness, name string) (int32, int32) {
		f, err := h.client.AutoscalingV1alpha1().FederatedHPAs(ns).Get(h.ctx, name, metav1.GetOptions{})
		if err != nil {
			h.t.Fatal(err)
		}
		return ptr.Deref(f.Spec.MinReplicas, 0), f.Spec.MaxReplicas
	},
}, {
	kind: "HorizontalPodAutoscaler",
	ref: func(name string) autoscalingv2.CrossVersionObjectReference {
		return autoscalingv2.CrossVersionObjectReference{APIVersion: "autoscaling/v2", Kind: "HorizontalPodAutoscaler", Name: name}
	},
	object: func(name string, owners ...metav1.OwnerReference) runtime.Object {
		return &autoscalingv2.HorizontalPodAutoscaler{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, OwnerReferences: owners},
			Spec:       autoscalingv2.HorizontalPodAutoscalerSpec{MinReplicas: ptr.To[int32](2), MaxReplicas: 8},
		}
	},
	bounds: func(h *harness, name string) (int32, int32) {
		a, err := h.kube.AutoscalingV2().HorizontalPodAutoscalers(ns).Get(h.ctx, name, metav1.GetOptions{})
		if err != nil {
			h.t.Fatal(err)
		}
		return ptr.Deref(a.Spec.MinReplicas, 0), a.Spec.MaxReplicas
	},
}}

// Issue 35, item 15. On Karmada the hpa-generator keeps a FederatedHPA for a
// LeaderWorkerSet, and Karmada's own webhook denies a bounds-only rule aimed
// at the LeaderWorkerSet ("targetReplicas cannot be nil if you want to scale
// LeaderWorkerSet"): the rule that both webhooks admit is aimed at the
// generated FederatedHPA. Its targetMinReplicas/targetMaxReplicas go where the
// generator takes the bounds from, the LeaderWorkerSet's spec.scalePolicy, and
// the FederatedHPA follows them; the cron-scaler never writes the autoscaler
// itself, which the generator would put back. The same for a generated HPA.
// An autoscaler no LeaderWorkerSet controls gets the rule's bounds.
func TestGeneratedAutoscalerBoundsMoveTheScalePolicy(t *testing.T) {
	for _, a := range generatedAutoscalers {
		t.Run(a.kind, func(t *testing.T) {
			generated := cron("c", boundsRule("peak", "0 8 * * *", 4, 12))
			generated.Spec.ScaleTargetRef = a.ref("vllm")
			plain := cron("d", boundsRule("peak", "0 8 * * *", 3, 10))
			plain.Spec.ScaleTargetRef = a.ref("web")
			minOnly := cron("e", autoscalingv1alpha1.CronFederatedHPARule{Name: "floor", Schedule: "0 9 * * *", TimeZone: ptr.To("UTC"), TargetMinReplicas: ptr.To[int32](5)})
			minOnly.Spec.ScaleTargetRef = a.ref("vllm")
			h := newHarness(t, utc("2024-05-01 07:00:00"), generated, plain, minOnly,
				leaderWorkerSet("vllm", &lwsv1.ScalePolicy{MinReplicas: ptr.To[int32](2), MaxReplicas: 8}),
				a.object("vllm", lwsController("vllm")),
				a.object("web", controlledBy("apps/v1", "Deployment", "web")))
			for _, name := range []string{"c", "d", "e"} {
				h.syncAt(utc("2024-05-01 07:00:00"), name)
				h.syncAt(utc("2024-05-01 08:00:00.100"), name)
			}
			for _, e := range h.events() {
				if strings.Contains(e, "Warning") {
					t.Errorf("unexpected warning %q", e)
				}
			}
			policy := h.lws("vllm").Spec.ScalePolicy
			if ptr.Deref(policy.MinReplicas, 0) != 4 || policy.MaxReplicas != 12 {
				t.Errorf("the LeaderWorkerSet's scalePolicy bounds are %v/%d; want the rule's 4/12", policy.MinReplicas, policy.MaxReplicas)
			}
			if min, max := a.bounds(h, "vllm"); min != 2 || max != 8 {
				t.Errorf("the generated %s was written (%d/%d): the hpa-generator would put its bounds back", a.kind, min, max)
			}
			if e := h.history("c", "peak").SuccessfulExecutions; len(e) != 1 || ptr.Deref(e[0].AppliedMinReplicas, 0) != 4 || ptr.Deref(e[0].AppliedMaxReplicas, 0) != 12 {
				t.Errorf("successful executions %+v; want min 4 and max 12 applied", e)
			}
			if min, max := a.bounds(h, "web"); min != 3 || max != 10 {
				t.Errorf("a %s no LeaderWorkerSet controls did not get the bounds: %d/%d", a.kind, min, max)
			}

			// A rule that sets one bound leaves the other alone.
			h.syncAt(utc("2024-05-01 09:00:00.100"), "e")
			policy = h.lws("vllm").Spec.ScalePolicy
			if ptr.Deref(policy.MinReplicas, 0) != 5 || policy.MaxReplicas != 12 {
				t.Errorf("after the min-only rule the scalePolicy bounds are %v/%d; want 5/12", policy.MinReplicas, policy.MaxReplicas)
			}
		})
	}
}

// The LeaderWorkerSet lost its scalePolicy (the hpa-generator is about to
// delete the autoscaler it kept from it): the firing fails, naming both.
func TestGeneratedAutoscalerWithoutPolicy(t *testing.T) {
	for _, a := range generatedAutoscalers {
		t.Run(a.kind, func(t *testing.T) {
			obj := cron("c", boundsRule("peak", "0 8 * * *", 4, 12))
			obj.Spec.ScaleTargetRef = a.ref("vllm")
			h := newHarness(t, utc("2024-05-01 07:00:00"), obj, leaderWorkerSet("vllm", nil), a.object("vllm", lwsController("vllm")))
			h.syncAt(utc("2024-05-01 07:00:00"), "c")
			h.syncAt(utc("2024-05-01 08:00:00.100"), "c")
			f := h.history("c", "peak").FailedExecutions
			if len(f) != 1 || !strings.Contains(f[0].Message, "LeaderWorkerSet vllm has no spec.scalePolicy") ||
				!strings.Contains(f[0].Message, a.kind+" vllm is generated by the hpa-generator") {
				t.Errorf("failed executions %+v; want the missing scalePolicy and the generated %s named", f, a.kind)
			}
			if min, max := a.bounds(h, "vllm"); min != 2 || max != 8 {
				t.Errorf("the generated %s was written (%d/%d)", a.kind, min, max)
			}
		})
	}
}

// An inherited firing aimed at a generated autoscaler is checked against the
// LeaderWorkerSet's managedFields, where its bounds are written: a change to
// the scalePolicy's bounds by someone else after the slot is kept.
func TestGeneratedAutoscalerInheritedFiringKeepsALaterChange(t *testing.T) {
	obj := cron("c", boundsRule("peak", "0 8 * * *", 4, 12))
	obj.Spec.ScaleTargetRef = generatedAutoscalers[0].ref("vllm")
	lws := leaderWorkerSet("vllm", &lwsv1.ScalePolicy{MinReplicas: ptr.To[int32](6), MaxReplicas: 9})
	changed := metav1.NewTime(utc("2024-05-01 08:00:30"))
	lws.ManagedFields = []metav1.ManagedFieldsEntry{{
		Manager: "kubectl-edit", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "leaderworkerset.x-k8s.io/v1", Time: &changed,
		FieldsType: "FieldsV1", FieldsV1: metav1.NewFieldsV1(`{"f:spec":{"f:scalePolicy":{"f:minReplicas":{},"f:maxReplicas":{}}}}`),
	}}
	h := newHarness(t, utc("2024-05-01 07:00:00"), obj, lws, generatedAutoscalers[0].object("vllm", lwsController("vllm")))
	h.syncAt(utc("2024-05-01 07:00:00"), "c")
	// The process that planned 08:00 is gone; its successor starts after
	// the slot: the firing is inherited.
	h.clock.SetTime(utc("2024-05-01 08:01:00"))
	h.newController()
	h.syncAt(utc("2024-05-01 08:01:00"), "c")
	policy := h.lws("vllm").Spec.ScalePolicy
	if ptr.Deref(policy.MinReplicas, 0) != 6 || policy.MaxReplicas != 9 {
		t.Errorf("scalePolicy bounds %v/%d; the later change 6/9 must be kept", policy.MinReplicas, policy.MaxReplicas)
	}
	if f := h.history("c", "peak").FailedExecutions; len(f) != 1 || !strings.Contains(f[0].Message, "kubectl-edit") {
		t.Errorf("failed executions %+v; want the other manager's change named", f)
	}
}

func (h *harness) lws(name string) *lwsv1.LeaderWorkerSet {
	h.t.Helper()
	l, err := h.client.LeaderworkersetV1().LeaderWorkerSets(ns).Get(h.ctx, name, metav1.GetOptions{})
	if err != nil {
		h.t.Fatal(err)
	}
	return l
}
