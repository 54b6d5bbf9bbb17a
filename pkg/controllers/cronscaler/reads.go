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

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	autoscalingv1alpha1 "github.com/scaleplane/scaleplane/pkg/apis/autoscaling/v1alpha1"
)

// Reads made at decision time.
//
// Some of what decides a slot is not kept by this process at all: it is
// read when the decision is made, and so a restart, or the order in which
// objects are synced, changes nothing. Three such reads:
//
//   - The object itself, read fresh from the apiserver (readFresh, a quorum
//     read, not the watch cache the informer may list from) when the cache
//     may be behind it: behind this process's journal (baseOf), before a
//     slot from before this process started is applied or recorded missed
//     (readBeforeInherited), and after a status write conflicted
//     (readAfterConflict). What it returns is the one thing these reads
//     keep: it goes into the journal (journalRead) until the cache shows
//     it, as a status this process wrote does.
//   - The target's managedFields, read with the target before an inherited
//     or retried firing is applied (priorWrite, inherited.go).
//   - The other objects on a shared target and their plans, read from the
//     lister and the journal (laterSlot, acrossobjects.go).
//
// The fresh reads after a conflict and in the retry's baseOf are two reads,
// not one: the first lets the retry plan from the newer status when the
// second gets no answer (an outage that starts in between), and lets
// another object's sync see it meanwhile (memory.peek); the second sees what
// changed since. Neither is made when the cache has caught up by then.

// readFresh reads the object from the apiserver. Every read of a
// CronFederatedHPA outside the informer is this one.
func (c *Controller) readFresh(ctx context.Context, obj *autoscalingv1alpha1.CronFederatedHPA) (*autoscalingv1alpha1.CronFederatedHPA, error) {
	return c.client.AutoscalingV1alpha1().CronFederatedHPAs(obj.Namespace).Get(ctx, obj.Name, metav1.GetOptions{})
}

// journalRead keeps what a fresh read of the object returned until the
// cache shows it (see statusJournal.written): it holds this process's last
// write, or something newer.
func (c *Controller) journalRead(key cache.ObjectName, live *autoscalingv1alpha1.CronFederatedHPA) {
	c.memory.setWritten(key, live.UID, live.Status, live.ResourceVersion)
}

// baseOf returns the object to plan from and its status as this process
// knows it: the cache's, with the journal over it (see memory.base). When
// the cache is behind the status this process last wrote, or behind the
// apiserver's after a status write conflicted, it reads the object from the apiserver and keeps what it read
// until the cache shows it. If that read gets no answer (the apiserver is
// down or restarting), it plans from the status it last wrote, if it has
// one (after a conflict it has none, and the sync fails and is retried),
// which holds every firing this process applied: a firing due then is tried
// on the firings' own retry schedule (see retryFiring) instead of the
// slower backoff of a failed sync, and the status write, made with the
// cache's older resourceVersion, cannot overwrite anything newer. A nil
// object means it was deleted; fresh says the object was read from the
// apiserver in this call.
func (c *Controller) baseOf(ctx context.Context, obj *autoscalingv1alpha1.CronFederatedHPA) (_ *autoscalingv1alpha1.CronFederatedHPA, _ *autoscalingv1alpha1.CronFederatedHPAStatus, fresh bool, _ error) {
	key := cache.MetaObjectToName(obj)
	base, stale := c.memory.base(key, obj)
	if !stale {
		return obj, base, false, nil
	}
	logger := klog.FromContext(ctx)
	live, err := c.readFresh(ctx, obj)
	switch {
	case apierrors.IsNotFound(err):
		c.memory.forget(key)
		c.deferred.forget(key)
		return nil, nil, false, nil
	case err == nil && live.UID != obj.UID:
		// Re-created meanwhile: the cache will show the new object.
		return nil, nil, false, fmt.Errorf("%s was re-created since the cache saw it, will retry", klog.KObj(obj))
	case err == nil:
		logger.V(4).Info("The cache is behind the last status write; planning from the object read from the apiserver")
		c.journalRead(key, live)
		return live, live.Status.DeepCopy(), true, nil
	case isUnreachable(err):
		if written, ok := c.memory.writtenStatus(key, obj.UID); ok {
			logger.V(4).Info("The cache is behind the last status write and the apiserver gives no answer; planning from the status last written", "err", err)
			return obj, written, false, nil
		}
	}
	return nil, nil, false, fmt.Errorf("reading %s, whose cached status is older than the apiserver's: %w", klog.KObj(obj), err)
}

// inherits says whether the plans decide a scheduled time that came before
// this process started: a firing due now (a predecessor may have applied it,
// see priorWrite), or one found too late to run (a predecessor may have
// applied and recorded it, in a status the first list does not show yet;
// recorded missed from that list, it would be recorded two ways once the
// sync's histories are written, which they are when the sync applies
// another firing, issue 26).
func (c *Controller) inherits(plans []rulePlan) bool {
	for i := range plans {
		p := &plans[i]
		if !p.Due.IsZero() && c.start.inherited(p.Due) || p.Missed > 0 && c.start.inherited(p.FirstMissed) {
			return true
		}
	}
	return false
}

// readBeforeInherited reads the object from the apiserver before an
// inherited firing is applied or recorded missed (see inherits). The
// informer's first list may be served from the apiserver's watch cache
// (resourceVersion 0), which may be behind the status the predecessor
// wrote last, on another apiserver, say; a quorum read is not.
// It returns the object when it is newer than the cache's, and keeps it
// until the cache shows it; nil when the cache was current. When the read
// gets no answer the firing goes on: its target write gets none either and
// is retried, with this check, on the firings' retry schedule.
func (c *Controller) readBeforeInherited(ctx context.Context, obj *autoscalingv1alpha1.CronFederatedHPA) (*autoscalingv1alpha1.CronFederatedHPA, error) {
	live, err := c.readFresh(ctx, obj)
	switch {
	case err == nil && live.UID == obj.UID && live.ResourceVersion != obj.ResourceVersion:
		klog.FromContext(ctx).Info("The cache is behind the apiserver for a firing scheduled before this controller started; planning from the object read from the apiserver",
			"cachedResourceVersion", obj.ResourceVersion, "resourceVersion", live.ResourceVersion)
		c.journalRead(cache.MetaObjectToName(obj), live)
		return live, nil
	case err == nil, isUnreachable(err):
		return nil, nil
	}
	return nil, fmt.Errorf("reading %s before deciding a firing scheduled before this controller started: %w", klog.KObj(obj), err)
}

// readAfterConflict reads the object after a status write conflicted and
// keeps it until the cache shows it (see memory.base), so that the retry,
// and another object's sync meanwhile, plan from it. Until the cache shows
// it, the retry reads the object again (see baseOf) before it plans; if
// that read gets no answer, it plans from this one. When this read fails,
// the cache is known to be behind (behindRV) all the same, and the retry
// reads before it plans.
func (c *Controller) readAfterConflict(ctx context.Context, obj *autoscalingv1alpha1.CronFederatedHPA) {
	live, err := c.readFresh(ctx, obj)
	if err != nil || live.UID != obj.UID {
		klog.FromContext(ctx).V(4).Info("Could not read the object after a status conflict; the retry reads it again before it plans", "err", err)
		return
	}
	c.journalRead(cache.MetaObjectToName(obj), live)
}
