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
	// failedLimit and successLimit are how many failed and successful
	// executions the rule's history keeps.
	failedLimit, successLimit int
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
				inc.successLimit = int(ptr.Deref(r.SuccessfulHistoryLimit, 3))
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
