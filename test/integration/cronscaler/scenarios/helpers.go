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

// Package scenarios holds the cron-scaler's integration scenarios, run by two
// test packages on two CronFederatedHPA CRDs: scaleplane's own
// (test/integration/cronscaler) and Karmada's, which lacks scaleplane's
// additions (test/integration/cronscaler/karmadacrd). Every promise of the
// cron-scaler must hold on both.
package scenarios

import (
	"context"
	"errors"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/scale"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2/ktesting"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"

	autoscalingv1alpha1 "github.com/scaleplane/scaleplane/pkg/apis/autoscaling/v1alpha1"
	lwsv1 "github.com/scaleplane/scaleplane/pkg/apis/leaderworkerset/v1"
	"github.com/scaleplane/scaleplane/pkg/controllers/cronscaler"
	"github.com/scaleplane/scaleplane/pkg/generated/clientset/versioned"
	generatedscheme "github.com/scaleplane/scaleplane/pkg/generated/clientset/versioned/scheme"
	"github.com/scaleplane/scaleplane/pkg/generated/informers/externalversions"
	"github.com/scaleplane/scaleplane/test/integration/framework"
)

// KarmadaCRDDir writes, under the repository's _output directory, the CRDs of
// artifacts/deploy/crds with the CronFederatedHPA CRD made into what Karmada's
// amounts to: without spec.rules[].maxDelaySeconds and
// status.executionHistories[].lastScheduleTime (the apiserver prunes them),
// and without unique rule names (Karmada's rules list is a plain list). It
// returns the directory, for framework.Options.CRDDir.
func KarmadaCRDDir() (string, error) {
	root, err := framework.RepoRoot()
	if err != nil {
		return "", err
	}
	dst := filepath.Join(root, "_output", "integration", "karmada-crds")
	return dst, framework.WriteCRDVariant(filepath.Join(root, "artifacts", "deploy", "crds"), dst, func(crd *unstructured.Unstructured) error {
		if crd.GetName() != cronscaler.CRDName {
			return nil
		}
		versions, _, err := unstructured.NestedSlice(crd.Object, "spec", "versions")
		if err != nil {
			return err
		}
		for _, v := range versions {
			version, ok := v.(map[string]any)
			if !ok {
				return errors.New("a version is not an object")
			}
			schema, ok, _ := unstructured.NestedMap(version, "schema", "openAPIV3Schema")
			if !ok {
				return errors.New("a version has no openAPIV3Schema")
			}
			rules := []string{"properties", "spec", "properties", "rules"}
			unstructured.RemoveNestedField(schema, append(rules, "items", "properties", "maxDelaySeconds")...)
			unstructured.RemoveNestedField(schema, append(rules, "x-kubernetes-list-type")...)
			unstructured.RemoveNestedField(schema, append(rules, "x-kubernetes-list-map-keys")...)
			unstructured.RemoveNestedField(schema, "properties", "status", "properties", "executionHistories", "items", "properties", "lastScheduleTime")
			if err := unstructured.SetNestedMap(version, schema, "schema", "openAPIV3Schema"); err != nil {
				return err
			}
		}
		return unstructured.SetNestedSlice(crd.Object, versions, "spec", "versions")
	})
}

// StoredFields reads what the control plane's CronFederatedHPA CRD stores,
// as the controller manager does at start-up.
func StoredFields(t *testing.T, cp *framework.ControlPlane) cronscaler.StoredFields {
	t.Helper()
	crd, err := cp.DynamicClient().Resource(framework.CRDResource).Get(context.Background(), cronscaler.CRDName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	fields, err := cronscaler.StoredFieldsFromCRD(crd)
	if err != nil {
		t.Fatal(err)
	}
	return fields
}

// Controller is a cron-scaler run in the test process, and what its client
// did.
type Controller struct {
	*cronscaler.Controller
	// statusWrites counts the status updates it sent.
	statusWrites atomic.Int64
	mu           sync.Mutex
	// warnings are the apiserver's warnings to it ("unknown field", say).
	warnings []string
	// refuseStatus makes its status writes fail (503) before they reach
	// the apiserver, as a process that dies before them would not make them.
	refuseStatus atomic.Bool
	stopOnce     sync.Once
	stop         func()
}

// RefuseStatusWrites makes the controller's status writes fail, or not.
func (c *Controller) RefuseStatusWrites(refuse bool) { c.refuseStatus.Store(refuse) }

// Stop stops the controller, as the end of the test would, and waits for it.
func (c *Controller) Stop() { c.stopOnce.Do(c.stop) }

// StatusWrites is how many status updates the controller sent.
func (c *Controller) StatusWrites() int { return int(c.statusWrites.Load()) }

// Warnings are the apiserver's warnings to the controller's requests.
func (c *Controller) Warnings() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.warnings...)
}

func (c *Controller) HandleWarningHeader(_ int, _ string, text string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.warnings = append(c.warnings, text)
}

type countingTransport struct {
	rt http.RoundTripper
	c  *Controller
}

func (t countingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method == http.MethodPut && strings.HasSuffix(req.URL.Path, "/status") {
		t.c.statusWrites.Add(1)
		if t.c.refuseStatus.Load() {
			body := `{"kind":"Status","apiVersion":"v1","status":"Failure","message":"refused by the test","reason":"ServiceUnavailable","code":503}`
			return &http.Response{
				StatusCode: http.StatusServiceUnavailable, Status: "503 Service Unavailable", Request: req,
				Header: http.Header{"Content-Type": []string{"application/json"}}, Body: io.NopCloser(strings.NewReader(body)),
			}, nil
		}
	}
	return t.rt.RoundTrip(req)
}

// StartController runs the cron-scaler in the test process, with real
// clients and the given clock, watching only ns, until the test ends. It is
// told what the CRD stores, as the controller manager tells it.
func StartController(t *testing.T, cp *framework.ControlPlane, ns string, clk clock.WithTicker) *Controller {
	t.Helper()
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	out := &Controller{}
	cfg := cp.Config()
	cfg.WarningHandler = out
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { return countingTransport{rt: rt, c: out} })
	client, err := versioned.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	disc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(disc))
	scales, err := scale.NewForConfig(cfg, mapper, dynamic.LegacyAPIPathResolverFunc, scale.NewDiscoveryScaleKindResolver(disc))
	if err != nil {
		t.Fatal(err)
	}
	factory := externalversions.NewSharedInformerFactoryWithOptions(client, 0, externalversions.WithNamespace(ns))
	broadcaster := record.NewBroadcaster(record.WithContext(ctx))
	broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: cp.KubeClient().CoreV1().Events(ns)})
	// The generated scheme knows CronFederatedHPAs, the events' objects.
	recorder := broadcaster.NewRecorder(generatedscheme.Scheme, corev1.EventSource{Component: cronscaler.Name})
	metadataClient, err := metadata.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	c, err := cronscaler.NewController(ctx, cronscaler.Config{
		Informer:   factory.Autoscaling().V1alpha1().CronFederatedHPAs(),
		Client:     client,
		KubeClient: cp.KubeClient(),
		Scales:     scales,
		Metadata:   metadataClient,
		Mapper:     mapper,
		Recorder:   recorder,
		Clock:      clk,
		Workers:    5,
		Stored:     StoredFields(t, cp),
	})
	if err != nil {
		t.Fatal(err)
	}
	out.Controller = c
	factory.Start(ctx.Done())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		c.Run(ctx)
	}()
	out.stop = func() {
		cancel()
		wg.Wait()
		factory.Shutdown()
		broadcaster.Shutdown()
	}
	t.Cleanup(out.Stop)
	return out
}

func podTemplate(app string) corev1.PodTemplateSpec {
	return corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": app}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "registry.k8s.io/pause:3.10"}}},
	}
}

func deployment(name string, replicas int32) *appsv1.Deployment {
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}},
			Template: podTemplate(name),
		},
	}
}

func statefulSet(name string, replicas int32) *appsv1.StatefulSet {
	return &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: appsv1.StatefulSetSpec{
			Replicas: ptr.To(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}},
			Template: podTemplate(name),
		},
	}
}

func leaderWorkerSet(name string, replicas int32) *lwsv1.LeaderWorkerSet {
	return &lwsv1.LeaderWorkerSet{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: lwsv1.LeaderWorkerSetSpec{
			Replicas:             ptr.To(replicas),
			LeaderWorkerTemplate: lwsv1.LeaderWorkerTemplate{Size: ptr.To[int32](2), WorkerTemplate: podTemplate(name)},
			// Typed clients send the struct even when empty; the schema wants
			// a type.
			RolloutStrategy: lwsv1.RolloutStrategy{Type: lwsv1.RollingUpdateStrategyType},
			StartupPolicy:   lwsv1.LeaderCreatedStartupPolicy,
		},
	}
}

func cronOf(name string, ref autoscalingv2.CrossVersionObjectReference, rules ...autoscalingv1alpha1.CronFederatedHPARule) *autoscalingv1alpha1.CronFederatedHPA {
	return &autoscalingv1alpha1.CronFederatedHPA{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       autoscalingv1alpha1.CronFederatedHPASpec{ScaleTargetRef: ref, Rules: rules},
	}
}

func everyMinute(name string, ref autoscalingv2.CrossVersionObjectReference, r autoscalingv1alpha1.CronFederatedHPARule) *autoscalingv1alpha1.CronFederatedHPA {
	r.Name = "every-minute"
	r.Schedule = "* * * * *"
	r.TimeZone = ptr.To("UTC")
	return cronOf(name, ref, r)
}

func replicasRule(name, schedule string, replicas int32) autoscalingv1alpha1.CronFederatedHPARule {
	return autoscalingv1alpha1.CronFederatedHPARule{Name: name, Schedule: schedule, TimeZone: ptr.To("UTC"), TargetReplicas: ptr.To(replicas)}
}

func deploymentRef(name string) autoscalingv2.CrossVersionObjectReference {
	return autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: name}
}

// history returns the first rule's history, or nil.
func history(ctx context.Context, cp *framework.ControlPlane, ns, name string) *autoscalingv1alpha1.ExecutionHistory {
	obj, err := cp.Client().AutoscalingV1alpha1().CronFederatedHPAs(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil || len(obj.Status.ExecutionHistories) == 0 {
		return nil
	}
	return &obj.Status.ExecutionHistories[0]
}

func waitForStatus(ctx context.Context, t *testing.T, cp *framework.ControlPlane, ns, name string, timeout time.Duration, what string, cond func(*autoscalingv1alpha1.ExecutionHistory) bool) *autoscalingv1alpha1.ExecutionHistory {
	t.Helper()
	var last *autoscalingv1alpha1.ExecutionHistory
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		h := history(ctx, cp, ns, name)
		if h != nil {
			last = h
		}
		return h != nil && cond(h), nil
	})
	if err != nil {
		t.Fatalf("%s/%s: waiting for %s: %v; last history %+v", ns, name, what, err, last)
	}
	return last
}

func deploymentReplicas(ctx context.Context, t *testing.T, cp *framework.ControlPlane, ns, name string) int32 {
	t.Helper()
	d, err := cp.KubeClient().AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return ptr.Deref(d.Spec.Replicas, 1)
}

func setDeploymentReplicas(ctx context.Context, t *testing.T, cp *framework.ControlPlane, ns, name string, replicas int32) {
	t.Helper()
	sc, err := cp.KubeClient().AppsV1().Deployments(ns).GetScale(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sc.Spec.Replicas = replicas
	if _, err := cp.KubeClient().AppsV1().Deployments(ns).UpdateScale(ctx, name, sc, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// updateCron changes the object's spec, retrying conflicts with the
// controller's status writes.
func updateCron(ctx context.Context, t *testing.T, cp *framework.ControlPlane, ns, name string, change func(*autoscalingv1alpha1.CronFederatedHPA)) {
	t.Helper()
	client := cp.Client().AutoscalingV1alpha1().CronFederatedHPAs(ns)
	err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		obj, err := client.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		change(obj)
		_, err = client.Update(ctx, obj, metav1.UpdateOptions{})
		return err == nil, nil
	})
	if err != nil {
		t.Fatalf("updating %s/%s: %v", ns, name, err)
	}
}

// untilSecond waits for a wall-clock second within [from, to].
func untilSecond(from, to int) {
	for {
		s := time.Now().Second()
		if s >= from && s <= to {
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func lastHandled(h *autoscalingv1alpha1.ExecutionHistory) time.Time {
	var last time.Time
	for _, t := range []*metav1.Time{h.LastScheduleTime} {
		if t != nil && t.Time.After(last) {
			last = t.Time
		}
	}
	for _, e := range h.SuccessfulExecutions {
		if e.ScheduleTime.Time.After(last) {
			last = e.ScheduleTime.Time
		}
	}
	for _, e := range h.FailedExecutions {
		if e.ScheduleTime.Time.After(last) {
			last = e.ScheduleTime.Time
		}
	}
	return last
}
