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

// Package hpagenerator tests the hpa-generator against a real kube-apiserver,
// with kube-controller-manager's garbage collector and HPA controller, and a
// real metrics pipeline (kwok's emulated kubelets scraped by metrics-server):
// the real scaleplane-controller-manager binary creates, repairs and deletes
// the HPA of a LeaderWorkerSet, leaves foreign HPAs alone, makes no writes in
// steady state, and the generated HPA really scales the LeaderWorkerSet.
//
// The upstream LWS controller is not part of this project: the tests stand in
// for it by setting the LeaderWorkerSet's status (replicas, hpaPodSelector)
// through the status subresource and by creating its leader pods.
package hpagenerator

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"

	lwsv1 "github.com/scaleplane/scaleplane/pkg/apis/leaderworkerset/v1"
	"github.com/scaleplane/scaleplane/test/integration/framework"
	"github.com/scaleplane/scaleplane/test/integration/hpagenerator/lwsfixture"
)

func TestMain(m *testing.M) {
	framework.Main(m, framework.Options{
		KubeControllerManager: true,
		Metrics:               true,
		ExtraKubeControllerManagerArgs: []string{
			// React in seconds, not the default 15 s; pods here become
			// ready at once, so the CPU initialization period only delays.
			"--horizontal-pod-autoscaler-sync-period=2s",
			"--horizontal-pod-autoscaler-cpu-initialization-period=10s",
			"--horizontal-pod-autoscaler-initial-readiness-delay=5s",
		},
	})
}

const (
	managedByLabel = "app.kubernetes.io/managed-by"
	managedByValue = "scaleplane-hpa-generator"
	waitTimeout    = 60 * time.Second
)

// The LeaderWorkerSets both hpa-generator packages test (lwsfixture).
var (
	cpuMetric       = lwsfixture.CPUMetric
	leaderWorkerSet = lwsfixture.LeaderWorkerSet
	createLWS       = lwsfixture.Create
	updateLWS       = lwsfixture.Update
)

// updateHPA applies change to the newest HPA, retrying on conflict.
func updateHPA(t *testing.T, cp *framework.ControlPlane, ns, name string, change func(*autoscalingv2.HorizontalPodAutoscaler)) {
	t.Helper()
	ctx := context.Background()
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		hpa, err := cp.KubeClient().AutoscalingV2().HorizontalPodAutoscalers(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		change(hpa)
		_, err = cp.KubeClient().AutoscalingV2().HorizontalPodAutoscalers(ns).Update(ctx, hpa, metav1.UpdateOptions{})
		if apierrors.IsConflict(err) {
			return false, nil
		}
		return err == nil, err
	})
	if err != nil {
		t.Fatalf("updating HPA %s: %v", name, err)
	}
}

// waitHPA reads the HPA until check returns "" (nothing wrong), and fails
// the test with the last complaint otherwise.
func waitHPA(t *testing.T, cp *framework.ControlPlane, ns, name string, check func(*autoscalingv2.HorizontalPodAutoscaler, error) string) *autoscalingv2.HorizontalPodAutoscaler {
	t.Helper()
	return framework.WaitObject(t, waitTimeout, fmt.Sprintf("HPA %s/%s", ns, name), func(ctx context.Context) (*autoscalingv2.HorizontalPodAutoscaler, error) {
		return cp.KubeClient().AutoscalingV2().HorizontalPodAutoscalers(ns).Get(ctx, name, metav1.GetOptions{})
	}, check)
}

func hpaGone(hpa *autoscalingv2.HorizontalPodAutoscaler, err error) string {
	if apierrors.IsNotFound(err) {
		return ""
	}
	if err != nil {
		return err.Error()
	}
	return "still exists"
}

// generated checks the HPA the generator should keep for lws with min, max
// and the CPU target.
func generated(lws *lwsv1.LeaderWorkerSet, min, max, cpu int32) func(*autoscalingv2.HorizontalPodAutoscaler, error) string {
	return func(hpa *autoscalingv2.HorizontalPodAutoscaler, err error) string {
		if err != nil {
			return err.Error()
		}
		var problems []string
		ref := hpa.Spec.ScaleTargetRef
		if ref.APIVersion != "leaderworkerset.x-k8s.io/v1" || ref.Kind != "LeaderWorkerSet" || ref.Name != lws.Name {
			problems = append(problems, fmt.Sprintf("scaleTargetRef %+v", ref))
		}
		if ptr.Deref(hpa.Spec.MinReplicas, 0) != min || hpa.Spec.MaxReplicas != max {
			problems = append(problems, fmt.Sprintf("min/max %d/%d, want %d/%d", ptr.Deref(hpa.Spec.MinReplicas, 0), hpa.Spec.MaxReplicas, min, max))
		}
		if len(hpa.Spec.Metrics) != 1 || hpa.Spec.Metrics[0].Resource == nil || ptr.Deref(hpa.Spec.Metrics[0].Resource.Target.AverageUtilization, 0) != cpu {
			problems = append(problems, fmt.Sprintf("metrics %+v, want cpu %d%%", hpa.Spec.Metrics, cpu))
		}
		if hpa.Labels[managedByLabel] != managedByValue {
			problems = append(problems, fmt.Sprintf("label %s=%q", managedByLabel, hpa.Labels[managedByLabel]))
		}
		owner := metav1.GetControllerOf(hpa)
		if owner == nil || owner.UID != lws.UID || owner.Kind != "LeaderWorkerSet" || !ptr.Deref(owner.BlockOwnerDeletion, false) {
			problems = append(problems, fmt.Sprintf("controller %+v, want the LeaderWorkerSet %s", owner, lws.UID))
		}
		return strings.Join(problems, "; ")
	}
}

// TestLifecycle: created with the policy's fields, updated when the policy
// changes, repaired when edited (foreign labels kept), deleted when the policy
// goes, and garbage collected with the LeaderWorkerSet.
func TestLifecycle(t *testing.T) {
	cp := framework.Get(t)
	ns := cp.CreateNamespace(t)
	ctx := context.Background()
	framework.StartManager(t, cp.KubeconfigPath(), "hpa-generator")

	// Without minReplicas: 1.
	lws := createLWS(t, cp, leaderWorkerSet(ns, "llm", &lwsv1.ScalePolicy{MaxReplicas: 4, Metrics: []autoscalingv2.MetricSpec{cpuMetric(60)}}))
	waitHPA(t, cp, ns, "llm", generated(lws, 1, 4, 60))
	cp.WaitForEvent(t, ns, "llm", "HPACreated", "llm", waitTimeout)

	// Each policy field.
	updateLWS(t, cp, ns, "llm", func(l *lwsv1.LeaderWorkerSet) {
		l.Spec.ScalePolicy.MinReplicas = ptr.To[int32](2)
		l.Spec.ScalePolicy.MaxReplicas = 6
		l.Spec.ScalePolicy.Metrics = []autoscalingv2.MetricSpec{cpuMetric(70)}
		l.Spec.ScalePolicy.Behavior = &autoscalingv2.HorizontalPodAutoscalerBehavior{
			ScaleDown: &autoscalingv2.HPAScalingRules{StabilizationWindowSeconds: ptr.To[int32](60)},
		}
	})
	hpa := waitHPA(t, cp, ns, "llm", generated(lws, 2, 6, 70))
	if hpa.Spec.Behavior == nil || hpa.Spec.Behavior.ScaleDown == nil || ptr.Deref(hpa.Spec.Behavior.ScaleDown.StabilizationWindowSeconds, 0) != 60 {
		t.Errorf("behavior not applied: %+v", hpa.Spec.Behavior)
	}

	// Someone edits what the generator owns, and adds a label and an
	// annotation of their own: the owned fields are put back, the rest kept.
	updateHPA(t, cp, ns, "llm", func(h *autoscalingv2.HorizontalPodAutoscaler) {
		h.Spec.MaxReplicas = 50
		h.Labels["team"] = "inference"
		if h.Annotations == nil {
			h.Annotations = map[string]string{}
		}
		h.Annotations["example.com/owner"] = "me"
	})
	hpa = waitHPA(t, cp, ns, "llm", generated(lws, 2, 6, 70))
	if hpa.Labels["team"] != "inference" || hpa.Annotations["example.com/owner"] != "me" {
		t.Errorf("foreign label or annotation lost: labels %v annotations %v", hpa.Labels, hpa.Annotations)
	}

	// Empty metrics: no autoscaling, the HPA goes.
	updateLWS(t, cp, ns, "llm", func(l *lwsv1.LeaderWorkerSet) { l.Spec.ScalePolicy.Metrics = nil })
	waitHPA(t, cp, ns, "llm", hpaGone)
	cp.WaitForEvent(t, ns, "llm", "HPADeleted", "llm", waitTimeout)

	// Back, then the whole policy removed.
	updateLWS(t, cp, ns, "llm", func(l *lwsv1.LeaderWorkerSet) { l.Spec.ScalePolicy.Metrics = []autoscalingv2.MetricSpec{cpuMetric(70)} })
	waitHPA(t, cp, ns, "llm", generated(lws, 2, 6, 70))
	updateLWS(t, cp, ns, "llm", func(l *lwsv1.LeaderWorkerSet) { l.Spec.ScalePolicy = nil })
	waitHPA(t, cp, ns, "llm", hpaGone)

	// LeaderWorkerSet deleted: the garbage collector removes the HPA through
	// its owner reference.
	updateLWS(t, cp, ns, "llm", func(l *lwsv1.LeaderWorkerSet) {
		l.Spec.ScalePolicy = &lwsv1.ScalePolicy{MaxReplicas: 3, Metrics: []autoscalingv2.MetricSpec{cpuMetric(50)}}
	})
	waitHPA(t, cp, ns, "llm", generated(lws, 1, 3, 50))
	if err := cp.Client().LeaderworkersetV1().LeaderWorkerSets(ns).Delete(ctx, "llm", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitHPA(t, cp, ns, "llm", hpaGone)
}

// TestConflicts: an HPA of the same name that the LeaderWorkerSet does not
// control is never touched (Warning event), until it is deleted and the name
// is free; an HPA of another name that already targets the LeaderWorkerSet
// keeps the generator from creating a second one.
func TestConflicts(t *testing.T) {
	cp := framework.Get(t)
	ns := cp.CreateNamespace(t)
	ctx := context.Background()
	m := framework.StartManager(t, cp.KubeconfigPath(), "hpa-generator")

	mine := &autoscalingv2.HorizontalPodAutoscaler{
		ObjectMeta: metav1.ObjectMeta{Name: "taken", Namespace: ns, Labels: map[string]string{"team": "other"}},
		Spec: autoscalingv2.HorizontalPodAutoscalerSpec{
			ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"},
			MinReplicas:    ptr.To[int32](1),
			MaxReplicas:    9,
		},
	}
	if _, err := cp.KubeClient().AutoscalingV2().HorizontalPodAutoscalers(ns).Create(ctx, mine, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	policy := &lwsv1.ScalePolicy{MaxReplicas: 4, Metrics: []autoscalingv2.MetricSpec{cpuMetric(60)}}
	taken := createLWS(t, cp, leaderWorkerSet(ns, "taken", policy))
	cp.WaitForEvent(t, ns, "taken", "HPAConflict", "taken", waitTimeout)
	before := writes(t, m)
	// The event says a sync left the HPA alone; once every sync queued by
	// then has run, nothing may have changed.
	waitIdle(t, m)
	got, err := cp.KubeClient().AutoscalingV2().HorizontalPodAutoscalers(ns).Get(ctx, "taken", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got.Spec.ScaleTargetRef.Kind != "Deployment" || got.Spec.MaxReplicas != 9 || metav1.GetControllerOf(got) != nil {
		t.Fatalf("the user's HPA was changed: %+v", got.Spec)
	}
	if after := writes(t, m); after != before {
		t.Errorf("the generator wrote %v times while the name was taken", after-before)
	}

	// The name is freed: the generator takes it.
	if err := cp.KubeClient().AutoscalingV2().HorizontalPodAutoscalers(ns).Delete(ctx, "taken", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitHPA(t, cp, ns, "taken", generated(taken, 1, 4, 60))

	// Another HPA, under another name, already scales this LeaderWorkerSet.
	other := &autoscalingv2.HorizontalPodAutoscaler{
		ObjectMeta: metav1.ObjectMeta{Name: "hand-made", Namespace: ns},
		Spec: autoscalingv2.HorizontalPodAutoscalerSpec{
			ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "leaderworkerset.x-k8s.io/v1", Kind: "LeaderWorkerSet", Name: "second"},
			MaxReplicas:    5,
		},
	}
	if _, err := cp.KubeClient().AutoscalingV2().HorizontalPodAutoscalers(ns).Create(ctx, other, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	createLWS(t, cp, leaderWorkerSet(ns, "second", policy))
	cp.WaitForEvent(t, ns, "second", "HPATargetConflict", "hand-made", waitTimeout)
	waitIdle(t, m)
	if _, err := cp.KubeClient().AutoscalingV2().HorizontalPodAutoscalers(ns).Get(ctx, "second", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("a second HPA was created for a LeaderWorkerSet that already had one (err %v)", err)
	}
}

// TestSteadyStateAndRealScaling: the HPA controller accepts the generated HPA
// (AbleToScale=True, so the LeaderWorkerSet's scale subresource works); with
// the leader pods' CPU usage raised, it raises the LeaderWorkerSet's
// spec.replicas; and meanwhile, with the HPA controller updating the HPA's
// status every few seconds, the generator writes nothing.
func TestSteadyStateAndRealScaling(t *testing.T) {
	cp := framework.Get(t)
	ns := cp.CreateNamespace(t)
	ctx := context.Background()
	m := framework.StartManager(t, cp.KubeconfigPath(), "hpa-generator")
	if err := cp.CreateFakeNode(ctx, "node-"+ns); err != nil {
		t.Fatal(err)
	}

	lws := createLWS(t, cp, leaderWorkerSet(ns, "llm", &lwsv1.ScalePolicy{
		MinReplicas: ptr.To[int32](1),
		MaxReplicas: 5,
		Metrics:     []autoscalingv2.MetricSpec{cpuMetric(50)},
		// Partially set: the apiserver fills in the rest, which must not
		// look like drift.
		Behavior: &autoscalingv2.HorizontalPodAutoscalerBehavior{ScaleDown: &autoscalingv2.HPAScalingRules{StabilizationWindowSeconds: ptr.To[int32](30)}},
	}))
	// Standing in for the LWS controller: one group, its leader pod selected
	// by hpaPodSelector.
	selector := "leaderworkerset.sigs.k8s.io/name=llm,leaderworkerset.sigs.k8s.io/worker-index=0"
	lws.Status.Replicas = 1
	lws.Status.HPAPodSelector = selector
	if _, err := cp.Client().LeaderworkersetV1().LeaderWorkerSets(ns).UpdateStatus(ctx, lws, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("setting the LeaderWorkerSet's status: %v", err)
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: "llm-0", Namespace: ns,
			Labels:      map[string]string{"leaderworkerset.sigs.k8s.io/name": "llm", "leaderworkerset.sigs.k8s.io/worker-index": "0"},
			Annotations: map[string]string{framework.UsageCPUAnnotation: "20m"},
		},
		Spec: corev1.PodSpec{
			NodeName: "node-" + ns,
			Containers: []corev1.Container{{
				Name: "main", Image: "registry.example/llm:1",
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")}},
			}},
		},
	}
	if _, err := cp.KubeClient().CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	waitHPA(t, cp, ns, "llm", func(hpa *autoscalingv2.HorizontalPodAutoscaler, err error) string {
		if err != nil {
			return err.Error()
		}
		for _, c := range hpa.Status.Conditions {
			if c.Type == autoscalingv2.AbleToScale {
				if c.Status == corev1.ConditionTrue {
					return ""
				}
				return fmt.Sprintf("AbleToScale=%s: %s", c.Status, c.Message)
			}
		}
		return "no AbleToScale condition yet"
	})

	// Steady state: the HPA controller keeps writing status; the generator
	// must not write at all.
	before := writes(t, m)
	statusBefore, err := cp.KubeClient().AutoscalingV2().HorizontalPodAutoscalers(ns).Get(ctx, "llm", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}

	// Usage at 4x the target: the HPA scales up.
	// A merge patch of the annotation alone: kwok updates the pod's status
	// meanwhile, which would make a read-modify-write conflict.
	updatePod := func(cpu string) {
		patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, framework.UsageCPUAnnotation, cpu)
		if _, err := cp.KubeClient().CoreV1().Pods(ns).Patch(ctx, "llm-0", types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	updatePod("200m")
	var replicas int32
	err = wait.PollUntilContextTimeout(ctx, time.Second, 120*time.Second, true, func(ctx context.Context) (bool, error) {
		l, err := cp.Client().LeaderworkersetV1().LeaderWorkerSets(ns).Get(ctx, "llm", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		replicas = ptr.Deref(l.Spec.Replicas, 0)
		return replicas > 1, nil
	})
	if err != nil {
		hpa, _ := cp.KubeClient().AutoscalingV2().HorizontalPodAutoscalers(ns).Get(ctx, "llm", metav1.GetOptions{})
		t.Fatalf("the HPA did not scale the LeaderWorkerSet up (spec.replicas %d); HPA status: %+v", replicas, hpa.Status)
	}
	t.Logf("the HPA raised the LeaderWorkerSet's spec.replicas to %d", replicas)

	statusAfter, err := cp.KubeClient().AutoscalingV2().HorizontalPodAutoscalers(ns).Get(ctx, "llm", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if statusAfter.ResourceVersion == statusBefore.ResourceVersion {
		t.Errorf("the HPA controller did not update the HPA's status meanwhile; the steady-state check proved nothing")
	}
	if after := writes(t, m); after != before {
		t.Errorf("the generator made %v writes in steady state, want 0", after-before)
	}
}
