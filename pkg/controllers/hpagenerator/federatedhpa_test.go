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

// The tests of the FederatedHPA output: its lifecycle, foreign
// FederatedHPAs, a change of output, refusals by the generator and by the
// server, a mismatched output, the informer it needs, and its events. The
// harness is in federatedhpa_harness_test.go.

import (
	"strings"
	"testing"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	kubeinformers "k8s.io/client-go/informers"
	kubefake "k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2/ktesting"
	"k8s.io/utils/ptr"

	autoscalingv1alpha1 "github.com/scaleplane/scaleplane/pkg/apis/autoscaling/v1alpha1"
	lwsv1 "github.com/scaleplane/scaleplane/pkg/apis/leaderworkerset/v1"
	"github.com/scaleplane/scaleplane/pkg/generated/clientset/versioned/fake"
	"github.com/scaleplane/scaleplane/pkg/generated/informers/externalversions"
	"github.com/scaleplane/scaleplane/pkg/internal/testkit"
)

// The FederatedHPA path has the HPA path's guarantees: created from the
// policy, no writes in a steady state (with karmada-webhook's defaults
// applied to what is stored), updated on a policy change, drift put back
// with foreign labels kept, deleted when the metrics go.
func TestFederatedHPALifecycle(t *testing.T) {
	l := lws("llm", policy(nil, 4, cpuMetric(60)))
	l.Spec.ScalePolicy.Behavior = &autoscalingv2.HorizontalPodAutoscalerBehavior{ScaleDown: &autoscalingv2.HPAScalingRules{StabilizationWindowSeconds: ptr.To[int32](30)}}
	h := newFHPAHarness(t, fhpaOutput(), l)
	karmadaDefaults(h.client)

	h.mustSync("llm")
	h.expectWrites("create federatedhpas")
	f, ok := h.getFHPA("llm")
	if !ok {
		t.Fatal("no FederatedHPA created")
	}
	checkGenerated(t, f, l, 1, 4)
	if h.hpaExists("llm") {
		t.Error("an HPA was created next to the FederatedHPA")
	}
	h.expectEvent("Normal HPACreated", "Created FederatedHPA llm")

	// Steady state: what karmada-webhook filled in is not drift.
	if f.Spec.Behavior.ScaleUp == nil || len(f.Spec.Behavior.ScaleDown.Policies) != 1 {
		t.Fatalf("the defaults were not applied: %+v", f.Spec.Behavior)
	}
	h.mustSync("llm")
	h.mustSync("llm")
	h.expectWrites()

	// A policy change.
	h.updateLWS("llm", func(l *lwsv1.LeaderWorkerSet) { l.Spec.ScalePolicy.MaxReplicas = 6 })
	h.mustSync("llm")
	h.expectWrites("update federatedhpas")
	f, _ = h.getFHPA("llm")
	checkGenerated(t, f, l, 1, 6)
	h.expectEvent("Normal HPAUpdated", "Updated FederatedHPA llm: maxReplicas")

	// Drift: an owned field is put back, a foreign label kept.
	f.Spec.MaxReplicas = 50
	f.Labels["team"] = "inference"
	if _, err := h.client.AutoscalingV1alpha1().FederatedHPAs(ns).Update(h.ctx, f, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	h.refresh()
	h.clearActions()
	h.mustSync("llm")
	h.expectWrites("update federatedhpas")
	f, _ = h.getFHPA("llm")
	checkGenerated(t, f, l, 1, 6)
	if f.Labels["team"] != "inference" {
		t.Errorf("the foreign label was lost: %v", f.Labels)
	}

	// No metrics: the FederatedHPA goes.
	h.updateLWS("llm", func(l *lwsv1.LeaderWorkerSet) { l.Spec.ScalePolicy.Metrics = nil })
	h.mustSync("llm")
	h.expectWrites("delete federatedhpas")
	if _, ok := h.getFHPA("llm"); ok {
		t.Error("the FederatedHPA was not deleted")
	}
	h.expectEvent("Normal HPADeleted", "Deleted FederatedHPA llm: spec.scalePolicy has no metrics")
}

// A FederatedHPA of the LeaderWorkerSet's name that it does not control is
// never written, and an HPA that already scales the LeaderWorkerSet keeps
// the generator from creating a FederatedHPA next to it: both reported.
func TestFederatedHPAForeign(t *testing.T) {
	theirs := &autoscalingv1alpha1.FederatedHPA{
		ObjectMeta: metav1.ObjectMeta{Name: "taken", Namespace: ns, UID: "uid-theirs"},
		Spec: autoscalingv1alpha1.FederatedHPASpec{
			ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"},
			MinReplicas:    ptr.To[int32](1), MaxReplicas: 9,
		},
	}
	hand := targeting(foreignHPA("hand-made"), "second")
	h := newFHPAHarness(t, fhpaOutput(), theirs, hand,
		lws("taken", policy(nil, 4, cpuMetric(60))), lws("second", policy(nil, 4, cpuMetric(60))))

	h.mustSync("taken")
	h.expectWrites()
	h.expectEvent("Warning HPAConflict", "FederatedHPA taken already exists with no controller", "delete that FederatedHPA")

	h.mustSync("second")
	h.expectWrites()
	h.expectEvent("Warning HPATargetConflict", "HorizontalPodAutoscaler hand-made already scales this LeaderWorkerSet", "not creating a FederatedHPA")
	if h.hpaExists("second") {
		t.Error("an HPA was created")
	}
}

// When the output changes, the autoscaler of the other kind that the
// LeaderWorkerSet controls is deleted, with a Warning, and the new kind is
// created; an HPA of the same name that the LeaderWorkerSet does not control
// is left alone.
func TestOutputChangeDeletesTheOtherKind(t *testing.T) {
	t.Run("HPA to FederatedHPA", func(t *testing.T) {
		l := lws("llm", policy(nil, 4, cpuMetric(60)))
		left := foreignHPA("llm", lwsOwner("llm", l.UID))
		h := newFHPAHarness(t, fhpaOutput(), l, left, lws("web", policy(nil, 4, cpuMetric(60))), foreignHPA("web"))
		h.mustSync("llm")
		h.expectWrites("create federatedhpas", "delete horizontalpodautoscalers")
		if h.hpaExists("llm") {
			t.Error("the LeaderWorkerSet's HPA was kept")
		}
		h.expectEvent("Warning HPAOutputChanged", "Deleted HorizontalPodAutoscaler llm", "output is FederatedHPA now")

		h.mustSync("web")
		h.expectWrites("create federatedhpas")
		if !h.hpaExists("web") {
			t.Error("an HPA the LeaderWorkerSet does not control was deleted")
		}
	})
	t.Run("FederatedHPA to HPA", func(t *testing.T) {
		l := lws("llm", policy(nil, 4, cpuMetric(60)))
		left := &autoscalingv1alpha1.FederatedHPA{
			ObjectMeta: metav1.ObjectMeta{Name: "llm", Namespace: ns, UID: "uid-left", ResourceVersion: "1", OwnerReferences: []metav1.OwnerReference{lwsOwner("llm", l.UID)}},
			Spec:       autoscalingv1alpha1.FederatedHPASpec{MaxReplicas: 4},
		}
		h := newFHPAHarness(t, Config{Output: OutputHorizontalPodAutoscaler}, l, left)
		h.mustSync("llm")
		h.expectWrites("delete federatedhpas", "create horizontalpodautoscalers")
		if _, ok := h.getFHPA("llm"); ok {
			t.Error("the LeaderWorkerSet's FederatedHPA was kept")
		}
		h.expectEvent("Warning HPAOutputChanged", "Deleted FederatedHPA llm")
	})
}

// What Karmada's FederatedHPA refuses or cannot serve is refused before
// any write, by the field of spec.scalePolicy, and not retried.
func TestFederatedHPARefusals(t *testing.T) {
	external := autoscalingv2.MetricSpec{Type: autoscalingv2.ExternalMetricSourceType, External: &autoscalingv2.ExternalMetricSource{
		Metric: autoscalingv2.MetricIdentifier{Name: "queue_depth"},
		Target: autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageValue: ptr.To(resourceQuantity("30"))},
	}}
	cases := []struct {
		name   string
		policy *lwsv1.ScalePolicy
		want   string
	}{
		{"External metric", policy(nil, 4, cpuMetric(60), external), `spec.scalePolicy.metrics[1].type: Unsupported value: "External"`},
		{"minReplicas 0", policy(ptr.To[int32](0), 4, cpuMetric(60)), "spec.scalePolicy.minReplicas: Invalid value: 0"},
		{"tolerance", func() *lwsv1.ScalePolicy {
			p := policy(nil, 4, cpuMetric(60))
			p.Behavior = &autoscalingv2.HorizontalPodAutoscalerBehavior{ScaleUp: &autoscalingv2.HPAScalingRules{Tolerance: ptr.To(resourceQuantity("50m"))}}
			return p
		}(), "spec.scalePolicy.behavior.scaleUp.tolerance: Forbidden"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newFHPAHarness(t, fhpaOutput(), lws("llm", tc.policy))
			if err := h.sync("llm"); err != nil {
				t.Errorf("sync returned %v; a refusal is not retried", err)
			}
			h.expectWrites()
			h.expectEvent("Warning HPARejected", tc.want, "cannot be served by a FederatedHPA")
		})
	}
	// The same policies are fine for an HPA (its own validation is the
	// LeaderWorkerSet's).
	h := newFHPAHarness(t, Config{Output: OutputHorizontalPodAutoscaler}, lws("llm", cases[0].policy))
	h.mustSync("llm")
	h.expectWrites("create horizontalpodautoscalers")
}

// karmada-webhook denies with 403 (controller-runtime's admission.Denied):
// a refusal naming the LeaderWorkerSet's field, not retried; a 422 the same;
// a Forbidden from RBAC is retried with backoff.
func TestFederatedHPAServerRefusals(t *testing.T) {
	gr := schema.GroupResource{Group: "autoscaling.karmada.io", Resource: "federatedhpas"}
	denied := apierrors.NewForbidden(gr, "llm", nil)
	// As kube-apiserver words a webhook's denial (k8s.io/apiserver
	// pkg/admission/plugin/webhook/errors ToStatusErr).
	denied.ErrStatus.Message = `admission webhook "validation.federatedhpa.karmada.io" denied the request: spec.metrics[0].type: Unsupported value: "External"`
	invalid := apierrors.NewInvalid(schema.GroupKind{Group: "autoscaling.karmada.io", Kind: "FederatedHPA"}, "llm", nil)
	invalid.ErrStatus.Message = `FederatedHPA.autoscaling.karmada.io "llm" is invalid: spec.maxReplicas: Invalid value: 0: spec.maxReplicas in body should be greater than or equal to 1`
	rbac := apierrors.NewForbidden(gr, "llm", nil)
	rbac.ErrStatus.Message = `federatedhpas.autoscaling.karmada.io "llm" is forbidden: User "system:serviceaccount:x:y" cannot create resource "federatedhpas"`
	cases := []struct {
		name  string
		err   error
		retry bool
		want  string
	}{
		{"webhook denial", denied, false, "spec.scalePolicy.metrics[0].type"},
		{"invalid", invalid, false, "spec.scalePolicy.maxReplicas"},
		{"RBAC", rbac, true, "retrying with backoff"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newFHPAHarness(t, fhpaOutput(), lws("llm", policy(nil, 4, cpuMetric(60))))
			h.client.PrependReactor("create", "federatedhpas", func(clienttesting.Action) (bool, runtime.Object, error) {
				return true, nil, tc.err
			})
			err := h.sync("llm")
			if (err != nil) != tc.retry {
				t.Errorf("sync returned %v; retry wanted: %v", err, tc.retry)
			}
			h.expectEvent("Warning HPARejected", tc.want)
		})
	}
}

// The wrong output for the API server is said once per LeaderWorkerSet.
func TestOutputMismatch(t *testing.T) {
	cases := []struct {
		name string
		cfg  Config
		want string
	}{
		{"HPA on Karmada", Config{Output: OutputHorizontalPodAutoscaler, Karmada: true}, "is a Karmada control plane, where no HPA controller runs"},
		{"FederatedHPA without Karmada", Config{Output: OutputFederatedHPA}, "is not a Karmada control plane"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newFHPAHarness(t, tc.cfg, lws("llm", policy(nil, 4, cpuMetric(60))))
			h.mustSync("llm")
			h.expectEvent("Warning HPAOutputMismatch", tc.want)
			h.mustSync("llm")
			for _, e := range testkit.DrainEvents(h.recorder) {
				if strings.Contains(e, "HPAOutputMismatch") {
					t.Errorf("said again: %q", e)
				}
			}
		})
	}
	h := newFHPAHarness(t, fhpaOutput(), lws("llm", policy(nil, 4, cpuMetric(60))))
	h.mustSync("llm")
	for _, e := range testkit.DrainEvents(h.recorder) {
		if strings.Contains(e, "HPAOutputMismatch") {
			t.Errorf("a FederatedHPA on Karmada is no mismatch: %q", e)
		}
	}
	if v, _ := testkit.MetricValue(t, "hpa_generator_output", map[string]string{"kind": "FederatedHPA"}); v != 1 {
		t.Errorf("hpa_generator_output{kind=FederatedHPA} = %v, want 1", v)
	}
}

// A FederatedHPA output needs FederatedHPAs served.
func TestFederatedHPAOutputNeedsTheInformer(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	kube := kubefake.NewSimpleClientset()
	client := fake.NewSimpleClientset()
	_, err := NewController(ctx, Config{
		Output:           OutputFederatedHPA,
		LeaderWorkerSets: externalversions.NewSharedInformerFactory(client, 0).Leaderworkerset().V1().LeaderWorkerSets(),
		HPAs:             kubeinformers.NewSharedInformerFactory(kube, 0).Autoscaling().V2().HorizontalPodAutoscalers(),
		KubeClient:       kube, Client: client, Recorder: record.NewFakeRecorder(1), Workers: 1,
	})
	if err == nil || !strings.Contains(err.Error(), "FederatedHPA informer") {
		t.Errorf("NewController = %v, want an error about the FederatedHPA informer", err)
	}
}

// FederatedHPA events enqueue the LeaderWorkerSets they concern, as HPA
// events do; status-only updates do not.
func TestFederatedHPAEvents(t *testing.T) {
	h := newFHPAHarness(t, fhpaOutput())
	f := &autoscalingv1alpha1.FederatedHPA{
		ObjectMeta: metav1.ObjectMeta{Name: "llm", Namespace: ns, ResourceVersion: "1", OwnerReferences: []metav1.OwnerReference{lwsOwner("other", "uid-other")}},
		Spec: autoscalingv1alpha1.FederatedHPASpec{MaxReplicas: 4,
			ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "leaderworkerset.x-k8s.io/v1", Kind: "LeaderWorkerSet", Name: "target"}},
	}
	h.c.onFederatedHPAAdd(h.ctx, f)
	got := map[string]bool{}
	for h.c.queue.Len() > 0 {
		key, _ := h.c.queue.Get()
		h.c.queue.Done(key)
		got[key.Name] = true
	}
	if !got["llm"] || !got["other"] || !got["target"] || len(got) != 3 {
		t.Errorf("enqueued %v, want llm, other and target", got)
	}
	if h.c.managedFHPAs.len() != 1 {
		t.Errorf("managed FederatedHPAs = %d, want 1", h.c.managedFHPAs.len())
	}
	status := f.DeepCopy()
	status.ResourceVersion = "2"
	status.Status.CurrentReplicas = 3
	status.Status.Conditions = []autoscalingv2.HorizontalPodAutoscalerCondition{{Type: autoscalingv2.AbleToScale, Status: corev1.ConditionTrue}}
	h.c.onFederatedHPAUpdate(h.ctx, f, status)
	if h.c.queue.Len() != 0 {
		t.Errorf("a status update enqueued %d keys", h.c.queue.Len())
	}
	h.c.onFederatedHPADelete(h.ctx, cache.DeletedFinalStateUnknown{Key: "default/llm", Obj: f})
	if h.c.managedFHPAs.len() != 0 || h.c.queue.Len() != 3 {
		t.Errorf("after delete: managed %d, queued %d; want 0 and 3", h.c.managedFHPAs.len(), h.c.queue.Len())
	}
}
