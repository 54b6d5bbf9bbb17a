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
	"sort"
	"time"
)

// The oracle's check 1 (must run, see sim_oracle_test.go): the window in
// which a slot must run, and what excuses it.

// leaderAt is the process that runs from at least from to to, if any.
func (o *oracle) leaderThrough(from, to time.Time) *simProc {
	for _, p := range o.s.procs {
		if !p.start.After(from) && p.end.After(to) {
			return p
		}
	}
	return nil
}

// faultFree says whether no outage is in [from, to] and no flaky period in
// [since, to] (answered failures back off for minutes: a flaky period after
// the slot excuses it).
func (o *oracle) faultFree(since, from, to time.Time) bool {
	for _, i := range o.s.scenario.outages {
		if i.from.Before(to) && i.to.After(from) {
			return false
		}
	}
	for _, f := range o.flakies() {
		if f.from.Before(to) && f.to.After(since) {
			return false
		}
	}
	return true
}

// window returns when a slot's must-run window starts: the first moment
// from the slot on, before its deadline less simSettle, from which one
// leader runs with a fault-free apiserver for simSettle; zero if none.
func (o *oracle) window(inc *incarnation, slot time.Time) time.Time {
	deadline := inc.deadline(slot)
	cands := []time.Time{slot}
	for _, p := range o.s.procs {
		if p.start.After(slot) && p.start.Before(deadline) {
			cands = append(cands, p.start)
		}
	}
	for _, i := range o.s.scenario.outages {
		if i.to.After(slot) && i.to.Before(deadline) {
			cands = append(cands, i.to)
		}
	}
	sort.Slice(cands, func(i, j int) bool { return cands[i].Before(cands[j]) })
	for _, t0 := range cands {
		end := t0.Add(simSettle)
		if !end.Before(deadline) || end.After(o.s.scenario.end) {
			return time.Time{}
		}
		p := o.leaderThrough(t0, end)
		if p == nil || (t0.Equal(slot) && !p.start.Before(slot)) {
			continue
		}
		if o.faultFree(slot, t0, end) {
			return t0
		}
	}
	return time.Time{}
}

// otherChange says whether a writer other than the cron-scaler changed the
// field in [from, to].
func (o *oracle) otherChange(t simTarget, field string, from, to time.Time) bool {
	for _, ch := range o.s.srv.fields[fieldKey(t, field)] {
		if ch.manager != FieldManager && !ch.at.Before(from) && !ch.at.After(to) {
			return true
		}
	}
	return false
}

// entryMovedPastSlot is the doc's limit of managedFields' one time per
// manager (docs/cron-scaler.md, after the crash window's table): a firing
// found late (inherited, or retried after an error) is not applied when
// another manager changed some field of the target through the object at
// or after the slot, up to to, while it owned one of the fields the firing
// sets (the last to change it, through the object): its entry's time says
// it changed them all then.
func (o *oracle) entryMovedPastSlot(t simTarget, vals map[string]int32, slot, to time.Time) bool {
	for _, f := range simFieldsOf(t) {
		for _, ch := range o.s.srv.fields[fieldKey(t, f)] {
			if ch.manager == FieldManager || ch.subresource != "" || ch.at.Before(slot) || ch.at.After(to) {
				continue
			}
			for field := range vals {
				if owner := o.ownerAt(t, field, ch.at); owner != nil && owner.manager == ch.manager && owner.subresource == "" {
					return true
				}
			}
		}
	}
	return false
}

// foundLate says whether the slot's firing is checked against the target's
// managedFields: inherited (the leader of the window started after the
// slot) or retried (the apiserver did not answer at the slot).
func (o *oracle) foundLate(slot, t0, settled time.Time) bool {
	if !t0.After(slot) {
		return false
	}
	if p := o.leaderThrough(t0, settled); p != nil && p.start.After(slot) {
		return true
	}
	for _, i := range o.s.scenario.outages {
		if !i.from.After(slot) && i.to.After(slot) {
			return true
		}
	}
	return false
}

// ownerAt is the last change of the field at or before at: its writer owns
// the field then.
func (o *oracle) ownerAt(t simTarget, field string, at time.Time) *fieldChange {
	var last *fieldChange
	for i, ch := range o.s.srv.fields[fieldKey(t, field)] {
		if ch.at.After(at) {
			break
		}
		last = &o.s.srv.fields[fieldKey(t, field)][i]
	}
	return last
}

// crowded says whether another slot for the field may run in the window:
// one of another incarnation in [slot, end]. An earlier slot still in time
// does not excuse the slot: the latest due slot wins (across objects too).
func (o *oracle) crowded(inc *incarnation, field string, slot, t0, end time.Time) bool {
	for _, other := range o.byTarget[inc.target] {
		if other == inc {
			continue
		}
		if _, ok := other.valuesAt(end)[field]; !ok {
			if _, ok := other.valuesAt(slot)[field]; !ok {
				continue
			}
		}
		// An incarnation that ended shortly before may still fire: the
		// process sees its end when the watch (or a stale first list)
		// catches up, at the relist when its watch delivered nothing.
		from := slot.Add(-time.Nanosecond)
		if other.start.After(from) {
			from = other.start
		}
		if s := other.sched.Next(from); !s.IsZero() && !s.After(end) &&
			(other.end.IsZero() || s.Before(o.endSeenBy(other).Add(simLagLimit))) {
			return true
		}
	}
	return false
}

// endSeenBy is when the leader can have seen inc's end: at its end, or, when
// the leader's watch delivered nothing then, at the relist after it. An
// object deleted meanwhile fires until then, as an edit takes effect then
// (docs/cron-scaler.md, "Edits the watch has not delivered"; seed 11705440).
func (o *oracle) endSeenBy(inc *incarnation) time.Time {
	seen := inc.end
	for _, r := range o.s.scenario.relists {
		if inc.end.Before(r.at.Add(-r.down)) || !inc.end.Before(r.at) {
			continue
		}
		if p := o.leaderThrough(inc.end, inc.end); p == nil || !r.at.After(p.start) {
			continue
		}
		if r.at.After(seen) {
			seen = r.at
		}
	}
	return seen
}

// checkMustRun is check 1.
func (o *oracle) checkMustRun() {
	end := o.s.scenario.end
	for _, inc := range o.incs {
		last := end
		if !inc.end.IsZero() && inc.end.Before(last) {
			last = inc.end
		}
		for slot := inc.sched.Next(inc.start); !slot.IsZero() && slot.Before(last); slot = inc.sched.Next(slot) {
			if !slot.After(inc.slackEnd) || o.unseenRetarget(inc, slot) {
				continue
			}
			t0 := o.window(inc, slot)
			settled, retried := t0.Add(simSettle), false
			if t0.IsZero() {
				// Excused by a flaky period after the slot, unless it
				// ended well before the deadline (see windowAfterFlaky).
				if t0, settled = o.windowAfterFlaky(inc, slot); t0.IsZero() {
					continue
				}
				retried = true
			}
			if !inc.end.IsZero() && !inc.end.After(settled) {
				continue
			}
			if p := o.leaderThrough(t0, settled); p.start.After(slot) && o.unwatchedChange(inc.uid, slot, p.start) {
				continue
			}
			if o.decidedFromUnseenSpec(inc, slot) {
				continue
			}
			vals := inc.valuesAt(slot)
			ok := !((retried || o.foundLate(slot, t0, settled)) && o.entryMovedPastSlot(inc.target, vals, slot, settled))
			for field := range vals {
				if o.otherChange(inc.target, field, slot.Add(-simSlack), settled) || o.crowded(inc, field, slot, t0, settled) {
					ok = false
				}
			}
			if !ok || len(vals) == 0 {
				continue
			}
			o.mustRun++
			o.expectRun(inc, slot, t0, settled)
		}
	}
}

func (o *oracle) expectRun(inc *incarnation, slot, t0, settled time.Time) {
	k := keyOf(inc.uid, inc.rule, slot)
	how := "on time"
	if t0.After(slot) {
		how = fmt.Sprintf("when the apiserver or a leader came back at %s", t0.UTC().Format(time.RFC3339Nano))
	}
	tag := o.mustRunTag(inc, slot, t0)
	at, ok := o.recorded[k]
	if !ok || at.After(settled) {
		o.violate(slot, "%smust run: %s slot %s (%s) is not recorded as applied by %s", tag, inc, slot.UTC().Format(time.RFC3339), how, settled.UTC().Format(time.RFC3339))
	} else if !o.recordedValues(inc, slot, settled) {
		o.violate(slot, "must run: %s slot %s is recorded with values the rule never had", inc, slot.UTC().Format(time.RFC3339))
	}
	for field := range inc.valuesAt(slot) {
		want := inc.valueSet(field, settled)
		got := o.valueAt(inc.target, field, settled)
		if !want[got] {
			tag := tag
			if ok && tag == "" {
				tag = o.wrongValueTag(inc, field, slot, settled)
			}
			o.violate(slot, "%smust run: %s slot %s (%s): %s.%s is %d at %s; want one of the rule's values %v", tag, inc, slot.UTC().Format(time.RFC3339), how,
				inc.target, field, got, settled.UTC().Format(time.RFC3339), keys(want))
		}
	}
}

// recordedValues says whether the first status recording the slot as
// applied records values of the rule.
func (o *oracle) recordedValues(inc *incarnation, slot, upTo time.Time) bool {
	for _, c := range o.s.srv.statuses {
		if c.uid != inc.uid || c.manager != FieldManager {
			continue
		}
		for _, h := range c.status.ExecutionHistories {
			if h.RuleName != inc.rule {
				continue
			}
			for _, e := range h.SuccessfulExecutions {
				if !e.ScheduleTime.Time.Equal(slot) {
					continue
				}
				for field, v := range map[string]*int32{fieldReplicas: e.AppliedReplicas, fieldMin: e.AppliedMinReplicas, fieldMax: e.AppliedMaxReplicas} {
					if v != nil && !inc.valueSet(field, upTo)[*v] {
						return false
					}
				}
				return true
			}
		}
	}
	return false
}

func keys(m map[int32]bool) []int32 {
	out := make([]int32, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// valueAt is the field's value at t.
func (o *oracle) valueAt(t simTarget, field string, at time.Time) int32 {
	var v int32
	for _, ch := range o.s.srv.fields[fieldKey(t, field)] {
		if ch.at.After(at) {
			break
		}
		v = ch.value
	}
	return v
}
