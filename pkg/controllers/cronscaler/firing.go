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
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"

	autoscalingv1alpha1 "github.com/scaleplane/scaleplane/pkg/apis/autoscaling/v1alpha1"

	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
)

// firing is one rule's due scheduled time and what it sets.
type firing struct {
	plan *rulePlan
	vals values
	// err says why the rule cannot be applied to this target.
	err error
	// won are the fields this firing sets that no later firing sets.
	won values
	// yielded is the latest slot of another object on the target that
	// took a field of this firing (see yieldToOtherObjects).
	yielded laterSlot
}

// fire records missed scheduled times and runs the due firings with one
// write to the target. When several due firings set the same field (after
// downtime, say), the latest scheduled one wins and the others are recorded
// as superseded, so the target does not flap through stale values; a later
// slot of another object on the same target wins too (see
// yieldToOtherObjects).
//
// A transient failure of the target write (a 5xx, a timeout, a webhook that
// is down) is retried while the firings may still run: each attempt's reason
// is a Warning event, nextExecutionTime keeps naming the firing being
// retried, the missed scheduled times found are recorded all the same, and
// the sync is requeued for the next attempt. The firing is recorded as
// failed, with the last reason, once it is given up (recordMissed).
//
// It reports whether it wrote, or tried to write, the target.
func (c *Controller) fire(ctx context.Context, obj *autoscalingv1alpha1.CronFederatedHPA, plans []rulePlan, now time.Time) bool {
	t, targetErr := parseTarget(obj.Spec.ScaleTargetRef)
	var due []*firing
	for i := range plans {
		p := &plans[i]
		if p.Due.IsZero() {
			continue
		}
		f := &firing{plan: p, err: targetErr}
		if f.err == nil {
			f.vals, f.err = ruleValues(t, p.Rule)
		}
		due = append(due, f)
	}
	// Oldest first; among equal times, spec order.
	sort.SliceStable(due, func(i, j int) bool { return due[i].plan.Due.Before(due[j].plan.Due) })
	c.yieldToOtherObjects(obj, due, now)
	yieldToOwnAppliedSlots(plans, due, now)
	merged := mergeFirings(due)

	var applyErr error
	var prior priorWrite
	wrote := merged != (values{})
	if wrote {
		c.checkAutoscalers(obj, t, merged)
		check := c.inheritedSlot(due)
		if retried := c.retriedSlot(obj, due); retried.After(check) {
			check = retried
		}
		prior, applyErr = c.apply(withFiringDeadline(ctx, writtenDeadline(due)), obj.Namespace, t, merged, check)
		if prior.decided() {
			klog.FromContext(ctx).Info("Firing that may have been applied already not applied again", "target", t.String(), "prior", prior.String())
		}
	}
	transient := applyErr != nil && !isPermanent(applyErr)
	switch {
	case transient && isUnreachable(applyErr):
		// Every object with a firing due says the same, every few
		// seconds, while the control plane is down; the outage itself
		// is logged once by the manager's API server probe.
		klog.FromContext(ctx).V(4).Info("Target write got no answer from the apiserver, will retry", "target", t.String(), "err", applyErr)
	case transient:
		klog.FromContext(ctx).Info("Target write failed for a transient reason, will retry", "target", t.String(), "err", applyErr)
	}

	for i := range plans {
		c.recordMissed(obj, &plans[i], now)
	}
	retries := map[string]firingAttempts{}
	for _, f := range due {
		// A firing that won no field is superseded whatever became of the
		// write: the later firing that took its fields may be on the
		// target already (an error does not say the write was not made),
		// and retried alone once that one is given up, it would set an
		// older slot's value over it.
		if transient && f.err == nil && f.won != (values{}) {
			retries[f.plan.Rule.Name] = c.retryFiring(obj, f.plan, applyErr, now)
			continue
		}
		c.recordFiring(obj, t, f, due, prior, applyErr, now)
	}
	c.memory.setAttempts(cache.MetaObjectToName(obj), obj.UID, retries)
	for i := range plans {
		if plans[i].Invalid != nil {
			c.recorder.Eventf(obj, corev1.EventTypeWarning, reasonInvalidRule, "Rule %q cannot be scheduled: %v", plans[i].Rule.Name, plans[i].Invalid)
		}
	}
	return wrote
}

// mergeFirings returns what one write sets for the due firings (oldest
// first): the latest firing setting a field wins it.
func mergeFirings(due []*firing) values {
	var merged values
	var owners [3]*firing
	for _, f := range due {
		if f.err != nil {
			continue
		}
		if f.vals.replicas != nil {
			merged.replicas, owners[0] = f.vals.replicas, f
		}
		if f.vals.min != nil {
			merged.min, owners[1] = f.vals.min, f
		}
		if f.vals.max != nil {
			merged.max, owners[2] = f.vals.max, f
		}
	}
	if owners[0] != nil {
		owners[0].won.replicas = merged.replicas
	}
	if owners[1] != nil {
		owners[1].won.min = merged.min
	}
	if owners[2] != nil {
		owners[2].won.max = merged.max
	}
	return merged
}

func (c *Controller) recordFiring(obj *autoscalingv1alpha1.CronFederatedHPA, t target, f *firing, due []*firing, prior priorWrite, applyErr error, now time.Time) {
	p := f.plan
	scheduled := p.Due.UTC().Format(time.RFC3339)
	fail := func(result, reason, msg string) {
		recordFailure(&p.History, p.Rule, autoscalingv1alpha1.FailedExecution{
			ScheduleTime: metaTime(p.Due), ExecutionTime: metaTime(now), Message: msg,
		})
		c.recorder.Eventf(obj, corev1.EventTypeWarning, reason, "Rule %q (scheduled %s): %s", p.Rule.Name, scheduled, msg)
		countFailure(obj, result, reason)
	}
	switch {
	case f.err != nil:
		firingSkew.Observe(now.Sub(p.Due).Seconds())
		fail(resultFailed, reasonScaleFailed, f.err.Error())
	case f.won == (values{}) && f.vals == (values{}):
		fail(resultSuperseded, reasonSuperseded, fmt.Sprintf("not applied: %s sets the same field of %s and was applied or is due instead",
			f.yielded.desc, t))
	case f.won == (values{}):
		by := latestSetting(f, due)
		fail(resultSuperseded, reasonSuperseded, fmt.Sprintf("not applied: rule %q, scheduled later (%s), sets the same field of %s and was applied or is due instead",
			by.plan.Rule.Name, by.plan.Due.UTC().Format(time.RFC3339), t))
	case applyErr != nil:
		firingSkew.Observe(now.Sub(p.Due).Seconds())
		fail(resultFailed, reasonScaleFailed, applyErr.Error())
	case prior.by != "" && !c.start.inherited(p.Due):
		fail(resultFailed, reasonNotReapplied, fmt.Sprintf("not applied: an earlier attempt may have been applied (its answer was an error), and since then %s of %s; "+
			"applying it now could undo that change", prior, t))
	case prior.by != "":
		fail(resultFailed, reasonNotReapplied, fmt.Sprintf("not applied: it was due before this controller started, and since then %s of %s; "+
			"the controller before it may have applied it, and applying it now could undo that change", prior, t))
	case prior.applied:
		recordSuccess(&p.History, p.Rule, autoscalingv1alpha1.SuccessfulExecution{
			ScheduleTime:       metaTime(p.Due),
			ExecutionTime:      metaTime(prior.at),
			AppliedReplicas:    f.won.replicas,
			AppliedMinReplicas: f.won.min,
			AppliedMaxReplicas: f.won.max,
		})
		c.deferEvent(obj, reasonScaled, "Rule %q (scheduled %s): %s of %s was %s; recorded, not applied again", p.Rule.Name, scheduled, describe(f.won), t, prior)
		countFiring(obj, resultSuccess, outcomeAlreadyApplied)
	default:
		firingSkew.Observe(now.Sub(p.Due).Seconds())
		recordSuccess(&p.History, p.Rule, autoscalingv1alpha1.SuccessfulExecution{
			ScheduleTime:       metaTime(p.Due),
			ExecutionTime:      metaTime(now),
			AppliedReplicas:    f.won.replicas,
			AppliedMinReplicas: f.won.min,
			AppliedMaxReplicas: f.won.max,
		})
		c.deferEvent(obj, reasonScaled, "Rule %q (scheduled %s): set %s of %s", p.Rule.Name, scheduled, describe(f.won), t)
		countFiring(obj, resultSuccess, outcomeApplied)
		// The write was answered before recordFiring was called: now is
		// when the sync began, the clock says when the target took it.
		observeTargetWrite(obj, p.Due, c.clock.Now())
	}
}

// inheritedSlot returns the latest scheduled time among the due firings
// that came before this process started (see priorWrite); zero if none.
func (c *Controller) inheritedSlot(due []*firing) time.Time {
	var slot time.Time
	for _, f := range due {
		if f.err == nil && f.won != (values{}) && c.start.inherited(f.plan.Due) && f.plan.Due.After(slot) {
			slot = f.plan.Due
		}
	}
	return slot
}

// deferEvent keeps a Normal event until the status that records its firing
// is written (see deferredEvents), if the controller's event rate allows it
// now: in a burst of 100,000 firings all but a few thousand would be dropped
// at the limit anyway, and holding each one's message until then was tens of
// megabytes.
func (c *Controller) deferEvent(obj *autoscalingv1alpha1.CronFederatedHPA, reason, messageFmt string, args ...any) {
	if !c.normalEvents.TryAccept() {
		droppedEvents.Inc()
		return
	}
	c.deferred.add(cache.MetaObjectToName(obj), obj.UID, reason, fmt.Sprintf(messageFmt, args...))
}

// normalEventf emits a Normal event if the controller's event rate allows it
// (see normalEventQPS) and counts it as dropped otherwise.
func (c *Controller) normalEventf(obj *autoscalingv1alpha1.CronFederatedHPA, reason, messageFmt string, args ...any) {
	if !c.normalEvents.TryAccept() {
		droppedEvents.Inc()
		return
	}
	c.recorder.Eventf(obj, corev1.EventTypeNormal, reason, messageFmt, args...)
}

// latestSetting returns the last due firing that sets a field f sets.
func latestSetting(f *firing, due []*firing) *firing {
	by := f
	for _, g := range due {
		if g.err == nil && (f.vals.replicas != nil && g.vals.replicas != nil || f.vals.min != nil && g.vals.min != nil || f.vals.max != nil && g.vals.max != nil) {
			by = g
		}
	}
	return by
}

func describe(v values) string {
	s := ""
	add := func(name string, p *int32) {
		if p == nil {
			return
		}
		if s != "" {
			s += ", "
		}
		s += fmt.Sprintf("%s to %d", name, *p)
	}
	add("replicas", v.replicas)
	add("minReplicas", v.min)
	add("maxReplicas", v.max)
	return s
}

// writtenDeadline is the earliest deadline of the firings that won a field
// of the target write.
func writtenDeadline(due []*firing) time.Time {
	var d time.Time
	for _, f := range due {
		if f.won != (values{}) && (d.IsZero() || f.plan.Deadline.Before(d)) {
			d = f.plan.Deadline
		}
	}
	return d
}
