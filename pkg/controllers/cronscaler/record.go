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
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	autoscalingv1alpha1 "github.com/scaleplane/scaleplane/pkg/apis/autoscaling/v1alpha1"
	"github.com/scaleplane/scaleplane/pkg/cronplan"
)

// The durable record.
//
// Each rule's durable record is its history in the object's status
// (autoscalingv1alpha1.CronFederatedHPAStatus): its successful and failed
// executions, newest first within their limits, nextExecutionTime, and,
// where the installed CRD keeps it, lastScheduleTime. Both Karmada's CRD and
// scaleplane's store it; it is the only record of what was decided, and
// every later process plans from it. This file holds its rules; it is written by one way in
// (writeStatus, statuswrites.go) and read by one way out (the informer's
// cache, with this process's journal over it: baseOf, reads.go), and pure
// planning (pkg/cronplan) decides from it.
//
// Invariants (docs/cron-scaler.md, "When a firing runs" and "Exactly
// once"):
//   - A slot no later than the newest scheduled time the history holds
//     (cronplan.LastHandled: applied, failed or missed) is never run again,
//     by this process or any later one.
//   - nextExecutionTime is the floor of the plan: a slot before it is not
//     replayed (a resumed rule's skipped slots). It is nil while a rule is
//     suspended, refused or unschedulable, and for an object without rules.
//   - Only what both schemas store decides: lastScheduleTime only adds a
//     failure that failedHistoryLimit 0 keeps no entry of (recordFailure),
//     and is not written where the CRD prunes it (plannedStatus).
//   - An object whose rules are all removed keeps its last histories, with
//     no next execution (dormantStatus), so that a rule added back is
//     planned from when it was added, not from the object's creation.
//   - It is written once per sync, with the resourceVersion the sync read:
//     a stale cache makes the write conflict instead of overwriting a newer
//     record. Statuses are compared as the apiserver stores them
//     (sameStatus), so a write that would change nothing is not made.

// recordMissed records the plan's missed scheduled times. The first of them
// may be a firing that was being retried and is now too late. If the
// apiserver answered any of its attempts, it failed, and is recorded with the
// reason of its last answered attempt rather than as missed. If none was answered, the
// control plane was down from the scheduled time to the deadline: the firing
// could not be tried, and is recorded as missed, saying so.
func (c *Controller) recordMissed(obj *autoscalingv1alpha1.CronFederatedHPA, p *rulePlan, now time.Time) {
	if p.Missed == 0 {
		return
	}
	r, ok := c.memory.attemptsOf(cache.MetaObjectToName(obj), obj.UID, p.Rule.Name)
	if !ok || !r.slot.Equal(p.FirstMissed) {
		c.recordMissedRange(obj, p, p.Missed, p.FirstMissed, now)
		return
	}
	if r.answered == 0 {
		c.recordUnreachable(obj, p, r, now)
	} else {
		msg := fmt.Sprintf("not applied: %d attempts from %s to %s failed, the last with: %s", r.attempts,
			r.first.UTC().Format(time.RFC3339), now.UTC().Format(time.RFC3339), r.lastAnswer)
		recordFailure(&p.History, p.Rule, autoscalingv1alpha1.FailedExecution{
			ScheduleTime: metaTime(r.slot), ExecutionTime: metaTime(now), Message: msg,
		})
		c.recorder.Eventf(obj, corev1.EventTypeWarning, reasonScaleFailed, "Rule %q (scheduled %s): gave up: %s", p.Rule.Name, r.slot.UTC().Format(time.RFC3339), msg)
		countFiring(obj, resultFailed, outcomeFailed)
	}
	if p.Missed > 1 {
		c.recordMissedRange(obj, p, p.Missed-1, p.SecondMissed, now)
	}
}

// recordUnreachable records a firing none of whose attempts reached the
// apiserver as missed.
func (c *Controller) recordUnreachable(obj *autoscalingv1alpha1.CronFederatedHPA, p *rulePlan, r firingAttempts, now time.Time) {
	msg := fmt.Sprintf("missed the scheduled time %s: the API server could not be reached from %s to %s, past the time the rule may still run (%d attempts, the last with: %s)",
		r.slot.UTC().Format(time.RFC3339), r.first.UTC().Format(time.RFC3339), now.UTC().Format(time.RFC3339), r.attempts, r.lastErr)
	recordFailure(&p.History, p.Rule, autoscalingv1alpha1.FailedExecution{
		ScheduleTime: metaTime(r.slot), ExecutionTime: metaTime(now), Message: msg,
	})
	c.recorder.Eventf(obj, corev1.EventTypeWarning, reasonMissed, "Rule %q %s", p.Rule.Name, msg)
	missedFirings.Inc()
	countFiring(obj, resultMissed, outcomeMissed)
}

// recordMissedRange records count missed scheduled times from first to the
// plan's LastMissed as one failed execution.
func (c *Controller) recordMissedRange(obj *autoscalingv1alpha1.CronFederatedHPA, p *rulePlan, count int, first, now time.Time) {
	msg := cronplan.MissedTimes(count, first, p.LastMissed)
	if d := p.Rule.MaxDelaySeconds; d != nil {
		msg += fmt.Sprintf(": found %s late, more than maxDelaySeconds (%d), or superseded by a later scheduled time", now.Sub(p.LastMissed).Round(time.Second), *d)
	} else {
		msg += ": a later scheduled time had already come when it was found (was the controller down?)"
	}
	recordFailure(&p.History, p.Rule, autoscalingv1alpha1.FailedExecution{
		ScheduleTime: metaTime(p.LastMissed), ExecutionTime: metaTime(now), Message: msg,
	})
	c.recorder.Eventf(obj, corev1.EventTypeWarning, reasonMissed, "Rule %q %s", p.Rule.Name, msg)
	missedFirings.Add(float64(count))
	countFiring(obj, resultMissed, outcomeMissed)
}

const (
	defaultSuccessfulHistoryLimit = 3
	defaultFailedHistoryLimit     = 3
)

func metaTime(t time.Time) *metav1.Time {
	if t.IsZero() {
		return nil
	}
	return &metav1.Time{Time: t}
}

// recordSuccess adds a successful execution, newest first, within the rule's
// limit.
func recordSuccess(h *autoscalingv1alpha1.ExecutionHistory, rule *autoscalingv1alpha1.CronFederatedHPARule, e autoscalingv1alpha1.SuccessfulExecution) {
	limit := int(ptr.Deref(rule.SuccessfulHistoryLimit, defaultSuccessfulHistoryLimit))
	h.SuccessfulExecutions = prepend(h.SuccessfulExecutions, e, limit)
	setLastScheduleTime(h, e.ScheduleTime.Time)
}

// recordFailure adds a failed or missed execution, newest first, within the
// rule's limit; a limit of 0 keeps none but still moves lastScheduleTime, so
// the scheduled time is never run again.
func recordFailure(h *autoscalingv1alpha1.ExecutionHistory, rule *autoscalingv1alpha1.CronFederatedHPARule, e autoscalingv1alpha1.FailedExecution) {
	limit := int(ptr.Deref(rule.FailedHistoryLimit, defaultFailedHistoryLimit))
	h.FailedExecutions = prepend(h.FailedExecutions, e, limit)
	setLastScheduleTime(h, e.ScheduleTime.Time)
}

func setLastScheduleTime(h *autoscalingv1alpha1.ExecutionHistory, t time.Time) {
	if h.LastScheduleTime == nil || t.After(h.LastScheduleTime.Time) {
		h.LastScheduleTime = metaTime(t)
	}
}

// prepend puts e first and keeps at most limit entries (none for limit <= 0).
func prepend[T any](list []T, e T, limit int) []T {
	if limit <= 0 {
		return nil
	}
	out := make([]T, 0, min(len(list)+1, limit))
	out = append(out, e)
	for _, x := range list {
		if len(out) == limit {
			break
		}
		out = append(out, x)
	}
	return out
}

// plannedStatus is the planned histories, in spec order, as the installed
// schema stores them (lastScheduleTime only where it is kept).
func (c *Controller) plannedStatus(plans []rulePlan) autoscalingv1alpha1.CronFederatedHPAStatus {
	status := autoscalingv1alpha1.CronFederatedHPAStatus{}
	for i := range plans {
		h := plans[i].History
		if !c.stored.LastScheduleTime {
			h.LastScheduleTime = nil
		}
		status.ExecutionHistories = append(status.ExecutionHistories, h)
	}
	return status
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

// sameStatus compares two statuses as the apiserver stores them.
func sameStatus(a, b autoscalingv1alpha1.CronFederatedHPAStatus) bool {
	return equality.Semantic.DeepEqual(normalize(a), normalize(b))
}

// normalize makes status comparable after a round trip through JSON: times
// have second precision and empty lists are nil.
func normalize(s autoscalingv1alpha1.CronFederatedHPAStatus) autoscalingv1alpha1.CronFederatedHPAStatus {
	out := *s.DeepCopy()
	if len(out.ExecutionHistories) == 0 {
		out.ExecutionHistories = nil
	}
	for i := range out.ExecutionHistories {
		h := &out.ExecutionHistories[i]
		h.NextExecutionTime = truncate(h.NextExecutionTime)
		h.LastScheduleTime = truncate(h.LastScheduleTime)
		if len(h.SuccessfulExecutions) == 0 {
			h.SuccessfulExecutions = nil
		}
		if len(h.FailedExecutions) == 0 {
			h.FailedExecutions = nil
		}
		for j := range h.SuccessfulExecutions {
			e := &h.SuccessfulExecutions[j]
			e.ScheduleTime, e.ExecutionTime = truncate(e.ScheduleTime), truncate(e.ExecutionTime)
		}
		for j := range h.FailedExecutions {
			e := &h.FailedExecutions[j]
			e.ScheduleTime, e.ExecutionTime = truncate(e.ScheduleTime), truncate(e.ExecutionTime)
		}
	}
	return out
}

func truncate(t *metav1.Time) *metav1.Time {
	if t == nil {
		return nil
	}
	return &metav1.Time{Time: t.Time.Truncate(time.Second)}
}

// historyIndex is the index of the rule's history in status, -1 if none.
func historyIndex(status *autoscalingv1alpha1.CronFederatedHPAStatus, rule string) int {
	return slices.IndexFunc(status.ExecutionHistories, func(h autoscalingv1alpha1.ExecutionHistory) bool { return h.RuleName == rule })
}

// addMissingExecutions adds to newer the executions of older whose
// scheduled time newer does not record, newest first as status keeps them.
func addMissingExecutions(newer, older *autoscalingv1alpha1.ExecutionHistory) {
	recorded := func(t *metav1.Time) bool {
		for _, e := range newer.SuccessfulExecutions {
			if e.ScheduleTime.Equal(t) {
				return true
			}
		}
		for _, e := range newer.FailedExecutions {
			if e.ScheduleTime.Equal(t) {
				return true
			}
		}
		return false
	}
	for _, e := range older.SuccessfulExecutions {
		if !recorded(e.ScheduleTime) {
			newer.SuccessfulExecutions = append(newer.SuccessfulExecutions, e)
		}
	}
	for _, e := range older.FailedExecutions {
		if !recorded(e.ScheduleTime) {
			newer.FailedExecutions = append(newer.FailedExecutions, e)
		}
	}
	newestFirst := func(a, b *metav1.Time) int { return b.Compare(a.Time) }
	slices.SortStableFunc(newer.SuccessfulExecutions, func(a, b autoscalingv1alpha1.SuccessfulExecution) int {
		return newestFirst(a.ScheduleTime, b.ScheduleTime)
	})
	slices.SortStableFunc(newer.FailedExecutions, func(a, b autoscalingv1alpha1.FailedExecution) int { return newestFirst(a.ScheduleTime, b.ScheduleTime) })
}
