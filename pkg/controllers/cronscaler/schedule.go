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
	"sync"
	"time"

	autoscalingv1alpha1 "github.com/scaleplane/scaleplane/pkg/apis/autoscaling/v1alpha1"
	"github.com/scaleplane/scaleplane/pkg/cronplan"
	"github.com/scaleplane/scaleplane/pkg/cronschedule"
)

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
	_, e.sched, e.err = cronplan.ParseSchedule(rule, time.Local)
	c.mu.Lock()
	if len(c.m) >= maxCachedSchedules {
		c.m = map[scheduleKey]scheduleEntry{}
	}
	c.m[key] = e
	c.mu.Unlock()
	return e.sched, e.err
}

// rulePlan is what one sync decided for one rule, before anything is
// applied: the plan of pkg/cronplan (pure: the rule, its history, as this
// sync found it, and the clock; kubectl-scaleplane's preview shares it), and
// what applying it adds.
type rulePlan struct {
	cronplan.Plan
	// retryAt is set when Due failed for a transient reason: the sync that
	// tries it again is requeued then, and nextExecutionTime stays Due.
	retryAt time.Time
}

// nextRequeue returns how long until the earliest planned firing, plus a
// little so the sync runs just after the scheduled time (as the CronJob
// controller does); false when no rule is planned.
func nextRequeue(plans []rulePlan, now time.Time) (time.Duration, bool) {
	var earliest time.Time
	for i := range plans {
		at := plans[i].retryAt
		if n := plans[i].History.NextExecutionTime; at.IsZero() && n != nil {
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
