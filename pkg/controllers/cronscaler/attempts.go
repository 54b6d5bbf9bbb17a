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
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"

	autoscalingv1alpha1 "github.com/scaleplane/scaleplane/pkg/apis/autoscaling/v1alpha1"
)

// firingAttempts are the attempts of one rule's firing whose target write
// failed for a transient reason (a 5xx, a timeout, no answer at all): it is
// tried again while its slot may still run. The object's memory keeps one
// per rule (see objectMemory), only while a firing is being retried.
//
// Invariants (docs/cron-scaler.md, "When a firing runs"):
//   - They are of one slot: an attempt at another slot starts anew (see
//     retryFiring), so a retry never runs an earlier slot's value after a
//     later one's.
//   - Every sync that plans the object replaces its attempts with
//     those it leaves to retry (setAttempts): a firing applied, given up,
//     failed for good or superseded has none.
//   - They are read three ways: the next attempt's backoff (retryFiring);
//     the record of a firing given up at its deadline, failed with the last
//     answered error, or missed ("could not be reached") when no attempt
//     was answered (recordMissed); and before a retry, the slot is checked
//     against the target's managedFields (retriedSlot): an error does not
//     say the write was not made, and a change another manager made since
//     must not be undone.
type firingAttempts struct {
	slot     time.Time
	attempts int
	first    time.Time
	lastErr  string
	// answered and unanswered count the attempts the apiserver answered
	// (with an error) and those it did not (see isUnreachable); lastAnswer
	// is the last answered attempt's error.
	answered, unanswered int
	lastAnswer           string
}

// attemptsOf returns the attempts of the rule's firing, if it is being
// retried.
func (m *memory) attemptsOf(key cache.ObjectName, uid types.UID, rule string) (firingAttempts, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	o := m.object(key, uid, false)
	if o == nil {
		return firingAttempts{}, false
	}
	r, ok := o.attempts[rule]
	return r, ok
}

// setAttempts replaces the object's attempts with those of this sync.
func (m *memory) setAttempts(key cache.ObjectName, uid types.UID, attempts map[string]firingAttempts) {
	m.mu.Lock()
	defer m.mu.Unlock()
	o := m.object(key, uid, len(attempts) > 0)
	if o == nil {
		return
	}
	o.attempts = attempts
	m.prune(key, o)
}

// retryFiring leaves the plan's firing to be tried again: nextExecutionTime
// stays its scheduled time (it is still to run), the attempt's reason is a
// Warning event, and the next attempt comes with exponential backoff, never
// later than the firing's deadline, when it is given up.
//
// Attempts the apiserver did not answer at all (see isUnreachable) are
// counted apart: they cost nothing but a failed dial and their events could
// not be delivered, so they are retried every few seconds for the first
// minutes (a restart of the control plane), then at most every 30 s, and
// only the first of them is an event. An answered attempt after them backs
// off from its own count.
func (c *Controller) retryFiring(obj *autoscalingv1alpha1.CronFederatedHPA, p *rulePlan, err error, now time.Time) firingAttempts {
	r, ok := c.memory.attemptsOf(cache.MetaObjectToName(obj), obj.UID, p.Rule.Name)
	if !ok || !r.slot.Equal(p.Due) {
		r = firingAttempts{slot: p.Due, first: now}
	}
	r.attempts++
	r.lastErr = err.Error()
	unreachable := isUnreachable(err)
	var backoff time.Duration
	if unreachable {
		r.unanswered++
		backoff = unreachableBackoff(r.unanswered, now.Sub(r.first))
	} else {
		r.answered++
		r.lastAnswer = err.Error()
		backoff = retryBackoff(r.answered)
	}
	p.History.NextExecutionTime = metaTime(p.Due)
	p.retryAt = now.Add(backoff)
	if p.retryAt.After(p.Deadline) {
		p.retryAt = p.Deadline
	}
	if unreachable && r.unanswered > 1 {
		return r
	}
	c.recorder.Eventf(obj, corev1.EventTypeWarning, reasonScaleFailed, "Rule %q (scheduled %s): attempt %d failed, will retry until %s: %v",
		p.Rule.Name, p.Due.UTC().Format(time.RFC3339), r.attempts, p.Deadline.UTC().Format(time.RFC3339), err)
	return r
}

// unreachableBackoff is the wait after the n-th attempt the apiserver did
// not answer, the first of them since the firing's first attempt: as
// retryBackoff, at most maxUnreachableBackoff during the first
// fastUnreachableRetries (how late after a restart of the control plane a
// firing still in time runs), at most maxUnreachableSlowBackoff after.
func unreachableBackoff(n int, since time.Duration) time.Duration {
	if since < fastUnreachableRetries {
		return min(retryBackoff(n), maxUnreachableBackoff)
	}
	return min(retryBackoff(n), maxUnreachableSlowBackoff)
}

// retryBackoff is the wait after attempt n of a firing: 1s doubling, at most
// 5 minutes, so a target that is down for hours costs a few requests.
func retryBackoff(attempts int) time.Duration {
	d := time.Second
	for i := 1; i < attempts && d < maxRetryBackoff; i++ {
		d *= 2
	}
	return min(d, maxRetryBackoff)
}

const (
	maxRetryBackoff           = 5 * time.Minute
	maxUnreachableBackoff     = 4 * time.Second
	maxUnreachableSlowBackoff = 30 * time.Second
	fastUnreachableRetries    = 2 * time.Minute
)

// retriedSlot returns the latest scheduled time among the due firings that
// this process already tried to apply, for the same slot, and got an error
// for; zero if none. An error does not say that the write did not happen (a
// timeout after etcd committed it, a connection reset before the answer): a
// change another manager made to the target since would be undone by the
// retry. Such a firing is checked as an inherited one (see priorWrite)
// before it is tried again.
func (c *Controller) retriedSlot(obj *autoscalingv1alpha1.CronFederatedHPA, due []*firing) time.Time {
	var slot time.Time
	key := cache.MetaObjectToName(obj)
	for _, f := range due {
		if f.err != nil || f.won == (values{}) || !f.plan.Due.After(slot) {
			continue
		}
		if r, ok := c.memory.attemptsOf(key, obj.UID, f.plan.Rule.Name); ok && r.slot.Equal(f.plan.Due) {
			slot = f.plan.Due
		}
	}
	return slot
}
