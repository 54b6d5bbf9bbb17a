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
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	kubefake "k8s.io/client-go/kubernetes/fake"
	scalefake "k8s.io/client-go/scale/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2/ktesting"
	testingclock "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	autoscalingv1alpha1 "github.com/scaleplane/scaleplane/pkg/apis/autoscaling/v1alpha1"
	"github.com/scaleplane/scaleplane/pkg/generated/clientset/versioned/fake"
	"github.com/scaleplane/scaleplane/pkg/generated/informers/externalversions"
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
	c        *Controller
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
		case *autoscalingv1alpha1.FederatedHPA:
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
	h.client.PrependReactor("update", "cronfederatedhpas", pruneWrites)
	h.kube = kubefake.NewSimpleClientset(kube...)
	h.scales = newScaleStore()
	h.mapper = newTestMapper()
	h.recorder = record.NewFakeRecorder(1000)
	h.newController()
	return h
}

// newController builds a controller as a restarted process would: new
// memory, a cache listed fresh from the clientset.
func (h *harness) newController() {
	h.t.Helper()
	factory := externalversions.NewSharedInformerFactory(h.client, 0)
	informer := factory.Autoscaling().V1alpha1().CronFederatedHPAs()
	c, err := NewController(h.ctx, informer, h.client, h.kube, h.scales.fake, h.mapper, h.recorder, h.clock, 1)
	if err != nil {
		h.t.Fatal(err)
	}
	c.SetStoredFields(h.schema.stored)
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

func (h *harness) trySyncAt(at time.Time, name string) (time.Duration, error) {
	h.clock.SetTime(at)
	return h.c.syncRecovered(h.ctx, cache.ObjectName{Namespace: ns, Name: name})
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

// update changes the object's spec in the clientset and tells the
// controller, as the informer would.
func (h *harness) update(name string, change func(*autoscalingv1alpha1.CronFederatedHPA)) {
	h.t.Helper()
	old := h.get(name)
	updated := old.DeepCopy()
	change(updated)
	updated.ResourceVersion = old.ResourceVersion + "1"
	if _, err := h.client.AutoscalingV1alpha1().CronFederatedHPAs(ns).Update(h.ctx, updated, metav1.UpdateOptions{}); err != nil {
		h.t.Fatal(err)
	}
	h.refresh()
	h.c.onUpdate(h.ctx, old, updated)
}

// events drains the recorded events.
func (h *harness) events() []string {
	var out []string
	for {
		select {
		case e := <-h.recorder.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

func (h *harness) expectEvent(prefix string) {
	h.t.Helper()
	events := h.events()
	for _, e := range events {
		if strings.HasPrefix(e, prefix) {
			return
		}
	}
	h.t.Errorf("no event starting with %q in %q", prefix, events)
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

// scaleStore backs the fake scale client: replicas by resource and name.
type scaleStore struct {
	mu       sync.Mutex
	fake     *scalefake.FakeScaleClient
	replicas map[string]int32
	updates  int
	// conflicts makes the next updates fail with a conflict.
	conflicts int
	// err, when set, fails every update with it.
	err error
	// block, when set, holds every update until it is closed; entered
	// receives one value per update that started.
	block, entered chan struct{}
}

func newScaleStore() *scaleStore {
	s := &scaleStore{fake: &scalefake.FakeScaleClient{}, replicas: map[string]int32{}}
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
		s.replicas[key] = *body.Spec.Replicas
		sc := &autoscalingv1.Scale{ObjectMeta: metav1.ObjectMeta{Name: patch.GetName(), Namespace: patch.GetNamespace()}}
		sc.Spec.Replicas = *body.Spec.Replicas
		return true, sc, nil
	})
	return s
}

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
