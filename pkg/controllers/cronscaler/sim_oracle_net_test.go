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

	"k8s.io/apimachinery/pkg/types"
)

// Two holes of the oracle that issue 36 found with deliberate breakages:
// check 1 excused every slot with a flaky period after it, so a transient
// failure treated as permanent (recorded failed at once) went unseen; and
// check 5 refused false reports of a second controller but never asked for
// a true one.

// windowAfterFlaky is check 1's window for a slot that window excuses
// because a flaky period came after it. docs/cron-scaler.md: a target write
// that fails for a transient reason (a 5xx) is retried until the firing's
// deadline. So a flaky period that ends well before the deadline does not
// excuse the slot: from its end, allow for the backoff its answered failures
// grew to (1 s doubling from the slot, so at most the time since the slot
// and a second, and at most maxRetryBackoff; a failed sync or status write
// backs off less, maxFailureBackoff), then simSettle. One leader runs from
// before the slot to the window's end, no outage comes from the slot on, and
// no other flaky period from the period's end to the window's end. It
// returns the period's end and the window's end; zero if no period allows
// it. The slot's firing is then a retried one (checked against the
// target's managedFields, see entryMovedPastSlot).
func (o *oracle) windowAfterFlaky(inc *incarnation, slot time.Time) (t0, settled time.Time) {
	deadline := inc.deadline(slot)
	for _, f := range o.flakies() {
		if !f.to.After(slot) || !f.to.Before(deadline) || (!t0.IsZero() && !f.to.Before(t0)) {
			continue
		}
		end := f.to.Add(min(f.to.Sub(slot)+time.Second, maxRetryBackoff)).Add(simSettle)
		if !end.Before(deadline) || end.After(o.s.scenario.end) {
			continue
		}
		if p := o.leaderThrough(slot, end); p == nil || !p.start.Before(slot) {
			continue
		}
		if o.faultFree(f.to, slot, end) && o.noFlakyBetween(f.to, end) {
			t0, settled = f.to, end
		}
	}
	return t0, settled
}

// decidedFromUnseenSpec says whether the leader at the slot decided it from
// a spec it had not seen: its watch delivered nothing (the model's relists)
// from before an edit of an object on the slot's target, or of the slot's
// own object, until after the slot. docs/cron-scaler.md ("What the
// simulator plays"): the cron-scaler acts on the objects as its cache holds
// them; an edit the watch has not delivered (a rule suspended, a schedule
// changed, another object's rule on the same target) takes effect at the
// relist, and a slot decided before it was decided by the older spec (its
// firing superseded by a rule suspended meanwhile, or its value set over
// by a slot the edit removed). Found by -sim.edges with -sim.model (seeds
// 8001407, 8100707): check 1 then expected the slot as the new spec says.
func (o *oracle) decidedFromUnseenSpec(inc *incarnation, slot time.Time) bool {
	for _, r := range o.s.scenario.relists {
		from := r.at.Add(-r.down)
		if slot.Before(from) || !slot.Before(r.at) {
			continue
		}
		if p := o.leaderThrough(slot, slot); p == nil || !r.at.After(p.start) {
			continue
		}
		uids := map[types.UID]bool{inc.uid: true}
		for _, other := range o.byTarget[inc.target] {
			uids[other.uid] = true
		}
		for uid := range uids {
			for _, v := range o.s.srv.versions[uid] {
				if v.spec && !v.at.Before(from) && !v.at.After(slot) {
					return true
				}
			}
		}
	}
	return false
}

// flakyEndsAt says whether a flaky period ends at t: a window from there is
// windowAfterFlaky's, and a slot not run in it was given up on a transient
// failure (its tag, see mustRunTag).
func (o *oracle) flakyEndsAt(t time.Time) bool {
	for _, f := range o.flakies() {
		if f.to.Equal(t) {
			return true
		}
	}
	return false
}

// noFlakyBetween says whether no flaky period overlaps (from, to].
func (o *oracle) noFlakyBetween(from, to time.Time) bool {
	for _, f := range o.flakies() {
		if f.from.Before(to) && f.to.After(from) {
			return false
		}
	}
	return true
}

// checkOtherControllerReported is check 5's other half. docs/cron-scaler.md,
// "Two cron controllers": every change of a CronFederatedHPA's status that
// this cron-scaler process did not make is reported (a Warning event
// ManagedByAnotherController naming the writer, at most every 10 minutes per
// writer and object). A leader whose watch delivers a status write of the
// simulated second controller syncs the object in the same step: it reports
// the write then, or did within foreignReportInterval before. Excused: the
// process ended in that step, the object was deleted by then, or the write
// came in the first list (not a change the process saw).
func (o *oracle) checkOtherControllerReported() {
	for _, p := range o.s.procs {
		for _, d := range p.seen {
			if d.list || !p.end.After(d.at) || !o.foreignWrite(d.uid, d.versionAt) || o.deletedBetween(d.uid, d.versionAt, d.at) {
				continue
			}
			// Until the end of the step, or the longest hang after it: a
			// request of the sync that saw the write may hang first (the
			// model's hung requests; seed 9000961 -sim.edges -sim.model,
			// reported 0.47 s after it was seen).
			if !o.reportedBy(p.id, d.uid, d.at.Add(-foreignReportInterval), d.at.Add(o.hangAllowance())) {
				o.violate(d.at, "second controller not reported: process %d saw %s's status write of %s (committed %s) and made no %s event naming it",
					p.id, simOtherCron, d.uid, d.versionAt.UTC().Format(time.RFC3339Nano), reasonManagedByAnother)
			}
		}
	}
}

// hangAllowance is how much later than the step that saw it a report may
// come: the longest hang of a request when the model plays hung requests,
// nothing otherwise.
func (o *oracle) hangAllowance() time.Duration {
	if len(o.s.scenario.requestFaults) == 0 {
		return 0
	}
	return maxHang + time.Second
}

// foreignWrite says whether the second controller's status write committed
// at is a version of uid.
func (o *oracle) foreignWrite(uid types.UID, at time.Time) bool {
	for _, a := range o.s.srv.foreign[uid] {
		if a.Equal(at) {
			return true
		}
	}
	return false
}

// deletedBetween says whether uid was deleted in [from, to].
func (o *oracle) deletedBetween(uid types.UID, from, to time.Time) bool {
	for _, v := range o.s.srv.versions[uid] {
		if v.deleted && !v.at.Before(from) && !v.at.After(to) {
			return true
		}
	}
	return false
}

// reportedBy says whether process proc made a ManagedByAnotherController
// event on uid in [from, to]. It need not name the second controller:
// managedFields time writes in seconds, and a second controller's status
// write in the second of the cron-scaler's own leaves the newest status
// entry undecided; the controller may then name its own field manager
// ("from another process"), which is still a report (seed 2000033: a status
// write at 08:20:00.02 after the cron-scaler's at 08:20:00.01).
func (o *oracle) reportedBy(proc int, uid types.UID, from, to time.Time) bool {
	for _, e := range o.s.events {
		if e.proc == proc && e.uid == uid && e.reason == reasonManagedByAnother && !e.at.Before(from) && !e.at.After(to) {
			return true
		}
	}
	return false
}
