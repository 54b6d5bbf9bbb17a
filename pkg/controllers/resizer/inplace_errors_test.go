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

// The tests of updateMode InPlace when a resize fails: refused by the API
// server, conflicting, forbidden, or answered with a transient kubelet error.

import (
	"errors"
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

	scaleplanev1alpha1 "github.com/scaleplane/scaleplane/pkg/apis/scaleplane/v1alpha1"
	"github.com/scaleplane/scaleplane/pkg/internal/testkit"
)

// TestInPlaceRejectedNotRetried: a resize the API server refuses is
// reported once, not sent again at every sync.
func TestInPlaceRejectedNotRetried(t *testing.T) {
	start := resources("cpu=100m", "memory=100Mi")
	h := newHarness(t, addonResizer("addon", withInPlace(), withSetLimits(false)), deployment(addonName, start), addonPod("addon-a", start))
	h.podsFromClientset()
	h.setNodes(2)
	h.kube.PrependReactor("patch", "pods", func(a clienttesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewInvalid(schema.GroupKind{Kind: "Pod"}, "addon-a", field.ErrorList{field.Invalid(field.NewPath("spec"), "Guaranteed", "Pod QOS Class may not change as a result of resizing")})
	})
	h.syncAt(t0, "addon")
	h.expectCondition("addon", scaleplanev1alpha1.ConditionInPlaceResized, metav1.ConditionFalse, reasonResizeReject)
	events := h.events()
	if _, ok := testkit.FindEvent(events, "Warning ResizeRejected", "QOS"); !ok {
		t.Errorf("events %q, want a Warning ResizeRejected with the API server's reason", events)
	}
	h.kube.ClearActions()
	for i := range 3 {
		h.syncAt(t0.Add(time.Duration(i)*time.Minute), "addon")
	}
	if got := h.podResizes(); len(got) != 0 {
		t.Errorf("a refused resize was sent again: %v", got)
	}
	if events := h.events(); len(events) != 0 {
		t.Errorf("events %q after the first refusal", events)
	}
}

// TestInPlaceConflictBackoff: a resize that conflicts (the pod changed
// since the cache showed it) is tried again after 1 s, then 2 s, 4 s, ...
// up to maxConflictBackoff, not every second for ever; at
// maxResizeConflicts in a row it is reported once (InPlaceResized False,
// reason ResizeConflict, a Warning event). When it goes through, the pod
// is resizing and the backoff is over.
func TestInPlaceConflictBackoff(t *testing.T) {
	start := resources("cpu=100m", "memory=100Mi")
	h := newHarness(t, addonResizer("addon", withInPlace(), withSetLimits(false)), deployment(addonName, start), addonPod("addon-a", start))
	h.podsFromClientset()
	h.setNodes(2)
	conflicting := true
	h.kube.PrependReactor("patch", "pods", func(a clienttesting.Action) (bool, runtime.Object, error) {
		if !conflicting || a.GetSubresource() != "resize" {
			return false, nil, nil
		}
		return true, nil, apierrors.NewConflict(schema.GroupResource{Resource: "pods"}, "addon-a", errors.New("the object has been modified"))
	})

	want := []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 16 * time.Second,
		32 * time.Second, 64 * time.Second, 128 * time.Second, 256 * time.Second, maxConflictBackoff, maxConflictBackoff}
	now := t0
	for i, w := range want {
		n := i + 1
		d := h.syncAt(now, "addon")
		if d != w {
			t.Errorf("after conflict %d: sync again in %v, want %v", n, d, w)
		}
		events := h.events()
		var warnings []string
		for _, e := range events {
			if strings.HasPrefix(e, "Warning") {
				warnings = append(warnings, e)
			}
		}
		cond := h.condition("addon", scaleplanev1alpha1.ConditionInPlaceResized)
		switch {
		case n < maxResizeConflicts:
			if len(warnings) != 0 || cond == nil || cond.Reason != reasonResizing {
				t.Errorf("after conflict %d: warnings %q, condition %+v; want none and Resizing", n, warnings, cond)
			}
		case n == maxResizeConflicts:
			if len(warnings) != 1 || !strings.HasPrefix(warnings[0], "Warning ResizeConflict Pod addon-a changed") {
				t.Errorf("after conflict %d: warnings %q, want one ResizeConflict", n, warnings)
			}
			if cond == nil || cond.Status != metav1.ConditionFalse || cond.Reason != reasonConflict || !strings.Contains(cond.Message, "5 conflicts in a row") {
				t.Errorf("after conflict %d: condition %+v, want False ResizeConflict", n, cond)
			}
		default:
			if len(warnings) != 0 || cond == nil || cond.Reason != reasonConflict {
				t.Errorf("after conflict %d: warnings %q, condition %+v; want no new warning, still ResizeConflict", n, warnings, cond)
			}
		}
		now = now.Add(d)
	}
	if got := h.podResizes(); len(got) != len(want) {
		t.Errorf("%d resize attempts, want %d: one per sync", len(got), len(want))
	}
	labels := map[string]string{"namespace": ns, "name": "addon", "state": string(podConflicted)}
	if v, ok := testkit.MetricValue(t, "resizer_in_place_pods", labels); !ok || v != 1 {
		t.Errorf("resizer_in_place_pods%v = %v, %v; want 1", labels, v, ok)
	}

	conflicting = false
	if d := h.syncAt(now, "addon"); d >= time.Second {
		t.Errorf("sync again in %v after the resize went through, want no conflict backoff", d)
	}
	if got := h.podResizes(); strings.Join(got, ",") != "addon-a" {
		t.Errorf("resized %v, want addon-a", got)
	}
	h.expectCondition("addon", scaleplanev1alpha1.ConditionInPlaceResized, metav1.ConditionFalse, reasonResizing)
}

// TestInPlaceForbiddenRetriedWithBackoff: a 403 on pods/resize that RBAC or
// a ResourceQuota answers is not the pod's for good: the permission gets
// granted, the quota gets room. It is reported (InPlaceResized False,
// reason ResizeForbidden, a Warning event) and tried again with backoff;
// once allowed, the pod is resized. The node's refusal of a size its
// allocatable cannot hold (the PodResizeValidator's NodeCapacity) stays
// abandoned at that size.
func TestInPlaceForbiddenRetriedWithBackoff(t *testing.T) {
	start := resources("cpu=100m", "memory=100Mi")
	h := newHarness(t, addonResizer("addon", withInPlace(), withSetLimits(false)), deployment(addonName, start), addonPod("addon-a", start))
	h.podsFromClientset()
	h.setNodes(2)
	var refusal error = apierrors.NewForbidden(schema.GroupResource{Resource: "pods"}, "addon-a",
		errors.New(`User "system:serviceaccount:kube-system:scaleplane" cannot patch resource "pods/resize" in API group "" in the namespace "kube-system"`))
	h.kube.PrependReactor("patch", "pods", func(a clienttesting.Action) (bool, runtime.Object, error) {
		if refusal == nil || a.GetSubresource() != "resize" {
			return false, nil, nil
		}
		return true, nil, refusal
	})
	h.kube.ClearActions()

	d := h.syncAt(t0, "addon")
	if got := h.podResizes(); len(got) != 1 {
		t.Fatalf("resized %v, want one attempt at addon-a", got)
	}
	h.expectCondition("addon", scaleplanev1alpha1.ConditionInPlaceResized, metav1.ConditionFalse, reasonResizeForbidden)
	if _, ok := testkit.FindEvent(h.events(), "Warning ResizeForbidden", "pods/resize"); !ok {
		t.Errorf("no Warning ResizeForbidden naming pods/resize")
	}
	if d <= 0 || d > time.Second {
		t.Errorf("sync again in %v, want a retry within a second", d)
	}
	h.syncAt(t0.Add(d), "addon")
	if got := h.podResizes(); len(got) != 1 {
		t.Errorf("resized %v after the backoff, want addon-a tried again", got)
	}
	// Granted: the next attempt goes through.
	refusal = nil
	h.syncAt(t0.Add(time.Minute), "addon")
	if got := h.podResizes(); strings.Join(got, ",") != "addon-a" {
		t.Errorf("resized %v once allowed, want addon-a", got)
	}
	mustQuantity(t, h.podRequests("addon-a"), corev1.ResourceCPU, "120m")
	h.expectCondition("addon", scaleplanev1alpha1.ConditionInPlaceResized, metav1.ConditionFalse, reasonResizing)

	// The node's allocatable cannot hold the next size: not retried.
	h.kubeletAnswers("apply", "addon-a")
	capacity := apierrors.NewForbidden(schema.GroupResource{Resource: "pods"}, "addon-a",
		errors.New("node didn't have enough allocatable resources: cpu, requested: 130, allocatable: 100"))
	capacity.ErrStatus.Details.Causes = append(capacity.ErrStatus.Details.Causes, metav1.StatusCause{Type: "NodeCapacity"})
	refusal = capacity
	h.setNodes(3)
	h.syncAt(t0.Add(2*time.Minute), "addon")
	if got := h.podResizes(); len(got) != 1 {
		t.Fatalf("resized %v, want one attempt at the new size", got)
	}
	h.expectCondition("addon", scaleplanev1alpha1.ConditionInPlaceResized, metav1.ConditionFalse, reasonResizeReject)
	for i := range 3 {
		h.syncAt(t0.Add(time.Duration(3+i)*time.Minute), "addon")
	}
	if got := h.podResizes(); len(got) != 0 {
		t.Errorf("a size the node's allocatable cannot hold was sent again: %v", got)
	}
}

// TestInPlaceConflictBackoffIsAGatePerPod: the backoff after a conflict
// holds the pod's next attempt until its time on the controller's clock,
// whatever syncs come before it (every change of the cluster size syncs):
// not only the requeue is delayed.
func TestInPlaceConflictBackoffIsAGatePerPod(t *testing.T) {
	start := resources("cpu=100m", "memory=100Mi")
	h := newHarness(t, addonResizer("addon", withInPlace(), withSetLimits(false)), deployment(addonName, start), addonPod("addon-a", start))
	h.podsFromClientset()
	h.setNodes(2)
	h.kube.PrependReactor("patch", "pods", func(a clienttesting.Action) (bool, runtime.Object, error) {
		if a.GetSubresource() != "resize" {
			return false, nil, nil
		}
		return true, nil, apierrors.NewConflict(schema.GroupResource{Resource: "pods"}, "addon-a", errors.New("the object has been modified"))
	})
	h.kube.ClearActions()
	now := t0
	attempts := 0
	for n := 1; n <= 4; n++ {
		d := h.syncAt(now, "addon")
		attempts++
		// Syncs before the backoff is over: a node joins, one leaves.
		for _, early := range []time.Duration{d / 4, d / 2, d - time.Millisecond} {
			if got := h.syncAt(now.Add(early), "addon"); got <= 0 || got > d-early {
				t.Errorf("after conflict %d, a sync %v into the backoff of %v asks to sync again in %v, want at most %v", n, early, d, got, d-early)
			}
		}
		now = now.Add(d)
	}
	if got := h.podResizes(); len(got) != attempts {
		t.Errorf("%d resize attempts in %v, want %d: one per backoff", len(got), now.Sub(t0), attempts)
	}
}

// TestInPlaceTransientKubeletErrorIsNotPermanent: the kubelet's
// PodResizeInProgress with reason Error (a memory limit below the
// container's usage, a runtime that failed once) is a passing state the
// kubelet retries by itself. The resizer keeps nothing of it: it reads the
// pod's conditions afresh at every sync, so the pod holds its place while
// the error lasts, is sent a later size all the same, and is at size once
// its kubelet applies one. (The Vertical Pod Autoscaler cached such an
// error as infeasible and skipped the pod's later sizes until a restart.)
func TestInPlaceTransientKubeletErrorIsNotPermanent(t *testing.T) {
	start := resources("cpu=100m", "memory=100Mi")
	h := newHarness(t, addonResizer("addon", withInPlace(), withSetLimits(false)), deployment(addonName, start), addonPod("addon-a", start))
	h.podsFromClientset()
	h.setNodes(2)
	h.kube.ClearActions()
	h.syncAt(t0, "addon")
	if got := h.podResizes(); strings.Join(got, ",") != "addon-a" {
		t.Fatalf("resized %v, want addon-a", got)
	}
	h.expectEvents("Normal Resized")
	failing := func() {
		p, err := h.kube.CoreV1().Pods(ns).Get(h.ctx, "addon-a", metav1.GetOptions{})
		h.check(err)
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodResizeInProgress, Status: corev1.ConditionTrue, Reason: corev1.PodReasonError,
			Message: "failed to update container resources: the runtime refused", ObservedGeneration: p.Generation}}
		_, err = h.kube.CoreV1().Pods(ns).UpdateStatus(h.ctx, p, metav1.UpdateOptions{})
		h.check(err)
	}
	failing()
	h.syncAt(t0.Add(time.Minute), "addon")
	if got := h.podResizes(); len(got) != 0 {
		t.Errorf("resized %v while the kubelet retries", got)
	}
	h.expectCondition("addon", scaleplanev1alpha1.ConditionInPlaceResized, metav1.ConditionFalse, reasonResizeError)
	h.expectEvents("Warning ResizeError The kubelet of node node-0 failed to resize pod addon-a")

	// A new size while the error lasts is sent all the same.
	h.setNodes(3)
	h.syncAt(t0.Add(2*time.Minute), "addon")
	if got := h.podResizes(); strings.Join(got, ",") != "addon-a" {
		t.Errorf("resized %v at the new size while the kubelet's error lasts, want addon-a", got)
	}
	mustQuantity(t, h.podRequests("addon-a"), corev1.ResourceCPU, "130m")

	// The error passes: the pod is at size, and later sizes follow.
	h.kubeletAnswers("apply", "addon-a")
	h.syncAt(t0.Add(3*time.Minute), "addon")
	h.expectCondition("addon", scaleplanev1alpha1.ConditionInPlaceResized, metav1.ConditionTrue, reasonAtSize)
	h.setNodes(4)
	h.syncAt(t0.Add(4*time.Minute), "addon")
	if got := h.podResizes(); strings.Join(got, ",") != "addon-a" {
		t.Errorf("resized %v at the next size after the error passed, want addon-a", got)
	}
	mustQuantity(t, h.podRequests("addon-a"), corev1.ResourceCPU, "140m")
}
