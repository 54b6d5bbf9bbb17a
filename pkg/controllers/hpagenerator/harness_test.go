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
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/scaleplane/scaleplane/pkg/internal/testkit"
	"github.com/scaleplane/scaleplane/pkg/workloop"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	kubeinformers "k8s.io/client-go/informers"
	kubefake "k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2/ktesting"
	"k8s.io/utils/ptr"

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

// apiserver models what kube-apiserver does to HPA writes that matters here:
// a JSON round trip (omitempty, canonical quantities), its defaults, UIDs,
// resourceVersions with optimistic concurrency, status kept on update, the
// writer's field manager in managedFields, and the UID and resourceVersion
// preconditions of delete. createErr, when set, fails creates (and
// updateErr updates); dropTolerance plays a server that does not keep
// behavior's tolerance (the HPAConfigurableTolerance gate off).
type apiserver struct {
	mu            sync.Mutex
	kube          *kubefake.Clientset
	rv            int
	uids          int
	createErr     error
	updateErr     error
	dropTolerance bool
}

func newAPIServer(kube *kubefake.Clientset) *apiserver {
	s := &apiserver{kube: kube, rv: 100}
	kube.PrependReactor("*", "horizontalpodautoscalers", s.react)
	return s
}

func (s *apiserver) react(action clienttesting.Action) (bool, runtime.Object, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	tracker := s.kube.Tracker()
	// Switch on the verb: create and update actions have the same methods.
	switch action.GetVerb() {
	case "create":
		a := action.(clienttesting.CreateAction)
		if s.createErr != nil {
			return true, nil, s.createErr
		}
		hpa := s.stored(a.GetObject().(*autoscalingv2.HorizontalPodAutoscaler))
		recordManager(hpa, action.(clienttesting.CreateActionImpl).GetCreateOptions().FieldManager)
		if _, err := tracker.Get(hpaResource, a.GetNamespace(), hpa.Name); err == nil {
			return true, nil, apierrors.NewAlreadyExists(hpaResource.GroupResource(), hpa.Name)
		}
		s.uids++
		hpa.UID = types.UID(fmt.Sprintf("hpa-uid-%d", s.uids))
		hpa.ResourceVersion = s.nextRV()
		hpa.Status = autoscalingv2.HorizontalPodAutoscalerStatus{}
		return true, hpa, tracker.Create(hpaResource, hpa, a.GetNamespace())
	case "update":
		a := action.(clienttesting.UpdateAction)
		if s.updateErr != nil && a.GetSubresource() == "" {
			return true, nil, s.updateErr
		}
		hpa := s.stored(a.GetObject().(*autoscalingv2.HorizontalPodAutoscaler))
		recordManager(hpa, action.(clienttesting.UpdateActionImpl).GetUpdateOptions().FieldManager)
		obj, err := tracker.Get(hpaResource, a.GetNamespace(), hpa.Name)
		if err != nil {
			return true, nil, err
		}
		old := obj.(*autoscalingv2.HorizontalPodAutoscaler)
		if hpa.ResourceVersion != old.ResourceVersion {
			return true, nil, apierrors.NewConflict(hpaResource.GroupResource(), hpa.Name, fmt.Errorf("resourceVersion %s is not %s", hpa.ResourceVersion, old.ResourceVersion))
		}
		hpa.UID = old.UID
		if a.GetSubresource() == "status" {
			old.Status = hpa.Status
			hpa = old
		} else {
			hpa.Status = old.Status
		}
		hpa.ResourceVersion = s.nextRV()
		return true, hpa, tracker.Update(hpaResource, hpa, a.GetNamespace())
	case "delete":
		a := action.(clienttesting.DeleteAction)
		obj, err := tracker.Get(hpaResource, a.GetNamespace(), a.GetName())
		if err != nil {
			return true, nil, err
		}
		have := obj.(*autoscalingv2.HorizontalPodAutoscaler)
		if pre := a.GetDeleteOptions().Preconditions; pre != nil {
			if pre.UID != nil && *pre.UID != have.UID {
				return true, nil, apierrors.NewConflict(hpaResource.GroupResource(), a.GetName(), fmt.Errorf("precondition failed: UID in precondition: %s", *pre.UID))
			}
			if pre.ResourceVersion != nil && *pre.ResourceVersion != have.ResourceVersion {
				return true, nil, apierrors.NewConflict(hpaResource.GroupResource(), a.GetName(), fmt.Errorf("precondition failed: ResourceVersion in precondition: %s", *pre.ResourceVersion))
			}
		}
		return true, nil, tracker.Delete(hpaResource, a.GetNamespace(), a.GetName())
	}
	return false, nil, nil
}

func (s *apiserver) nextRV() string {
	s.rv++
	return strconv.Itoa(s.rv)
}

// recordManager adds the writer's field manager to managedFields, as the
// apiserver does (without the field sets, which nothing here reads).
func recordManager(hpa *autoscalingv2.HorizontalPodAutoscaler, manager string) {
	if manager == "" {
		return
	}
	for _, e := range hpa.ManagedFields {
		if e.Manager == manager {
			return
		}
	}
	hpa.ManagedFields = append(hpa.ManagedFields, metav1.ManagedFieldsEntry{Manager: manager, Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "autoscaling/v2"})
}

// stored is the package's stored, with what this server drops dropped.
func (s *apiserver) stored(in *autoscalingv2.HorizontalPodAutoscaler) *autoscalingv2.HorizontalPodAutoscaler {
	out := stored(in)
	if b := out.Spec.Behavior; s.dropTolerance && b != nil {
		for _, rules := range []*autoscalingv2.HPAScalingRules{b.ScaleUp, b.ScaleDown} {
			if rules != nil {
				rules.Tolerance = nil
			}
		}
	}
	return out
}

// stored returns the HPA as kube-apiserver would store it: through JSON, then
// defaulted. The defaults are written out here independently of the
// controller's withDefaults, from the apiserver's documented behaviour.
func stored(in *autoscalingv2.HorizontalPodAutoscaler) *autoscalingv2.HorizontalPodAutoscaler {
	data, err := json.Marshal(in)
	if err != nil {
		panic(err)
	}
	out := &autoscalingv2.HorizontalPodAutoscaler{}
	if err := json.Unmarshal(data, out); err != nil {
		panic(err)
	}
	spec := &out.Spec
	if spec.MinReplicas == nil {
		spec.MinReplicas = ptr.To[int32](1)
	}
	if len(spec.Metrics) == 0 {
		spec.Metrics = []autoscalingv2.MetricSpec{cpuMetric(80)}
	}
	if b := spec.Behavior; b != nil {
		if b.ScaleUp == nil {
			b.ScaleUp = &autoscalingv2.HPAScalingRules{}
		}
		if b.ScaleUp.StabilizationWindowSeconds == nil {
			b.ScaleUp.StabilizationWindowSeconds = ptr.To[int32](0)
		}
		if b.ScaleUp.SelectPolicy == nil {
			b.ScaleUp.SelectPolicy = ptr.To(autoscalingv2.MaxChangePolicySelect)
		}
		if b.ScaleUp.Policies == nil {
			b.ScaleUp.Policies = []autoscalingv2.HPAScalingPolicy{
				{Type: autoscalingv2.PodsScalingPolicy, Value: 4, PeriodSeconds: 15},
				{Type: autoscalingv2.PercentScalingPolicy, Value: 100, PeriodSeconds: 15},
			}
		}
		if b.ScaleDown == nil {
			b.ScaleDown = &autoscalingv2.HPAScalingRules{}
		}
		// The scale-down window stays unset: the HPA controller's flag.
		if b.ScaleDown.SelectPolicy == nil {
			b.ScaleDown.SelectPolicy = ptr.To(autoscalingv2.MaxChangePolicySelect)
		}
		if b.ScaleDown.Policies == nil {
			b.ScaleDown.Policies = []autoscalingv2.HPAScalingPolicy{
				{Type: autoscalingv2.PercentScalingPolicy, Value: 100, PeriodSeconds: 15},
			}
		}
	}
	return out
}

// Fixtures.

func cpuMetric(utilization int32) autoscalingv2.MetricSpec {
	return autoscalingv2.MetricSpec{
		Type: autoscalingv2.ResourceMetricSourceType,
		Resource: &autoscalingv2.ResourceMetricSource{
			Name:   corev1.ResourceCPU,
			Target: autoscalingv2.MetricTarget{Type: autoscalingv2.UtilizationMetricType, AverageUtilization: ptr.To(utilization)},
		},
	}
}

func podsMetric(name, average string) autoscalingv2.MetricSpec {
	return autoscalingv2.MetricSpec{
		Type: autoscalingv2.PodsMetricSourceType,
		Pods: &autoscalingv2.PodsMetricSource{
			Metric: autoscalingv2.MetricIdentifier{Name: name},
			Target: autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageValue: ptr.To(resource.MustParse(average))},
		},
	}
}

func policy(minReplicas *int32, maxReplicas int32, metrics ...autoscalingv2.MetricSpec) *lwsv1.ScalePolicy {
	return &lwsv1.ScalePolicy{MinReplicas: minReplicas, MaxReplicas: maxReplicas, Metrics: metrics}
}

func lws(name string, p *lwsv1.ScalePolicy) *lwsv1.LeaderWorkerSet {
	return &lwsv1.LeaderWorkerSet{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, UID: types.UID("uid-" + name), ResourceVersion: "1"},
		Spec:       lwsv1.LeaderWorkerSetSpec{Replicas: ptr.To[int32](1), ScalePolicy: p},
	}
}

// foreignHPA is an HPA the generator did not make, on a Deployment.
func foreignHPA(name string, owners ...metav1.OwnerReference) *autoscalingv2.HorizontalPodAutoscaler {
	return &autoscalingv2.HorizontalPodAutoscaler{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, UID: types.UID("uid-hpa-" + name), ResourceVersion: "1", OwnerReferences: owners},
		Spec: autoscalingv2.HorizontalPodAutoscalerSpec{
			ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: name},
			MinReplicas:    ptr.To[int32](2),
			MaxReplicas:    7,
			Metrics:        []autoscalingv2.MetricSpec{cpuMetric(50)},
		},
	}
}

func targeting(hpa *autoscalingv2.HorizontalPodAutoscaler, lwsName string) *autoscalingv2.HorizontalPodAutoscaler {
	hpa.Spec.ScaleTargetRef = autoscalingv2.CrossVersionObjectReference{APIVersion: "leaderworkerset.x-k8s.io/v1", Kind: "LeaderWorkerSet", Name: lwsName}
	return hpa
}

func deploymentOwner(name string) metav1.OwnerReference {
	return metav1.OwnerReference{APIVersion: "apps/v1", Kind: "Deployment", Name: name, UID: "uid-deploy-" + types.UID(name), Controller: ptr.To(true)}
}

func lwsOwner(name string, uid types.UID) metav1.OwnerReference {
	return metav1.OwnerReference{APIVersion: "leaderworkerset.x-k8s.io/v1", Kind: "LeaderWorkerSet", Name: name, UID: uid, Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}
}

func resourceQuantity(s string) resource.Quantity { return resource.MustParse(s) }

// counterValue reads a counter, or a gauge, with one label from the registry
// /metrics serves.
func counterValue(t *testing.T, name, label, value string) float64 {
	t.Helper()
	v, _ := testkit.MetricValue(t, name, map[string]string{label: value})
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
