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

package resizer

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	kubeinformers "k8s.io/client-go/informers"
	kubefake "k8s.io/client-go/kubernetes/fake"
	metadatafake "k8s.io/client-go/metadata/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2/ktesting"
	metricsv1beta1 "k8s.io/metrics/pkg/apis/metrics/v1beta1"
	metricsfake "k8s.io/metrics/pkg/client/clientset/versioned/fake"
	testingclock "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	scaleplanev1alpha1 "github.com/scaleplane/scaleplane/pkg/apis/scaleplane/v1alpha1"
	"github.com/scaleplane/scaleplane/pkg/generated/clientset/versioned/fake"
	"github.com/scaleplane/scaleplane/pkg/generated/informers/externalversions"
	"github.com/scaleplane/scaleplane/pkg/workloop"

	"github.com/scaleplane/scaleplane/pkg/internal/testkit"
)

const (
	ns            = "kube-system"
	testInterval  = 15 * time.Second
	addonLabel    = "app"
	addonName     = "addon"
	containerName = "main"
)

var t0 = time.Date(2024, 5, 1, 9, 0, 0, 0, time.UTC)

// harness runs the controller's sync against fake clientsets and a fake
// clock. The informer caches are indexers the test refreshes from the
// clientsets, so tests choose when a cache catches up. The cluster size of
// source APIServer is fed straight into the counters, which are marked
// synced: the informers behind them have their own tests.
type harness struct {
	t        *testing.T
	ctx      context.Context
	clock    *testingclock.FakeClock
	client   *fake.Clientset
	kube     *kubefake.Clientset
	metrics  *metricsfake.Clientset
	recorder *record.FakeRecorder
	c        *Controller

	arIndexer, deployIndexer, stsIndexer, dsIndexer cache.Indexer

	// nodes and pods are the cluster the counters count.
	nodes int
	pods  []*corev1.Pod
}

func newHarness(t *testing.T, objects ...runtime.Object) *harness {
	t.Helper()
	_, ctx := ktesting.NewTestContext(t)
	h := &harness{t: t, ctx: ctx, clock: testingclock.NewFakeClock(t0)}
	var ars, kube []runtime.Object
	for _, o := range objects {
		if _, ok := o.(*scaleplanev1alpha1.AddonResizer); ok {
			ars = append(ars, o)
		} else {
			kube = append(kube, o)
		}
	}
	h.client = fake.NewSimpleClientset(ars...)
	h.kube = kubefake.NewClientset(kube...)
	h.metrics = metricsfake.NewSimpleClientset()
	h.recorder = record.NewFakeRecorder(1000)
	h.newController()
	return h
}

// newController builds a controller as a restarted process would: new
// memory, caches listed fresh from the clientsets, counters counted afresh.
func (h *harness) newController() {
	h.t.Helper()
	factory := externalversions.NewSharedInformerFactory(h.client, 0)
	kubeFactory := kubeinformers.NewSharedInformerFactory(h.kube, 0)
	arInformer := factory.Scaleplane().V1alpha1().AddonResizers()
	apps := kubeFactory.Apps().V1()
	c, err := NewController(h.ctx, Config{
		AddonResizers: arInformer, Deployments: apps.Deployments(), StatefulSets: apps.StatefulSets(), DaemonSets: apps.DaemonSets(),
		Client: h.client, KubeClient: h.kube, Metadata: metadatafake.NewSimpleMetadataClient(metadatafake.NewTestScheme()), Metrics: h.metrics,
		Recorder: h.recorder, Clock: h.clock, Workers: 1, MetricsInterval: testInterval,
	})
	if err != nil {
		h.t.Fatal(err)
	}
	h.c = c
	h.arIndexer = arInformer.Informer().GetIndexer()
	h.deployIndexer = apps.Deployments().Informer().GetIndexer()
	h.stsIndexer = apps.StatefulSets().Informer().GetIndexer()
	h.dsIndexer = apps.DaemonSets().Informer().GetIndexer()
	synced := func() bool { return true }
	c.counts.podInformer.synced = synced
	c.counts.nodeInformer.synced = synced
	h.recount()
	h.refresh()
}

// recount feeds the cluster to fresh counters.
func (h *harness) recount() {
	h.c.counts.nodes = newNodeCounter()
	for i := range h.nodes {
		h.c.counts.nodes.add(fmt.Sprintf("node-%d", i))
	}
	h.c.counts.containers = newContainerCounter()
	for _, p := range h.pods {
		h.c.counts.containers.add(newCountedPod(p))
	}
}

func (h *harness) setNodes(n int) {
	h.nodes = n
	h.recount()
}

// refresh makes the caches catch up with the clientsets.
func (h *harness) refresh() {
	h.t.Helper()
	ars, err := h.client.ScaleplaneV1alpha1().AddonResizers("").List(h.ctx, metav1.ListOptions{})
	h.check(err)
	replace(h.t, h.arIndexer, ars.Items)
	deploys, err := h.kube.AppsV1().Deployments("").List(h.ctx, metav1.ListOptions{})
	h.check(err)
	replace(h.t, h.deployIndexer, deploys.Items)
	sts, err := h.kube.AppsV1().StatefulSets("").List(h.ctx, metav1.ListOptions{})
	h.check(err)
	replace(h.t, h.stsIndexer, sts.Items)
	ds, err := h.kube.AppsV1().DaemonSets("").List(h.ctx, metav1.ListOptions{})
	h.check(err)
	replace(h.t, h.dsIndexer, ds.Items)
}

func replace[T any](t *testing.T, indexer cache.Indexer, items []T) {
	t.Helper()
	objs := make([]any, 0, len(items))
	for i := range items {
		objs = append(objs, &items[i])
	}
	if err := indexer.Replace(objs, ""); err != nil {
		t.Fatal(err)
	}
}

func (h *harness) check(err error) {
	h.t.Helper()
	if err != nil {
		h.t.Fatal(err)
	}
}

// syncAt moves the clock to at, syncs name, and refreshes the caches.
func (h *harness) syncAt(at time.Time, name string) time.Duration {
	h.t.Helper()
	d, err := h.trySyncAt(at, name)
	if err != nil {
		h.t.Fatalf("sync at %v: %v", at, err)
	}
	return d
}

func (h *harness) trySyncAt(at time.Time, name string) (time.Duration, error) {
	h.clock.SetTime(at)
	d, err := h.c.syncRecovered(h.ctx, cache.ObjectName{Namespace: ns, Name: name})
	h.refresh()
	return d, err
}

func (h *harness) get(name string) *scaleplanev1alpha1.AddonResizer {
	h.t.Helper()
	ar, err := h.client.ScaleplaneV1alpha1().AddonResizers(ns).Get(h.ctx, name, metav1.GetOptions{})
	h.check(err)
	return ar
}

func (h *harness) condition(name, typ string) *metav1.Condition {
	return meta.FindStatusCondition(h.get(name).Status.Conditions, typ)
}

func (h *harness) expectCondition(name, typ string, status metav1.ConditionStatus, reason string) {
	h.t.Helper()
	c := h.condition(name, typ)
	if c == nil || c.Status != status || c.Reason != reason {
		h.t.Errorf("condition %s = %+v; want %s %s", typ, c, status, reason)
	}
}

// deploymentResources returns the resources of container "main" of the
// Deployment, as the API server has it.
func (h *harness) deploymentResources(name string) corev1.ResourceRequirements {
	h.t.Helper()
	d, err := h.kube.AppsV1().Deployments(ns).Get(h.ctx, name, metav1.GetOptions{})
	h.check(err)
	return containerOf(h.t, &d.Spec.Template).Resources
}

func containerOf(t *testing.T, tmpl *corev1.PodTemplateSpec) *corev1.Container {
	t.Helper()
	for i := range tmpl.Spec.Containers {
		if tmpl.Spec.Containers[i].Name == containerName {
			return &tmpl.Spec.Containers[i]
		}
	}
	t.Fatalf("no container %q", containerName)
	return nil
}

// events drains the recorded events.
func (h *harness) events() []string { return testkit.DrainEvents(h.recorder) }

// expectEvents checks the drained events start with the prefixes, in order.
func (h *harness) expectEvents(prefixes ...string) []string {
	h.t.Helper()
	events := h.events()
	if len(events) != len(prefixes) {
		h.t.Errorf("events %q; want %d starting with %q", events, len(prefixes), prefixes)
		return events
	}
	for i, p := range prefixes {
		if !strings.HasPrefix(events[i], p) {
			h.t.Errorf("event %d = %q; want it to start with %q", i, events[i], p)
		}
	}
	return events
}

// writes counts the write actions (create, update, patch) on the workloads
// and on the AddonResizers.
func (h *harness) writes() (target, status int) {
	for _, a := range h.kube.Actions() {
		if isWrite(a) {
			target++
		}
	}
	for _, a := range h.client.Actions() {
		if isWrite(a) {
			status++
		}
	}
	return target, status
}

func isWrite(a clienttesting.Action) bool {
	switch a.GetVerb() {
	case "create", "update", "patch", "delete":
		return true
	}
	return false
}

// patches returns the patch actions on the workloads.
func (h *harness) patches() []clienttesting.PatchAction {
	var out []clienttesting.PatchAction
	for _, a := range h.kube.Actions() {
		if p, ok := a.(clienttesting.PatchAction); ok && a.GetVerb() == "patch" {
			out = append(out, p)
		}
	}
	return out
}

// decodedPatch is the patch as the resizer sends it.
type decodedPatch struct {
	Metadata struct {
		ResourceVersion string `json:"resourceVersion"`
	} `json:"metadata"`
	Spec struct {
		Template struct {
			Spec struct {
				Containers []struct {
					Name      string                      `json:"name"`
					Resources corev1.ResourceRequirements `json:"resources"`
				} `json:"containers"`
			} `json:"spec"`
		} `json:"template"`
	} `json:"spec"`
}

func decodePatch(t *testing.T, p clienttesting.PatchAction) decodedPatch {
	t.Helper()
	if p.GetPatchType() != types.StrategicMergePatchType {
		t.Errorf("patch type %s; want strategic merge", p.GetPatchType())
	}
	var out decodedPatch
	if err := json.Unmarshal(p.GetPatch(), &out); err != nil {
		t.Fatalf("patch %s: %v", p.GetPatch(), err)
	}
	return out
}

// option changes an AddonResizer.
type option func(*scaleplanev1alpha1.AddonResizer)

// addonResizer sizes container "main" of Deployment "addon": cpu 100m +
// 10m per unit, memory 100Mi + 10Mi per unit, by nodes, linearly, with a
// threshold of 0.
func addonResizer(name string, opts ...option) *scaleplanev1alpha1.AddonResizer {
	ar := &scaleplanev1alpha1.AddonResizer{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, UID: types.UID("uid-" + name), ResourceVersion: "1", Generation: 1},
		Spec: scaleplanev1alpha1.AddonResizerSpec{
			TargetRef:     scaleplanev1alpha1.TargetReference{Kind: scaleplanev1alpha1.TargetKindDeployment, Name: addonName},
			ContainerName: containerName,
			Resources: []scaleplanev1alpha1.ResourceScaling{
				{Name: corev1.ResourceCPU, Base: resource.MustParse("100m"), ExtraPerUnit: resource.MustParse("10m")},
				{Name: corev1.ResourceMemory, Base: resource.MustParse("100Mi"), ExtraPerUnit: resource.MustParse("10Mi")},
			},
		},
	}
	for _, o := range opts {
		o(ar)
	}
	return ar
}

func withMode(m scaleplanev1alpha1.ScalingMode) option {
	return func(ar *scaleplanev1alpha1.AddonResizer) { ar.Spec.ScalingMode = m }
}

func withSource(s scaleplanev1alpha1.SizeSource) option {
	return func(ar *scaleplanev1alpha1.AddonResizer) { ar.Spec.Source = s }
}

func withThreshold(t int32) option {
	return func(ar *scaleplanev1alpha1.AddonResizer) { ar.Spec.Threshold = t }
}

func withExponential(minClusterSize int32) option {
	return func(ar *scaleplanev1alpha1.AddonResizer) {
		ar.Spec.Estimator = scaleplanev1alpha1.Estimator{Type: scaleplanev1alpha1.ExponentialEstimator, MinClusterSize: minClusterSize}
	}
}

func withDelays(up, down time.Duration) option {
	return func(ar *scaleplanev1alpha1.AddonResizer) {
		ar.Spec.ScaleUpDelay = &metav1.Duration{Duration: up}
		ar.Spec.ScaleDownDelay = &metav1.Duration{Duration: down}
	}
}

func withSetLimits(b bool) option {
	return func(ar *scaleplanev1alpha1.AddonResizer) { ar.Spec.SetLimits = ptr.To(b) }
}

func withTarget(kind scaleplanev1alpha1.TargetKind, name string) option {
	return func(ar *scaleplanev1alpha1.AddonResizer) {
		ar.Spec.TargetRef = scaleplanev1alpha1.TargetReference{Kind: kind, Name: name}
	}
}

func withContainer(name string) option {
	return func(ar *scaleplanev1alpha1.AddonResizer) { ar.Spec.ContainerName = name }
}

func withResources(r ...scaleplanev1alpha1.ResourceScaling) option {
	return func(ar *scaleplanev1alpha1.AddonResizer) { ar.Spec.Resources = r }
}

// resources builds requirements from "name=quantity" pairs; a "limit:"
// prefix makes a limit.
func resources(pairs ...string) corev1.ResourceRequirements {
	var r corev1.ResourceRequirements
	for _, p := range pairs {
		list := &r.Requests
		if rest, ok := strings.CutPrefix(p, "limit:"); ok {
			list, p = &r.Limits, rest
		}
		name, q, _ := strings.Cut(p, "=")
		if *list == nil {
			*list = corev1.ResourceList{}
		}
		(*list)[corev1.ResourceName(name)] = resource.MustParse(q)
	}
	return r
}

func podTemplate(r corev1.ResourceRequirements) corev1.PodTemplateSpec {
	return corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{addonLabel: addonName}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{
			{Name: "sidecar", Image: "sidecar", Resources: resources("cpu=5m")},
			{Name: containerName, Image: "addon", Resources: r},
		}},
	}
}

var addonSelector = &metav1.LabelSelector{MatchLabels: map[string]string{addonLabel: addonName}}

func deployment(name string, r corev1.ResourceRequirements) *appsv1.Deployment {
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, UID: types.UID("uid-" + name), ResourceVersion: "7", Generation: 1},
		Spec:       appsv1.DeploymentSpec{Selector: addonSelector, Template: podTemplate(r)},
	}
}

func statefulSet(name string, r corev1.ResourceRequirements) *appsv1.StatefulSet {
	return &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, UID: types.UID("uid-" + name), ResourceVersion: "7", Generation: 1},
		Spec:       appsv1.StatefulSetSpec{Selector: addonSelector, Template: podTemplate(r)},
	}
}

func daemonSet(name string, r corev1.ResourceRequirements) *appsv1.DaemonSet {
	return &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, UID: types.UID("uid-" + name), ResourceVersion: "7", Generation: 1},
		Spec:       appsv1.DaemonSetSpec{Selector: addonSelector, Template: podTemplate(r)},
	}
}

// pod builds a pod with n regular containers.
func pod(namespace, name string, phase corev1.PodPhase, labels map[string]string, n int) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace, UID: types.UID("uid-" + namespace + "-" + name), ResourceVersion: "1", Labels: labels},
		Status:     corev1.PodStatus{Phase: phase},
	}
	for i := range n {
		p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: fmt.Sprintf("c%d", i), Image: "busybox"})
	}
	return p
}

func mustQuantity(t *testing.T, list corev1.ResourceList, name corev1.ResourceName, want string) {
	t.Helper()
	got, ok := list[name]
	if !ok {
		t.Errorf("%s not set in %v; want %s", name, list, want)
		return
	}
	if w := resource.MustParse(want); got.Cmp(w) != 0 {
		t.Errorf("%s = %s; want %s", name, got.String(), want)
	}
}

func keyOf(name string) cache.ObjectName { return cache.ObjectName{Namespace: ns, Name: name} }

func nodeMetrics(name string) *metricsv1beta1.NodeMetrics {
	return &metricsv1beta1.NodeMetrics{ObjectMeta: metav1.ObjectMeta{Name: name}}
}

func podMetrics(namespace, name string, labels map[string]string, containers int) *metricsv1beta1.PodMetrics {
	pm := &metricsv1beta1.PodMetrics{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace, Labels: labels}}
	for i := range containers {
		pm.Containers = append(pm.Containers, metricsv1beta1.ContainerMetrics{Name: fmt.Sprintf("c%d", i)})
	}
	return pm
}

// addMetrics adds NodeMetrics or PodMetrics under the resources the metrics
// clientset lists ("nodes", "pods"), not those the tracker would guess from
// the kinds.
func (h *harness) addMetrics(obj runtime.Object) {
	h.t.Helper()
	gv := metricsv1beta1.SchemeGroupVersion
	switch o := obj.(type) {
	case *metricsv1beta1.NodeMetrics:
		h.check(h.metrics.Tracker().Create(gv.WithResource("nodes"), o, ""))
	case *metricsv1beta1.PodMetrics:
		h.check(h.metrics.Tracker().Create(gv.WithResource("pods"), o, o.Namespace))
	}
}

// syncRecovered runs the sync a worker runs, with a panic turned into an
// error.
func (c *Controller) syncRecovered(ctx context.Context, key cache.ObjectName) (time.Duration, error) {
	return workloop.Recovered(c.sync)(ctx, key)
}
