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
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	scaleplanev1alpha1 "github.com/scaleplane/scaleplane/pkg/apis/scaleplane/v1alpha1"
)

// Condition reasons.
const (
	reasonFound           = "Found"
	reasonNotFound        = "NotFound"
	reasonUnsupportedKind = "UnsupportedKind"
	reasonMetricsRead     = "MetricsRead"

	// Reasons of UpToDate.
	reasonWithinThreshold    = "WithinThreshold"
	reasonResized            = "Resized"
	reasonPostponed          = "Postponed"
	reasonTargetNotFound     = "TargetNotFound"
	reasonContainerNotFound  = "ContainerNotFound"
	reasonMetricsUnavailable = "MetricsUnavailable"
	reasonResizeForbidden    = "ResizeForbidden"
	reasonResizeFailed       = "ResizeFailed"
	// reasonCappedAtLimit: setLimits is false and the estimate is above
	// the container's limit; the request is sized to the limit.
	reasonCappedAtLimit = "CappedAtLimit"
	// reasonAmbiguousTarget: another AddonResizer sizes the same
	// resources of the same container.
	reasonAmbiguousTarget = "AmbiguousTarget"
)

// warningReasons are the reasons of UpToDate=False that are also Warning
// events, with the condition's message. The event is sent when the
// condition turns to one of them, not on every sync that finds it so.
var warningReasons = []string{reasonTargetNotFound, reasonContainerNotFound, reasonMetricsUnavailable, reasonResizeForbidden, reasonResizeFailed, reasonCappedAtLimit, reasonAmbiguousTarget}

// observationInterval is how often status is written when only the
// observed cluster size (and so the recommendation) changed. In a large
// cluster the container count changes every few seconds; writing each
// change would load the API server and etcd to say what the metric
// resizer_cluster_size says too. Conditions, pendingResize and
// lastChangeTime are written at once.
const observationInterval = 10 * time.Second

// setCondition sets a condition at now, to the second (as it is stored);
// the transition time moves only when the status does.
func setCondition(status *scaleplanev1alpha1.AddonResizerStatus, typ string, s metav1.ConditionStatus, reason, message string, generation int64, now time.Time) {
	meta.SetStatusCondition(&status.Conditions, metav1.Condition{
		Type:               typ,
		Status:             s,
		Reason:             reason,
		Message:            message,
		ObservedGeneration: generation,
		LastTransitionTime: metav1.NewTime(now).Rfc3339Copy(),
	})
}

// statusWrites remembers when this process last wrote each AddonResizer's
// status, to pace observation-only writes (observationInterval). A new
// process has no memory and writes at once.
type statusWrites struct {
	mu   sync.Mutex
	last map[cache.ObjectName]time.Time
}

func newStatusWrites() *statusWrites {
	return &statusWrites{last: map[cache.ObjectName]time.Time{}}
}

func (s *statusWrites) wrote(key cache.ObjectName, at time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.last[key] = at
}

// wait returns how long an observation-only write must still wait.
func (s *statusWrites) wait(key cache.ObjectName, now time.Time) time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	last, ok := s.last[key]
	if !ok {
		return 0
	}
	return max(last.Add(observationInterval).Sub(now), 0)
}

func (s *statusWrites) forget(key cache.ObjectName) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.last, key)
}

// updateStatus writes status if it differs from the object's, and sends
// the Warning events of conditions that turned bad once it is stored. It
// returns when to sync again for an observation-only change it held back.
func (c *Controller) updateStatus(ctx context.Context, ar *scaleplanev1alpha1.AddonResizer, status *scaleplanev1alpha1.AddonResizerStatus) (time.Duration, error) {
	if equality.Semantic.DeepEqual(normalize(&ar.Status), normalize(status)) {
		return 0, nil
	}
	key := cache.MetaObjectToName(ar)
	now := c.clock.Now()
	if observationOnly(&ar.Status, status) {
		if d := c.statusWrites.wait(key, now); d > 0 {
			klog.FromContext(ctx).V(4).Info("Cluster size changed; status refreshed later", "after", d)
			return d, nil
		}
	}
	updated := ar.DeepCopy()
	updated.Status = *status
	writes.WithLabelValues(writeStatus).Inc()
	_, err := c.client.ScaleplaneV1alpha1().AddonResizers(ar.Namespace).UpdateStatus(ctx, updated, metav1.UpdateOptions{FieldManager: fieldManager})
	switch {
	case err == nil:
		c.statusWrites.wrote(key, now)
		c.warnOnTransition(ar, &ar.Status, status)
		warnInPlaceTransition(c.recorder, ar, &ar.Status, status)
		return 0, nil
	case apierrors.IsNotFound(err):
		// Deleted meanwhile: nothing left to record.
		return 0, nil
	case apierrors.IsConflict(err):
		// The cache is behind; the retry reads the newer object.
		return 0, fmt.Errorf("status of %s changed meanwhile, will retry with the newer object: %w", klog.KObj(ar), err)
	}
	return 0, fmt.Errorf("updating the status of %s: %w", klog.KObj(ar), err)
}

// warnOnTransition sends a Warning event when UpToDate turns False for a
// reason a user must act on.
func (c *Controller) warnOnTransition(ar *scaleplanev1alpha1.AddonResizer, old, status *scaleplanev1alpha1.AddonResizerStatus) {
	cond := meta.FindStatusCondition(status.Conditions, scaleplanev1alpha1.ConditionUpToDate)
	if cond == nil || cond.Status != metav1.ConditionFalse || !slices.Contains(warningReasons, cond.Reason) {
		return
	}
	if prev := meta.FindStatusCondition(old.Conditions, scaleplanev1alpha1.ConditionUpToDate); prev != nil && prev.Status == cond.Status && prev.Reason == cond.Reason {
		return
	}
	c.recorder.Event(ar, corev1.EventTypeWarning, cond.Reason, cond.Message)
}

// observationOnly reports whether the statuses differ in the observed
// cluster size and recommendation only, and in the messages that say them:
// Bounded's, and UpToDate's with updateMode Off, as long as their status
// and reason stay.
func observationOnly(old, status *scaleplanev1alpha1.AddonResizerStatus) bool {
	a, b := old.DeepCopy(), status.DeepCopy()
	a.ClusterSize, a.Recommendation = nil, nil
	b.ClusterSize, b.Recommendation = nil, nil
	for _, s := range []*scaleplanev1alpha1.AddonResizerStatus{a, b} {
		for i := range s.Conditions {
			if recommendationOnlyChurn(&s.Conditions[i]) {
				s.Conditions[i].Message = ""
			}
		}
	}
	return equality.Semantic.DeepEqual(normalize(a), normalize(b))
}

// normalize makes statuses comparable after a round trip through JSON:
// times have second precision and empty lists are nil.
func normalize(s *scaleplanev1alpha1.AddonResizerStatus) *scaleplanev1alpha1.AddonResizerStatus {
	out := s.DeepCopy()
	if len(out.Conditions) == 0 {
		out.Conditions = nil
	}
	for i := range out.Conditions {
		out.Conditions[i].LastTransitionTime = out.Conditions[i].LastTransitionTime.Rfc3339Copy()
	}
	if out.LastChangeTime != nil {
		out.LastChangeTime = ptr.To(out.LastChangeTime.Rfc3339Copy())
	}
	if out.PendingResize != nil {
		out.PendingResize.Since = out.PendingResize.Since.Rfc3339Copy()
	}
	return out
}
