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
	"time"

	corev1 "k8s.io/api/core/v1"

	autoscalingv1alpha1 "github.com/scaleplane/scaleplane/pkg/apis/autoscaling/v1alpha1"
	"github.com/scaleplane/scaleplane/pkg/cronplan"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
)

// fireSync fires the object's due rules and returns when to sync it again
// (0: only on change). A sync that wrote (or tried to write) the target
// leaves its status in memory and returns record true: the caller writes it
// with record, after the other firings due (targets first). Any other sync
// writes its status itself.
func (c *Controller) fireSync(ctx context.Context, key cache.ObjectName) (time.Duration, bool, error) {
	logger := klog.LoggerWithValues(klog.FromContext(ctx), "cronFederatedHPA", key)
	ctx = klog.NewContext(ctx, logger)
	obj, err := c.lister.CronFederatedHPAs(key.Namespace).Get(key.Name)
	if apierrors.IsNotFound(err) {
		c.memory.forget(key)
		c.deferred.forget(key)
		return 0, false, nil
	}
	if err != nil {
		return 0, false, err
	}
	c.reportOtherWriters(logger, obj)
	obj, base, fresh, err := c.baseOf(ctx, obj)
	if err != nil || obj == nil {
		return 0, false, err
	}
	if dups := duplicateRuleNames(obj.Spec.Rules); len(dups) > 0 {
		return 0, false, c.refuse(ctx, obj, base, dups)
	}
	c.memory.accept(key, obj.UID)
	if len(obj.Spec.Rules) == 0 {
		return 0, false, c.writeStatus(ctx, obj, dormantStatus(base))
	}
	now := c.clock.Now()

	marks := c.memory.takeReplan(key, obj.UID)
	plans := c.plan(obj, base, marks, now)
	if !fresh && c.inherits(plans) {
		live, err := c.readLive(ctx, obj)
		if err != nil {
			return 0, false, err
		}
		if live != nil {
			obj, base = live, live.Status.DeepCopy()
			plans = c.plan(obj, base, marks, now)
		}
	}
	wrote := c.fire(ctx, obj, plans, now)
	record := false
	if wrote {
		// The histories planned here are the only record of the firings
		// until record writes them; the next sync plans from them.
		c.memory.setPending(key, obj.UID, c.plannedStatus(plans).ExecutionHistories, true, marks)
		record = true
	} else if err := c.updateStatus(ctx, obj, plans, marks); err != nil {
		// Retried with backoff; the next firing is kept all the same. The
		// replan marks are kept with the plan made from them, in the
		// pending status, or given back when that plan is dropped (see
		// updateStatus): planning again without them, from the time of
		// the retry, would skip a slot in between.
		d, _ := nextRequeue(plans, c.clock.Now())
		return d, false, err
	}
	d, ok := nextRequeue(plans, c.clock.Now())
	if !ok {
		return 0, record, nil
	}
	logger.V(4).Info("Requeued until the next firing", "after", d)
	return d, record, nil
}

// baseOf returns the object to plan from and its status as this process
// knows it (see memory.base). When the cache is behind the status this
// process last wrote, or behind the apiserver's after a status write
// conflicted, it reads the object from the apiserver and keeps what it read
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
	live, err := c.client.AutoscalingV1alpha1().CronFederatedHPAs(key.Namespace).Get(ctx, key.Name, metav1.GetOptions{})
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
		c.memory.setWritten(key, live.UID, live.Status, live.ResourceVersion)
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
// see inheritedFiring), or one found too late to run (a predecessor may have
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

// readLive reads the object from the apiserver before an inherited firing
// is applied or recorded missed (see inherits). The informer's first list may be served from the apiserver's
// watch cache (resourceVersion 0), which may be behind the status the
// predecessor wrote last, on another apiserver, say; a quorum read is not.
// It returns the object when it is newer than the cache's, and keeps it
// until the cache shows it; nil when the cache was current. When the read
// gets no answer the firing goes on: its target write gets none either and
// is retried, with this check, on the firings' retry schedule.
func (c *Controller) readLive(ctx context.Context, obj *autoscalingv1alpha1.CronFederatedHPA) (*autoscalingv1alpha1.CronFederatedHPA, error) {
	key := cache.MetaObjectToName(obj)
	live, err := c.client.AutoscalingV1alpha1().CronFederatedHPAs(key.Namespace).Get(ctx, key.Name, metav1.GetOptions{})
	switch {
	case err == nil && live.UID == obj.UID && live.ResourceVersion != obj.ResourceVersion:
		klog.FromContext(ctx).Info("The cache is behind the apiserver for a firing scheduled before this controller started; planning from the object read from the apiserver",
			"cachedResourceVersion", obj.ResourceVersion, "resourceVersion", live.ResourceVersion)
		c.memory.setWritten(key, live.UID, live.Status, live.ResourceVersion)
		return live, nil
	case err == nil, isUnreachable(err):
		return nil, nil
	}
	return nil, fmt.Errorf("reading %s before deciding a firing scheduled before this controller started: %w", klog.KObj(obj), err)
}

// dormantStatus is the status of an object without rules: the histories of
// its last rules, with no next execution. They are kept, not emptied, so
// that a rule added back later (while the controller is down, say) is planned
// from the time it was added (see cronplan.RuleStart) instead of the object's
// creation, which would run again a slot that was already applied.
func dormantStatus(base *autoscalingv1alpha1.CronFederatedHPAStatus) autoscalingv1alpha1.CronFederatedHPAStatus {
	status := base.DeepCopy()
	for i := range status.ExecutionHistories {
		status.ExecutionHistories[i].NextExecutionTime = nil
	}
	return *status
}

// duplicateRuleNames returns the names used by more than one rule.
func duplicateRuleNames(rules []autoscalingv1alpha1.CronFederatedHPARule) []string {
	seen := make(map[string]int, len(rules))
	var dups []string
	for i := range rules {
		seen[rules[i].Name]++
		if seen[rules[i].Name] == 2 {
			dups = append(dups, rules[i].Name)
		}
	}
	return dups
}

// refuse handles an object whose rules share names: a rule's name is the key
// of its history, so such rules would read and overwrite each other's history
// and one of them would never fire. No rule of the object runs; status keeps
// its histories but promises no next execution; a Warning event says why,
// once per change of the object. The CRD and the webhook reject such objects;
// this covers a cluster with neither (Karmada's CRD without its webhook).
func (c *Controller) refuse(ctx context.Context, obj *autoscalingv1alpha1.CronFederatedHPA, base *autoscalingv1alpha1.CronFederatedHPAStatus, dups []string) error {
	if c.memory.refuse(cache.MetaObjectToName(obj), obj.UID, obj.Generation) {
		c.recorder.Eventf(obj, corev1.EventTypeWarning, reasonDuplicateRules,
			"Rule names %q are used by more than one rule; a rule's name is the key of its history, so no rule of this object runs until every rule has a name of its own", dups)
		klog.FromContext(ctx).Info("Refusing a CronFederatedHPA whose rules share names", "names", dups)
	}
	return c.writeStatus(ctx, obj, dormantStatus(base))
}

// plan plans every rule of the object from base, its status as this sync
// found it (see memory.base), with pkg/cronplan (see cronplan.Object and
// cronplan.Rule for the rules) and the replan marks it was handed (see
// replanMarks).
func (c *Controller) plan(obj *autoscalingv1alpha1.CronFederatedHPA, base *autoscalingv1alpha1.CronFederatedHPAStatus, marks replanMarks, now time.Time) []rulePlan {
	plans := make([]rulePlan, 0, len(obj.Spec.Rules))
	cronplan.Object(obj, base, c.schedules.get, c.start.time(), marks.all, marks.rules, now, func(p cronplan.Plan) {
		plans = append(plans, rulePlan{Plan: p})
	})
	return plans
}
