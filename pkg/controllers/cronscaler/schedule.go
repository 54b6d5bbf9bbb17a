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

type scheduleKey struct{ expr, zone string }

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

// get parses the rule's schedule in its time zone ("" is the process's own).
func (c *scheduleCache) get(rule *autoscalingv1alpha1.CronFederatedHPARule) (*cronschedule.Schedule, error) {
	key := scheduleKey{expr: rule.Schedule}
	if rule.TimeZone != nil {
		key.zone = *rule.TimeZone
	}
	c.mu.Lock()
	e, ok := c.m[key]
	c.mu.Unlock()
	if ok {
		return e.sched, e.err
	}
	loc, err := cronschedule.LoadLocation(key.zone)
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
}

// planRule decides whether the rule is due at now, and when it fires next.
//
// The rule's durable state is its history in status: lastScheduleTime (the
// latest scheduled time handled, whether applied, failed or missed) and
// nextExecutionTime (the next one planned). A scheduled time S is run only if
// S > lastScheduleTime and S >= nextExecutionTime, so nothing is ever run
// twice and nothing from before the plan is replayed:
//   - no nextExecutionTime (first sight of the rule, or it was suspended or
//     unschedulable) or one that is not a scheduled time of the current
//     schedule (the schedule or zone changed), or an explicit replan (target
//     changed, rule resumed): plan from now, run nothing now;
//   - otherwise the latest scheduled time S <= now runs if it is at most
//     maxDelaySeconds late (unset: while it is the latest, i.e. until the
//     next one); earlier ones since the plan are recorded as missed.
func planRule(rule *autoscalingv1alpha1.CronFederatedHPARule, history autoscalingv1alpha1.ExecutionHistory, sched *cronschedule.Schedule, schedErr error, replan bool, now time.Time) rulePlan {
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
	planned := history.NextExecutionTime
	if replan || planned == nil || !sched.Prev(planned.Time).Equal(planned.Time) {
		p.history.NextExecutionTime = metaTime(sched.Next(now))
		return p
	}
	floor := planned.Time
	if last := history.LastScheduleTime; last != nil && !floor.After(last.Time) {
		floor = sched.Next(last.Time)
	}
	p.history.NextExecutionTime = metaTime(sched.Next(now))
	slot := sched.Prev(now)
	if slot.IsZero() || floor.IsZero() || slot.Before(floor) {
		return p
	}
	for t := floor; t.Before(slot) && p.missed < maxCountedMisses; t = sched.Next(t) {
		if p.missed == 0 {
			p.firstMissed = t
		}
		p.missed++
		p.lastMissed = t
	}
	if d := rule.MaxDelaySeconds; d != nil && now.Sub(slot) > time.Duration(*d)*time.Second {
		if p.missed == 0 {
			p.firstMissed = slot
		}
		p.missed++
		p.lastMissed = slot
		return p
	}
	p.due = slot
	return p
}

// nextRequeue returns how long until the earliest planned firing, plus a
// little so the sync runs just after the scheduled time (as the CronJob
// controller does); false when no rule is planned.
func nextRequeue(plans []rulePlan, now time.Time) (time.Duration, bool) {
	var earliest time.Time
	for i := range plans {
		if n := plans[i].history.NextExecutionTime; n != nil && (earliest.IsZero() || n.Time.Before(earliest)) {
			earliest = n.Time
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
// before, the scheduled time.
const requeueSlack = 100 * time.Millisecond
