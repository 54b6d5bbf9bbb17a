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
	"sort"
	"time"

	autoscalingv1alpha1 "github.com/scaleplane/scaleplane/pkg/apis/autoscaling/v1alpha1"
)

// The oracle's checks 2 to 5 (see sim_oracle_test.go): every change the
// cron-scaler makes to a target field, and its reports of a second
// controller.

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
