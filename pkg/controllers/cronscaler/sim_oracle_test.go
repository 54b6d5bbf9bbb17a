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

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	autoscalingv1alpha1 "github.com/scaleplane/scaleplane/pkg/apis/autoscaling/v1alpha1"
	"github.com/scaleplane/scaleplane/pkg/cronschedule"
)

// The oracle of TestSim. It is written from docs/cron-scaler.md, not from
// the controller's code: it reads the history the simulated apiserver kept
// (every spec version with the time it was made, every change of a target
// field and who made it, every committed status, the events) and the
// scenario (when processes ran, outages, flaky periods), and says what the
// doc promises. The only code it shares with the controller is
// pkg/cronschedule, to enumerate a schedule's slots; it never calls the
// controller's planning.
//
// A rule's incarnation is the rule as it was between two changes that the
// doc says it is planned from: the object's creation, the rule added,
// rescheduled (schedule or time zone), resumed, or given a new target; it
// ends when the rule is removed, renamed, suspended, rescheduled, retargeted
// or the object deleted. Its slots are its schedule's times after its start.
// A slot's deadline is its next slot, or maxDelaySeconds after it if sooner.
//
// What it checks:
//
//  1. Must run. A slot runs, and is recorded once as applied, with the right
//     value on the target, when the doc leaves the controller no excuse: a
//     leader was running (from before the slot, or started after it while it
//     was still the rule's latest and in time: an inherited firing) and the
//     apiserver answered, without faults, for simSettle from then, all
//     before the deadline; the incarnation lasted through it; no other writer
//     changed the field, and no other slot for the field came, from the slot
//     to the end of that window (the doc's "latest wins" and NotReapplied
//     cases are judged apart); and the slot is not inside the stated limit
//     of edits timed by managedFields (below), nor a slot of a rule given a
//     new target that no process had seen by the slot and that was recorded
//     (run on the old target: the doc's limit of an unseen retarget, see
//     unseenRetarget), nor found late (inherited or retried) when another
//     manager that owns one of its fields changed any field of the target
//     through the object since the slot (the doc's limit of managedFields'
//     one time per manager, see entryMovedPastSlot). Then by the window's end a
//     status the cron-scaler wrote records the slot as a successful
//     execution with the rule's value, and the target field holds it.
//     A flaky period after the slot does not excuse it when it ends well
//     before the deadline: answered failures are retried to the deadline
//     (see windowAfterFlaky).
//  2. Nothing else runs. Every change the cron-scaler makes to a target
//     field is the value of a slot that may run then: a slot of an
//     incarnation on that target that the writing process could see (its
//     cache or the apiserver, at the write), after the incarnation's start,
//     at or before the write and not past its deadline. A slot from before
//     an edit, or applied to a target the rule no longer names, is not.
//  3. Latest wins, across objects too: the slots whose values the
//     cron-scaler writes to one field never go back in time. The doc's
//     limit: a later slot that no status records as applied and whose
//     deadline has passed does not count, if it is another object's or
//     another process wrote it (see unrecordedLater); nor does a later slot
//     of an object that, as the writer's cache shows it, no longer targets
//     the field's object with that rule (see leftTarget).
//  4. Never undone: once a slot was applied (written, or recorded), the
//     cron-scaler does not write it again over another writer's later
//     change; and an inherited firing (due before the writing process
//     started) is not applied over a change made through the object at or
//     after the slot (NotReapplied). The stated limit: a change made through
//     the scale subresource after a process applied the slot and ended
//     without recording it, undone by a later process re-applying it; or
//     after a target write that committed but lost its answer, undone by
//     the same process retrying it.
//  5. No false second controller: ManagedByAnotherController is reported
//     for an object only after a second controller really wrote its status.
//     And a real one is reported: a leader whose watch delivers another
//     controller's status write reports it then, or did within the report
//     interval (see checkOtherControllerReported).
//  6. Recorded once: a scheduled time of a rule is recorded at most one way
//     (applied at one time, or failed/missed), across every status written.
//  7. What does not run is recorded. A slot that has come is handled once a
//     leader has run with an apiserver that answers, without faults, for
//     simHandle: by then a status the cron-scaler wrote records it as applied
//     or as a failed execution (failed, NotReapplied, Superseded or missed),
//     or, for misses found together, inside the one failed execution that
//     records them ("missed N scheduled times from A to B"). Exempt are the
//     slots the doc says are not the plan's (the stated limits of edits made
//     while no process ran, below) and slots of an incarnation that ended
//     before then. A slot for which no process ran from the slot to its
//     deadline is recorded as missed (it was late when found), not as
//     failed or Superseded; one for which no process ran or the apiserver
//     answered nothing is recorded as missed or Superseded (a later slot of
//     another object came while it was retried), not as failed.
//  8. Every failed execution the cron-scaler records comes with a Warning
//     event on the object naming the rule and the scheduled time, made from
//     the slot to the status write; for a missed one, MissedSchedule.
//
// The stated limits of edits made while the controller was down: a process
// that first saw an edit in its first list, together with a later change of
// the object, may plan from that later change (the newest time in
// managedFields); and any change of the object made before a process started,
// in a later second than its last status write, makes every rule of the
// object plan from it (see unwatchedChange). Slots these excuse are excused
// from check 1 only (they may still run: check 2 allows them).

const (
	// simSettle is how long a leader and the apiserver must run without
	// faults after a slot for the doc to promise it runs: the watch's
	// longest lag (a minute) and the longest backoff after an outage
	// (30 s) fit in it.
	simSettle = 90 * time.Second
	// simSlack is the precision of deadlines (the requeue's 10 ms, the
	// second of managedFields).
	simSlack = time.Second
	// simLagLimit bounds how long after a change a process may still act
	// on what was before it: the watch's longest lag (a minute) or a first
	// list up to two minutes behind.
	simLagLimit = 3 * time.Minute
	// simHandle is how long a leader and the apiserver must run without
	// faults, from a slot or after it, for the doc to promise that the slot
	// is recorded one way or another (check 7): simSettle, and the longest
	// backoff of a firing that failed before (5 minutes).
	simHandle = simSettle + 5*time.Minute
)

type incarnation struct {
	uid        types.UID
	obj, rule  string
	target     simTarget
	sched      *cronschedule.Schedule
	zone       string
	maxDelay   *int32
	start, end time.Time
	// slackEnd is the end of the stated limit: slots up to it are excused
	// from check 1.
	slackEnd time.Time
	// retargeted is set when the incarnation began with a new
	// scaleTargetRef of a rule that was there before (see unseenRetarget).
	retargeted bool
	values     []valuesAt
	// failedLimit is how many failed executions the rule's history keeps.
	failedLimit int
}

type valuesAt struct {
	at time.Time
	v  map[string]int32
}

func (i *incarnation) String() string {
	return fmt.Sprintf("%s/%s rule %s (%s %s on %s, from %s)", i.obj, i.uid, i.rule, i.sched, i.sched.Location(), i.target, i.start.UTC().Format(time.RFC3339Nano))
}

func (i *incarnation) current(t time.Time) bool {
	return !t.Before(i.start) && (i.end.IsZero() || t.Before(i.end))
}

func (i *incarnation) valuesAt(t time.Time) map[string]int32 {
	var out map[string]int32
	for _, v := range i.values {
		if !v.at.After(t) {
			out = v.v
		}
	}
	return out
}

// valueSet is every value the incarnation set on field up to t.
func (i *incarnation) valueSet(field string, upTo time.Time) map[int32]bool {
	out := map[int32]bool{}
	for _, v := range i.values {
		if x, ok := v.v[field]; ok && !v.at.After(upTo) {
			out[x] = true
		}
	}
	return out
}

func (i *incarnation) deadline(slot time.Time) time.Time {
	d := i.sched.Next(slot)
	if i.maxDelay != nil {
		if end := slot.Add(time.Duration(*i.maxDelay) * time.Second); d.IsZero() || end.Before(d) {
			d = end
		}
	}
	return d
}

// eligible says whether slot is one of the incarnation's.
func (i *incarnation) eligible(slot time.Time) bool {
	return !slot.IsZero() && slot.After(i.start) && (i.end.IsZero() || slot.Before(i.end))
}

type oracle struct {
	s          *sim
	incs       []*incarnation
	byTarget   map[simTarget][]*incarnation
	violations []string
	// recorded is when a slot was first recorded as applied in a status
	// the cron-scaler wrote.
	recorded map[slotKey]time.Time
	mustRun  int
	// handled counts the slots check 7 judged.
	handled int
}

type slotKey struct {
	uid  types.UID
	rule string
	slot int64
}

// keyOf is the slot's key (the time in Unix seconds: times from the
// schedule and from status differ in their location).
func keyOf(uid types.UID, rule string, slot time.Time) slotKey {
	return slotKey{uid, rule, slot.Unix()}
}

func (o *oracle) violate(at time.Time, format string, args ...any) {
	o.violations = append(o.violations, at.UTC().Format("2006-01-02T15:04:05.000Z")+" "+fmt.Sprintf(format, args...))
}

func judge(s *sim) *oracle {
	o := &oracle{s: s, byTarget: map[simTarget][]*incarnation{}, recorded: map[slotKey]time.Time{}}
	o.buildIncarnations()
	o.checkRecords()
	o.checkMustRun()
	o.checkTargetWrites()
	o.checkOtherControllerReports()
	o.checkNotRunRecorded()
	o.checkFailureEvents()
	sort.Strings(o.violations)
	return o
}

// ruleFields are the fields a rule sets on a target of t's kind.
func ruleFields(t simTarget, r *autoscalingv1alpha1.CronFederatedHPARule) map[string]int32 {
	out := map[string]int32{}
	set := func(f string, v *int32) {
		if v != nil {
			out[f] = *v
		}
	}
	switch t.kind() {
	case "Deployment":
		set(fieldReplicas, r.TargetReplicas)
	case "LeaderWorkerSet":
		set(fieldReplicas, r.TargetReplicas)
		set(fieldMin, r.TargetMinReplicas)
		set(fieldMax, r.TargetMaxReplicas)
	default:
		set(fieldMin, r.TargetMinReplicas)
		set(fieldMax, r.TargetMaxReplicas)
	}
	return out
}

func (o *oracle) buildIncarnations() {
	srv := o.s.srv
	uids := make([]types.UID, 0, len(srv.versions))
	for uid := range srv.versions {
		uids = append(uids, uid)
	}
	sort.Slice(uids, func(i, j int) bool { return uids[i] < uids[j] })
	for _, uid := range uids {
		var prev *autoscalingv1alpha1.CronFederatedHPA
		var prevRules map[string]bool
		open := map[string]*incarnation{}
		end := func(name string, at time.Time) {
			open[name].end = at
			delete(open, name)
		}
		for _, v := range srv.versions[uid] {
			if v.deleted {
				for name := range open {
					end(name, v.at)
				}
				continue
			}
			if !v.spec {
				continue
			}
			obj := v.obj
			target := simTarget(obj.Spec.ScaleTargetRef.Kind + "/" + obj.Spec.ScaleTargetRef.Name)
			retargeted := prev != nil && !equality.Semantic.DeepEqual(prev.Spec.ScaleTargetRef, obj.Spec.ScaleTargetRef)
			rules := map[string]*autoscalingv1alpha1.CronFederatedHPARule{}
			for i := range obj.Spec.Rules {
				rules[obj.Spec.Rules[i].Name] = &obj.Spec.Rules[i]
			}
			for name, inc := range open {
				r := rules[name]
				switch {
				case r == nil, retargeted, ptr.Deref(r.Suspend, false),
					r.Schedule != inc.sched.String(), ptr.Deref(r.TimeZone, "") != inc.zone:
					end(name, v.at)
				default:
					if vals := ruleFields(target, r); !equality.Semantic.DeepEqual(vals, inc.valuesAt(v.at)) {
						inc.values = append(inc.values, valuesAt{at: v.at, v: vals})
					}
				}
			}
			for i := range obj.Spec.Rules {
				r := &obj.Spec.Rules[i]
				if open[r.Name] != nil || ptr.Deref(r.Suspend, false) {
					continue
				}
				loc, err := cronschedule.RuleLocation(r.TimeZone)
				if err != nil {
					panic(err)
				}
				sched, err := cronschedule.Parse(r.Schedule, loc)
				if err != nil {
					panic(err)
				}
				inc := &incarnation{uid: uid, obj: obj.Name, rule: r.Name, target: target, sched: sched, zone: ptr.Deref(r.TimeZone, ""), maxDelay: r.MaxDelaySeconds,
					start: v.at, values: []valuesAt{{at: v.at, v: ruleFields(target, r)}}}
				inc.slackEnd = o.slackEnd(uid, v.at)
				inc.failedLimit = int(ptr.Deref(r.FailedHistoryLimit, 3))
				inc.retargeted = retargeted && prev != nil && prevRules[r.Name]
				open[r.Name] = inc
				o.incs = append(o.incs, inc)
				o.byTarget[target] = append(o.byTarget[target], inc)
			}
			prev = obj
			prevRules = map[string]bool{}
			for i := range obj.Spec.Rules {
				prevRules[obj.Spec.Rules[i].Name] = true
			}
		}
	}
}

// unseenRetarget is the doc's limit of a retarget the controller has not
// seen: a slot after the edit that came before any process held the edited
// object (the watch delivers it late) may run on the old target, and is then
// recorded; the new target does not get it. Excused only when the slot was
// recorded (by the old incarnation's write) and no process held the edit by
// the slot.
func (o *oracle) unseenRetarget(inc *incarnation, slot time.Time) bool {
	if !inc.retargeted {
		return false
	}
	if _, ok := o.recorded[keyOf(inc.uid, inc.rule, slot)]; !ok {
		return false
	}
	for _, p := range o.s.procs {
		for _, d := range p.seen {
			if d.uid == inc.uid && !d.versionAt.Before(inc.start) {
				if !d.at.After(slot) {
					return false
				}
				break
			}
		}
	}
	return true
}

// slackEnd is the end of the stated limit for a change made at: the newest
// spec change any process held when it first held that change, if it saw
// it in its first list or together with later changes.
func (o *oracle) slackEnd(uid types.UID, at time.Time) time.Time {
	end := at
	for _, p := range o.s.procs {
		first := -1
		for i, d := range p.seen {
			if d.uid == uid && !d.versionAt.Before(at) {
				first = i
				break
			}
		}
		if first < 0 {
			continue
		}
		for _, d := range p.seen[first:] {
			if !d.at.Equal(p.seen[first].at) {
				break
			}
			if d.uid == uid && d.specAt.After(end) {
				end = d.specAt
			}
		}
	}
	return end
}

// checkRecords is check 6, and indexes when slots were recorded applied.
func (o *oracle) checkRecords() {
	seen := map[slotKey]string{}
	for _, c := range o.s.srv.statuses {
		for _, h := range c.status.ExecutionHistories {
			for _, e := range h.SuccessfulExecutions {
				k := keyOf(c.uid, h.RuleName, e.ScheduleTime.Time)
				o.note(seen, c, k, "applied at "+e.ExecutionTime.UTC().Format(time.RFC3339))
				if _, ok := o.recorded[k]; !ok && c.manager == FieldManager {
					o.recorded[k] = c.at
				}
			}
			for _, e := range h.FailedExecutions {
				if len(e.Message) >= len(simForeignPrefix) && e.Message[:len(simForeignPrefix)] == simForeignPrefix {
					continue
				}
				o.note(seen, c, keyOf(c.uid, h.RuleName, e.ScheduleTime.Time), "failed at "+e.ExecutionTime.UTC().Format(time.RFC3339))
			}
		}
	}
}

func (o *oracle) note(seen map[slotKey]string, c statusCommit, k slotKey, how string) {
	if prev, ok := seen[k]; ok && prev != how {
		o.violate(c.at, "recorded twice: %s rule %s slot %s was recorded %s, then %s (status written by %s)",
			c.name, k.rule, time.Unix(k.slot, 0).UTC().Format(time.RFC3339), prev, how, c.manager)
	}
	seen[k] = how
}

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
	for _, f := range o.s.scenario.flakies {
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
		// catches up.
		from := slot.Add(-time.Nanosecond)
		if other.start.After(from) {
			from = other.start
		}
		if s := other.sched.Next(from); !s.IsZero() && !s.After(end) &&
			(other.end.IsZero() || s.Before(other.end.Add(simLagLimit))) {
			return true
		}
	}
	return false
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

// attribute returns the latest slot a cron-scaler change may be the value
// of (check 2), and its incarnation; nil if none.
func (o *oracle) attribute(t simTarget, field string, ch fieldChange) (*incarnation, time.Time) {
	var best *incarnation
	var bestSlot time.Time
	o.candidates(t, field, ch, func(inc *incarnation, slot time.Time) {
		if slot.After(bestSlot) {
			best, bestSlot = inc, slot
		}
	})
	return best, bestSlot
}

// mayBeAtOrBefore says whether a cron-scaler change may be the value of a
// slot at or before limit: one of the slots it may be the value of is.
func (o *oracle) mayBeAtOrBefore(t simTarget, field string, ch fieldChange, limit time.Time) bool {
	found := false
	o.candidates(t, field, ch, func(_ *incarnation, slot time.Time) {
		if !slot.After(limit) {
			found = true
		}
	})
	return found
}

// candidates calls each, per incarnation on t whose rule sets field to the
// change's value, with the latest of its slots the change may be the value
// of: one after the incarnation's start, not after its end (as the process
// saw it), and within its deadline.
func (o *oracle) candidates(t simTarget, field string, ch fieldChange, each func(*incarnation, time.Time)) {
	for _, inc := range o.byTarget[t] {
		views := []time.Time{ch.at}
		if at, ok := ch.cacheAt[inc.uid]; ok {
			views = append(views, at)
		}
		for _, view := range views {
			if !inc.current(view) {
				continue
			}
			if v, ok := inc.valuesAt(view)[field]; !ok || v != ch.value {
				continue
			}
			slot := inc.sched.Prev(ch.at)
			for range 2 {
				// Seen in the process's cache, the incarnation's end may
				// not have reached it yet: a slot after it is still one
				// the process may run.
				if slot.IsZero() || !slot.After(inc.start) || (!view.Equal(ch.at) && !inc.current(view)) || (view.Equal(ch.at) && !inc.eligible(slot)) {
					break
				}
				if !ch.at.After(inc.deadline(slot).Add(simSlack)) {
					each(inc, slot)
					break
				}
				slot = inc.sched.Prev(slot.Add(-time.Second))
			}
		}
	}
}

// checkTargetWrites is checks 2, 3 and 4.
func (o *oracle) checkTargetWrites() {
	fieldKeys := make([]string, 0, len(o.s.srv.fields))
	for k := range o.s.srv.fields {
		fieldKeys = append(fieldKeys, k)
	}
	sort.Strings(fieldKeys)
	for _, fk := range fieldKeys {
		changes := o.s.srv.fields[fk]
		var t simTarget
		var field string
		for _, tt := range simTargets {
			for _, f := range simFieldsOf(tt) {
				if fieldKey(tt, f) == fk {
					t, field = tt, f
				}
			}
		}
		type applied struct {
			at   time.Time
			proc *simProc
			lost bool
		}
		first := map[slotKey]applied{}
		var latest time.Time
		// latestBy are the writes of the latest slot's value (of one
		// incarnation or several, at the same time).
		var latestBy []laterWrite
		for i, ch := range changes {
			if ch.manager != FieldManager {
				continue
			}
			inc, slot := o.attribute(t, field, ch)
			if inc == nil {
				o.violate(ch.at, "%sapplied no slot that may run: process %d set %s.%s to %d, the value of no slot of a rule on %s after its start and in time",
					o.retargetTag(ch), ch.proc.id, t, field, ch.value, t)
				continue
			}
			k := keyOf(inc.uid, inc.rule, slot)
			switch {
			case slot.Before(latest) && o.coincide(latestBy, t, field, slot):
				// Which slot a write is the value of is not known, only
				// its value: the later slot's writes may be the value of
				// a slot at or before this one (another object's, due at
				// the same time, say), which the check then takes.
				latest, latestBy = slot, []laterWrite{{inc, ch.proc, ch}}
			case slot.Before(latest) && o.leftTarget(latestBy, t, ch):
				// The doc's limit: the later slot's object no longer
				// targets t, or no longer has that rule, as the writer
				// saw it; its records say nothing about t then.
				latest, latestBy = slot, []laterWrite{{inc, ch.proc, ch}}
			case slot.Before(latest) && o.unrecordedLater(latestBy, latest, inc, ch):
				// The doc's limit: the later slot does not count, so
				// this slot's value is the latest the records know.
				latest, latestBy = slot, []laterWrite{{inc, ch.proc, ch}}
			case slot.Before(latest):
				o.violate(ch.at, "[case 7] latest wins: process %d set %s.%s to %d (%s slot %s) after it had set the value of a later slot, %s",
					ch.proc.id, t, field, ch.value, inc, slot.UTC().Format(time.RFC3339), latest.UTC().Format(time.RFC3339))
			case slot.After(latest):
				latest, latestBy = slot, []laterWrite{{inc, ch.proc, ch}}
			default:
				latestBy = append(latestBy, laterWrite{inc, ch.proc, ch})
			}
			if i > 0 {
				prev := changes[i-1]
				if prev.manager != FieldManager && !prev.at.Truncate(time.Second).Before(slot) {
					a, wasApplied := first[k]
					if rec, ok := o.recorded[k]; ok && rec.Before(prev.at) && (!wasApplied || rec.Before(a.at)) {
						a, wasApplied = applied{at: rec}, true
					}
					switch {
					case wasApplied && a.at.Before(prev.at):
						// The stated limit: the process that re-applies
						// the slot did not know it was applied (another
						// process, or its own write whose answer was lost).
						limit := prev.subresource == "scale" && a.proc != nil && (a.proc != ch.proc || a.lost)
						if rec, ok := o.recorded[k]; ok && rec.Before(ch.at) {
							limit = false
						}
						if !limit {
							o.violate(ch.at, "undone: process %d set %s.%s back to %d for %s slot %s, applied at %s, over %s's change at %s (through %q)",
								ch.proc.id, t, field, ch.value, inc, slot.UTC().Format(time.RFC3339), a.at.UTC().Format(time.RFC3339Nano),
								prev.manager, prev.at.UTC().Format(time.RFC3339Nano), prev.subresource)
						}
					case !wasApplied && slot.Before(ch.proc.start) && prev.subresource == "":
						o.violate(ch.at, "not NotReapplied: process %d (started %s) applied the inherited %s slot %s to %s.%s over %s's change through the object at %s",
							ch.proc.id, ch.proc.start.UTC().Format(time.RFC3339Nano), inc, slot.UTC().Format(time.RFC3339), t, field,
							prev.manager, prev.at.UTC().Format(time.RFC3339Nano))
					}
				}
			}
			if _, ok := first[k]; !ok {
				first[k] = applied{at: ch.at, proc: ch.proc, lost: ch.lost}
			}
		}
	}
}

// laterWrite is a write of a slot's value: the incarnation it is
// attributed to, and the process that made it.
type laterWrite struct {
	inc  *incarnation
	proc *simProc
	ch   fieldChange
}

// unrecordedLater says whether the doc lets an earlier slot's value be
// written (by ch, for inc) over the later slot whose value the field holds
// (written by each of by): a later slot counts when a status records it as
// applied or it is still due. This one never is recorded as applied (its
// write got an error and it was given up, or the process that wrote it
// ended before recording it), and ch came after its deadline. And either it
// is another object's, whose records are all the writer reads, or another
// process wrote it (a process does not know what its predecessor wrote and
// did not record). Within one object and one process, the earlier firing
// was due when the later one came and is Superseded from then on.
func (o *oracle) unrecordedLater(by []laterWrite, slot time.Time, inc *incarnation, ch fieldChange) bool {
	for _, w := range by {
		if _, ok := o.recorded[keyOf(w.inc.uid, w.inc.rule, slot)]; ok {
			return false
		}
		if !ch.at.After(w.inc.deadline(slot).Add(simSlack)) {
			return false
		}
		if w.inc.uid == inc.uid && w.proc == ch.proc {
			return false
		}
	}
	return len(by) > 0
}

// coincide says whether every write of the later slot (by) may be the value
// of a slot at or before slot: its value is also that of such a slot that
// may run then (see candidates).
func (o *oracle) coincide(by []laterWrite, t simTarget, field string, slot time.Time) bool {
	for _, w := range by {
		if !o.mayBeAtOrBefore(t, field, w.ch, slot) {
			return false
		}
	}
	return len(by) > 0
}

// leftTarget says whether the doc lets an earlier slot's value be written
// (by ch) over the later slot whose value t's field holds (written by each
// of by) because no object that wrote the later slot still targets t with
// that rule, in the version of it that the writer's cache held (or because
// it was deleted, and the writer's cache no longer holds it). A successful
// execution does not say which target it was applied to, so the cron-scaler
// reads the later slots of the objects that target t now, by rule.
func (o *oracle) leftTarget(by []laterWrite, t simTarget, ch fieldChange) bool {
	for _, w := range by {
		if !o.leftTargetSeen(w.inc, t, ch) {
			return false
		}
	}
	return len(by) > 0
}

func (o *oracle) leftTargetSeen(inc *incarnation, t simTarget, ch fieldChange) bool {
	versions := o.s.srv.versions[inc.uid]
	seen, ok := ch.cacheAt[inc.uid]
	if !ok {
		// Gone from the cache: deleted by then, or never seen.
		for _, v := range versions {
			if v.deleted && !v.at.After(ch.at) {
				return true
			}
		}
		return false
	}
	var obj *autoscalingv1alpha1.CronFederatedHPA
	for _, v := range versions {
		if v.at.Equal(seen) {
			if v.deleted {
				return true
			}
			obj = v.obj
		}
	}
	if obj == nil {
		return false
	}
	if simTarget(obj.Spec.ScaleTargetRef.Kind+"/"+obj.Spec.ScaleTargetRef.Name) != t {
		return true
	}
	for i := range obj.Spec.Rules {
		if obj.Spec.Rules[i].Name == inc.rule {
			return false
		}
	}
	return true
}

// checkOtherControllerReports is check 5.
func (o *oracle) checkOtherControllerReports() {
	o.checkOtherControllerReported()
	for _, e := range o.s.events {
		if e.reason != reasonManagedByAnother {
			continue
		}
		real := false
		for _, at := range o.s.srv.foreign[e.uid] {
			if !at.After(e.at) {
				real = true
			}
		}
		if !real {
			// Known case 6 when the process lost the answer to a status
			// write of the object it then reported; otherwise case 5 (a
			// predecessor's write seen after a stale first list).
			tag := "[case 5]"
			for _, l := range o.s.srv.lostStatus {
				if l.proc.id == e.proc && l.uid == e.uid && !l.at.After(e.at) {
					tag = "[case 6]"
				}
			}
			o.violate(e.at, "%s false second controller: process %d reported %s on %s, whose status no other controller wrote: %s", tag, e.proc, e.reason, e.name, e.message)
		}
	}
}

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
	for _, f := range o.s.scenario.flakies {
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
