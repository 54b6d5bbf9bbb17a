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
	"sync"
	"testing"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/scale"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2/ktesting"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"

	corev1 "k8s.io/api/core/v1"

	autoscalingv1alpha1 "github.com/scaleplane/scaleplane/pkg/apis/autoscaling/v1alpha1"
	"github.com/scaleplane/scaleplane/pkg/controllers/cronscaler"
	"github.com/scaleplane/scaleplane/pkg/generated/informers/externalversions"
	"github.com/scaleplane/scaleplane/test/integration/framework"
)

// startController runs the cron-scaler in the test process, with real
// clients, watching only ns, until the test ends.
func startController(t *testing.T, cp *framework.ControlPlane, ns string) {
	t.Helper()
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	cfg := cp.Config()
	disc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(disc))
	scales, err := scale.NewForConfig(cfg, mapper, dynamic.LegacyAPIPathResolverFunc, scale.NewDiscoveryScaleKindResolver(disc))
	if err != nil {
		t.Fatal(err)
	}
	factory := externalversions.NewSharedInformerFactoryWithOptions(cp.Client(), 0, externalversions.WithNamespace(ns))
	broadcaster := record.NewBroadcaster(record.WithContext(ctx))
	broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: cp.KubeClient().CoreV1().Events(ns)})
	recorder := broadcaster.NewRecorder(scheme.Scheme, corev1.EventSource{Component: cronscaler.Name})
	c, err := cronscaler.NewController(ctx, factory.Autoscaling().V1alpha1().CronFederatedHPAs(), cp.Client(), cp.KubeClient(),
		scales, mapper, recorder, clock.RealClock{}, 5)
	if err != nil {
		t.Fatal(err)
	}
	factory.Start(ctx.Done())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		c.Run(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		wg.Wait()
		factory.Shutdown()
		broadcaster.Shutdown()
	})
}

// TestEveryTargetKind fires a "* * * * *" rule on a Deployment, a
// StatefulSet, a LeaderWorkerSet (a custom resource with a scale
// subresource, from 0 replicas), a FederatedHPA and a HorizontalPodAutoscaler,
// all in the same minute, and checks each target and status.
func TestEveryTargetKind(t *testing.T) {
	ctx := context.Background()
	cp := framework.Get(t)
	ns := cp.CreateNamespace(t)
	kube, client := cp.KubeClient(), cp.Client()

	if _, err := kube.AppsV1().Deployments(ns).Create(ctx, deployment("web", 1), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := kube.AppsV1().StatefulSets(ns).Create(ctx, statefulSet("db", 1), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := client.LeaderworkersetV1().LeaderWorkerSets(ns).Create(ctx, leaderWorkerSet("llm", 0), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	fhpa := &autoscalingv1alpha1.FederatedHPA{
		ObjectMeta: metav1.ObjectMeta{Name: "fhpa"},
		Spec: autoscalingv1alpha1.FederatedHPASpec{
			ScaleTargetRef: deploymentRef("web"), MinReplicas: ptr.To[int32](1), MaxReplicas: 10,
		},
	}
	if _, err := client.AutoscalingV1alpha1().FederatedHPAs(ns).Create(ctx, fhpa, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	hpa := &autoscalingv2.HorizontalPodAutoscaler{
		ObjectMeta: metav1.ObjectMeta{Name: "hpa"},
		Spec: autoscalingv2.HorizontalPodAutoscalerSpec{
			ScaleTargetRef: deploymentRef("web"), MinReplicas: ptr.To[int32](1), MaxReplicas: 10,
		},
	}
	if _, err := kube.AutoscalingV2().HorizontalPodAutoscalers(ns).Create(ctx, hpa, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	replicas := func(n int32) autoscalingv1alpha1.CronFederatedHPARule {
		return autoscalingv1alpha1.CronFederatedHPARule{TargetReplicas: ptr.To(n)}
	}
	bounds := autoscalingv1alpha1.CronFederatedHPARule{TargetMinReplicas: ptr.To[int32](3), TargetMaxReplicas: ptr.To[int32](30)}
	crons := []*autoscalingv1alpha1.CronFederatedHPA{
		everyMinute("deployment", deploymentRef("web"), replicas(4)),
		everyMinute("statefulset", autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "StatefulSet", Name: "db"}, replicas(3)),
		everyMinute("lws", autoscalingv2.CrossVersionObjectReference{APIVersion: "leaderworkerset.x-k8s.io/v1", Kind: "LeaderWorkerSet", Name: "llm"}, replicas(2)),
		everyMinute("fhpa", autoscalingv2.CrossVersionObjectReference{APIVersion: "autoscaling.karmada.io/v1alpha1", Kind: "FederatedHPA", Name: "fhpa"}, bounds),
		everyMinute("hpa", autoscalingv2.CrossVersionObjectReference{APIVersion: "autoscaling/v2", Kind: "HorizontalPodAutoscaler", Name: "hpa"}, bounds),
		everyMinute("missing", deploymentRef("nope"), replicas(1)),
	}
	for _, c := range crons {
		if _, err := client.AutoscalingV1alpha1().CronFederatedHPAs(ns).Create(ctx, c, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	startController(t, cp, ns)
	// The namespace stays Terminating without the namespace controller: delete
	// the CronFederatedHPAs so later tests' controllers do not fire them.
	t.Cleanup(func() {
		_ = client.AutoscalingV1alpha1().CronFederatedHPAs(ns).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{})
	})

	// First sight plans the next minute and fires nothing.
	for _, c := range crons {
		h := waitForStatus(ctx, t, cp, ns, c.Name, 30*time.Second, "a planned next execution", func(h *autoscalingv1alpha1.ExecutionHistory) bool {
			return h.NextExecutionTime != nil
		})
		if h.LastScheduleTime != nil {
			t.Errorf("%s: first sight fired: %+v", c.Name, h)
		}
	}

	// Then every rule fires in the same minute.
	var slot time.Time
	for _, c := range crons[:5] {
		h := waitForStatus(ctx, t, cp, ns, c.Name, 90*time.Second, "a successful execution", func(h *autoscalingv1alpha1.ExecutionHistory) bool {
			return len(h.SuccessfulExecutions) > 0
		})
		e := h.SuccessfulExecutions[0]
		if skew := e.ExecutionTime.Sub(e.ScheduleTime.Time); skew < 0 || skew > 5*time.Second {
			t.Errorf("%s: executed %v after its scheduled time", c.Name, skew)
		}
		if !h.LastScheduleTime.Equal(e.ScheduleTime) || !h.NextExecutionTime.Time.Equal(e.ScheduleTime.Add(time.Minute)) {
			t.Errorf("%s: lastScheduleTime %v, nextExecutionTime %v after firing %v", c.Name, h.LastScheduleTime, h.NextExecutionTime, e.ScheduleTime)
		}
		if slot.IsZero() {
			slot = e.ScheduleTime.Time
		}
	}
	h := waitForStatus(ctx, t, cp, ns, "missing", 30*time.Second, "a failed execution", func(h *autoscalingv1alpha1.ExecutionHistory) bool {
		return len(h.FailedExecutions) > 0
	})
	t.Logf("missing target: %s", h.FailedExecutions[0].Message)

	if got := deploymentReplicas(ctx, t, cp, ns, "web"); got != 4 {
		t.Errorf("Deployment replicas = %d; want 4", got)
	}
	if sts, err := kube.AppsV1().StatefulSets(ns).Get(ctx, "db", metav1.GetOptions{}); err != nil || *sts.Spec.Replicas != 3 {
		t.Errorf("StatefulSet = %v, %v; want 3 replicas", sts.Spec.Replicas, err)
	}
	if lws, err := client.LeaderworkersetV1().LeaderWorkerSets(ns).Get(ctx, "llm", metav1.GetOptions{}); err != nil || *lws.Spec.Replicas != 2 {
		t.Errorf("LeaderWorkerSet = %v, %v; want 2 replicas (scaled from 0)", lws.Spec.Replicas, err)
	}
	if f, err := client.AutoscalingV1alpha1().FederatedHPAs(ns).Get(ctx, "fhpa", metav1.GetOptions{}); err != nil || *f.Spec.MinReplicas != 3 || f.Spec.MaxReplicas != 30 {
		t.Errorf("FederatedHPA = %+v, %v; want min 3 max 30", f.Spec, err)
	}
	if a, err := kube.AutoscalingV2().HorizontalPodAutoscalers(ns).Get(ctx, "hpa", metav1.GetOptions{}); err != nil || *a.Spec.MinReplicas != 3 || a.Spec.MaxReplicas != 30 {
		t.Errorf("HPA = %+v, %v; want min 3 max 30", a.Spec, err)
	}
	t.Logf("all kinds fired for the slot %v", slot)
}
