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
	"regexp"
	"sort"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// The oracle's tags of issue 26's known cases, the stated limit of changes
// made while no controller watched, and checks 7 and 8 (see
// sim_oracle_test.go): what does not run is recorded, with its event.

// The seven known cases of issue 26, told apart for the report (a tag on
// the violation; the checks do not depend on it).

// mustRunTag tags a slot that did not run: case 3 when the rule was edited
// less than a minute before it while a leader ran; case 1 when it is an
// inherited slot of a rule rescheduled while no leader ran.
func (o *oracle) mustRunTag(inc *incarnation, slot, t0 time.Time) string {
	if o.flakyEndsAt(t0) {
		return "[transient] "
	}
	if t0.Equal(slot) && slot.Sub(inc.start) < time.Minute {
		return "[case 3] "
	}
	if t0.After(slot) && o.leaderThrough(inc.start, inc.start) == nil {
		return "[case 1] "
	}
	return ""
}

// retargetTag tags a write that applied no slot: case 2 when the object's
// target changed since one of its rules had a slot with that value.
func (o *oracle) retargetTag(ch fieldChange) string {
	for _, inc := range o.incs {
		if inc.end.IsZero() || inc.end.After(ch.at) || ch.at.Sub(inc.end) > 24*time.Hour {
			continue
		}
		for _, v := range inc.values {
			for _, x := range v.v {
				if x == ch.value {
					for _, next := range o.incs {
						if next.uid == inc.uid && next.rule == inc.rule && next.start.Equal(inc.end) && next.target != inc.target {
							return "[case 2] "
						}
					}
				}
			}
		}
	}
	return ""
}

// wrongValueTag tags a slot recorded as applied whose field does not hold
// its value: case 7 when the cron-scaler's last change of the field was an
// older slot's value; case 4 when the slot was inherited, is a bound of an
// autoscaler, and the cron-scaler did not write it.
func (o *oracle) wrongValueTag(inc *incarnation, field string, slot, settled time.Time) string {
	var last *fieldChange
	for i, ch := range o.s.srv.fields[fieldKey(inc.target, field)] {
		if ch.at.After(settled) {
			break
		}
		last = &o.s.srv.fields[fieldKey(inc.target, field)][i]
	}
	if last != nil && last.manager == FieldManager && last.at.After(slot) {
		if _, s := o.attribute(inc.target, field, *last); s.Before(slot) {
			return "[case 7] "
		}
	}
	if field != fieldReplicas && (last == nil || !last.at.After(slot)) {
		return "[case 4] "
	}
	return ""
}

// unwatchedChange is the stated limit of changes made while no controller
// watched: a change of the object's spec or metadata (a label too) made at
// or after the slot and before the process started, in a later second than
// the cron-scaler's last status write to the object before that start (another cron
// controller's does not count), makes every rule plan from it, and the
// slot does not run (docs/cron-scaler.md, "Edits made while the controller
// was down").
func (o *oracle) unwatchedChange(uid types.UID, slot, started time.Time) bool {
	var lastStatus time.Time
	for _, c := range o.s.srv.statuses {
		// Before, not at: the process's own first status write is made at
		// the instant it starts (the simulated clock does not move during a
		// sync), and the doc's "last status write" is the one it found.
		if c.uid == uid && c.manager == FieldManager && c.at.Before(started) {
			lastStatus = c.at
		}
	}
	for _, v := range o.s.srv.versions[uid] {
		if v.spec && !v.deleted && !v.at.Before(slot) && v.at.Before(started) &&
			v.at.Truncate(time.Second).After(lastStatus.Truncate(time.Second)) {
			return true
		}
	}
	return false
}

// handleWindow is when check 7 starts to expect a slot recorded: the first
// moment from the slot on (the slot itself, a leader's start, the end of an
// outage or flaky period) from which one leader runs with an apiserver
// without faults for simHandle; zero if none before the scenario's end.
func (o *oracle) handleWindow(slot time.Time) time.Time {
	cands := []time.Time{slot}
	for _, p := range o.s.procs {
		if p.start.After(slot) {
			cands = append(cands, p.start)
		}
	}
	for _, i := range o.s.scenario.outages {
		if i.to.After(slot) {
			cands = append(cands, i.to)
		}
	}
	for _, f := range o.flakies() {
		if f.to.After(slot) {
			cands = append(cands, f.to)
		}
	}
	sort.Slice(cands, func(i, j int) bool { return cands[i].Before(cands[j]) })
	for _, t0 := range cands {
		end := t0.Add(simHandle)
		if end.After(o.s.scenario.end) {
			return time.Time{}
		}
		if o.leaderThrough(t0, end) != nil && o.faultFree(t0, t0, end) {
			return t0
		}
	}
	return time.Time{}
}

// unattended says whether no process ran at any moment from the slot to a
// second past its deadline (the slot was late when a process found it),
// and whether at every such moment no process ran or the apiserver
// answered nothing (an outage: no attempt of the slot was answered).
func (o *oracle) unattended(inc *incarnation, slot time.Time) (noProcess, noAnswer bool) {
	deadline := inc.deadline(slot).Add(simSlack)
	noProcess, noAnswer = true, true
	for _, p := range o.s.procs {
		from, to := p.start, p.end
		if from.Before(slot) {
			from = slot
		}
		if to.After(deadline) {
			to = deadline
		}
		if from.Before(to) {
			noProcess = false
			if !o.inOutage(from, to) {
				noAnswer = false
			}
		}
	}
	return noProcess, noAnswer
}

// supersededEvent says whether a Superseded event names the rule and the
// slot, up to upTo.
func (o *oracle) supersededEvent(uid types.UID, rule string, slot, upTo time.Time) bool {
	for _, e := range o.s.events {
		if e.uid == uid && e.reason == reasonSuperseded && !e.at.Before(slot) && !e.at.After(upTo) &&
			strings.Contains(e.message, fmt.Sprintf("%q", rule)) && strings.Contains(e.message, slot.UTC().Format(time.RFC3339)) {
			return true
		}
	}
	return false
}

// inOutage says whether outages cover all of [from, to].
func (o *oracle) inOutage(from, to time.Time) bool {
	for progress := true; progress && from.Before(to); {
		progress = false
		for _, i := range o.s.scenario.outages {
			if !i.from.After(from) && i.to.After(from) {
				from, progress = i.to, true
			}
		}
	}
	return !from.Before(to)
}

// missedRange reads the range a failed execution recording several misses
// names ("missed N scheduled times from A to B", docs/cron-scaler.md).
var missedRange = regexp.MustCompile(`^missed (?:at least )?[0-9]+ scheduled times from (\S+Z) to (\S+Z)`)

// missedRangeEvent reads the range a MissedSchedule event names.
var missedRangeEvent = regexp.MustCompile(` missed (?:at least )?[0-9]+ scheduled times from (\S+Z) to (\S+Z)`)

// appliedAt says whether a process reported the slot applied: a Scaled
// event of the rule's slot, which the cron-scaler emits once the status
// recording it is written.
func (o *oracle) appliedAt(inc *incarnation, slot time.Time) bool {
	want := fmt.Sprintf("Rule %q (scheduled %s)", inc.rule, slot.UTC().Format(time.RFC3339))
	for _, e := range o.s.events {
		if e.uid == inc.uid && e.reason == reasonScaled && strings.HasPrefix(e.message, want) {
			return true
		}
	}
	return false
}

// notRunRecord returns how the cron-scaler's statuses written up to upTo
// record the slot: "applied", "missed" (a failed execution whose message
// says missed, at the slot or a range around it), "failed" (any other
// failed execution at the slot), "pushed out" (a status whose rule's
// failed executions are as many as its limit keeps and all later than the
// slot: the doc's bound, failedHistoryLimit), or "" if none does.
func (o *oracle) notRunRecord(inc *incarnation, slot, upTo time.Time) string {
	how := ""
	for _, c := range o.s.srv.statuses {
		if c.at.After(upTo) {
			break
		}
		if c.uid != inc.uid || c.manager != FieldManager {
			continue
		}
		for _, h := range c.status.ExecutionHistories {
			if h.RuleName != inc.rule {
				continue
			}
			for _, e := range h.SuccessfulExecutions {
				if e.ScheduleTime.Time.Equal(slot) {
					return "applied"
				}
			}
			for _, e := range h.FailedExecutions {
				at := e.ScheduleTime.Time
				switch {
				case at.Equal(slot) && strings.HasPrefix(e.Message, "missed"):
					return "missed"
				case at.Equal(slot):
					how = "failed"
				case at.After(slot):
					if m := missedRange.FindStringSubmatch(e.Message); m != nil {
						if from, err := time.Parse(time.RFC3339, m[1]); err == nil && !from.After(slot) {
							return "missed"
						}
					}
				}
			}
			// Applied (its Scaled event says so) and recorded in a write that
			// also recorded as many later slots as the limit keeps: pushed
			// out in the same write
			// (a status write retried through a watch stall records the
			// slots of the whole stall at once; seed 10002704 -sim.edges
			// -sim.model).
			if how == "" && inc.successLimit > 0 && len(h.SuccessfulExecutions) >= inc.successLimit && o.appliedAt(inc, slot) {
				full := true
				for _, e := range h.SuccessfulExecutions {
					if !e.ScheduleTime.Time.After(slot) {
						full = false
					}
				}
				if full {
					return "applied"
				}
			}
			if how == "" && len(h.FailedExecutions) >= inc.failedLimit && lastScheduleOf(&h).After(slot) {
				full := true
				for _, e := range h.FailedExecutions {
					if !e.ScheduleTime.Time.After(slot) {
						full = false
					}
				}
				if full {
					how = "pushed out"
				}
			}
		}
	}
	return how
}

// checkNotRunRecorded is check 7.
func (o *oracle) checkNotRunRecorded() {
	for _, inc := range o.incs {
		last := o.s.scenario.end
		if !inc.end.IsZero() && inc.end.Before(last) {
			last = inc.end
		}
		for slot := inc.sched.Next(inc.start); !slot.IsZero() && slot.Before(last); slot = inc.sched.Next(slot) {
			if !slot.After(inc.slackEnd) || o.unseenRetarget(inc, slot) {
				continue
			}
			t0 := o.handleWindow(slot)
			if t0.IsZero() {
				continue
			}
			handled := t0.Add(simHandle)
			if !inc.end.IsZero() && !inc.end.After(handled) {
				continue
			}
			if p := o.leaderThrough(t0, handled); p.start.After(slot) && o.unwatchedChange(inc.uid, slot, p.start) {
				continue
			}
			// A slot of a spec the leader's watch had not delivered: the
			// edit takes effect at the relist, and a slot before it may lie
			// before a slot of the older spec that ran meanwhile, which the
			// record then says was handled last (seeds 10002704, 10003719,
			// 10103041 of -sim.edges -sim.model; see decidedFromUnseenSpec).
			if o.decidedFromUnseenSpec(inc, slot) {
				continue
			}
			o.handled++
			how := o.notRunRecord(inc, slot, handled)
			noProcess, noAnswer := o.unattended(inc, slot)
			switch {
			case how == "":
				o.violate(slot, "not recorded: %s slot %s is recorded neither as applied nor as failed, Superseded or missed by %s", inc,
					slot.UTC().Format(time.RFC3339), handled.UTC().Format(time.RFC3339))
			case how == "failed" && noProcess:
				o.violate(slot, "not recorded missed: %s slot %s came and passed its deadline %s while no process ran, but is recorded as failed, not missed", inc,
					slot.UTC().Format(time.RFC3339), inc.deadline(slot).UTC().Format(time.RFC3339))
			case how == "failed" && noAnswer && !o.supersededEvent(inc.uid, inc.rule, slot, handled):
				o.violate(slot, "not recorded missed: %s slot %s came and passed its deadline %s while the apiserver answered nothing, but is recorded as failed, not missed nor Superseded", inc,
					slot.UTC().Format(time.RFC3339), inc.deadline(slot).UTC().Format(time.RFC3339))
			case how == "pushed out" && !o.failureEvent(inc.uid, inc.rule, slot, handled, noProcess):
				o.violate(slot, "not recorded: %s slot %s fell out of the rule's failed executions (limit %d) with no Warning event naming it by %s", inc,
					slot.UTC().Format(time.RFC3339), inc.failedLimit, handled.UTC().Format(time.RFC3339))
			}
		}
	}
}

// checkFailureEvents is check 8.
func (o *oracle) checkFailureEvents() {
	seen := map[slotKey]bool{}
	for _, c := range o.s.srv.statuses {
		if c.manager != FieldManager {
			continue
		}
		for _, h := range c.status.ExecutionHistories {
			for _, e := range h.FailedExecutions {
				k := keyOf(c.uid, h.RuleName, e.ScheduleTime.Time)
				if seen[k] || strings.HasPrefix(e.Message, simForeignPrefix) {
					continue
				}
				seen[k] = true
				slot := e.ScheduleTime.Time
				missed := strings.HasPrefix(e.Message, "missed")
				if !o.failureEvent(c.uid, h.RuleName, slot, c.at, missed) {
					want := "a Warning event"
					if missed {
						want = "a " + reasonMissed + " event"
					}
					o.violate(c.at, "no event: %s rule %s slot %s is recorded failed (%q) without %s naming the rule and the slot", c.name, h.RuleName,
						slot.UTC().Format(time.RFC3339), e.Message, want)
				}
			}
		}
	}
}

// failureEvent says whether a Warning event of a failure (MissedSchedule
// if missed) names the rule and the slot, on the object, from the slot to
// upTo.
func (o *oracle) failureEvent(uid types.UID, rule string, slot, upTo time.Time, missed bool) bool {
	for _, e := range o.s.events {
		if e.uid != uid || e.at.After(upTo) || e.at.Before(slot) {
			continue
		}
		switch e.reason {
		case reasonMissed:
		case reasonScaleFailed, reasonNotReapplied, reasonSuperseded:
			if missed {
				continue
			}
		default:
			continue
		}
		if !strings.Contains(e.message, fmt.Sprintf("%q", rule)) {
			continue
		}
		if strings.Contains(e.message, slot.UTC().Format(time.RFC3339)) {
			return true
		}
		if m := missedRangeEvent.FindStringSubmatch(e.message); m != nil && e.reason == reasonMissed {
			from, err1 := time.Parse(time.RFC3339, m[1])
			to, err2 := time.Parse(time.RFC3339, m[2])
			if err1 == nil && err2 == nil && !from.After(slot) && !to.Before(slot) {
				return true
			}
		}
	}
	return false
}
