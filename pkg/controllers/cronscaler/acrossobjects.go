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
	"hash/fnv"
	"sort"
	"strings"
	"sync"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	autoscalingv1alpha1 "github.com/scaleplane/scaleplane/pkg/apis/autoscaling/v1alpha1"
)

// The latest slot wins across objects.
//
// Within one object, when several due firings set the same field of the
// target, the latest scheduled one wins and the others are Superseded (see
// fire). Several CronFederatedHPAs can target one object too (one setting
// 10 replicas at 08:00, another 20 at 08:30): after downtime both are due,
// and each object's sync alone would let the object synced last win, 10 until
// the next day (issue 26, case 7). So a due firing also yields each field it
// sets to a later slot of another object on the same target that sets that
// field and is already applied or due now: that field is not written, and a
// firing left with no field is recorded as Superseded.
//
// Why this holds across restarts and in either order of the syncs: the
// decision reads only what is durable or derived from it, the other
// object's status in the cache (merged with what this process wrote and
// the cache does not show yet) and its plan, made by the same planning as
// its own sync (cronplan.Rule, from its status, managedFields and the replan
// marks this process holds). The object synced first finds the later slot
// due and yields; the one synced second finds its own slot the later one (or
// already applied) and writes it. No memory shared between syncs decides,
// so a process that starts between the two syncs decides the same.
//
// Cost: only a firing at least a second late can have a later slot of
// another object between its slot and now (slots are whole seconds), and
// only a target shared by two objects or more is looked up: a count per
// target (a 64-bit hash, kept by the event handlers) says which; the
// objects are then found by going through the namespace in the cache (only
// those on the target are made typed objects: see cronCache.onTarget).

// targetCounts counts the CronFederatedHPAs per target (namespace, group,
// kind, name), by a hash of it: about 20 bytes per object. A collision only
// costs a namespace list that finds nothing.
type targetCounts struct {
	mu sync.Mutex
	n  map[uint64]int32
}

func newTargetCounts() *targetCounts {
	return &targetCounts{n: map[uint64]int32{}}
}

func (t *targetCounts) add(obj *autoscalingv1alpha1.CronFederatedHPA, delta int32) {
	key := targetHash(obj.Namespace, obj.Spec.ScaleTargetRef)
	t.mu.Lock()
	defer t.mu.Unlock()
	if n := t.n[key] + delta; n > 0 {
		t.n[key] = n
	} else {
		delete(t.n, key)
	}
}

// shared says whether more than one object targets what obj targets.
func (t *targetCounts) shared(obj *autoscalingv1alpha1.CronFederatedHPA) bool {
	key := targetHash(obj.Namespace, obj.Spec.ScaleTargetRef)
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.n[key] > 1
}

// targetHash identifies a target whatever the version in its apiVersion.
func targetHash(namespace string, ref autoscalingv2.CrossVersionObjectReference) uint64 {
	h := fnv.New64a()
	for _, s := range []string{namespace, apiGroup(ref.APIVersion), ref.Kind, ref.Name} {
		_, _ = h.Write([]byte(s))
		_, _ = h.Write([]byte{0})
	}
	return h.Sum64()
}

// apiGroup is the group of an apiVersion ("" for the core group's "v1").
func apiGroup(apiVersion string) string {
	if i := strings.Index(apiVersion, "/"); i >= 0 {
		return apiVersion[:i]
	}
	return ""
}

func sameTarget(a, b autoscalingv2.CrossVersionObjectReference) bool {
	return a.Name == b.Name && a.Kind == b.Kind && apiGroup(a.APIVersion) == apiGroup(b.APIVersion)
}

// laterSlot is a slot of another object's rule that sets a field.
type laterSlot struct {
	at   time.Time
	desc string
}

// yieldToOtherObjects removes from each due firing the fields that a later
// slot of another object on the same target sets and that is applied or due
// now (see above); a firing that loses a field notes by which.
func (c *Controller) yieldToOtherObjects(obj *autoscalingv1alpha1.CronFederatedHPA, due []*firing, now time.Time) {
	late := false
	for _, f := range due {
		if f.err == nil && !now.Before(f.plan.Due.Add(time.Second)) {
			late = true
		}
	}
	if !late || !c.targets.shared(obj) {
		return
	}
	later := c.laterSlots(obj, now)
	for _, f := range due {
		if f.err != nil {
			continue
		}
		f.yieldField(&f.vals.replicas, later[0])
		f.yieldField(&f.vals.min, later[1])
		f.yieldField(&f.vals.max, later[2])
	}
}

// yieldToOwnAppliedSlots removes from each due firing the fields that
// another rule of the same object applied at a later slot: the latest slot
// wins within an object too, not only among the firings due in one sync. A
// rule's slot is found late when the rule was added while the watch
// delivered nothing (the cache did not have it), and by then another rule
// of the object may have set the same field at a later slot; applied now,
// the older slot's value would be written over it (issue 36, seed 9100732 of
// -sim.edges -sim.model).
func yieldToOwnAppliedSlots(plans []rulePlan, due []*firing, now time.Time) {
	for _, f := range due {
		if f.err != nil || now.Before(f.plan.Due.Add(time.Second)) {
			continue
		}
		for i := range plans {
			p := &plans[i]
			if p == f.plan {
				continue
			}
			for _, e := range p.History.SuccessfulExecutions {
				if e.ScheduleTime != nil && e.ScheduleTime.Time.After(f.plan.Due) {
					f.yield(p.Rule.Name, e.ScheduleTime.Time, values{replicas: e.AppliedReplicas, min: e.AppliedMinReplicas, max: e.AppliedMaxReplicas})
				}
			}
		}
	}
}

// yield removes from f the fields that a later slot of rule sets (set: the
// values it set or sets).
func (f *firing) yield(rule string, at time.Time, set values) {
	slot := laterSlot{at: at, desc: fmt.Sprintf("rule %q, scheduled later (%s),", rule, at.UTC().Format(time.RFC3339))}
	if set.replicas != nil {
		f.yieldField(&f.vals.replicas, slot)
	}
	if set.min != nil {
		f.yieldField(&f.vals.min, slot)
	}
	if set.max != nil {
		f.yieldField(&f.vals.max, slot)
	}
}

// yieldField gives up field to slot when slot is later than f's and f sets
// the field, and notes the latest slot f yielded to: the one rule of latest
// wins, across objects (yieldToOtherObjects) and within one
// (yieldToOwnAppliedSlots).
func (f *firing) yieldField(field **int32, slot laterSlot) {
	if *field != nil && !slot.at.IsZero() && slot.at.After(f.plan.Due) {
		*field = nil
		if f.yielded.at.IsZero() || slot.at.After(f.yielded.at) {
			f.yielded = slot
		}
	}
}

// laterSlots returns, per field (replicas, min, max), the latest slot up to
// now of another object on obj's target that set the field (a successful
// execution in its status that applied it) or sets it and is due (its plan
// says so).
func (c *Controller) laterSlots(obj *autoscalingv1alpha1.CronFederatedHPA, now time.Time) [3]laterSlot {
	var out [3]laterSlot
	others := c.crons.onTarget(obj.Namespace, obj.Spec.ScaleTargetRef)
	note := func(i int, set *int32, at time.Time, o *autoscalingv1alpha1.CronFederatedHPA, rule string) {
		if set != nil && !at.After(now) && at.After(out[i].at) {
			out[i] = laterSlot{at: at, desc: fmt.Sprintf("rule %q of CronFederatedHPA %s, scheduled later (%s),", rule, klog.KObj(o), at.UTC().Format(time.RFC3339))}
		}
	}
	// In a fixed order: of two slots at the same time, the first noted is
	// named, and the cache lists in no order.
	sort.Slice(others, func(i, j int) bool { return others[i].Name < others[j].Name })
	for _, o := range others {
		if o.UID == obj.UID || !sameTarget(o.Spec.ScaleTargetRef, obj.Spec.ScaleTargetRef) {
			continue
		}
		t, err := parseTarget(o.Spec.ScaleTargetRef)
		if err != nil || len(duplicateRuleNames(o.Spec.Rules)) > 0 {
			continue
		}
		key := cache.MetaObjectToName(o)
		base := c.memory.peek(key, o)
		plans := c.plan(o, base, c.memory.peekReplan(key, o.UID), now)
		for i := range plans {
			p := &plans[i]
			for _, e := range p.History.SuccessfulExecutions {
				if e.ScheduleTime != nil {
					note(0, e.AppliedReplicas, e.ScheduleTime.Time, o, p.Rule.Name)
					note(1, e.AppliedMinReplicas, e.ScheduleTime.Time, o, p.Rule.Name)
					note(2, e.AppliedMaxReplicas, e.ScheduleTime.Time, o, p.Rule.Name)
				}
			}
			if v, err := ruleValues(t, p.Rule); err == nil && !p.Due.IsZero() {
				note(0, v.replicas, p.Due, o, p.Rule.Name)
				note(1, v.min, p.Due, o, p.Rule.Name)
				note(2, v.max, p.Due, o, p.Rule.Name)
			}
		}
	}
	return out
}
