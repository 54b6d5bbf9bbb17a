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
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	kubeinformers "k8s.io/client-go/informers"
	kubefake "k8s.io/client-go/kubernetes/fake"
	metadatafake "k8s.io/client-go/metadata/fake"
	scalefake "k8s.io/client-go/scale/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2/ktesting"
	testingclock "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	autoscalingv1alpha1 "github.com/scaleplane/scaleplane/pkg/apis/autoscaling/v1alpha1"
	lwsv1 "github.com/scaleplane/scaleplane/pkg/apis/leaderworkerset/v1"
	"github.com/scaleplane/scaleplane/pkg/generated/clientset/versioned/fake"
	"github.com/scaleplane/scaleplane/pkg/generated/informers/externalversions"
	"github.com/scaleplane/scaleplane/pkg/internal/testkit"
)

const ns = "default"

// schemaVariant is a CronFederatedHPA CRD schema the harness plays:
// scaleplane's, or Karmada's, which stores neither maxDelaySeconds nor
// lastScheduleTime (the apiserver prunes them on every write).
type schemaVariant struct {
	name   string
	stored StoredFields
}

var (
	projectSchema = schemaVariant{name: "scaleplane CRD", stored: AllStoredFields}
	karmadaSchema = schemaVariant{name: "Karmada CRD", stored: StoredFields{}}
)

// forEachSchema runs a planning or memory test on both schemas: every promise
// of the cron-scaler must hold without the fields Karmada's CRD prunes.
func forEachSchema(t *testing.T, test func(t *testing.T, crd schemaVariant)) {
	for _, crd := range []schemaVariant{projectSchema, karmadaSchema} {
		t.Run(crd.name, func(t *testing.T) { test(t, crd) })
	}
}

// prune drops what the schema does not store, as the apiserver does.
func (s schemaVariant) prune(obj *autoscalingv1alpha1.CronFederatedHPA) {
	if !s.stored.MaxDelaySeconds {
		for i := range obj.Spec.Rules {
			obj.Spec.Rules[i].MaxDelaySeconds = nil
		}
	}
	if !s.stored.LastScheduleTime {
		for i := range obj.Status.ExecutionHistories {
			obj.Status.ExecutionHistories[i].LastScheduleTime = nil
		}
	}
}

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
		objs = append(objs, &list.Items[i])
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

// heldQueue is one of the controller's queues as the harness drives it: keys
// added at once go to the real queue, and the worker functions of Run take
// them from it; keys added with a delay (a requeue at the next firing, a
// retry with backoff) are held and recorded instead of timed, so the test
// decides when they come back. With timed set it passes everything through,
// for tests that run Run.
type heldQueue struct {
	workqueue.TypedRateLimitingInterface[cache.ObjectName]
	mu      sync.Mutex
	timed   bool
	delays  map[cache.ObjectName]time.Duration
	retries map[cache.ObjectName]int
}

func (q *heldQueue) AddAfter(key cache.ObjectName, d time.Duration) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.timed {
		q.TypedRateLimitingInterface.AddAfter(key, d)
		return
	}
	if q.delays == nil {
		q.delays = map[cache.ObjectName]time.Duration{}
	}
	q.delays[key] = d
}

func (q *heldQueue) AddRateLimited(key cache.ObjectName) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.timed {
		q.TypedRateLimitingInterface.AddRateLimited(key)
		return
	}
	if q.retries == nil {
		q.retries = map[cache.ObjectName]int{}
	}
	q.retries[key]++
}

// after returns the delay key was last requeued with.
func (q *heldQueue) after(key cache.ObjectName) (time.Duration, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	d, ok := q.delays[key]
	return d, ok
}

// retried says whether key was requeued with backoff.
func (q *heldQueue) retried(key cache.ObjectName) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.retries[key] > 0
}

func (q *heldQueue) forget(key cache.ObjectName) {
	q.mu.Lock()
	defer q.mu.Unlock()
	delete(q.delays, key)
	delete(q.retries, key)
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
	hist, ok := findHistory(&obj.Status, rule)
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

// updateLikeAPIServer makes an update of a CronFederatedHPA in the fake
// clientset behave as the apiserver's: a write with a resourceVersion other
// than the stored one conflicts; a write of the status subresource changes
// only status, and a write of the object everything else; the schema prunes
// what it does not store; a write that changes something gets a new
// resourceVersion and moves the time of its field manager's managedFields
// entry (by subresource) to the fake clock's.
func (h *harness) updateLikeAPIServer(action clienttesting.Action) (bool, runtime.Object, error) {
	update := action.(clienttesting.UpdateActionImpl)
	obj := update.GetObject().(*autoscalingv1alpha1.CronFederatedHPA).DeepCopy()
	gvr := autoscalingv1alpha1.SchemeGroupVersion.WithResource("cronfederatedhpas")
	gr := gvr.GroupResource()
	current, err := h.client.Tracker().Get(gvr, obj.Namespace, obj.Name)
	if err != nil {
		return true, nil, err
	}
	stored := current.(*autoscalingv1alpha1.CronFederatedHPA)
	if obj.ResourceVersion != "" && obj.ResourceVersion != stored.ResourceVersion {
		return true, nil, apierrors.NewConflict(gr, obj.Name, fmt.Errorf("the object has been modified; please apply your changes to the latest version and try again"))
	}
	next := stored.DeepCopy()
	if update.GetSubresource() == "status" {
		next.Status = obj.Status
	} else {
		next.Spec, next.Labels, next.Annotations = obj.Spec, obj.Labels, obj.Annotations
	}
	h.schema.prune(next)
	if equality.Semantic.DeepEqual(next.Spec, stored.Spec) && sameStatus(next.Status, stored.Status) &&
		equality.Semantic.DeepEqual(next.ObjectMeta, stored.ObjectMeta) {
		return true, stored.DeepCopy(), nil
	}
	if !equality.Semantic.DeepEqual(next.Spec, stored.Spec) {
		next.Generation++
	}
	rv, _ := strconv.Atoi(stored.ResourceVersion)
	next.ResourceVersion = strconv.Itoa(rv + 1)
	touchManagedFields(&next.ObjectMeta, update.UpdateOptions.FieldManager, update.GetSubresource(), h.clock.Now())
	if err := h.client.Tracker().Update(gvr, next, next.Namespace); err != nil {
		return true, nil, err
	}
	return true, next.DeepCopy(), nil
}

// touchManagedFields sets the time of manager's Update entry for
// subresource, as the apiserver does when a write changes fields (with
// second precision, as it stores them). The field sets are not kept.
func touchManagedFields(m *metav1.ObjectMeta, manager, subresource string, at time.Time) {
	if manager == "" {
		manager = "unnamed-client"
	}
	t := metav1.NewTime(at.UTC().Truncate(time.Second))
	for i := range m.ManagedFields {
		if f := &m.ManagedFields[i]; f.Manager == manager && f.Subresource == subresource && f.Operation == metav1.ManagedFieldsOperationUpdate {
			f.Time = &t
			return
		}
	}
	m.ManagedFields = append(m.ManagedFields, metav1.ManagedFieldsEntry{
		Manager: manager, Operation: metav1.ManagedFieldsOperationUpdate, Subresource: subresource, Time: &t, APIVersion: "autoscaling.karmada.io/v1alpha1",
	})
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

// scaleStore backs the fake scale client: replicas by resource and name,
// and, as the apiserver keeps them, the managedFields entries that own them
// (served to the fake metadata client).
type scaleStore struct {
	mu       sync.Mutex
	clock    *testingclock.FakeClock
	fake     *scalefake.FakeScaleClient
	metadata *metadatafake.FakeMetadataClient
	replicas map[string]int32
	managers map[string]metav1.ManagedFieldsEntry
	updates  int
	// conflicts makes the next updates fail with a conflict.
	conflicts int
	// err, when set, fails every update with it.
	err error
	// block, when set, holds every update until it is closed; entered
	// receives one value per update that started.
	block, entered chan struct{}
}

func newScaleStore(clk *testingclock.FakeClock) *scaleStore {
	s := &scaleStore{
		clock: clk, fake: &scalefake.FakeScaleClient{}, metadata: metadatafake.NewSimpleMetadataClient(runtime.NewScheme()),
		replicas: map[string]int32{}, managers: map[string]metav1.ManagedFieldsEntry{},
	}
	s.metadata.PrependReactor("get", "*", func(action clienttesting.Action) (bool, runtime.Object, error) {
		get := action.(clienttesting.GetAction)
		key := get.GetResource().Resource + "/" + get.GetName()
		s.mu.Lock()
		defer s.mu.Unlock()
		if _, ok := s.replicas[key]; !ok {
			return true, nil, apierrors.NewNotFound(get.GetResource().GroupResource(), get.GetName())
		}
		m := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: get.GetName(), Namespace: get.GetNamespace()}}
		if e, ok := s.managers[key]; ok {
			m.ManagedFields = []metav1.ManagedFieldsEntry{e}
		}
		return true, m, nil
	})
	s.fake.AddReactor("patch", "*", func(action clienttesting.Action) (bool, runtime.Object, error) {
		s.mu.Lock()
		block, entered := s.block, s.entered
		s.mu.Unlock()
		if block != nil {
			entered <- struct{}{}
			<-block
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.err != nil {
			return true, nil, s.err
		}
		patch := action.(clienttesting.PatchAction)
		if patch.GetSubresource() != "scale" || patch.GetPatchType() != types.MergePatchType {
			return true, nil, fmt.Errorf("unexpected %s patch of %s", patch.GetPatchType(), patch.GetSubresource())
		}
		if s.conflicts > 0 {
			s.conflicts--
			return true, nil, apierrors.NewConflict(patch.GetResource().GroupResource(), patch.GetName(), nil)
		}
		key := patch.GetResource().Resource + "/" + patch.GetName()
		if _, ok := s.replicas[key]; !ok {
			return true, nil, apierrors.NewNotFound(patch.GetResource().GroupResource(), patch.GetName())
		}
		var body struct {
			Spec struct {
				Replicas *int32 `json:"replicas"`
			} `json:"spec"`
		}
		if err := json.Unmarshal(patch.GetPatch(), &body); err != nil || body.Spec.Replicas == nil {
			return true, nil, apierrors.NewBadRequest(fmt.Sprintf("patch %s does not set spec.replicas", patch.GetPatch()))
		}
		s.updates++
		// The fake scale client drops the patch options: every scale
		// patch is the cron-scaler's.
		s.write(key, FieldManager, "scale", *body.Spec.Replicas)
		sc := &autoscalingv1.Scale{ObjectMeta: metav1.ObjectMeta{Name: patch.GetName(), Namespace: patch.GetNamespace()}}
		sc.Spec.Replicas = *body.Spec.Replicas
		return true, sc, nil
	})
	return s
}

// write sets replicas as manager, as the apiserver records it: a write that
// changes the value makes manager the owner of spec.replicas, at the clock's
// time (in seconds); one that changes nothing changes no entry. A write
// through the scale subresource gets no time: the apiserver's scale handler
// drops it (k8s.io/apimachinery v0.37.2, pkg/util/managedfields/scalehandler.go,
// ToParent takes the time from the parent's entries, where a manager that
// writes only through the scale subresource has none), as the cron-scaler
// integration test InheritedFiringNotReapplied shows.
func (s *scaleStore) write(key, manager, subresource string, replicas int32) {
	if old, ok := s.replicas[key]; ok && old == replicas {
		return
	}
	s.replicas[key] = replicas
	var at *metav1.Time
	if subresource != "scale" {
		at = ptr.To(metav1.NewTime(s.clock.Now().UTC().Truncate(time.Second)))
	}
	s.managers[key] = metav1.ManagedFieldsEntry{
		Manager: manager, Operation: metav1.ManagedFieldsOperationUpdate, Subresource: subresource, Time: at,
		FieldsType: "FieldsV1", FieldsV1: metav1.NewFieldsV1(`{"f:spec":{"f:replicas":{}}}`),
	}
}

// scaleBy sets replicas as another manager would, through the object
// (kubectl edit, apply or patch) or, with subresource "scale", through the
// scale subresource (kubectl scale, the HPA controller).
func (s *scaleStore) scaleBy(manager, subresource, resource, name string, replicas int32) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.write(resource+"/"+name, manager, subresource, replicas)
}

// set sets replicas without a trace in managedFields (a test's setup).
func (s *scaleStore) set(resource, name string, replicas int32) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.replicas[resource+"/"+name] = replicas
}

func (s *scaleStore) failWith(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.err = err
}

func (s *scaleStore) get(resource, name string) int32 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.replicas[resource+"/"+name]
}

func (s *scaleStore) updateCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.updates
}

// testMapper knows Deployments and StatefulSets; kinds in onReset become
// known when it is reset, like a CRD installed after discovery was cached.
type testMapper struct {
	*meta.DefaultRESTMapper
	resets  int
	onReset []schema.GroupVersionKind
}

func newTestMapper() *testMapper {
	m := &testMapper{DefaultRESTMapper: meta.NewDefaultRESTMapper(nil)}
	m.Add(schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}, meta.RESTScopeNamespace)
	m.Add(schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "StatefulSet"}, meta.RESTScopeNamespace)
	m.Add(lwsv1.SchemeGroupVersion.WithKind("LeaderWorkerSet"), meta.RESTScopeNamespace)
	return m
}

func (m *testMapper) Reset() {
	m.resets++
	for _, gvk := range m.onReset {
		m.Add(gvk, meta.RESTScopeNamespace)
	}
}

// cron builds a CronFederatedHPA on a Deployment.
func cron(name string, rules ...autoscalingv1alpha1.CronFederatedHPARule) *autoscalingv1alpha1.CronFederatedHPA {
	return &autoscalingv1alpha1.CronFederatedHPA{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, UID: types.UID("uid-" + name), ResourceVersion: "1"},
		Spec: autoscalingv1alpha1.CronFederatedHPASpec{
			ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"},
			Rules:          rules,
		},
	}
}

func rule(name, schedule string, replicas int32) autoscalingv1alpha1.CronFederatedHPARule {
	return autoscalingv1alpha1.CronFederatedHPARule{Name: name, Schedule: schedule, TargetReplicas: ptr.To(replicas), TimeZone: ptr.To("UTC")}
}

func utc(s string) time.Time {
	t, err := time.Parse("2006-01-02 15:04:05.000", s)
	if err != nil {
		t, err = time.Parse("2006-01-02 15:04:05", s)
	}
	if err != nil {
		panic(err)
	}
	return t
}

func timeOf(t *metav1.Time) time.Time {
	if t == nil {
		return time.Time{}
	}
	return t.Time
}

// size is the number of objects the memory holds.
func (m *memory) size() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.objects)
}
