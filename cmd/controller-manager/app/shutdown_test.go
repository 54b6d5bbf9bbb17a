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

package app

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery/cached/memory"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	kubeinformers "k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	kubefake "k8s.io/client-go/kubernetes/fake"
	appsv1client "k8s.io/client-go/kubernetes/typed/apps/v1"
	autoscalingv2client "k8s.io/client-go/kubernetes/typed/autoscaling/v2"
	metadatafake "k8s.io/client-go/metadata/fake"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/scale"
	scalefake "k8s.io/client-go/scale/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"
	metricsfake "k8s.io/metrics/pkg/client/clientset/versioned/fake"
	"k8s.io/utils/clock"
	testingclock "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/scaleplane/scaleplane/cmd/controller-manager/app/options"
	autoscalingv1alpha1 "github.com/scaleplane/scaleplane/pkg/apis/autoscaling/v1alpha1"
	lwsv1 "github.com/scaleplane/scaleplane/pkg/apis/leaderworkerset/v1"
	scaleplanev1alpha1 "github.com/scaleplane/scaleplane/pkg/apis/scaleplane/v1alpha1"
	"github.com/scaleplane/scaleplane/pkg/generated/clientset/versioned/fake"
	"github.com/scaleplane/scaleplane/pkg/generated/informers/externalversions"
)

// Issue 19: every controller stops the same way, through the path Run takes
// (runWithLeaderElection running runControllers with the registry's
// descriptor): a write in flight when the process is told to stop finishes,
// with a context that is still live, before the lease is released, and the
// manager returns after that. The write is held until the controller's work
// loop says it is stopping; a loop that cancelled its syncs would fail the
// write, and one that did not wait for them would release the lease while the
// write is held.
func TestShutdownFinishesWritesInFlightBeforeReleasingTheLease(t *testing.T) {
	cases := []shutdownCase{
		{controller: "hpa-generator", write: "HorizontalPodAutoscaler created", setup: hpaGeneratorContext},
		{controller: "resizer", write: "Deployment patched", setup: resizerContext},
		{controller: "cron-scaler", write: "Deployment scaled", after: []string{"firing recorded"}, setup: cronScalerContext},
	}
	// Every controller the registry knows has its case: a new one is not
	// exempt (docs/architecture.md, adding a controller).
	for _, name := range KnownControllers(NewControllerDescriptors()) {
		if !slices.ContainsFunc(cases, func(c shutdownCase) bool { return c.controller == name }) {
			t.Errorf("no case for the registered controller %s", name)
		}
	}
	for _, tc := range cases {
		t.Run(tc.controller, func(t *testing.T) {
			// The log is kept: it says when the work loop is stopping.
			logger := ktesting.NewLogger(t, ktesting.NewConfig(ktesting.BufferLogs(true)))
			ctx := klog.NewContext(context.Background(), logger)
			ctx, cancel := context.WithCancel(ctx)
			defer cancel()
			leases := kubefake.NewClientset()
			log := &eventLog{}
			leaseReleases(leases, log)
			g := newWriteGate(log, tc.write)
			controllerCtx := tc.setup(g)
			checks := newHealthChecks()
			run := func(ctx context.Context) {
				runControllers(ctx, controllerCtx, NewControllerDescriptors(), []string{tc.controller}, checks)
			}
			returned := make(chan error, 1)
			go func() { returned <- runWithLeaderElection(ctx, leases, fastLeaderElection(), checks, run) }()

			select {
			case <-g.entered:
			case <-time.After(30 * time.Second):
				t.Fatal("the controller never wrote")
			}
			cancel()
			waitForLog(t, logger, "Stopping: no new work, waiting for the syncs in flight")
			if slices.Contains(log.list(), "lease released") {
				t.Error("the lease was released while a write was in flight")
			}
			close(g.open)
			select {
			case err := <-returned:
				if err != nil {
					t.Fatalf("runWithLeaderElection: %v", err)
				}
			case <-time.After(30 * time.Second):
				t.Fatal("runWithLeaderElection did not return")
			}
			log.add("manager returned")
			want := append(append([]string{tc.write}, tc.after...), "lease released", "manager returned")
			if got := log.list(); !slices.Equal(got, want) {
				t.Errorf("shutdown = %q; want %q", got, want)
			}
		})
	}
}

// shutdownCase is one controller's case: what its setup holds at the gate.
type shutdownCase struct {
	controller string
	// write is what the gated write logs once it went through.
	write string
	// after is what the controller logs after the write and before the
	// lease goes: the cron-scaler's status stage records the firing.
	after []string
	setup func(g *writeGate) ControllerContext
}

// writeGate holds a controller's write until the test opens it, as a slow
// API server would, and then fails it if its context ended meanwhile, as a
// real client's request ends with its context. A write that goes through is
// logged as what.
type writeGate struct {
	log     *eventLog
	what    string
	once    sync.Once
	entered chan struct{}
	open    chan struct{}
}

func newWriteGate(log *eventLog, what string) *writeGate {
	return &writeGate{log: log, what: what, entered: make(chan struct{}), open: make(chan struct{})}
}

// pass waits until the gate is open and returns the context's error.
func (g *writeGate) pass(ctx context.Context) error {
	g.once.Do(func() { close(g.entered) })
	<-g.open
	return ctx.Err()
}

// written logs a write that went through.
func (g *writeGate) written(err error) {
	if err == nil {
		g.log.add(g.what)
	}
}

// waitForLog waits until the test logger has logged want.
func waitForLog(t *testing.T, logger klog.Logger, want string) {
	t.Helper()
	buffer := logger.GetSink().(ktesting.Underlier).GetBuffer()
	err := wait.PollUntilContextTimeout(context.Background(), 10*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		return strings.Contains(buffer.String(), want), nil
	})
	if err != nil {
		t.Fatalf("never logged %q", want)
	}
}

// servedResources makes the fake clientset's discovery serve resources, so
// that startController finds what the controller requires.
func servedResources(kube *kubefake.Clientset, gvrs ...schema.GroupVersionResource) {
	for _, gvr := range gvrs {
		kube.Resources = append(kube.Resources, &metav1.APIResourceList{
			GroupVersion: gvr.GroupVersion().String(),
			APIResources: []metav1.APIResource{{Name: gvr.Resource, Namespaced: true}},
		})
	}
}

// fakeControllerContext is the controller context Run builds, on fake
// clientsets: kube for writes and discovery, informers on the fakes.
// Discovery serves namespaces, as every apiserver does: client-go's
// discovery mapper, asked for a kind on a discovery with no group at all,
// reads it again and again and never returns. The mapper is production's.
func fakeControllerContext(kube kubernetes.Interface, kubeFake *kubefake.Clientset, client *fake.Clientset) ControllerContext {
	if !slices.ContainsFunc(kubeFake.Resources, func(l *metav1.APIResourceList) bool { return l.GroupVersion == "v1" }) {
		kubeFake.Resources = append(kubeFake.Resources, &metav1.APIResourceList{
			GroupVersion: "v1",
			APIResources: []metav1.APIResource{{Name: "namespaces", Kind: "Namespace", Namespaced: false}},
		})
	}
	return ControllerContext{
		KubeClient:                kube,
		Client:                    client,
		MetadataClient:            metadatafake.NewSimpleMetadataClient(metadatafake.NewTestScheme()),
		MetricsClient:             metricsfake.NewSimpleClientset(),
		InformerFactory:           kubeinformers.NewSharedInformerFactory(kubeFake, 0),
		ScaleplaneInformerFactory: externalversions.NewSharedInformerFactory(client, 0),
		RESTMapper:                newMappingCache(restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(kubeFake.Discovery()))),
		EventRecorderFor:          func(string) record.EventRecorder { return record.NewFakeRecorder(100) },
		Clock:                     clock.RealClock{},
		Options:                   options.NewOptions(),
	}
}

// hpaGeneratorContext: a LeaderWorkerSet with a scale policy, whose HPA the
// generator creates through the gate.
func hpaGeneratorContext(g *writeGate) ControllerContext {
	kube := kubefake.NewClientset()
	servedResources(kube, lwsv1.SchemeGroupVersion.WithResource("leaderworkersets"))
	client := fake.NewSimpleClientset(&lwsv1.LeaderWorkerSet{
		ObjectMeta: metav1.ObjectMeta{Name: "llm", Namespace: metav1.NamespaceDefault, UID: "uid-llm"},
		Spec: lwsv1.LeaderWorkerSetSpec{ScalePolicy: &lwsv1.ScalePolicy{
			MaxReplicas: 4,
			Metrics: []autoscalingv2.MetricSpec{{
				Type: autoscalingv2.ResourceMetricSourceType,
				Resource: &autoscalingv2.ResourceMetricSource{
					Name:   corev1.ResourceCPU,
					Target: autoscalingv2.MetricTarget{Type: autoscalingv2.UtilizationMetricType, AverageUtilization: ptr.To[int32](60)},
				},
			}},
		}},
	})
	return fakeControllerContext(gatedHPACreates{Interface: kube, gate: g}, kube, client)
}

// resizerContext: an AddonResizer whose Deployment's container is below its
// base, so the resizer patches it, through the gate, at its first sync.
func resizerContext(g *writeGate) ControllerContext {
	ns := metav1.NamespaceDefault
	labels := map[string]string{"app": "addon"}
	kube := kubefake.NewClientset(&appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "addon", Namespace: ns, UID: "uid-addon", Generation: 1},
		Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{
					Name: "main", Image: "addon",
					Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("50m")}},
				}}},
			},
		},
	})
	servedResources(kube, scaleplanev1alpha1.SchemeGroupVersion.WithResource("addonresizers"))
	client := fake.NewSimpleClientset(&scaleplanev1alpha1.AddonResizer{
		ObjectMeta: metav1.ObjectMeta{Name: "addon", Namespace: ns, UID: "uid-ar", Generation: 1},
		Spec: scaleplanev1alpha1.AddonResizerSpec{
			TargetRef:     scaleplanev1alpha1.TargetReference{Kind: scaleplanev1alpha1.TargetKindDeployment, Name: "addon"},
			ContainerName: "main",
			Resources: []scaleplanev1alpha1.ResourceScaling{
				{Name: corev1.ResourceCPU, Base: resource.MustParse("100m"), ExtraPerUnit: resource.MustParse("10m")},
			},
			ScaleUpDelay: &metav1.Duration{},
		},
	})
	return fakeControllerContext(gatedDeploymentPatches{Interface: kube, gate: g}, kube, client)
}

// cronScalerContext: a CronFederatedHPA whose rule is due a second after
// the controller is built, on a fake clock; the firing scales the Deployment
// through the gate.
func cronScalerContext(g *writeGate) ControllerContext {
	ns := metav1.NamespaceDefault
	slot := time.Date(2026, 11, 25, 8, 0, 0, 0, time.UTC)
	clk := testingclock.NewFakeClock(slot.Add(-time.Second))
	kube := kubefake.NewClientset()
	servedResources(kube, autoscalingv1alpha1.SchemeGroupVersion.WithResource("cronfederatedhpas"))
	kube.Resources = append(kube.Resources, &metav1.APIResourceList{
		GroupVersion: "apps/v1",
		APIResources: []metav1.APIResource{{Name: "deployments", Kind: "Deployment", Namespaced: true}},
	})
	client := fake.NewSimpleClientset(&autoscalingv1alpha1.CronFederatedHPA{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns, UID: "uid-web", CreationTimestamp: metav1.NewTime(slot.Add(-time.Hour))},
		Spec: autoscalingv1alpha1.CronFederatedHPASpec{
			ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"},
			Rules: []autoscalingv1alpha1.CronFederatedHPARule{
				{Name: "morning", Schedule: "0 8 * * *", TargetReplicas: ptr.To[int32](5), TimeZone: ptr.To("UTC")},
			},
		},
	})
	// The clock runs, faster than the real one, until the firing writes: the
	// controller's requeue at the slot comes whenever it was made.
	go func() {
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-g.entered:
				return
			case <-g.open:
				return
			case <-tick.C:
				clk.Step(50 * time.Millisecond)
			}
		}
	}()
	// A status write with a successful execution records the firing.
	client.PrependReactor("update", "cronfederatedhpas", func(action clienttesting.Action) (bool, runtime.Object, error) {
		if action.GetSubresource() != "status" {
			return false, nil, nil
		}
		obj := action.(clienttesting.UpdateAction).GetObject().(*autoscalingv1alpha1.CronFederatedHPA)
		for _, h := range obj.Status.ExecutionHistories {
			if len(h.SuccessfulExecutions) > 0 {
				g.log.add("firing recorded")
			}
		}
		return false, nil, nil
	})
	scales := &scalefake.FakeScaleClient{}
	scales.AddReactor("patch", "deployments", func(action clienttesting.Action) (bool, runtime.Object, error) {
		return true, &autoscalingv1.Scale{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns}, Spec: autoscalingv1.ScaleSpec{Replicas: 5}}, nil
	})
	controllerCtx := fakeControllerContext(kube, kube, client)
	controllerCtx.DynamicClient = dynamicfake.NewSimpleDynamicClient(runtime.NewScheme())
	controllerCtx.Clock = clk
	controllerCtx.Unbounded = UnboundedClients{KubeClient: kube, Client: client, ScaleClient: gatedScales{ScalesGetter: scales, gate: g}}
	return controllerCtx
}

// gatedScales is a scale client whose patches go through the gate.
type gatedScales struct {
	scale.ScalesGetter
	gate *writeGate
}

func (s gatedScales) Scales(namespace string) scale.ScaleInterface {
	return gatedScaleInterface{ScaleInterface: s.ScalesGetter.Scales(namespace), gate: s.gate}
}

type gatedScaleInterface struct {
	scale.ScaleInterface
	gate *writeGate
}

func (s gatedScaleInterface) Patch(ctx context.Context, gvr schema.GroupVersionResource, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions) (*autoscalingv1.Scale, error) {
	if err := s.gate.pass(ctx); err != nil {
		return nil, err
	}
	scaled, err := s.ScaleInterface.Patch(ctx, gvr, name, pt, data, opts)
	s.gate.written(err)
	return scaled, err
}

// gatedHPACreates is a clientset whose HPA creates go through the gate.
type gatedHPACreates struct {
	kubernetes.Interface
	gate *writeGate
}

func (k gatedHPACreates) AutoscalingV2() autoscalingv2client.AutoscalingV2Interface {
	return gatedAutoscalingV2{AutoscalingV2Interface: k.Interface.AutoscalingV2(), gate: k.gate}
}

type gatedAutoscalingV2 struct {
	autoscalingv2client.AutoscalingV2Interface
	gate *writeGate
}

func (a gatedAutoscalingV2) HorizontalPodAutoscalers(namespace string) autoscalingv2client.HorizontalPodAutoscalerInterface {
	return gatedHPAs{HorizontalPodAutoscalerInterface: a.AutoscalingV2Interface.HorizontalPodAutoscalers(namespace), gate: a.gate}
}

type gatedHPAs struct {
	autoscalingv2client.HorizontalPodAutoscalerInterface
	gate *writeGate
}

func (h gatedHPAs) Create(ctx context.Context, hpa *autoscalingv2.HorizontalPodAutoscaler, opts metav1.CreateOptions) (*autoscalingv2.HorizontalPodAutoscaler, error) {
	if err := h.gate.pass(ctx); err != nil {
		return nil, err
	}
	created, err := h.HorizontalPodAutoscalerInterface.Create(ctx, hpa, opts)
	h.gate.written(err)
	return created, err
}

// gatedDeploymentPatches is a clientset whose Deployment patches go through
// the gate.
type gatedDeploymentPatches struct {
	kubernetes.Interface
	gate *writeGate
}

func (k gatedDeploymentPatches) AppsV1() appsv1client.AppsV1Interface {
	return gatedAppsV1{AppsV1Interface: k.Interface.AppsV1(), gate: k.gate}
}

type gatedAppsV1 struct {
	appsv1client.AppsV1Interface
	gate *writeGate
}

func (a gatedAppsV1) Deployments(namespace string) appsv1client.DeploymentInterface {
	return gatedDeployments{DeploymentInterface: a.AppsV1Interface.Deployments(namespace), gate: a.gate}
}

type gatedDeployments struct {
	appsv1client.DeploymentInterface
	gate *writeGate
}

func (d gatedDeployments) Patch(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions, subresources ...string) (*appsv1.Deployment, error) {
	if err := d.gate.pass(ctx); err != nil {
		return nil, err
	}
	patched, err := d.DeploymentInterface.Patch(ctx, name, pt, data, opts, subresources...)
	d.gate.written(err)
	return patched, err
}
