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

package karmada

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	autoscalingv1alpha1 "github.com/scaleplane/scaleplane/pkg/apis/autoscaling/v1alpha1"
	lwsv1 "github.com/scaleplane/scaleplane/pkg/apis/leaderworkerset/v1"
	"github.com/scaleplane/scaleplane/test/integration/framework"
)

// TestFederatedHPALifecycle: with the default --hpa-generator-output=Auto the
// manager detects Karmada and says so once; a LeaderWorkerSet's policy
// becomes a FederatedHPA (and no HPA), updated when the policy changes,
// untouched while Karmada's controller writes its status, repaired when
// edited (foreign labels kept), deleted when the metrics go, and garbage
// collected with the LeaderWorkerSet.
func TestFederatedHPALifecycle(t *testing.T) {
	cp := framework.Get(t)
	ns := cp.CreateNamespace(t)
	ctx := context.Background()
	m := framework.StartManager(t, cp.KubeconfigPath(), "hpa-generator")
	waitLog(t, m, "The hpa-generator keeps one autoscaler", "FederatedHPA", "Auto: the API server is a Karmada control plane")
	if v := metric(t, m, "hpa_generator_output", `kind="FederatedHPA"`); v != 1 {
		t.Errorf(`hpa_generator_output{kind="FederatedHPA"} = %v, want 1`, v)
	}

	lws := createLWS(t, cp, leaderWorkerSet(ns, "llm", &lwsv1.ScalePolicy{MaxReplicas: 4, Metrics: []autoscalingv2.MetricSpec{cpuMetric(60)}}))
	waitFHPA(t, cp, ns, "llm", generated(lws, 1, 4, 60))
	cp.WaitForEvent(t, ns, "llm", "HPACreated", "Created FederatedHPA llm", waitTimeout)
	if hpaExists(t, cp, ns, "llm") {
		t.Error("an HPA was created next to the FederatedHPA")
	}

	// Steady state: Karmada's controller writes status; nothing else.
	waitIdle(t, m)
	before := metric(t, m, "hpa_generator_writes_total")
	for i := int32(1); i <= 3; i++ {
		updateFHPA(t, cp, ns, "llm", true, func(f *autoscalingv1alpha1.FederatedHPA) {
			f.Status.CurrentReplicas, f.Status.DesiredReplicas = i, i
			f.Status.Conditions = []autoscalingv2.HorizontalPodAutoscalerCondition{{
				Type: autoscalingv2.AbleToScale, Status: corev1.ConditionTrue, Reason: "ReadyForNewScale", LastTransitionTime: metav1.Now(),
			}}
		})
	}
	waitIdle(t, m)
	if after := metric(t, m, "hpa_generator_writes_total"); after != before {
		t.Errorf("the generator wrote %v times in a steady state", after-before)
	}

	// Each policy field.
	updateLWS(t, cp, ns, "llm", func(l *lwsv1.LeaderWorkerSet) {
		l.Spec.ScalePolicy.MinReplicas = ptr.To[int32](2)
		l.Spec.ScalePolicy.MaxReplicas = 6
		l.Spec.ScalePolicy.Metrics = []autoscalingv2.MetricSpec{cpuMetric(70)}
		l.Spec.ScalePolicy.Behavior = &autoscalingv2.HorizontalPodAutoscalerBehavior{
			ScaleDown: &autoscalingv2.HPAScalingRules{StabilizationWindowSeconds: ptr.To[int32](60)},
		}
	})
	f := waitFHPA(t, cp, ns, "llm", generated(lws, 2, 6, 70))
	if f.Spec.Behavior == nil || f.Spec.Behavior.ScaleDown == nil || ptr.Deref(f.Spec.Behavior.ScaleDown.StabilizationWindowSeconds, 0) != 60 {
		t.Errorf("behavior not applied: %+v", f.Spec.Behavior)
	}

	// Drift: owned fields put back, a foreign label and annotation kept.
	updateFHPA(t, cp, ns, "llm", false, func(f *autoscalingv1alpha1.FederatedHPA) {
		f.Spec.MaxReplicas = 50
		f.Labels["team"] = "inference"
		if f.Annotations == nil {
			f.Annotations = map[string]string{}
		}
		f.Annotations["example.com/owner"] = "me"
	})
	f = waitFHPA(t, cp, ns, "llm", generated(lws, 2, 6, 70))
	if f.Labels["team"] != "inference" || f.Annotations["example.com/owner"] != "me" {
		t.Errorf("foreign label or annotation lost: labels %v annotations %v", f.Labels, f.Annotations)
	}

	// No metrics: the FederatedHPA goes.
	updateLWS(t, cp, ns, "llm", func(l *lwsv1.LeaderWorkerSet) { l.Spec.ScalePolicy.Metrics = nil })
	waitFHPA(t, cp, ns, "llm", fhpaGone)
	cp.WaitForEvent(t, ns, "llm", "HPADeleted", "Deleted FederatedHPA llm", waitTimeout)

	// Back, then the LeaderWorkerSet deleted: the garbage collector removes
	// the FederatedHPA through its owner reference.
	updateLWS(t, cp, ns, "llm", func(l *lwsv1.LeaderWorkerSet) { l.Spec.ScalePolicy.Metrics = []autoscalingv2.MetricSpec{cpuMetric(50)} })
	waitFHPA(t, cp, ns, "llm", generated(lws, 2, 6, 50))
	if err := cp.Client().LeaderworkersetV1().LeaderWorkerSets(ns).Delete(ctx, "llm", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFHPA(t, cp, ns, "llm", fhpaGone)
}

// TestFederatedHPAConflicts: a FederatedHPA of the LeaderWorkerSet's name
// that it does not control is never touched (Warning), until it is deleted;
// an HPA that already scales a LeaderWorkerSet keeps the generator from
// creating a FederatedHPA next to it (Warning).
func TestFederatedHPAConflicts(t *testing.T) {
	cp := framework.Get(t)
	ns := cp.CreateNamespace(t)
	ctx := context.Background()
	m := framework.StartManager(t, cp.KubeconfigPath(), "hpa-generator")

	theirs := &autoscalingv1alpha1.FederatedHPA{
		ObjectMeta: metav1.ObjectMeta{Name: "taken", Namespace: ns, Labels: map[string]string{"team": "other"}},
		Spec: autoscalingv1alpha1.FederatedHPASpec{
			ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"},
			MinReplicas:    ptr.To[int32](1), MaxReplicas: 9,
		},
	}
	fhpas := cp.Client().AutoscalingV1alpha1().FederatedHPAs(ns)
	if _, err := fhpas.Create(ctx, theirs, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	policy := &lwsv1.ScalePolicy{MaxReplicas: 4, Metrics: []autoscalingv2.MetricSpec{cpuMetric(60)}}
	taken := createLWS(t, cp, leaderWorkerSet(ns, "taken", policy))
	cp.WaitForEvent(t, ns, "taken", "HPAConflict", "FederatedHPA taken already exists", waitTimeout)
	before := metric(t, m, "hpa_generator_writes_total")
	waitIdle(t, m)
	got, err := fhpas.Get(ctx, "taken", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got.Spec.ScaleTargetRef.Kind != "Deployment" || got.Spec.MaxReplicas != 9 || metav1.GetControllerOf(got) != nil {
		t.Fatalf("the user's FederatedHPA was changed: %+v", got.Spec)
	}
	if after := metric(t, m, "hpa_generator_writes_total"); after != before {
		t.Errorf("the generator wrote %v times while the name was taken", after-before)
	}
	if err := fhpas.Delete(ctx, "taken", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFHPA(t, cp, ns, "taken", generated(taken, 1, 4, 60))

	// An HPA under another name already scales the LeaderWorkerSet.
	hand := &autoscalingv2.HorizontalPodAutoscaler{
		ObjectMeta: metav1.ObjectMeta{Name: "hand-made", Namespace: ns},
		Spec: autoscalingv2.HorizontalPodAutoscalerSpec{
			ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "leaderworkerset.x-k8s.io/v1", Kind: "LeaderWorkerSet", Name: "second"},
			MaxReplicas:    5,
		},
	}
	if _, err := cp.KubeClient().AutoscalingV2().HorizontalPodAutoscalers(ns).Create(ctx, hand, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	createLWS(t, cp, leaderWorkerSet(ns, "second", policy))
	cp.WaitForEvent(t, ns, "second", "HPATargetConflict", "HorizontalPodAutoscaler hand-made already scales this LeaderWorkerSet", waitTimeout)
	waitIdle(t, m)
	if _, err := fhpas.Get(ctx, "second", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("a FederatedHPA was created next to an HPA that scales the LeaderWorkerSet (err %v)", err)
	}
	if h, err := cp.KubeClient().AutoscalingV2().HorizontalPodAutoscalers(ns).Get(ctx, "hand-made", metav1.GetOptions{}); err != nil || metav1.GetControllerOf(h) != nil || h.Spec.MaxReplicas != 5 {
		t.Errorf("the user's HPA was changed or deleted: %v %+v", err, h)
	}
}

// TestOutputSwitch: an HPA output on Karmada is made impossible to miss
// (HPAOutputMismatch); when the manager comes back with Auto, the
// LeaderWorkerSet's HPA is deleted (HPAOutputChanged) and a FederatedHPA
// takes its place.
func TestOutputSwitch(t *testing.T) {
	cp := framework.Get(t)
	ns := cp.CreateNamespace(t)
	m := framework.StartManager(t, cp.KubeconfigPath(), "hpa-generator", "--hpa-generator-output=HorizontalPodAutoscaler")
	waitLog(t, m, "The hpa-generator keeps one autoscaler", "HorizontalPodAutoscaler", "set by --hpa-generator-output")

	lws := createLWS(t, cp, leaderWorkerSet(ns, "llm", &lwsv1.ScalePolicy{MaxReplicas: 4, Metrics: []autoscalingv2.MetricSpec{cpuMetric(60)}}))
	cp.WaitForEvent(t, ns, "llm", "HPACreated", "Created HorizontalPodAutoscaler llm", waitTimeout)
	cp.WaitForEvent(t, ns, "llm", "HPAOutputMismatch", "is a Karmada control plane, where no HPA controller runs", waitTimeout)
	m.Stop(15 * time.Second)

	framework.StartManager(t, cp.KubeconfigPath(), "hpa-generator")
	waitFHPA(t, cp, ns, "llm", generated(lws, 1, 4, 60))
	cp.WaitForEvent(t, ns, "llm", "HPAOutputChanged", "Deleted HorizontalPodAutoscaler llm", waitTimeout)
	if hpaExists(t, cp, ns, "llm") {
		t.Error("the LeaderWorkerSet's HPA was kept next to its FederatedHPA")
	}
}

// TestRefusedPolicy: what Karmada's FederatedHPA cannot take (an External
// metric) is refused by field, without a write and without a retry, and the
// FederatedHPA comes once the policy is fixed.
func TestRefusedPolicy(t *testing.T) {
	cp := framework.Get(t)
	ns := cp.CreateNamespace(t)
	m := framework.StartManager(t, cp.KubeconfigPath(), "hpa-generator")
	external := autoscalingv2.MetricSpec{Type: autoscalingv2.ExternalMetricSourceType, External: &autoscalingv2.ExternalMetricSource{
		Metric: autoscalingv2.MetricIdentifier{Name: "queue_depth"},
		Target: autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageValue: ptr.To(resource.MustParse("30"))},
	}}
	lws := createLWS(t, cp, leaderWorkerSet(ns, "llm", &lwsv1.ScalePolicy{MaxReplicas: 4, Metrics: []autoscalingv2.MetricSpec{cpuMetric(60), external}}))
	cp.WaitForEvent(t, ns, "llm", "HPARejected", `spec.scalePolicy.metrics[1].type: Unsupported value: "External"`, waitTimeout)
	waitIdle(t, m)
	// Not retried: a sync that returned an error would be retried with the
	// queue's backoff (5 ms, doubling), about ten times in the next three
	// seconds, each refusing again. The manager watches every namespace, so
	// its queue metrics count other tests' leftovers too; its log names the
	// LeaderWorkerSet.
	time.Sleep(3 * time.Second)
	refused := fmt.Sprintf(`"Scale policy refused" controller="hpa-generator" leaderWorkerSet="%s/llm"`, ns)
	if n := strings.Count(m.Tail(5000), refused); n != 1 {
		t.Errorf("the policy was refused %d times, want once: a refusal must not be retried", n)
	}
	if _, err := cp.Client().AutoscalingV1alpha1().FederatedHPAs(ns).Get(context.Background(), "llm", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("a FederatedHPA was written for a refused policy (err %v)", err)
	}
	updateLWS(t, cp, ns, "llm", func(l *lwsv1.LeaderWorkerSet) { l.Spec.ScalePolicy.Metrics = l.Spec.ScalePolicy.Metrics[:1] })
	waitFHPA(t, cp, ns, "llm", generated(lws, 1, 4, 60))
}
