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
	"context"
	"errors"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	kubeinformers "k8s.io/client-go/informers"
	kubefake "k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2/ktesting"
	testingclock "k8s.io/utils/clock/testing"

	autoscalingv1alpha1 "github.com/scaleplane/scaleplane/pkg/apis/autoscaling/v1alpha1"
	lwsv1 "github.com/scaleplane/scaleplane/pkg/apis/leaderworkerset/v1"
	"github.com/scaleplane/scaleplane/pkg/cronplan"
	"github.com/scaleplane/scaleplane/pkg/generated/clientset/versioned/fake"
	"github.com/scaleplane/scaleplane/pkg/generated/informers/externalversions"
	"github.com/scaleplane/scaleplane/pkg/internal/testkit"
)

const ns = "default"

// harness runs the controller's sync against fake clientsets, a fake scale
// client backed by a map, and a fake clock. The informer cache is an indexer
// the test refreshes from the fake clientset, so tests choose when the cache
// catches up (or not, to play a stale cache).
type harness struct {
	t        *testing.T
	schema   schemaVariant
	ctx      context.Context
	clock    *testingclock.FakeClock
	client   *fake.Clientset
	kube     *kubefake.Clientset
	scales   *scaleStore
	mapper   *testMapper
	recorder *record.FakeRecorder
	indexer  cache.Indexer
	// hpas is the HPA informer the controller looks autoscalers up in.
	hpas cache.SharedIndexInformer
	c    *Controller
	// syncs and records are the controller's two queues.
	syncs, records *heldQueue
}

func newHarness(t *testing.T, now time.Time, objects ...runtime.Object) *harness {
	t.Helper()
	return newHarnessOn(t, projectSchema, now, objects...)
}

// newHarnessOn is newHarness on the given CRD schema: objects and every write
// of a CronFederatedHPA lose what the schema does not store.
func newHarnessOn(t *testing.T, crd schemaVariant, now time.Time, objects ...runtime.Object) *harness {
	t.Helper()
	_, ctx := ktesting.NewTestContext(t)
	h := &harness{t: t, schema: crd, ctx: ctx, clock: testingclock.NewFakeClock(now)}
	var crons, kube []runtime.Object
	for _, o := range objects {
		switch o := o.(type) {
		case *autoscalingv1alpha1.CronFederatedHPA:
			o = o.DeepCopy()
			crd.prune(o)
			crons = append(crons, o)
		case *autoscalingv1alpha1.FederatedHPA, *lwsv1.LeaderWorkerSet:
			crons = append(crons, o)
		default:
			kube = append(kube, o)
		}
	}
	h.client = fake.NewSimpleClientset(crons...)
	pruneWrites := func(action clienttesting.Action) (bool, runtime.Object, error) {
		if obj, ok := action.(clienttesting.CreateAction); ok {
			if cron, ok := obj.GetObject().(*autoscalingv1alpha1.CronFederatedHPA); ok {
				crd.prune(cron)
			}
		}
		return false, nil, nil
	}
	h.client.PrependReactor("create", "cronfederatedhpas", pruneWrites)
	h.client.PrependReactor("update", "cronfederatedhpas", h.updateLikeAPIServer)
	h.kube = kubefake.NewSimpleClientset(kube...)
	h.scales = newScaleStore(h.clock)
	h.mapper = newTestMapper()
	h.recorder = record.NewFakeRecorder(1000)
	h.newController()
	return h
}

// newController builds a controller as a restarted process would: new
// memory, a cache listed fresh from the clientset. Its two queues are held
// (see heldQueue), so the test decides when a delayed key comes back.
func (h *harness) newController() {
	h.t.Helper()
	factory := externalversions.NewSharedInformerFactory(h.client, 0)
	informer := factory.Autoscaling().V1alpha1().CronFederatedHPAs()
	h.hpas = kubeinformers.NewSharedInformerFactory(h.kube, 0).Autoscaling().V2().HorizontalPodAutoscalers().Informer()
	c, err := NewController(h.ctx, Config{
		HPAs:       h.hpas,
		Informer:   informer,
		Client:     h.client,
		KubeClient: h.kube,
		Scales:     h.scales.fake,
		Metadata:   h.scales.metadata,
		Mapper:     h.mapper,
		Recorder:   h.recorder,
		Clock:      h.clock,
		Workers:    1,
		Stored:     h.schema.stored,
	})
	if err != nil {
		h.t.Fatal(err)
	}
	h.syncs = &heldQueue{TypedRateLimitingInterface: c.queue}
	h.records = &heldQueue{TypedRateLimitingInterface: c.records}
	c.queue, c.records = h.syncs, h.records
	h.c = c
	h.indexer = informer.Informer().GetIndexer()
	h.refresh()
	// The informer's first list hands every object to onAdd, which counts
	// it by target (see yieldToOtherObjects); the queue is left to the test.
	for _, o := range h.indexer.List() {
		cron, _ := cronOf(o)
		c.targets.add(cron, 1)
	}
}

// refresh makes the cache catch up with the clientset.
func (h *harness) refresh() {
	h.t.Helper()
	list, err := h.client.AutoscalingV1alpha1().CronFederatedHPAs("").List(h.ctx, metav1.ListOptions{})
	if err != nil {
		h.t.Fatal(err)
	}
	objs := make([]any, 0, len(list.Items))
	for i := range list.Items {
		// As the informer holds it.
		obj, _ := stripForCache(&list.Items[i])
		objs = append(objs, obj)
	}
	if err := h.indexer.Replace(objs, ""); err != nil {
		h.t.Fatal(err)
	}
	hpas, err := h.kube.AutoscalingV2().HorizontalPodAutoscalers("").List(h.ctx, metav1.ListOptions{})
	if err != nil {
		h.t.Fatal(err)
	}
	objs = objs[:0]
	for i := range hpas.Items {
		objs = append(objs, &hpas.Items[i])
	}
	if err := h.hpas.GetIndexer().Replace(objs, ""); err != nil {
		h.t.Fatal(err)
	}
}

// syncAt moves the clock to at, syncs name, and refreshes the cache.
func (h *harness) syncAt(at time.Time, name string) time.Duration {
	h.t.Helper()
	d, err := h.trySyncAt(at, name)
	if err != nil {
		h.t.Fatalf("sync at %v: %v", at, err)
	}
	h.refresh()
	return d
}

// errRetried says that a sync or a status write failed and its key was put
// back with backoff; the log of the test has the error.
var errRetried = errors.New("failed and requeued with backoff (see the log)")

// trySyncAt moves the clock to at and runs name through the path a worker
// runs (the shared loop's stages, as Run runs them): a sync worker takes it
// from the sync queue, and the status writers then write what that sync left
// to record. It returns the delay the sync
// asked to be requeued after, and errRetried when the sync or the status
// write failed and was requeued with backoff. The cache is not refreshed.
func (h *harness) trySyncAt(at time.Time, name string) (time.Duration, error) {
	h.t.Helper()
	h.clock.SetTime(at)
	key := cache.ObjectName{Namespace: ns, Name: name}
	h.syncs.forget(key)
	h.records.forget(key)
	h.c.queue.Add(key)
	syncs := h.c.stages()[0]
	if !syncs.ProcessNext(h.ctx, h.ctx) {
		h.t.Fatal("the sync queue was shut down")
	}
	h.drainRecords()
	d, _ := h.syncs.after(key)
	if h.syncs.retried(key) || h.records.retried(key) {
		return d, errRetried
	}
	return d, nil
}

// drainRecords runs the status writers until their queue is empty.
func (h *harness) drainRecords() {
	h.t.Helper()
	records := h.c.stages()[1]
	for h.c.records.Len() > 0 {
		if !records.ProcessNext(h.ctx, h.ctx) {
			h.t.Fatal("the status queue was shut down")
		}
	}
}

// runTimed lets Run's own timers requeue keys, on the fake clock.
func (h *harness) runTimed() {
	for _, q := range []*heldQueue{h.syncs, h.records} {
		q.mu.Lock()
		q.timed = true
		q.mu.Unlock()
	}
}

func (h *harness) get(name string) *autoscalingv1alpha1.CronFederatedHPA {
	h.t.Helper()
	obj, err := h.client.AutoscalingV1alpha1().CronFederatedHPAs(ns).Get(h.ctx, name, metav1.GetOptions{})
	if err != nil {
		h.t.Fatal(err)
	}
	return obj
}

func (h *harness) history(name, rule string) autoscalingv1alpha1.ExecutionHistory {
	h.t.Helper()
	obj := h.get(name)
	hist, ok := cronplan.FindHistory(&obj.Status, rule)
	if !ok {
		h.t.Fatalf("no history for rule %q in %v", rule, obj.Status.ExecutionHistories)
	}
	return hist
}

// update changes the object in the clientset and tells the controller, as
// the informer would.
func (h *harness) update(name string, change func(*autoscalingv1alpha1.CronFederatedHPA)) {
	h.t.Helper()
	old := h.get(name)
	updated := h.edit(name, change)
	h.c.onUpdate(h.ctx, old, updated)
}

// edit changes the object in the clientset at the clock's time, as a user
// would while the controller is down: the controller is not told, and the
// cache is refreshed.
func (h *harness) edit(name string, change func(*autoscalingv1alpha1.CronFederatedHPA)) *autoscalingv1alpha1.CronFederatedHPA {
	h.t.Helper()
	updated := h.get(name)
	change(updated)
	stored, err := h.client.AutoscalingV1alpha1().CronFederatedHPAs(ns).Update(h.ctx, updated, metav1.UpdateOptions{FieldManager: "kubectl-edit"})
	if err != nil {
		h.t.Fatal(err)
	}
	h.refresh()
	return stored
}

// events drains the recorded events.
func (h *harness) events() []string { return testkit.DrainEvents(h.recorder) }

func (h *harness) expectEvent(prefix string) {
	h.t.Helper()
	events := h.events()
	if _, ok := testkit.FindEvent(events, prefix); !ok {
		h.t.Errorf("no event starting with %q in %q", prefix, events)
	}
}

func (h *harness) statusWrites() int {
	n := 0
	for _, a := range h.client.Actions() {
		if a.GetVerb() == "update" && a.GetSubresource() == "status" {
			n++
		}
	}
	return n
}
