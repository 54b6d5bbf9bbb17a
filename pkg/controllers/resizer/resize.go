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
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	scaleplanev1alpha1 "github.com/scaleplane/scaleplane/pkg/apis/scaleplane/v1alpha1"
)

// sizing is the cluster size and what it was estimated to.
type sizing struct {
	size     int64
	units    int64
	expected corev1.ResourceList
}

// resize decides and applies. A patch that conflicts means the cache was
// behind: the target is read again from the API server and the decision
// made again, a few times. With updateMode InPlace the target's pods are
// resized instead, and the template is left alone (inplace.go).
func (c *Controller) resize(ctx context.Context, ar *scaleplanev1alpha1.AddonResizer, s settings, w *workload, z sizing, status *scaleplanev1alpha1.AddonResizerStatus, now time.Time) result {
	if inPlace(ar) {
		return c.inPlace.resize(ctx, ar, s, w, z, status, now)
	}
	c.inPlace.rollout(ar, status)
	for attempt := 1; ; attempt++ {
		rs, r, act := planResize(ar, s, w, z, status, now)
		if !act {
			return r
		}
		err := c.patchTarget(ctx, w, s.container, rs.changes, s.setLimits)
		if err == nil {
			return c.resized(ctx, ar, s, w, z, rs, status, now)
		}
		if !apierrors.IsConflict(err) || attempt == maxPatchAttempts {
			return patchFailed(ar, w, err, attempt, status, now)
		}
		klog.FromContext(ctx).V(2).Info("Target changed since it was read; reading it again", "target", w.String(), "attempt", attempt)
		fresh, err := c.freshTarget(ctx, w)
		if err != nil {
			if isGone(err) {
				targetMissing(status, ar, ar.Spec.TargetRef, err, now)
				return result{outcome: outcomeError}
			}
			return result{outcome: outcomeError, err: fmt.Errorf("reading %s again after a conflict: %w", w, err)}
		}
		w = fresh
	}
}

// planResize decides what to do with the target's container: nothing
// (within the threshold, or the container is gone), wait (a delay holds the
// change back), or act on the returned resize.
func planResize(ar *scaleplanev1alpha1.AddonResizer, s settings, w *workload, z sizing, status *scaleplanev1alpha1.AddonResizerStatus, now time.Time) (resize, result, bool) {
	container := w.container(s.container)
	if container == nil {
		containerMissing(status, ar, s, w, now)
		return resize{}, result{outcome: outcomeError}, false
	}
	rs := decide(container.Resources, z.expected, s)
	if len(rs.changes) == 0 {
		status.PendingResize = nil
		if len(rs.capped) > 0 {
			cappedCondition(status, s, w, rs, ar.Generation, now)
		} else {
			withinThresholdCondition(status, s, ar.Generation, now)
		}
		return rs, result{outcome: outcomeWithinThreshold}, false
	}
	delay := s.delay(rs.direction)
	pending, due, ok := hold(status.PendingResize, rs.direction, now, delay)
	// Kept until the change is applied, also when the patch fails, so that
	// the clock is not restarted.
	status.PendingResize = pending
	if !ok {
		setCondition(status, scaleplanev1alpha1.ConditionUpToDate, metav1.ConditionFalse, reasonPostponed,
			fmt.Sprintf("%s of %s held back by %s (%v) until %s", verb(rs.direction), names(rs.changes), delayField(rs.direction), delay, due.UTC().Format(time.RFC3339)),
			ar.Generation, now)
		return rs, result{outcome: outcomePostponed, requeue: due.Sub(now)}, false
	}
	return rs, result{}, true
}

// resized records a resize: in status, as a Normal event saying old -> new
// and why, and in the log.
func (c *Controller) resized(ctx context.Context, ar *scaleplanev1alpha1.AddonResizer, s settings, w *workload, z sizing, rs resize, status *scaleplanev1alpha1.AddonResizerStatus, now time.Time) result {
	status.PendingResize = nil
	status.LastChangeTime = ptr.To(metav1.NewTime(now).Rfc3339Copy())
	if len(rs.capped) > 0 {
		cappedCondition(status, s, w, rs, ar.Generation, now)
	} else {
		setCondition(status, scaleplanev1alpha1.ConditionUpToDate, metav1.ConditionTrue, reasonResized,
			fmt.Sprintf("Resized for cluster size %d %s", z.size, s.unit()), ar.Generation, now)
	}
	changes := describe(rs.changes, s.setLimits)
	msg := fmt.Sprintf("Resized container %q of %s: %s; cluster size %d %s (%s)", s.container, w, changes, z.size, s.unit(), s.mode)
	if z.units != z.size {
		msg += fmt.Sprintf(", estimated for %d (%s)", z.units, s.estimator)
	}
	c.recorder.Event(ar, corev1.EventTypeNormal, eventResized, msg)
	klog.FromContext(ctx).V(2).Info("Resized", "target", w.String(), "container", s.container, "clusterSize", z.size, "changes", changes)
	return result{outcome: outcomeResized}
}

// patchFailed records a patch that failed for good: a 403 says which
// permission is missing; a conflict that kept coming back is retried
// without a condition change, as it is transient.
func patchFailed(ar *scaleplanev1alpha1.AddonResizer, w *workload, err error, attempts int, status *scaleplanev1alpha1.AddonResizerStatus, now time.Time) result {
	gen := ar.Generation
	switch {
	case apierrors.IsNotFound(err):
		targetMissing(status, ar, ar.Spec.TargetRef, err, now)
		return result{outcome: outcomeError}
	case apierrors.IsConflict(err):
		return result{outcome: outcomeError, err: fmt.Errorf("patching %s: it kept changing, %d attempts: %w", w, attempts, err)}
	case apierrors.IsForbidden(err):
		setCondition(status, scaleplanev1alpha1.ConditionUpToDate, metav1.ConditionFalse, reasonResizeForbidden,
			fmt.Sprintf("Not allowed to patch %s (grant the controller manager patch on %s in namespace %s): %v", w, resourceOf(w.kind), w.namespace, err), gen, now)
	default:
		setCondition(status, scaleplanev1alpha1.ConditionUpToDate, metav1.ConditionFalse, reasonResizeFailed,
			fmt.Sprintf("Patching %s failed: %v", w, err), gen, now)
	}
	// Retried with backoff: permissions get fixed, webhooks come back.
	return result{outcome: outcomeError, err: fmt.Errorf("patching %s: %w", w, err)}
}
