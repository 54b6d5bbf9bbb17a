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
	"context"
	"strings"
	"testing"

	"github.com/scaleplane/scaleplane/pkg/internal/testkit"
	"github.com/scaleplane/scaleplane/pkg/workloop"

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

	lwsv1 "github.com/scaleplane/scaleplane/pkg/apis/leaderworkerset/v1"
	"github.com/scaleplane/scaleplane/pkg/generated/clientset/versioned/fake"
	"github.com/scaleplane/scaleplane/pkg/generated/informers/externalversions"
)

const ns = "default"

var hpaResource = autoscalingv2.SchemeGroupVersion.WithResource("horizontalpodautoscalers")

// harness drives the controller's sync against fake clientsets. The informer
// caches are indexers the test refreshes from the clientsets, so tests choose
// when the cache catches up (or not, to play a stale cache). HPA writes go
// through apiserver, a small model of kube-apiserver.
type harness struct {
	t          *testing.T
	ctx        context.Context
	client     *fake.Clientset
	kube       *kubefake.Clientset
	server     *apiserver
	recorder   *record.FakeRecorder
	lwsIndexer cache.Indexer
	hpaIndexer cache.Indexer
	c          *Controller
}

func newHarness(t *testing.T, objects ...runtime.Object) *harness {
	t.Helper()
	_, ctx := ktesting.NewTestContext(t)
	h := &harness{t: t, ctx: ctx}
	var lwss, kube []runtime.Object
	for _, o := range objects {
		if _, ok := o.(*lwsv1.LeaderWorkerSet); ok {
			lwss = append(lwss, o)
		} else {
			kube = append(kube, o)
		}
	}
	h.client = fake.NewSimpleClientset(lwss...)
	h.kube = kubefake.NewSimpleClientset(kube...)
	h.server = newAPIServer(h.kube)
	h.recorder = record.NewFakeRecorder(1000)

	lwsInformer := externalversions.NewSharedInformerFactory(h.client, 0).Leaderworkerset().V1().LeaderWorkerSets()
	hpaInformer := kubeinformers.NewSharedInformerFactory(h.kube, 0).Autoscaling().V2().HorizontalPodAutoscalers()
	c, err := NewController(ctx, Config{LeaderWorkerSets: lwsInformer, HPAs: hpaInformer, KubeClient: h.kube, Recorder: h.recorder, Workers: 1})
	if err != nil {
		t.Fatal(err)
	}
	h.c = c
	h.lwsIndexer = lwsInformer.Informer().GetIndexer()
	h.hpaIndexer = hpaInformer.Informer().GetIndexer()
	h.refresh()
	h.kube.ClearActions()
	return h
}

// refresh makes the caches catch up with the clientsets.
func (h *harness) refresh() {
	h.t.Helper()
	lwss, err := h.client.LeaderworkersetV1().LeaderWorkerSets("").List(h.ctx, metav1.ListOptions{})
	if err != nil {
		h.t.Fatal(err)
	}
	objs := make([]any, 0, len(lwss.Items))
	for i := range lwss.Items {
		objs = append(objs, &lwss.Items[i])
	}
	if err := h.lwsIndexer.Replace(objs, ""); err != nil {
		h.t.Fatal(err)
	}
	hpas, err := h.kube.AutoscalingV2().HorizontalPodAutoscalers("").List(h.ctx, metav1.ListOptions{})
	if err != nil {
		h.t.Fatal(err)
	}
	objs = make([]any, 0, len(hpas.Items))
	for i := range hpas.Items {
		objs = append(objs, &hpas.Items[i])
	}
	if err := h.hpaIndexer.Replace(objs, ""); err != nil {
		h.t.Fatal(err)
	}
}

// sync syncs the LeaderWorkerSet name, fails the test on an error, and
// refreshes the caches.
func (h *harness) sync(name string) {
	h.t.Helper()
	if err := h.trySync(name); err != nil {
		h.t.Fatalf("sync %s: %v", name, err)
	}
	h.refresh()
}

func (h *harness) trySync(name string) error {
	return h.c.syncRecovered(h.ctx, cache.ObjectName{Namespace: ns, Name: name})
}

func (h *harness) getHPA(name string) *autoscalingv2.HorizontalPodAutoscaler {
	h.t.Helper()
	hpa, err := h.kube.AutoscalingV2().HorizontalPodAutoscalers(ns).Get(h.ctx, name, metav1.GetOptions{})
	if err != nil {
		h.t.Fatal(err)
	}
	return hpa
}

func (h *harness) hpaExists(name string) bool {
	h.t.Helper()
	_, err := h.kube.AutoscalingV2().HorizontalPodAutoscalers(ns).Get(h.ctx, name, metav1.GetOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		h.t.Fatal(err)
	}
	return err == nil
}

func (h *harness) getLWS(name string) *lwsv1.LeaderWorkerSet {
	h.t.Helper()
	lws, err := h.client.LeaderworkersetV1().LeaderWorkerSets(ns).Get(h.ctx, name, metav1.GetOptions{})
	if err != nil {
		h.t.Fatal(err)
	}
	return lws
}

// updateLWS changes a LeaderWorkerSet in the clientset and the cache.
func (h *harness) updateLWS(name string, change func(*lwsv1.LeaderWorkerSet)) {
	h.t.Helper()
	lws := h.getLWS(name).DeepCopy()
	change(lws)
	if _, err := h.client.LeaderworkersetV1().LeaderWorkerSets(ns).Update(h.ctx, lws, metav1.UpdateOptions{}); err != nil {
		h.t.Fatal(err)
	}
	h.refresh()
}

// editHPA changes an HPA as a user would (through the apiserver model, with
// its defaults), and refreshes the cache. It returns the old and new object.
func (h *harness) editHPA(name string, change func(*autoscalingv2.HorizontalPodAutoscaler)) (*autoscalingv2.HorizontalPodAutoscaler, *autoscalingv2.HorizontalPodAutoscaler) {
	h.t.Helper()
	old := h.getHPA(name)
	edited := old.DeepCopy()
	change(edited)
	updated, err := h.kube.AutoscalingV2().HorizontalPodAutoscalers(ns).Update(h.ctx, edited, metav1.UpdateOptions{})
	if err != nil {
		h.t.Fatal(err)
	}
	h.refresh()
	h.kube.ClearActions()
	return old, updated
}

// setHPAStatus writes an HPA's status as the HPA controller would.
func (h *harness) setHPAStatus(name string, status autoscalingv2.HorizontalPodAutoscalerStatus) {
	h.t.Helper()
	hpa := h.getHPA(name)
	hpa.Status = status
	if _, err := h.kube.AutoscalingV2().HorizontalPodAutoscalers(ns).UpdateStatus(h.ctx, hpa, metav1.UpdateOptions{}); err != nil {
		h.t.Fatal(err)
	}
	h.refresh()
	h.kube.ClearActions()
}

// writes returns the HPA writes the controller made since the last
// ClearActions.
func (h *harness) writes() []clienttesting.Action {
	var out []clienttesting.Action
	for _, a := range h.kube.Actions() {
		switch a.GetVerb() {
		case "create", "update", "delete", "patch", "apply":
			out = append(out, a)
		}
	}
	return out
}

func (h *harness) expectWrites(verbs ...string) {
	h.t.Helper()
	var got []string
	for _, a := range h.writes() {
		got = append(got, a.GetVerb())
	}
	if strings.Join(got, ",") != strings.Join(verbs, ",") {
		h.t.Errorf("HPA writes = %v, want %v", got, verbs)
	}
	h.kube.ClearActions()
}

// events drains the recorded events.
func (h *harness) events() []string { return testkit.DrainEvents(h.recorder) }

// expectEvent checks that an event starts with prefix and contains every
// one of parts, and returns it.
func (h *harness) expectEvent(prefix string, parts ...string) string {
	h.t.Helper()
	events := h.events()
	e, ok := testkit.FindEvent(events, prefix, parts...)
	if !ok {
		h.t.Errorf("no event starting with %q containing %q in %q", prefix, parts, events)
	}
	return e
}

func (h *harness) expectNoEvents() {
	h.t.Helper()
	if events := h.events(); len(events) > 0 {
		h.t.Errorf("unexpected events: %q", events)
	}
}

// queued drains the workqueue.
func (h *harness) queued() []cache.ObjectName {
	var out []cache.ObjectName
	for h.c.queue.Len() > 0 {
		key, _ := h.c.queue.Get()
		h.c.queue.Done(key)
		out = append(out, key)
	}
	return out
}

// counterValue reads a counter, or a gauge, with one label from the registry
// /metrics serves.
func counterValue(t *testing.T, name, label, value string) float64 {
	t.Helper()
	v, _ := testkit.MetricValue(t, name, map[string]string{label: value})
	return v
}

// writeCount reads the writes counter of one verb and kind.
func writeCount(t *testing.T, verb string, kind Output) float64 {
	t.Helper()
	v, _ := testkit.MetricValue(t, "hpa_generator_writes_total", map[string]string{"verb": verb, "kind": string(kind)})
	return v
}

// gaugeValue reads an unlabelled gauge from the registry /metrics serves.
func gaugeValue(t *testing.T, name string) float64 {
	t.Helper()
	v, ok := testkit.MetricValue(t, name, nil)
	if !ok {
		t.Fatalf("no gauge %s", name)
	}
	return v
}

// processNextWorkItem syncs one key from the queue as a worker of Run does.
func (c *Controller) processNextWorkItem(ctx context.Context) bool {
	return workloop.ProcessNext(ctx, c.queue, Name, c.syncKey)
}

// syncRecovered runs the sync a worker runs, with a panic turned into an
// error, and returns its error.
func (c *Controller) syncRecovered(ctx context.Context, key cache.ObjectName) error {
	_, err := workloop.Recovered(c.syncKey)(ctx, key)
	return err
}
