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

// The harness of the FederatedHPA tests (federatedhpa_test.go): a generator
// against fake clientsets with caches the test refreshes, the writes and
// events it made, karmada-webhook's defaults and the check of a generated
// FederatedHPA.

import (
	"context"
	"strings"
	"testing"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
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

// fhpaHarness drives a generator whose output is FederatedHPA (or an HPA
// generator that also sees FederatedHPAs) against fake clientsets, with
// caches the test refreshes, as harness does for HPAs.
type fhpaHarness struct {
	t           *testing.T
	ctx         context.Context
	client      *fake.Clientset
	kube        *kubefake.Clientset
	recorder    *record.FakeRecorder
	lwsIndexer  cache.Indexer
	fhpaIndexer cache.Indexer
	hpaIndexer  cache.Indexer
	c           *Controller
}

func newFHPAHarness(t *testing.T, cfg Config, objects ...runtime.Object) *fhpaHarness {
	t.Helper()
	_, ctx := ktesting.NewTestContext(t)
	h := &fhpaHarness{t: t, ctx: ctx}
	var generated, kube []runtime.Object
	for _, o := range objects {
		if _, ok := o.(*autoscalingv2.HorizontalPodAutoscaler); ok {
			kube = append(kube, o)
		} else {
			generated = append(generated, o)
		}
	}
	h.client = fake.NewSimpleClientset(generated...)
	h.kube = kubefake.NewSimpleClientset(kube...)
	h.recorder = record.NewFakeRecorder(1000)
	factory := externalversions.NewSharedInformerFactory(h.client, 0)
	lwsInformer := factory.Leaderworkerset().V1().LeaderWorkerSets()
	fhpaInformer := factory.Autoscaling().V1alpha1().FederatedHPAs()
	hpaInformer := kubeinformers.NewSharedInformerFactory(h.kube, 0).Autoscaling().V2().HorizontalPodAutoscalers()
	cfg.LeaderWorkerSets, cfg.HPAs, cfg.FederatedHPAs = lwsInformer, hpaInformer, fhpaInformer
	cfg.KubeClient, cfg.Client, cfg.Recorder, cfg.Workers = h.kube, h.client, h.recorder, 1
	c, err := NewController(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	h.c = c
	h.lwsIndexer = lwsInformer.Informer().GetIndexer()
	h.fhpaIndexer = fhpaInformer.Informer().GetIndexer()
	h.hpaIndexer = hpaInformer.Informer().GetIndexer()
	h.refresh()
	h.clearActions()
	return h
}

func (h *fhpaHarness) refresh() {
	h.t.Helper()
	lwss, err := h.client.LeaderworkersetV1().LeaderWorkerSets("").List(h.ctx, metav1.ListOptions{})
	if err != nil {
		h.t.Fatal(err)
	}
	fhpas, err := h.client.AutoscalingV1alpha1().FederatedHPAs("").List(h.ctx, metav1.ListOptions{})
	if err != nil {
		h.t.Fatal(err)
	}
	hpas, err := h.kube.AutoscalingV2().HorizontalPodAutoscalers("").List(h.ctx, metav1.ListOptions{})
	if err != nil {
		h.t.Fatal(err)
	}
	var objs []any
	for i := range lwss.Items {
		objs = append(objs, &lwss.Items[i])
	}
	replace(h.t, h.lwsIndexer, objs)
	objs = nil
	for i := range fhpas.Items {
		objs = append(objs, &fhpas.Items[i])
	}
	replace(h.t, h.fhpaIndexer, objs)
	objs = nil
	for i := range hpas.Items {
		objs = append(objs, &hpas.Items[i])
	}
	replace(h.t, h.hpaIndexer, objs)
}

func replace(t *testing.T, indexer cache.Indexer, objs []any) {
	t.Helper()
	if err := indexer.Replace(objs, ""); err != nil {
		t.Fatal(err)
	}
}

func (h *fhpaHarness) clearActions() {
	h.client.ClearActions()
	h.kube.ClearActions()
}

func (h *fhpaHarness) sync(name string) error {
	err := h.c.syncRecovered(h.ctx, cache.ObjectName{Namespace: ns, Name: name})
	h.refresh()
	return err
}

func (h *fhpaHarness) mustSync(name string) {
	h.t.Helper()
	if err := h.sync(name); err != nil {
		h.t.Fatalf("sync %s: %v", name, err)
	}
}

// writes lists the writes made since the last clearActions, as
// "<verb> <resource>".
func (h *fhpaHarness) writes() []string {
	var out []string
	for _, a := range append(h.client.Actions(), h.kube.Actions()...) {
		switch a.GetVerb() {
		case "create", "update", "delete", "patch":
			out = append(out, a.GetVerb()+" "+a.GetResource().Resource)
		}
	}
	return out
}

func (h *fhpaHarness) expectWrites(want ...string) {
	h.t.Helper()
	if got := h.writes(); strings.Join(got, ",") != strings.Join(want, ",") {
		h.t.Errorf("writes = %q, want %q", got, want)
	}
	h.clearActions()
}

func (h *fhpaHarness) getFHPA(name string) (*autoscalingv1alpha1.FederatedHPA, bool) {
	h.t.Helper()
	f, err := h.client.AutoscalingV1alpha1().FederatedHPAs(ns).Get(h.ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, false
	}
	if err != nil {
		h.t.Fatal(err)
	}
	return f, true
}

func (h *fhpaHarness) hpaExists(name string) bool {
	h.t.Helper()
	_, err := h.kube.AutoscalingV2().HorizontalPodAutoscalers(ns).Get(h.ctx, name, metav1.GetOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		h.t.Fatal(err)
	}
	return err == nil
}

func (h *fhpaHarness) updateLWS(name string, change func(*lwsv1.LeaderWorkerSet)) {
	h.t.Helper()
	l, err := h.client.LeaderworkersetV1().LeaderWorkerSets(ns).Get(h.ctx, name, metav1.GetOptions{})
	if err != nil {
		h.t.Fatal(err)
	}
	change(l)
	if _, err := h.client.LeaderworkersetV1().LeaderWorkerSets(ns).Update(h.ctx, l, metav1.UpdateOptions{}); err != nil {
		h.t.Fatal(err)
	}
	h.refresh()
	h.clearActions()
}

func (h *fhpaHarness) expectEvent(prefix string, parts ...string) string {
	h.t.Helper()
	events := testkit.DrainEvents(h.recorder)
	e, ok := testkit.FindEvent(events, prefix, parts...)
	if !ok {
		h.t.Errorf("no event starting with %q containing %q in %q", prefix, parts, events)
	}
	return e
}

// karmadaDefaults plays karmada-webhook's FederatedHPA mutating handler on
// creates and updates: karmada-io/karmada v1.18.2
// pkg/webhook/federatedhpa/mutating.go calls
// pkg/util/lifted/federatedhpa.go SetDefaultsFederatedHPA, transcribed here:
// minReplicas 1; with no metrics, CPU at 80% utilization; a set behavior gets
// each rule rebuilt from the defaults (scaleUp: window 0, Max of 4 Pods and
// 100 Percent per 15 s; scaleDown: no window, Max of 100 Percent per 15 s)
// overlaid with the rule's selectPolicy, stabilizationWindowSeconds and
// policies only (copyHPAScalingRules), so tolerance is dropped.
func karmadaDefaults(client *fake.Clientset) {
	client.PrependReactor("*", "federatedhpas", func(action clienttesting.Action) (bool, runtime.Object, error) {
		// Create and update actions have the same methods: tell them by
		// the verb. Status updates do not go through the webhook.
		a, ok := action.(clienttesting.CreateAction)
		if !ok || action.GetVerb() != "create" && action.GetVerb() != "update" || action.GetSubresource() != "" {
			return false, nil, nil
		}
		f, ok := a.GetObject().(*autoscalingv1alpha1.FederatedHPA)
		if !ok {
			return false, nil, nil
		}
		if f.Spec.MinReplicas == nil {
			f.Spec.MinReplicas = ptr.To[int32](1)
		}
		if len(f.Spec.Metrics) == 0 {
			f.Spec.Metrics = []autoscalingv2.MetricSpec{cpuMetric(80)}
		}
		if b := f.Spec.Behavior; b != nil {
			maxPolicy := autoscalingv2.MaxChangePolicySelect
			up := &autoscalingv2.HPAScalingRules{StabilizationWindowSeconds: ptr.To[int32](0), SelectPolicy: &maxPolicy, Policies: []autoscalingv2.HPAScalingPolicy{
				{Type: autoscalingv2.PodsScalingPolicy, Value: 4, PeriodSeconds: 15}, {Type: autoscalingv2.PercentScalingPolicy, Value: 100, PeriodSeconds: 15}}}
			down := &autoscalingv2.HPAScalingRules{SelectPolicy: &maxPolicy, Policies: []autoscalingv2.HPAScalingPolicy{
				{Type: autoscalingv2.PercentScalingPolicy, Value: 100, PeriodSeconds: 15}}}
			overlay := func(from, to *autoscalingv2.HPAScalingRules) *autoscalingv2.HPAScalingRules {
				if from == nil {
					return to
				}
				if from.SelectPolicy != nil {
					to.SelectPolicy = from.SelectPolicy
				}
				if from.StabilizationWindowSeconds != nil {
					to.StabilizationWindowSeconds = from.StabilizationWindowSeconds
				}
				if from.Policies != nil {
					to.Policies = from.Policies
				}
				return to
			}
			b.ScaleUp, b.ScaleDown = overlay(b.ScaleUp, up), overlay(b.ScaleDown, down)
		}
		return false, nil, nil // the tracker stores the mutated object
	})
}

func fhpaOutput() Config { return Config{Output: OutputFederatedHPA, Karmada: true} }

// checkGenerated checks the FederatedHPA the generator keeps for l.
func checkGenerated(t *testing.T, f *autoscalingv1alpha1.FederatedHPA, l *lwsv1.LeaderWorkerSet, min, max int32) {
	t.Helper()
	ref := f.Spec.ScaleTargetRef
	if ref.APIVersion != "leaderworkerset.x-k8s.io/v1" || ref.Kind != "LeaderWorkerSet" || ref.Name != l.Name {
		t.Errorf("scaleTargetRef %+v", ref)
	}
	if ptr.Deref(f.Spec.MinReplicas, 0) != min || f.Spec.MaxReplicas != max {
		t.Errorf("min/max %v/%d, want %d/%d", f.Spec.MinReplicas, f.Spec.MaxReplicas, min, max)
	}
	if f.Labels[ManagedByLabelKey] != ManagedByLabelValue {
		t.Errorf("labels %v", f.Labels)
	}
	owner := metav1.GetControllerOf(f)
	if owner == nil || owner.UID != l.UID || !ptr.Deref(owner.BlockOwnerDeletion, false) {
		t.Errorf("controller %+v, want LeaderWorkerSet %s blocking its deletion", owner, l.UID)
	}
}
