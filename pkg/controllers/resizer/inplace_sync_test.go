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

// The tests of updateMode InPlace: a change held in status and applied to the
// running pods, the switch back to Rollout, the pacing, the held size, the
// cache behind the resizer's own resizes, and the limits that bind a pod.
// The harness's helpers are in inplace_harness_test.go, the failures in
// inplace_errors_test.go.

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"

	scaleplanev1alpha1 "github.com/scaleplane/scaleplane/pkg/apis/scaleplane/v1alpha1"
	"github.com/scaleplane/scaleplane/pkg/internal/testkit"
)

// TestInPlaceResize: with updateMode InPlace a change is held in status,
// not written to the template; the running pods are resized through
// pods/resize two at a time; a pod created later is resized once it runs;
// InPlaceResized follows, and the kubelet's Deferred answer is a
// condition, a Warning event and a metric.
func TestInPlaceResize(t *testing.T) {
	start := resources("cpu=100m", "memory=100Mi")
	h := newHarness(t,
		addonResizer("addon", withInPlace(), withSetLimits(false)),
		deployment(addonName, start),
		addonPod("addon-a", start), addonPod("addon-b", start), addonPod("addon-c", start),
	)
	h.podsFromClientset()
	h.setNodes(2)
	h.kube.ClearActions()

	h.syncAt(t0, "addon")
	if n := h.workloadWrites(); n != 0 {
		t.Errorf("%d writes of the target in InPlace mode, want none (a rollout)", n)
	}
	if got := h.podResizes(); strings.Join(got, ",") != "addon-a,addon-b" {
		t.Errorf("resized %v, want addon-a and addon-b (two at a time)", got)
	}
	mustQuantity(t, h.podRequests("addon-a"), corev1.ResourceCPU, "120m")
	mustQuantity(t, h.podRequests("addon-a"), corev1.ResourceMemory, "120Mi")
	ar := h.get("addon")
	if ar.Status.InPlace == nil {
		t.Fatal("no status.inPlace")
	}
	mustQuantity(t, ar.Status.InPlace.Resources.Requests, corev1.ResourceCPU, "120m")
	if ar.Status.InPlace.Resources.Limits != nil || ar.Status.InPlace.Pods != 3 || ar.Status.InPlace.AtSize != 0 {
		t.Errorf("status.inPlace %+v, want requests only, 3 pods, 0 at size", ar.Status.InPlace)
	}
	h.expectCondition("addon", scaleplanev1alpha1.ConditionUpToDate, metav1.ConditionTrue, reasonResized)
	h.expectCondition("addon", scaleplanev1alpha1.ConditionInPlaceResized, metav1.ConditionFalse, reasonResizing)
	h.expectEvents("Normal Resized Resized container \"main\" of Deployment kube-system/addon in place")

	// a is applied, b deferred: c takes a's place; b holds the other.
	h.kubeletAnswers("apply", "addon-a")
	h.kubeletAnswers(corev1.PodReasonDeferred, "addon-b")
	h.syncAt(t0, "addon")
	if got := h.podResizes(); strings.Join(got, ",") != "addon-c" {
		t.Errorf("resized %v, want addon-c", got)
	}
	h.expectCondition("addon", scaleplanev1alpha1.ConditionInPlaceResized, metav1.ConditionFalse, reasonDeferred)
	h.expectEvents("Warning Deferred The kubelet of node node-0 deferred the resize of pod addon-b")
	labels := map[string]string{"namespace": ns, "name": "addon", "state": string(podDeferred)}
	if v, ok := testkit.MetricValue(t, "resizer_in_place_pods", labels); !ok || v != 1 {
		t.Errorf("resizer_in_place_pods%v = %v, %v; want 1", labels, v, ok)
	}
	// The Deferred pod stays so: no second event, no second resize.
	h.syncAt(t0, "addon")
	if got := h.podResizes(); len(got) != 0 {
		t.Errorf("resized %v again", got)
	}
	h.expectEvents()

	h.kubeletAnswers("apply", "addon-b", "addon-c")
	h.syncAt(t0, "addon")
	h.expectCondition("addon", scaleplanev1alpha1.ConditionInPlaceResized, metav1.ConditionTrue, reasonAtSize)
	if ar := h.get("addon"); ar.Status.InPlace.AtSize != 3 {
		t.Errorf("status.inPlace %+v, want 3 at size", ar.Status.InPlace)
	}
	mustQuantity(t, h.deploymentResources(addonName).Requests, corev1.ResourceCPU, "100m")

	// Scale-up: a pod of the template's size is resized when it runs.
	h.check(h.kube.Tracker().Add(addonPod("addon-d", start)))
	h.kube.ClearActions()
	h.syncAt(t0, "addon")
	if got := h.podResizes(); strings.Join(got, ",") != "addon-d" {
		t.Errorf("resized %v, want the new pod addon-d", got)
	}
	// The cluster grows: the held size moves, every pod follows in place.
	h.kubeletAnswers("apply", "addon-d")
	h.setNodes(3)
	h.syncAt(t0, "addon")
	if n := h.workloadWrites(); n != 0 {
		t.Errorf("the template was written")
	}
	if got := h.podResizes(); len(got) != 2 {
		t.Errorf("resized %v, want two pods", got)
	}
	mustQuantity(t, h.get("addon").Status.InPlace.Resources.Requests, corev1.ResourceCPU, "130m")
}

// TestInPlaceBackToRollout: switching to Rollout drops the in-place status
// and its pod watch, and sizes the template (one rollout) as before.
func TestInPlaceBackToRollout(t *testing.T) {
	start := resources("cpu=100m", "memory=100Mi")
	h := newHarness(t, addonResizer("addon", withInPlace(), withSetLimits(false)), deployment(addonName, start), addonPod("addon-a", start))
	h.podsFromClientset()
	h.setNodes(2)
	h.syncAt(t0, "addon")
	if h.get("addon").Status.InPlace == nil {
		t.Fatal("no status.inPlace")
	}
	ar := h.get("addon")
	ar.Spec.UpdateMode = scaleplanev1alpha1.UpdateModeRollout
	ar.Generation++
	_, err := h.client.ScaleplaneV1alpha1().AddonResizers(ns).Update(h.ctx, ar, metav1.UpdateOptions{})
	h.check(err)
	h.refresh()
	h.syncAt(t0, "addon")
	ar = h.get("addon")
	if ar.Status.InPlace != nil || h.condition("addon", scaleplanev1alpha1.ConditionInPlaceResized) != nil {
		t.Errorf("status %+v still has the in-place part", ar.Status)
	}
	mustQuantity(t, h.deploymentResources(addonName).Requests, corev1.ResourceCPU, "120m")
	if h.c.inPlace.watches.watching(keyOf("addon")) {
		t.Error("still watching the target's pods")
	}
}

// TestInPlaceWaitsForReportedResources: a pod that runs before its kubelet
// reports its containers' resources is not resized yet. The API server
// would refuse it ("Pod running on node without support for resize"), and
// a refused resize is not sent again at that size, so the pod would keep
// its old size for good. kwok's pod stages report a running container
// first and its resources a moment later: TestInPlaceOnKwok lost a pod to
// that. The pod is resized once its resources are reported.
func TestInPlaceWaitsForReportedResources(t *testing.T) {
	start := resources("cpu=100m", "memory=100Mi")
	pod := addonPod("addon-a", start)
	pod.Status.ContainerStatuses[0].Resources = nil
	pod.Status.ContainerStatuses[0].State.Running = &corev1.ContainerStateRunning{}
	h := newHarness(t, addonResizer("addon", withInPlace(), withSetLimits(false)), deployment(addonName, start), pod)
	h.podsFromClientset()
	h.setNodes(2)
	// The API server's check of a resize (kube-apiserver 1.37,
	// isPodResizeRequestSupported): the first running container must
	// report its resources.
	h.kube.PrependReactor("patch", "pods", func(a clienttesting.Action) (bool, runtime.Object, error) {
		if a.GetSubresource() != "resize" {
			return false, nil, nil
		}
		name := a.(clienttesting.PatchAction).GetName()
		obj, err := h.kube.Tracker().Get(corev1.SchemeGroupVersion.WithResource("pods"), ns, name)
		if err != nil {
			return true, nil, err
		}
		for _, cs := range obj.(*corev1.Pod).Status.ContainerStatuses {
			if cs.State.Running == nil {
				continue
			}
			if cs.Resources == nil {
				return true, nil, apierrors.NewInvalid(schema.GroupKind{Kind: "Pod"}, name,
					field.ErrorList{field.Forbidden(field.NewPath("spec"), "Pod running on node without support for resize")})
			}
			break
		}
		return false, nil, nil
	})
	h.kube.ClearActions()

	h.syncAt(t0, "addon")
	if got := h.podResizes(); len(got) != 0 {
		t.Errorf("resized %v before the kubelet reported the resources: the API server refuses that", got)
	}
	h.expectCondition("addon", scaleplanev1alpha1.ConditionInPlaceResized, metav1.ConditionFalse, reasonUnreported)
	h.expectEvents("Normal Resized")

	// The kubelet reports them: a pod event, a sync, the resize.
	h.kubeletAnswers("apply", "addon-a")
	h.kube.ClearActions()
	h.syncAt(t0, "addon")
	if got := h.podResizes(); strings.Join(got, ",") != "addon-a" {
		t.Errorf("resized %v once the resources were reported, want addon-a", got)
	}
	mustQuantity(t, h.podRequests("addon-a"), corev1.ResourceCPU, "120m")
	h.expectCondition("addon", scaleplanev1alpha1.ConditionInPlaceResized, metav1.ConditionFalse, reasonResizing)
	h.expectEvents()
}

// TestInPlaceHeldSizeFollowsTheSpec: the held size keeps only what the
// spec manages. With setLimits true a container without limits is given
// them; after setLimits turns false the held limits are dropped, so they
// are not sent to the pods any more (the API server refuses a resize that
// adds limits making a Burstable pod Guaranteed, as on make local-up with
// the metrics-server example).
func TestInPlaceHeldSizeFollowsTheSpec(t *testing.T) {
	start := resources("cpu=100m", "memory=100Mi")
	h := newHarness(t, addonResizer("addon", withInPlace(), withSetLimits(true)), deployment(addonName, start), addonPod("addon-a", start))
	h.podsFromClientset()
	h.setNodes(2)
	h.syncAt(t0, "addon")
	if held := h.get("addon").Status.InPlace.Resources; len(held.Limits) != 2 {
		t.Fatalf("held %+v, want limits with setLimits true", held)
	}

	ar := h.get("addon")
	ar.Spec.SetLimits = ptr.To(false)
	ar.Generation++
	_, err := h.client.ScaleplaneV1alpha1().AddonResizers(ns).Update(h.ctx, ar, metav1.UpdateOptions{})
	h.check(err)
	h.refresh()
	h.syncAt(t0.Add(time.Minute), "addon")
	held := h.get("addon").Status.InPlace.Resources
	if held.Limits != nil {
		t.Errorf("held limits %v after setLimits turned false, want none", held.Limits)
	}
	mustQuantity(t, held.Requests, corev1.ResourceCPU, "120m")
}

// TestInPlaceCacheBehindItsOwnResizes: the sync that the resizer's own
// status write triggers right after a resize sees the pods as the cache
// shows them, from before the resize. The resizer remembers what it just
// wrote to each pod (with the resourceVersion of the API server's answer)
// until the cache shows it: the resized pods keep their places, and no
// third pod is resized by a sync the cache lags behind.
func TestInPlaceCacheBehindItsOwnResizes(t *testing.T) {
	start := resources("cpu=100m", "memory=100Mi")
	h := newHarness(t,
		addonResizer("addon", withInPlace(), withSetLimits(false)),
		deployment(addonName, start),
		addonPod("addon-a", start), addonPod("addon-b", start), addonPod("addon-c", start), addonPod("addon-d", start),
	)
	h.apiServerResizes()
	catchUp := h.podsFromSnapshot()
	h.setNodes(2)
	h.kube.ClearActions()

	h.syncAt(t0, "addon")
	if got := h.podResizes(); strings.Join(got, ",") != "addon-a,addon-b" {
		t.Fatalf("resized %v, want addon-a and addon-b", got)
	}
	// The status write's own sync, before the pod cache caught up.
	h.syncAt(t0, "addon")
	if got := h.podResizes(); len(got) != 0 {
		t.Errorf("resized %v while the cache lags behind the resizes of addon-a and addon-b: want none", got)
	}
	h.expectCondition("addon", scaleplanev1alpha1.ConditionInPlaceResized, metav1.ConditionFalse, reasonResizing)
	if ar := h.get("addon"); ar.Status.InPlace.AtSize != 0 || ar.Status.InPlace.Pods != 4 {
		t.Errorf("status.inPlace %+v, want 4 pods, none at size", ar.Status.InPlace)
	}

	// The cache catches up; the kubelet applies a: c takes its place.
	catchUp()
	h.kubeletAnswers("apply", "addon-a")
	catchUp()
	h.syncAt(t0, "addon")
	if got := h.podResizes(); strings.Join(got, ",") != "addon-c" {
		t.Errorf("resized %v once the cache caught up and addon-a was applied, want addon-c", got)
	}
}

// TestInPlaceCappedAtThePodsOwnLimit: in place, the limit that binds a
// request is the running pod's own, not the template's: pods given limits
// in place while setLimits was true keep them after it turned false, and
// the pods of an OnDelete DaemonSet or StatefulSet keep the limits of the
// template they were made from. A request is never sent above the pod's
// own limit (the API server would refuse it); it stops there, the pod runs
// at that size, and UpToDate says CappedAtLimit, naming the pod.
func TestInPlaceCappedAtThePodsOwnLimit(t *testing.T) {
	podLimits := resources("cpu=100m", "memory=100Mi", "limit:cpu=110m", "limit:memory=1Gi")
	tests := []struct {
		name   string
		target runtime.Object
		kind   scaleplanev1alpha1.TargetKind
	}{
		{name: "limits given in place, template without", target: deployment(addonName, resources("cpu=100m", "memory=100Mi")), kind: scaleplanev1alpha1.TargetKindDeployment},
		{name: "OnDelete DaemonSet whose template limits were raised", target: daemonSet(addonName, resources("cpu=100m", "memory=100Mi", "limit:cpu=1", "limit:memory=1Gi")), kind: scaleplanev1alpha1.TargetKindDaemonSet},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t,
				addonResizer("addon", withInPlace(), withSetLimits(false), withTarget(tc.kind, addonName)),
				tc.target, addonPod("addon-a", podLimits),
			)
			h.podsFromClientset()
			// The API server's validation: a request may not exceed its limit.
			h.kube.PrependReactor("patch", "pods", func(a clienttesting.Action) (bool, runtime.Object, error) {
				var body podResizePatchBody
				h.check(json.Unmarshal(a.(clienttesting.PatchAction).GetPatch(), &body))
				for _, c := range body.Spec.Containers {
					for name, q := range c.Resources.Requests {
						if lim, ok := podLimits.Limits[name]; ok && q.Cmp(lim) > 0 {
							return true, nil, apierrors.NewInvalid(schema.GroupKind{Kind: "Pod"}, "addon-a",
								field.ErrorList{field.Invalid(field.NewPath("spec", "containers").Index(1).Child("resources", "requests"), q.String(), "must be less than or equal to "+string(name)+" limit of "+lim.String())})
						}
					}
				}
				return false, nil, nil
			})
			h.setNodes(2) // cpu estimate 120m, above the pod's limit of 110m
			h.kube.ClearActions()
			h.syncAt(t0, "addon")
			if got := h.podResizes(); strings.Join(got, ",") != "addon-a" {
				t.Fatalf("resized %v, want addon-a", got)
			}
			mustQuantity(t, h.podRequests("addon-a"), corev1.ResourceCPU, "110m")
			mustQuantity(t, h.podRequests("addon-a"), corev1.ResourceMemory, "120Mi")
			h.expectCondition("addon", scaleplanev1alpha1.ConditionUpToDate, metav1.ConditionFalse, reasonCappedAtLimit)
			if c := h.condition("addon", scaleplanev1alpha1.ConditionUpToDate); c == nil || !strings.Contains(c.Message, "addon-a") || !strings.Contains(c.Message, "110m") {
				t.Errorf("UpToDate %+v, want the pod and its limit named", c)
			}
			if c := h.condition("addon", scaleplanev1alpha1.ConditionInPlaceResized); c != nil && c.Reason == reasonResizeReject {
				t.Errorf("InPlaceResized %+v: a request above the pod's limit was sent", c)
			}
			// Applied at its capped size, the pod is not resized again.
			h.kubeletAnswers("apply", "addon-a")
			h.syncAt(t0.Add(time.Minute), "addon")
			if got := h.podResizes(); len(got) != 0 {
				t.Errorf("resized %v again", got)
			}
			h.expectCondition("addon", scaleplanev1alpha1.ConditionInPlaceResized, metav1.ConditionTrue, reasonAtSize)
			h.expectCondition("addon", scaleplanev1alpha1.ConditionUpToDate, metav1.ConditionFalse, reasonCappedAtLimit)
		})
	}
}

// TestInPlaceRecreatedStartsFromTheRunningPods: an AddonResizer deleted
// and created again (a GitOps replace, a Helm reinstall, a restore, a move
// from VPA in place) has no held size. It starts from the size its target's
// running pods have, not from the template's stale one: a raise that
// scaleUpDelay postpones leaves the pods as they are, instead of shrinking
// them at once to the template's size.
func TestInPlaceRecreatedStartsFromTheRunningPods(t *testing.T) {
	template := resources("cpu=100m", "memory=100Mi")
	running := resources("cpu=120m", "memory=120Mi")
	h := newHarness(t,
		addonResizer("addon", withInPlace(), withSetLimits(false), withDelays(10*time.Minute, 10*time.Minute)),
		deployment(addonName, template),
		addonPod("addon-a", running), addonPod("addon-b", running),
	)
	h.podsFromClientset()
	h.setNodes(3) // estimate 130m, 130Mi: a raise from the pods' size
	h.kube.ClearActions()

	h.syncAt(t0, "addon")
	if got := h.podResizes(); len(got) != 0 {
		t.Errorf("resized %v to %v: the re-created AddonResizer shrank its running pods", got, h.podRequests("addon-a"))
	}
	ar := h.get("addon")
	if ar.Status.InPlace == nil {
		t.Fatal("no status.inPlace")
	}
	mustQuantity(t, ar.Status.InPlace.Resources.Requests, corev1.ResourceCPU, "120m")
	mustQuantity(t, ar.Status.InPlace.Resources.Requests, corev1.ResourceMemory, "120Mi")
	h.expectCondition("addon", scaleplanev1alpha1.ConditionUpToDate, metav1.ConditionFalse, reasonPostponed)

	// The delay passes: the raise goes to the pods.
	h.syncAt(t0.Add(10*time.Minute), "addon")
	if got := h.podResizes(); strings.Join(got, ",") != "addon-a,addon-b" {
		t.Errorf("resized %v after scaleUpDelay, want both pods", got)
	}
	mustQuantity(t, h.podRequests("addon-a"), corev1.ResourceCPU, "130m")
}

// TestInPlaceNotReadyNodesDoNotHoldThePacing: DaemonSet pods on nodes that
// are not Ready stay Running and accept a resize their kubelet never
// answers. Resized before their nodes died, they would hold both places
// of the pacing for good, and no healthy pod would ever be resized. Pods
// on nodes whose Ready condition is not True hold no place and are not
// sent a resize; the others go on, and InPlaceResized says which pods wait
// for which node.
func TestInPlaceNotReadyNodesDoNotHoldThePacing(t *testing.T) {
	start := resources("cpu=100m", "memory=100Mi")
	sent := resources("cpu=120m", "memory=120Mi")
	// a and b were sent 120m before their nodes stopped answering.
	a, b := onNode(addonPod("addon-a", start), "dead-1"), onNode(addonPod("addon-b", start), "dead-2")
	for _, p := range []*corev1.Pod{a, b} {
		p.Generation++
		p.Spec.Containers[1].Resources = sent
	}
	h := newHarness(t,
		addonResizer("addon", withInPlace(), withSetLimits(false), withTarget(scaleplanev1alpha1.TargetKindDaemonSet, addonName)),
		daemonSet(addonName, start),
		node("dead-1", corev1.ConditionUnknown), node("dead-2", corev1.ConditionFalse), node("live-1", corev1.ConditionTrue), node("live-2", corev1.ConditionTrue),
		a, b, onNode(addonPod("addon-c", start), "live-1"), onNode(addonPod("addon-d", start), "live-2"),
	)
	h.podsFromClientset()
	h.setNodes(2) // 120m, 120Mi
	h.kube.ClearActions()

	h.syncAt(t0, "addon")
	if got := h.podResizes(); strings.Join(got, ",") != "addon-c,addon-d" {
		t.Errorf("resized %v, want addon-c and addon-d: the pods on nodes that are not Ready hold no place", got)
	}
	h.expectCondition("addon", scaleplanev1alpha1.ConditionInPlaceResized, metav1.ConditionFalse, reasonNodeNotReady)
	c := h.condition("addon", scaleplanev1alpha1.ConditionInPlaceResized)
	for _, want := range []string{"addon-a", "dead-1", "addon-b", "dead-2"} {
		if c == nil || !strings.Contains(c.Message, want) {
			t.Errorf("InPlaceResized %+v, want it to name %s", c, want)
		}
	}

	// The healthy pods are applied; the size changes: the pods on dead
	// nodes are not sent it.
	h.kubeletAnswers("apply", "addon-c", "addon-d")
	h.setNodes(4)
	h.syncAt(t0.Add(time.Minute), "addon")
	if got := h.podResizes(); strings.Join(got, ",") != "addon-c,addon-d" {
		t.Errorf("resized %v at the new size, want addon-c and addon-d only", got)
	}

	// dead-1 comes back: its pod is resized.
	h.kubeletAnswers("apply", "addon-c", "addon-d")
	_, err := h.kube.CoreV1().Nodes().UpdateStatus(h.ctx, node("dead-1", corev1.ConditionTrue), metav1.UpdateOptions{})
	h.check(err)
	h.syncAt(t0.Add(2*time.Minute), "addon")
	if got := h.podResizes(); strings.Join(got, ",") != "addon-a" {
		t.Errorf("resized %v once dead-1 was Ready again, want addon-a", got)
	}
}

// TestInPlaceTemplateLimitDoesNotBindRunningPods: the other way round, an
// OnDelete DaemonSet whose template limit was lowered below the estimate
// while its running pods keep a higher limit of their own: in place, their
// own limit binds, so they are sized to the estimate, not held at the
// template's limit. A pod made from the template later has its limit, and
// stops there.
func TestInPlaceTemplateLimitDoesNotBindRunningPods(t *testing.T) {
	running := resources("cpu=100m", "memory=100Mi", "limit:cpu=1", "limit:memory=1Gi")
	template := resources("cpu=100m", "memory=100Mi", "limit:cpu=110m", "limit:memory=1Gi")
	h := newHarness(t,
		addonResizer("addon", withInPlace(), withSetLimits(false), withTarget(scaleplanev1alpha1.TargetKindDaemonSet, addonName)),
		daemonSet(addonName, template), addonPod("addon-a", running),
	)
	h.podsFromClientset()
	h.setNodes(2) // cpu estimate 120m: above the template's limit, below the pod's
	h.kube.ClearActions()
	h.syncAt(t0, "addon")
	if got := h.podResizes(); strings.Join(got, ",") != "addon-a" {
		t.Fatalf("resized %v, want addon-a", got)
	}
	mustQuantity(t, h.podRequests("addon-a"), corev1.ResourceCPU, "120m")
	mustQuantity(t, h.get("addon").Status.InPlace.Resources.Requests, corev1.ResourceCPU, "120m")
	if c := h.condition("addon", scaleplanev1alpha1.ConditionUpToDate); c == nil || c.Reason == reasonCappedAtLimit {
		t.Errorf("UpToDate %+v: the template's limit held back a pod whose own limit allows the estimate", c)
	}

	// A pod made from the template has its limit, and stops there.
	h.kubeletAnswers("apply", "addon-a")
	h.check(h.kube.Tracker().Add(addonPod("addon-b", template)))
	h.kube.ClearActions()
	h.syncAt(t0.Add(time.Minute), "addon")
	if got := h.podResizes(); strings.Join(got, ",") != "addon-b" {
		t.Errorf("resized %v, want the new pod addon-b", got)
	}
	mustQuantity(t, h.podRequests("addon-b"), corev1.ResourceCPU, "110m")
	h.expectCondition("addon", scaleplanev1alpha1.ConditionUpToDate, metav1.ConditionFalse, reasonCappedAtLimit)
}
