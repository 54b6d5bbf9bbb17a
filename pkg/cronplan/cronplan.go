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

// Package cronplan is the cron-scaler's planning of a CronFederatedHPA's
// rules at a sync: which scheduled time runs now, which passed too late and
// are recorded as missed, and when each rule fires next. It is pure (the
// object, its status and the clock) and shared with kubectl-scaleplane, so
// that `next` previews what the controller does, after a downtime too.
package cronplan

import (
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	autoscalingv1alpha1 "github.com/scaleplane/scaleplane/pkg/apis/autoscaling/v1alpha1"
	"github.com/scaleplane/scaleplane/pkg/cronschedule"
)

// FieldManager names the cron-scaler in the managedFields of what it
// writes; its status writes time the plan in status (see OwnStatusWrite).
const FieldManager = "scaleplane-cron-scaler"

// MaxCountedMisses bounds the walk over missed scheduled times, so a rule
// that fires every minute and was down for a month costs little.
const MaxCountedMisses = 1000

// From says from when a rule is planned when its history does not say.
type From struct {
	// Start is when a rule without history came to exist (see RuleStart).
	Start time.Time
	// Replan is when a change the event handlers saw that invalidates the
	// rule's plan (target changed, rule added, resumed or rescheduled) was
	// made.
	Replan time.Time
	// Edited is the last change of the object (see LastSpecChange): a plan
	// the history holds that the current spec invalidates was changed then
	// or before, while the controller was not watching.
	Edited time.Time
	// Stale says that the last change came after the cron-scaler's last
	// status write (see OwnStatusWrite; both as managedFields time them, in
	// seconds): the plan in status may
	// have been made for the object as it was before the change. A status
	// write after a change was planned for the changed object, since it is
	// made with the resourceVersion its sync read, and a change in between
	// would have made it conflict. A status write in the change's second
	// comes after it as a rule (the sync that the change triggers writes
	// it), and is taken as after it: the plan stands. (Taken as before it,
	// the plan of a controller whose clock is ahead of the apiserver's
	// would give way to slots it skipped on purpose, a rule resumed, say.)
	Stale bool
	// Unwatched is Edited when the change is stale and was made before
	// the planning process started. A slot before it that no controller ran is not run: it
	// belongs to the object as it was before the change, whose target or
	// values may be other than now (a target changed while the controller
	// was down, issue 26, case 2), and nothing the API keeps says what
	// changed. managedFields keep seconds: a change in the slot's second
	// may have come after it, and counts as after it.
	Unwatched time.Time
}

// Plan is what one sync decides for one rule, before anything is applied.
type Plan struct {
	Rule *autoscalingv1alpha1.CronFederatedHPARule
	// History is the rule's history as the sync found it, with
	// nextExecutionTime planned.
	History autoscalingv1alpha1.ExecutionHistory
	// Invalid says why the rule cannot be scheduled (bad schedule or zone).
	Invalid error

	// Due is the scheduled time to run now; zero when nothing is due.
	Due time.Time
	// Missed counts scheduled times that passed without running and are now
	// too late; LastMissed and FirstMissed are the latest and earliest.
	Missed                  int
	FirstMissed, LastMissed time.Time
	// SecondMissed is the missed time after FirstMissed, if any.
	SecondMissed time.Time

	// Deadline is when Due stops being runnable: maxDelaySeconds after it,
	// or the rule's next scheduled time, whichever comes first.
	Deadline time.Time
}

// ScheduleFunc parses a rule's schedule in its time zone (the controller's
// own when timeZone is absent).
type ScheduleFunc func(rule *autoscalingv1alpha1.CronFederatedHPARule) (*cronschedule.Schedule, error)

// ParseSchedule parses a rule's schedule in its zone, as the controller
// reads it: the rule's timeZone, UTC for "", local (the controller's own
// zone) when it is absent. loc is nil when the zone is unknown.
func ParseSchedule(rule *autoscalingv1alpha1.CronFederatedHPARule, local *time.Location) (*time.Location, *cronschedule.Schedule, error) {
	loc := local
	if rule.TimeZone != nil {
		var err error
		if loc, err = cronschedule.LoadLocation(*rule.TimeZone); err != nil {
			return nil, nil, fmt.Errorf("time zone %q: %w", *rule.TimeZone, err)
		}
	}
	sched, err := cronschedule.Parse(rule.Schedule, loc)
	if err != nil {
		return loc, nil, fmt.Errorf("schedule %q: %w", rule.Schedule, err)
	}
	return loc, sched, nil
}

// MissedTimes says which scheduled times a history entry for count missed
// ones, from first to last, records.
func MissedTimes(count int, first, last time.Time) string {
	switch {
	case count >= MaxCountedMisses:
		return fmt.Sprintf("missed at least %d scheduled times from %s to %s", count, first.UTC().Format(time.RFC3339), last.UTC().Format(time.RFC3339))
	case count > 1:
		return fmt.Sprintf("missed %d scheduled times from %s to %s", count, first.UTC().Format(time.RFC3339), last.UTC().Format(time.RFC3339))
	}
	return "missed the scheduled time " + last.UTC().Format(time.RFC3339)
}

// Object plans every rule of obj from status, its status as the sync found
// it, at now, and hands each plan to each, in the order of the rules (a
// callback, so that the controller keeps its plans with what applying them
// adds without a second slice at every sync). started is when the planning
// process started (a change made before it was not watched, see
// From.Unwatched); replanAll and replan are when a change seen by the event
// handlers that invalidated the plan of every rule or of the named ones was
// made.
func Object(obj *autoscalingv1alpha1.CronFederatedHPA, status *autoscalingv1alpha1.CronFederatedHPAStatus, schedule ScheduleFunc, started, replanAll time.Time, replan map[string]time.Time, now time.Time, each func(Plan)) {
	changed := LastSpecChange(obj, now)
	stale := !changed.IsZero() && changed.After(OwnStatusWrite(obj))
	// A change made after the cron-scaler's last status write and before this process
	// started was not watched by it: it may have been of the target or the
	// values, and nothing the API keeps says which (see From.Unwatched).
	var unwatched time.Time
	if stale && !changed.After(started) {
		unwatched = changed
	}
	for i := range obj.Spec.Rules {
		rule := &obj.Spec.Rules[i]
		sched, err := schedule(rule)
		history, found := FindHistory(status, rule.Name)
		from := From{Replan: replanAll, Edited: changed, Stale: stale, Unwatched: unwatched}
		if r := replan[rule.Name]; r.After(from.Replan) {
			from.Replan = r
		}
		if !found {
			from.Start = RuleStart(obj, status, now)
		}
		each(Rule(rule, history, sched, err, from, now))
	}
}

// Rule decides whether the rule is due at now, and when it fires next.
//
// The rule's durable state is its history in status, as both Karmada's schema
// and scaleplane's store it: the newest scheduled time in its successful and
// failed executions (LastHandled: applied, failed or missed; lastScheduleTime
// adds to it where the schema keeps it) and nextExecutionTime (the next one
// planned). A scheduled time S is run only if S > lastHandled and S >=
// the floor of the plan, so nothing is ever run twice and nothing from
// before the plan is replayed. The floor is:
//   - after a change the event handlers saw (target changed, rule added,
//     resumed or rescheduled): the first scheduled time after it was made;
//   - nextExecutionTime, when it is a scheduled time of the current schedule,
//     or the first scheduled time after the object was last changed if that
//     is earlier (the schedule was widened while the controller was down);
//   - for a rule without history, the first scheduled time after it came to
//     exist (see RuleStart), so a scheduled time that passed while the
//     controller was down is still run, as the CronJob controller does;
//   - for a rule whose history holds no plan (it was suspended, refused or
//     unschedulable) or a plan that is not a scheduled time of the current
//     schedule (the schedule or zone changed): the first scheduled time after
//     the object was last changed, which is when that edit was made or later.
//     An edit made while the controller was down is thus treated as a rule
//     added while down: its slot since then runs. Without managed fields
//     the time of the edit is unknown, and the rule is planned from now.
//
// A change made before the planning process started (while no controller
// watched, or before this one took over) raises the floor to the first
// scheduled time after it: a slot before the change belongs to the object
// as it was, with perhaps another target or other values (see
// From.Unwatched).
//
// The latest scheduled time S <= now since the floor runs if it is at most
// maxDelaySeconds late (unset: while it is the latest, i.e. until the next
// one); earlier ones are recorded as missed.
func Rule(rule *autoscalingv1alpha1.CronFederatedHPARule, history autoscalingv1alpha1.ExecutionHistory, sched *cronschedule.Schedule, schedErr error, from From, now time.Time) Plan {
	p := Plan{Rule: rule, History: history}
	p.History.RuleName = rule.Name
	if rule.Suspend != nil && *rule.Suspend {
		// A suspended rule has no plan; resuming it plans from the time it
		// is resumed, so what it skipped is never replayed.
		p.History.NextExecutionTime = nil
		return p
	}
	if schedErr != nil {
		p.Invalid = schedErr
		p.History.NextExecutionTime = nil
		return p
	}
	var floor time.Time
	switch planned := history.NextExecutionTime; {
	case !from.Replan.IsZero():
		floor = sched.Next(from.Replan)
	case planned != nil && sched.Prev(planned.Time).Equal(planned.Time):
		floor = planned.Time
		// A slot of the current schedule, but perhaps planned under an
		// older one: a schedule widened while the controller was down
		// (weekdays to every day) keeps its old plan (Monday) a slot, and
		// the new slots after the edit (Saturday, Sunday) came before it
		// (issue 26, case 1). So when the change came after the plan
		// (stale), the floor is the earlier of the plan and the first
		// slot after the change; lastHandled still bounds it below, so
		// nothing handled is replayed. A plan written after the change
		// is the changed object's, and stands: it may skip a slot on
		// purpose (a failure that failedHistoryLimit 0 did not keep on
		// Karmada's schema is remembered only by it).
		if from.Stale && !from.Edited.IsZero() {
			if e := sched.Next(from.Edited); e.Before(floor) {
				floor = e
			}
		}
	case !from.Start.IsZero():
		// Like the CronJob controller: the first scheduled time after the
		// rule came to exist.
		floor = sched.Next(from.Start)
	case !from.Edited.IsZero():
		floor = sched.Next(from.Edited)
	}
	if !floor.IsZero() && !from.Unwatched.IsZero() {
		if n := sched.Next(from.Unwatched); n.After(floor) {
			floor = n
		}
	}
	p.History.NextExecutionTime = metaTime(sched.Next(now))
	if floor.IsZero() {
		return p
	}
	if last := LastHandled(&history); !last.IsZero() && !floor.After(last) {
		floor = sched.Next(last)
	}
	slot := sched.Prev(now)
	if slot.IsZero() || floor.IsZero() || slot.Before(floor) {
		return p
	}
	for t := floor; t.Before(slot) && p.Missed < MaxCountedMisses; t = sched.Next(t) {
		p.addMissed(t)
	}
	if d := rule.MaxDelaySeconds; d != nil && now.Sub(slot) > time.Duration(*d)*time.Second {
		p.addMissed(slot)
		return p
	}
	p.Due, p.Deadline = slot, DeadlineOf(rule, sched, slot)
	return p
}

func (p *Plan) addMissed(t time.Time) {
	switch p.Missed {
	case 0:
		p.FirstMissed = t
	case 1:
		p.SecondMissed = t
	}
	p.Missed++
	p.LastMissed = t
}

// RuleStart is when a rule with no history came to exist, the time its first
// sight plans from (as the CronJob controller plans a new CronJob from its
// creation). It is the object's creation when status has no history at all
// (the object was never synced). Otherwise the rule was added to an existing
// object: the last change of the object (see LastSpecChange), which is when
// the generation that added the rule was written, or later. (A rule added
// while the controller watched was marked for a replan by the event handler
// instead.) Never after now, so a clock behind the apiserver's cannot make a
// rule skip its present.
func RuleStart(obj *autoscalingv1alpha1.CronFederatedHPA, status *autoscalingv1alpha1.CronFederatedHPAStatus, now time.Time) time.Time {
	start := obj.CreationTimestamp.Time
	if len(status.ExecutionHistories) > 0 {
		if changed := LastSpecChange(obj, now); changed.After(start) {
			start = changed
		}
	}
	if start.IsZero() || start.After(now) {
		return now
	}
	return start
}

// OwnStatusWrite is the time of the cron-scaler's newest status write (its
// own field manager's entry: this process or another of its processes), as
// the object's managedFields say; zero without one. Only such a write says
// that the plan in status was made for the object as it was then: another
// cron controller writing status (Karmada's, switched back on) may leave
// the plan of the object as it was before an edit, and a change made while
// no cron-scaler watched would then pass for one the plan was made after
// (a retarget's old slot applied to the new target, or a widened schedule's
// first slot lost, issue 26).
func OwnStatusWrite(obj *autoscalingv1alpha1.CronFederatedHPA) time.Time {
	var newest time.Time
	for _, f := range obj.ManagedFields {
		if f.Subresource == "status" && f.Manager == FieldManager && f.Time != nil && f.Time.Time.After(newest) {
			newest = f.Time.Time
		}
	}
	return newest
}

// LastSpecChange is the last change of the object's spec or metadata: the
// newest time in its managed fields, status writes aside (the apiserver moves
// a manager's time only when its write changed something). An edit the
// controller did not see (it was down) happened then or before. Zero when
// the object has no managed fields (tracking off, or stripped); never after
// now.
func LastSpecChange(obj *autoscalingv1alpha1.CronFederatedHPA, now time.Time) time.Time {
	var last time.Time
	for _, f := range obj.ManagedFields {
		if f.Subresource == "" && f.Time != nil && f.Time.Time.After(last) {
			last = f.Time.Time
		}
	}
	if last.After(now) {
		return now
	}
	return last
}

// FindHistory returns the history of the named rule in status.
func FindHistory(status *autoscalingv1alpha1.CronFederatedHPAStatus, rule string) (autoscalingv1alpha1.ExecutionHistory, bool) {
	for i := range status.ExecutionHistories {
		if status.ExecutionHistories[i].RuleName == rule {
			return *status.ExecutionHistories[i].DeepCopy(), true
		}
	}
	return autoscalingv1alpha1.ExecutionHistory{RuleName: rule}, false
}

// LastHandled is the latest scheduled time the history says was handled
// (applied, failed or missed). It is read from what every schema stores, the
// newest scheduleTime of the successful and failed executions, and from
// lastScheduleTime where the schema keeps it (Karmada's prunes it; it also
// still counts a failure that failedHistoryLimit 0 did not keep).
func LastHandled(h *autoscalingv1alpha1.ExecutionHistory) time.Time {
	var last time.Time
	later := func(t *metav1.Time) {
		if t != nil && t.Time.After(last) {
			last = t.Time
		}
	}
	later(h.LastScheduleTime)
	for i := range h.SuccessfulExecutions {
		later(h.SuccessfulExecutions[i].ScheduleTime)
	}
	for i := range h.FailedExecutions {
		later(h.FailedExecutions[i].ScheduleTime)
	}
	return last
}

// DeadlineOf is when a slot of sched stops being runnable: maxDelaySeconds
// after it, or the rule's next scheduled time, whichever comes first.
func DeadlineOf(rule *autoscalingv1alpha1.CronFederatedHPARule, sched *cronschedule.Schedule, slot time.Time) time.Time {
	deadline := sched.Next(slot)
	if d := rule.MaxDelaySeconds; d != nil {
		if end := slot.Add(time.Duration(*d) * time.Second); end.Before(deadline) {
			deadline = end
		}
	}
	return deadline
}

func metaTime(t time.Time) *metav1.Time {
	if t.IsZero() {
		return nil
	}
	return &metav1.Time{Time: t}
}
