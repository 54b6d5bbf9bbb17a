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

// fieldManager names the generator in the autoscalers' managedFields.
const fieldManager = ManagedByLabelValue

func (c *Controller) createHPA(ctx context.Context, lws *lwsv1.LeaderWorkerSet, desired *autoscalingv2.HorizontalPodAutoscaler) error {
	kind := c.out.kind()
	created, err := c.out.create(ctx, desired)
	switch {
	case err == nil:
		c.learnFromWrite(ctx, lws, desired, created)
	case apierrors.IsAlreadyExists(err):
		// The cache is behind: the retry sees the HPA and decides whether
		// it is ours.
		return fmt.Errorf("creating %s %s: it exists but is not in the cache yet, will retry: %w", kind, klog.KObj(desired), err)
	case isRejected(err):
		return c.rejected(ctx, lws, "create", kind, desired, err)
	default:
		return fmt.Errorf("creating %s %s: %w", kind, klog.KObj(desired), err)
	}
	writes.WithLabelValues(verbCreate, kind).Inc()
	klog.FromContext(ctx).V(2).Info("Created autoscaler", "kind", kind, "hpa", klog.KObj(desired))
	c.recorder.Eventf(lws, corev1.EventTypeNormal, reasonCreated,
		"Created %s %s: minReplicas %d, maxReplicas %d, %d metric(s)",
		kind, desired.Name, *desired.Spec.MinReplicas, desired.Spec.MaxReplicas, len(desired.Spec.Metrics))
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
	kind := c.out.kind()
	updated := withOwnedFields(existing, desired)
	stored, err := c.out.update(ctx, updated)
	switch {
	case err == nil:
		c.learnFromWrite(ctx, lws, updated, stored)
	case apierrors.IsConflict(err):
		return fmt.Errorf("%s %s changed meanwhile, will retry with the newer object: %w", kind, klog.KObj(existing), err)
	case apierrors.IsNotFound(err):
		return fmt.Errorf("%s %s was deleted meanwhile, will retry: %w", kind, klog.KObj(existing), err)
	case isRejected(err):
		return c.rejected(ctx, lws, "update", kind, existing, err)
	default:
		return fmt.Errorf("updating %s %s: %w", kind, klog.KObj(existing), err)
	}
	writes.WithLabelValues(verbUpdate, kind).Inc()
	changed := strings.Join(fields, ", ")
	klog.FromContext(ctx).V(2).Info("Updated autoscaler", "kind", kind, "hpa", klog.KObj(existing), "fields", changed)
	c.recorder.Eventf(lws, corev1.EventTypeNormal, reasonUpdated, "Updated %s %s: %s", kind, existing.Name, changed)
	return nil
}

// deleteHPA deletes an autoscaler of the LeaderWorkerSet that it no longer
// wants (why says why, in an event of the given type and reason). The delete
// is conditional on what the decision was made from: the UID (not a newer
// object of the same name) and the resourceVersion (not an autoscaler changed
// meanwhile: a user who removed its owner reference released it, and a cache
// that lags behind that must not delete it). A failed precondition is
// retried, and the retry decides again from the newer object.
func (c *Controller) deleteHPA(ctx context.Context, lws *lwsv1.LeaderWorkerSet, store autoscalers, hpa *autoscalingv2.HorizontalPodAutoscaler, eventType, reason, why string) error {
	kind := store.kind()
	uid, rv := hpa.UID, hpa.ResourceVersion
	err := store.delete(ctx, hpa.Namespace, hpa.Name, metav1.DeleteOptions{
		Preconditions: &metav1.Preconditions{UID: &uid, ResourceVersion: &rv},
	})
	switch {
	case err == nil:
	case apierrors.IsNotFound(err):
		return nil
	case apierrors.IsConflict(err):
		// A precondition failed: the HPA changed, or another object has
		// the name now.
		return fmt.Errorf("%s %s changed or was replaced since the cache showed it, not deleting it; will decide again from the newer object: %w", kind, klog.KObj(hpa), err)
	case isRejected(err):
		return c.rejected(ctx, lws, "delete", kind, hpa, err)
	default:
		return fmt.Errorf("deleting %s %s: %w", kind, klog.KObj(hpa), err)
	}
	writes.WithLabelValues(verbDelete, kind).Inc()
	klog.FromContext(ctx).V(2).Info("Deleted autoscaler", "kind", kind, "hpa", klog.KObj(hpa), "reason", why)
	c.recorder.Eventf(lws, eventType, reason, "Deleted %s %s: %s", kind, hpa.Name, why)
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
// for its timing: the autoscaler is invalid (a policy that slipped past
// admission, or one Karmada refuses), or the generator may not write it.
func isRejected(err error) bool {
	return apierrors.IsInvalid(err) || apierrors.IsForbidden(err)
}

// rejected reports a refused write in a Warning event on the LeaderWorkerSet
// and decides whether to retry. An invalid autoscaler stays invalid until
// the policy changes, whose event brings the LeaderWorkerSet back: no retry.
// The same holds for an admission webhook's denial (karmada-webhook's of a
// FederatedHPA), although the apiserver answers it with Forbidden. Any other
// Forbidden answer is retried with the queue's backoff, as permissions get
// granted and quotas freed without any change the generator would see
// (typically: OwnerReferencesPermissionEnforcement refusing blockOwnerDeletion
// to a generator without update on leaderworkersets/finalizers).
func (c *Controller) rejected(ctx context.Context, lws *lwsv1.LeaderWorkerSet, verb, kind string, hpa *autoscalingv2.HorizontalPodAutoscaler, err error) error {
	reason := apierrors.ReasonForError(err)
	if apierrors.IsForbidden(err) && !isAdmissionDenied(err) {
		klog.FromContext(ctx).Info("The API server refused an autoscaler write, retrying with backoff", "verb", verb, "kind", kind, "hpa", klog.KObj(hpa), "err", err)
		c.recorder.Eventf(lws, corev1.EventTypeWarning, reasonRejected,
			"The API server refused to %s %s %s (%s): %v; grant the hpa-generator's service account what it lacks (%s on %s, and update on leaderworkersets/finalizers where OwnerReferencesPermissionEnforcement is on) or free the quota; retrying with backoff",
			verb, kind, hpa.Name, reason, err, verb, resourceOf(kind))
		return fmt.Errorf("%s %s %s: forbidden, retrying with backoff until permitted: %w", verb, kind, klog.KObj(hpa), err)
	}
	refusals.WithLabelValues(kind).Inc()
	c.recorder.Eventf(lws, corev1.EventTypeWarning, reasonRejected,
		"The API server refused to %s %s %s (%s): %s; fix spec.scalePolicy, it is tried again on the next change",
		verb, kind, hpa.Name, reason, inScalePolicy(err.Error()))
	return nil
}

// resourceOf names the resource of an autoscaler kind, for RBAC advice.
func resourceOf(kind string) string {
	if kind == string(OutputFederatedHPA) {
		return "federatedhpas.autoscaling.karmada.io"
	}
	return "horizontalpodautoscalers"
}
