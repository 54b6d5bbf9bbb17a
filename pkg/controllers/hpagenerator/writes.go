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
	"fmt"
	"strings"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"

	lwsv1 "github.com/scaleplane/scaleplane/pkg/apis/leaderworkerset/v1"
)

// fieldManager names the generator in the HPA's managedFields.
const fieldManager = ManagedByLabelValue

func (c *Controller) createHPA(ctx context.Context, lws *lwsv1.LeaderWorkerSet, desired *autoscalingv2.HorizontalPodAutoscaler) error {
	created, err := c.kubeClient.AutoscalingV2().HorizontalPodAutoscalers(desired.Namespace).Create(ctx, desired, metav1.CreateOptions{FieldManager: fieldManager})
	switch {
	case err == nil:
		c.learnFromWrite(ctx, lws, desired, created)
	case apierrors.IsAlreadyExists(err):
		// The cache is behind: the retry sees the HPA and decides whether
		// it is ours.
		return fmt.Errorf("creating HorizontalPodAutoscaler %s: it exists but is not in the cache yet, will retry: %w", klog.KObj(desired), err)
	case isRejected(err):
		return c.rejected(ctx, lws, "create", desired, err)
	default:
		return fmt.Errorf("creating HorizontalPodAutoscaler %s: %w", klog.KObj(desired), err)
	}
	writes.WithLabelValues(verbCreate).Inc()
	klog.FromContext(ctx).V(2).Info("Created HorizontalPodAutoscaler", "hpa", klog.KObj(desired))
	c.recorder.Eventf(lws, corev1.EventTypeNormal, reasonCreated,
		"Created HorizontalPodAutoscaler %s: minReplicas %d, maxReplicas %d, %d metric(s)",
		desired.Name, *desired.Spec.MinReplicas, desired.Spec.MaxReplicas, len(desired.Spec.Metrics))
	return nil
}

// updateHPA writes the owned fields back when they drifted from the policy.
// The update carries the resourceVersion read from the cache: if the HPA
// changed meanwhile it conflicts, and the retry compares with the newer one
// instead of clobbering it.
func (c *Controller) updateHPA(ctx context.Context, lws *lwsv1.LeaderWorkerSet, existing, desired *autoscalingv2.HorizontalPodAutoscaler) error {
	fields := driftedFields(existing, desired)
	if len(fields) == 0 {
		return nil
	}
	updated := withOwnedFields(existing, desired)
	stored, err := c.kubeClient.AutoscalingV2().HorizontalPodAutoscalers(existing.Namespace).Update(ctx, updated, metav1.UpdateOptions{FieldManager: fieldManager})
	switch {
	case err == nil:
		c.learnFromWrite(ctx, lws, updated, stored)
	case apierrors.IsConflict(err):
		return fmt.Errorf("HorizontalPodAutoscaler %s changed meanwhile, will retry with the newer object: %w", klog.KObj(existing), err)
	case apierrors.IsNotFound(err):
		return fmt.Errorf("HorizontalPodAutoscaler %s was deleted meanwhile, will retry: %w", klog.KObj(existing), err)
	case isRejected(err):
		return c.rejected(ctx, lws, "update", existing, err)
	default:
		return fmt.Errorf("updating HorizontalPodAutoscaler %s: %w", klog.KObj(existing), err)
	}
	writes.WithLabelValues(verbUpdate).Inc()
	changed := strings.Join(fields, ", ")
	klog.FromContext(ctx).V(2).Info("Updated HorizontalPodAutoscaler", "hpa", klog.KObj(existing), "fields", changed)
	c.recorder.Eventf(lws, corev1.EventTypeNormal, reasonUpdated, "Updated HorizontalPodAutoscaler %s: %s", existing.Name, changed)
	return nil
}

// deleteHPA deletes the LeaderWorkerSet's HPA once its policy no longer asks
// for one. The delete is conditional on what the decision was made from: the
// UID (not a newer object of the same name) and the resourceVersion (not an
// HPA changed meanwhile: a user who removed its owner reference released it,
// and a cache that lags behind that must not delete it). A failed
// precondition is retried, and the retry decides again from the newer object.
func (c *Controller) deleteHPA(ctx context.Context, lws *lwsv1.LeaderWorkerSet, hpa *autoscalingv2.HorizontalPodAutoscaler) error {
	uid, rv := hpa.UID, hpa.ResourceVersion
	err := c.kubeClient.AutoscalingV2().HorizontalPodAutoscalers(hpa.Namespace).Delete(ctx, hpa.Name, metav1.DeleteOptions{
		Preconditions: &metav1.Preconditions{UID: &uid, ResourceVersion: &rv},
	})
	switch {
	case err == nil:
	case apierrors.IsNotFound(err):
		return nil
	case apierrors.IsConflict(err):
		// A precondition failed: the HPA changed, or another object has
		// the name now.
		return fmt.Errorf("HorizontalPodAutoscaler %s changed or was replaced since the cache showed it, not deleting it; will decide again from the newer object: %w", klog.KObj(hpa), err)
	case isRejected(err):
		return c.rejected(ctx, lws, "delete", hpa, err)
	default:
		return fmt.Errorf("deleting HorizontalPodAutoscaler %s: %w", klog.KObj(hpa), err)
	}
	writes.WithLabelValues(verbDelete).Inc()
	why := "spec.scalePolicy was removed"
	if lws.Spec.ScalePolicy != nil {
		why = "spec.scalePolicy has no metrics"
	}
	klog.FromContext(ctx).V(2).Info("Deleted HorizontalPodAutoscaler", "hpa", klog.KObj(hpa), "reason", why)
	c.recorder.Eventf(lws, corev1.EventTypeNormal, reasonDeleted, "Deleted HorizontalPodAutoscaler %s: %s", hpa.Name, why)
	return nil
}

// learnFromWrite compares what was sent with what the server stored, for
// the fields a server may not know.
func (c *Controller) learnFromWrite(ctx context.Context, lws *lwsv1.LeaderWorkerSet, sent, stored *autoscalingv2.HorizontalPodAutoscaler) {
	if stored == nil {
		return
	}
	c.tolerance.learn(sent, stored)
	if hasTolerance(sent) && !c.tolerance.honoured() {
		c.warnToleranceIgnored(ctx, lws)
	}
}

// isRejected reports errors the API server gives for the write itself, not
// for its timing: the HPA is invalid (a policy that slipped past admission),
// or the generator may not write it.
func isRejected(err error) bool {
	return apierrors.IsInvalid(err) || apierrors.IsForbidden(err)
}

// rejected reports a refused write in a Warning event on the LeaderWorkerSet
// and decides whether to retry. An invalid HPA stays invalid until the
// policy changes, whose event brings the LeaderWorkerSet back: no retry. A
// Forbidden answer is retried with the queue's backoff, as permissions get
// granted and quotas freed without any change the generator would see
// (typically: OwnerReferencesPermissionEnforcement refusing blockOwnerDeletion
// to a generator without update on leaderworkersets/finalizers).
func (c *Controller) rejected(ctx context.Context, lws *lwsv1.LeaderWorkerSet, verb string, hpa *autoscalingv2.HorizontalPodAutoscaler, err error) error {
	reason := apierrors.ReasonForError(err)
	if apierrors.IsForbidden(err) {
		klog.FromContext(ctx).Info("The API server refused a HorizontalPodAutoscaler write, retrying with backoff", "verb", verb, "hpa", klog.KObj(hpa), "err", err)
		c.recorder.Eventf(lws, corev1.EventTypeWarning, reasonRejected,
			"The API server refused to %s HorizontalPodAutoscaler %s (%s): %v; grant the hpa-generator's service account what it lacks (%s on horizontalpodautoscalers, and update on leaderworkersets/finalizers where OwnerReferencesPermissionEnforcement is on) or free the quota; retrying with backoff",
			verb, hpa.Name, reason, err, verb)
		return fmt.Errorf("%s HorizontalPodAutoscaler %s: forbidden, retrying with backoff until permitted: %w", verb, klog.KObj(hpa), err)
	}
	c.recorder.Eventf(lws, corev1.EventTypeWarning, reasonRejected,
		"The API server refused to %s HorizontalPodAutoscaler %s (%s): %v; fix spec.scalePolicy, it is tried again on the next change",
		verb, hpa.Name, reason, err)
	return nil
}
