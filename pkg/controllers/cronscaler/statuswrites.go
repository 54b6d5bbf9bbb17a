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
	"fmt"

	corev1 "k8s.io/api/core/v1"

	autoscalingv1alpha1 "github.com/scaleplane/scaleplane/pkg/apis/autoscaling/v1alpha1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
)

// record writes the status of the firings fireSync applied and left in
// memory, if the status is still to be written. A failed write is retried by
// the caller; the firings stay in memory meanwhile, and a sync of the object
// plans from them.
//
// The Normal events of the firings are emitted once their status is written
// (see deferredEvents).
func (c *Controller) record(ctx context.Context, key cache.ObjectName) error {
	obj, err := c.crons.get(key)
	if apierrors.IsNotFound(err) {
		c.memory.forget(key)
		c.deferred.forget(key)
		return nil
	}
	if err != nil {
		return err
	}
	if status, ok := c.memory.pendingStatus(key, obj); ok {
		if err := c.writeStatus(ctx, obj, status); err != nil {
			return err
		}
	}
	for _, e := range c.deferred.take(key, obj.UID) {
		// Within the event rate: counted when deferred (see deferEvent).
		c.recorder.Eventf(obj, corev1.EventTypeNormal, e.reason, "%s", e.message)
	}
	return nil
}

// updateStatus writes the planned histories (see plannedStatus) of a sync
// that applied no firing, with the resourceVersion the sync read: a stale
// cache makes it conflict instead of overwriting newer status. It writes
// nothing when nothing changed. A failed write is retried by the caller.
//
// After a conflict the plan was made from a status older than the
// apiserver's, and what it decided is dropped (see discardPlan): the retry
// plans again from the newer object, which this reads now, so that it does
// not wait for the cache (and decide again from the older status). A new
// leader's first list may be older than its predecessor's last status write,
// and a slot the predecessor applied and recorded would otherwise be found
// late, recorded missed, and written over the predecessor's record (issue 26,
// seed 204865). Pending histories that hold applied firings are kept, as
// after any other failure: the histories recorded in this sync are in
// memory, so the retry writes them without firing again.
func (c *Controller) updateStatus(ctx context.Context, obj *autoscalingv1alpha1.CronFederatedHPA, plans []rulePlan, marks replanMarks) error {
	key := cache.MetaObjectToName(obj)
	status := c.plannedStatus(plans)
	err := c.writeStatus(ctx, obj, status)
	switch {
	case err == nil:
		return nil
	case apierrors.IsConflict(err) && c.memory.discardPlan(key, obj.UID, obj.ResourceVersion, marks):
		c.readAfterConflict(ctx, obj)
		return err
	}
	c.memory.setPending(key, obj.UID, status.ExecutionHistories, false, marks)
	return err
}

// writeStatus writes status unless the object read already has it, with the
// resourceVersion the sync read: a stale cache makes it conflict instead of
// overwriting newer status. What the apiserver stored is remembered until the
// cache shows it. A failed write is retried by the caller.
func (c *Controller) writeStatus(ctx context.Context, obj *autoscalingv1alpha1.CronFederatedHPA, status autoscalingv1alpha1.CronFederatedHPAStatus) error {
	key := cache.MetaObjectToName(obj)
	if sameStatus(obj.Status, status) {
		c.memory.settled(key, obj.UID)
		return nil
	}
	updated := obj.DeepCopy()
	updated.Status = status
	// The cache keeps managedFields without their field sets (see
	// stripForCache): none sent means the apiserver keeps its own.
	updated.ManagedFields = nil
	stored, err := c.client.AutoscalingV1alpha1().CronFederatedHPAs(obj.Namespace).UpdateStatus(ctx, updated, metav1.UpdateOptions{FieldManager: FieldManager})
	switch {
	case err == nil:
		c.journalStored(key, obj.UID, stored.Status, stored.ResourceVersion)
		return nil
	case apierrors.IsNotFound(err):
		// Deleted meanwhile: nothing left to record.
		c.memory.forget(key)
		return nil
	case apierrors.IsConflict(err):
		// The cache is behind; the retry reads the newer object.
		return fmt.Errorf("status of %s changed meanwhile, will retry with the newer object: %w", klog.KObj(obj), err)
	}
	if mayHaveCommitted(err) {
		// The watch may deliver it: it is this process's own write.
		c.journalLost(key, status)
	}
	if !isUnreachable(err) {
		// While the apiserver gives no answer an event could not be
		// delivered either; the error is logged by the caller.
		c.recorder.Eventf(obj, corev1.EventTypeWarning, reasonStatusNotStored, "Could not record the rules' executions in status, will retry: %v", err)
	}
	return fmt.Errorf("updating the status of %s: %w", klog.KObj(obj), err)
}
