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
	"sync"
	"time"

	autoscalingv1alpha1 "github.com/scaleplane/scaleplane/pkg/apis/autoscaling/v1alpha1"
	"github.com/scaleplane/scaleplane/pkg/cronschedule"
)

// maxCountedMisses bounds the walk over missed scheduled times, so a rule
// that fires every minute and was down for a month costs little.
const maxCountedMisses = 1000

// scheduleCache keeps parsed schedules by expression and time zone: parsing
// is cheap but not free, and thousands of objects share a few schedules.
type scheduleCache struct {
	mu sync.Mutex
	m  map[scheduleKey]scheduleEntry
}

// scheduleKey tells an absent time zone (the process's) from an empty one
// (UTC).
type scheduleKey struct {
	expr, zone string
	hasZone    bool
}

type scheduleEntry struct {
	sched *cronschedule.Schedule
	err   error
}

// maxCachedSchedules bounds the cache; it is emptied when full, which only
// costs re-parsing.
const maxCachedSchedules = 4096

func newScheduleCache() *scheduleCache {
	return &scheduleCache{m: map[scheduleKey]scheduleEntry{}}
}

// get parses the rule's schedule in its time zone: the process's own when
// timeZone is absent, UTC when it is "" (as Karmada reads it).
func (c *scheduleCache) get(rule *autoscalingv1alpha1.CronFederatedHPARule) (*cronschedule.Schedule, error) {
	key := scheduleKey{expr: rule.Schedule}
	if rule.TimeZone != nil {
		key.zone, key.hasZone = *rule.TimeZone, true
	}
	c.mu.Lock()
	e, ok := c.m[key]
	c.mu.Unlock()
	if ok {
		return e.sched, e.err
	}
	loc, err := cronschedule.RuleLocation(rule.TimeZone)
	if err != nil {
		e.err = fmt.Errorf("time zone %q: %w", key.zone, err)
	} else if e.sched, e.err = cronschedule.Parse(key.expr, loc); e.err != nil {
		e.err = fmt.Errorf("schedule %q: %w", key.expr, e.err)
	}
	c.mu.Lock()
	if len(c.m) >= maxCachedSchedules {
		c.m = map[scheduleKey]scheduleEntry{}
	}
	c.m[key] = e
	c.mu.Unlock()
	return e.sched, e.err
}

// rulePlan is what one sync decided for one rule, before anything is
// applied. Planning is pure: it reads the rule, its history and the clock.
type rulePlan struct {
	rule *autoscalingv1alpha1.CronFederatedHPARule
	// history is the rule's history as this sync found it (status merged with
	// what this process already recorded), with nextExecutionTime planned.
	history autoscalingv1alpha1.ExecutionHistory
	// invalid says why the rule cannot be scheduled (bad schedule or zone).
	invalid error

	// due is the scheduled time to run now; zero when nothing is due.
	due time.Time
	// missed counts scheduled times that passed without running and are now
	// too late; lastMissed and firstMissed are the latest and earliest.
	missed                  int
	firstMissed, lastMissed time.Time
	// secondMissed is the missed time after firstMissed, if any.
	secondMissed time.Time

	// deadline is when due stops being runnable: maxDelaySeconds after it,
	// or the rule's next scheduled time, whichever comes first.
	deadline time.Time
	// retryAt is set when due failed for a transient reason: the sync that
	// tries it again is requeued then, and nextExecutionTime stays due.
	retryAt time.Time
}

// planFrom says from when a rule is planned when its history does not say.
type planFrom struct {
	// start is when a rule without history came to exist (see ruleStart).
	start time.Time
	// replan is when a change the event handlers saw that invalidates the
	// rule's plan (target changed, rule added, resumed or rescheduled) was
	// made (see changeMade).
	replan time.Time
	// edited is the last change of the object (see lastSpecChange): a plan
	// the history holds that the current spec invalidates was changed then
	// or before, while the controller was not watching.
	edited time.Time
	// stale says that the last change came after the cron-scaler's last
	// status write (see ownStatusWrite; both as managedFields time them, in
	// seconds): the plan in status may
	// have been made for the object as it was before the change. A status
	// write after a change was planned for the changed object, since it is
	// made with the resourceVersion its sync read, and a change in between
	// would have made it conflict. A status write in the change's second
	// comes after it as a rule (the sync that the change triggers writes
	// it), and is taken as after it: the plan stands. (Taken as before it,
	// the plan of a controller whose clock is ahead of the apiserver's
	// would give way to slots it skipped on purpose, a rule resumed, say.)
	stale bool
	// unwatched is edited when the change is stale and was made before
	// this process started. A slot before it that no controller ran is not run: it
	// belongs to the object as it was before the change, whose target or
	// values may be other than now (a target changed while the controller
	// was down, issue 26, case 2), and nothing the API keeps says what
	// changed. managedFields keep seconds: a change in the slot's second
	// may have come after it, and counts as after it.
	unwatched time.Time
}

// planRule decides whether the rule is due at now, and when it fires next.
//
// The rule's durable state is its history in status, as both Karmada's schema
// and scaleplane's store it: the newest scheduled time in its successful and
// failed executions (lastHandled: applied, failed or missed; lastScheduleTime
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
//     exist (see ruleStart), so a scheduled time that passed while the
//     controller was down is still run, as the CronJob controller does;
//   - for a rule whose history holds no plan (it was suspended, refused or
//     unschedulable) or a plan that is not a scheduled time of the current
//     schedule (the schedule or zone changed): the first scheduled time after
//     the object was last changed, which is when that edit was made or later.
//     An edit made while the controller was down is thus treated as a rule
//     added while down: its slot since then runs. Without managed fields
//     the time of the edit is unknown, and the rule is planned from now.
//
// A change made before this process started (while no controller watched,
// or before this one took over) raises the floor to the first scheduled
// time after it: a slot before the change belongs to the object as it was,
// with perhaps another target or other values (see planFrom.unwatched).
//
// The latest scheduled time S <= now since the floor runs if it is at most
// maxDelaySeconds late (unset: while it is the latest, i.e. until the next
// one); earlier ones are recorded as missed.
func planRule(rule *autoscalingv1alpha1.CronFederatedHPARule, history autoscalingv1alpha1.ExecutionHistory, sched *cronschedule.Schedule, schedErr error, from planFrom, now time.Time) rulePlan {
	p := rulePlan{rule: rule, history: history}
	p.history.RuleName = rule.Name
	if rule.Suspend != nil && *rule.Suspend {
		// A suspended rule has no plan; resuming it plans from the time it
		// is resumed, so what it skipped is never replayed.
		p.history.NextExecutionTime = nil
		return p
	}
	if schedErr != nil {
		p.invalid = schedErr
		p.history.NextExecutionTime = nil
		return p
	}
	var floor time.Time
	switch planned := history.NextExecutionTime; {
	case !from.replan.IsZero():
		floor = sched.Next(from.replan)
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
		if from.stale && !from.edited.IsZero() {
			if e := sched.Next(from.edited); e.Before(floor) {
				floor = e
			}
		}
	case !from.start.IsZero():
		// Like the CronJob controller: the first scheduled time after the
		// rule came to exist.
		floor = sched.Next(from.start)
	case !from.edited.IsZero():
		floor = sched.Next(from.edited)
	}
	if !floor.IsZero() && !from.unwatched.IsZero() {
		if n := sched.Next(from.unwatched); n.After(floor) {
			floor = n
		}
	}
	p.history.NextExecutionTime = metaTime(sched.Next(now))
	if floor.IsZero() {
		return p
	}
	if last := lastHandled(&history); !last.IsZero() && !floor.After(last) {
		floor = sched.Next(last)
	}
	slot := sched.Prev(now)
	if slot.IsZero() || floor.IsZero() || slot.Before(floor) {
		return p
	}
	for t := floor; t.Before(slot) && p.missed < maxCountedMisses; t = sched.Next(t) {
		p.addMissed(t)
	}
	if d := rule.MaxDelaySeconds; d != nil && now.Sub(slot) > time.Duration(*d)*time.Second {
		p.addMissed(slot)
		return p
	}
	p.due = slot
	p.deadline = sched.Next(slot)
	if d := rule.MaxDelaySeconds; d != nil {
		if end := slot.Add(time.Duration(*d) * time.Second); end.Before(p.deadline) {
			p.deadline = end
		}
	}
	return p
}

func (p *rulePlan) addMissed(t time.Time) {
	switch p.missed {
	case 0:
		p.firstMissed = t
	case 1:
		p.secondMissed = t
	}
	p.missed++
	p.lastMissed = t
}

// nextRequeue returns how long until the earliest planned firing, plus a
// little so the sync runs just after the scheduled time (as the CronJob
// controller does); false when no rule is planned.
func nextRequeue(plans []rulePlan, now time.Time) (time.Duration, bool) {
	var earliest time.Time
	for i := range plans {
		at := plans[i].retryAt
		if n := plans[i].history.NextExecutionTime; at.IsZero() && n != nil {
			at = n.Time
		}
		if !at.IsZero() && (earliest.IsZero() || at.Before(earliest)) {
			earliest = at
		}
	}
	if earliest.IsZero() {
		return 0, false
	}
	d := earliest.Sub(now)
	if d < 0 {
		d = 0
	}
	return d + requeueSlack, true
}

// requeueSlack is added to requeue delays so the sync runs after, not just
// before, the scheduled time. Timers run on the monotonic clock and do not
// fire early, so it only covers a wall clock stepped back meanwhile; a sync
// that still comes early finds nothing due and is requeued for the rest. It is small because in a burst it delays
// every firing: at 1,000 firings per second, 100 ms is 10 % of the burst.
const requeueSlack = 10 * time.Millisecond
