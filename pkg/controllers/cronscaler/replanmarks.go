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
	"maps"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	autoscalingv1alpha1 "github.com/scaleplane/scaleplane/pkg/apis/autoscaling/v1alpha1"
	"github.com/scaleplane/scaleplane/pkg/cronplan"
)

// replanMarks are the changes of an object, seen by the event handlers,
// that invalidate the plan of every rule (all: its target changed) or of
// the named ones (rules: added, resumed, rescheduled), each with the time
// the change was made (see changeMade); a rule is planned from the first
// slot after its mark (cronplan.From.Replan). Zero and nil: none.
//
// Invariants:
//   - A mark is only ever moved later (see add): of two changes, the plan
//     is the later one's.
//   - Set by the event handlers (markReplan), taken by the sync that plans
//     from them (takeReplan). They are not lost when that plan is not
//     written: a plan kept pending holds the marks it was made from
//     (statusJournal), and a plan dropped after a conflict gives them back
//     (discardPlan), so the retry plans as of the same changes, not from the
//     time of the retry, which would skip a slot in between.
//   - Another object's sync reads them without taking them (peekReplan), to
//     plan that object as its own sync would (see laterSlots).
//
// What they hold that the object's timeline does not: a change the watch
// delivers more than maxChangeLag after its managedFields time (the clocks
// are apart) is planned from when it was seen; and that an object first
// seen after this process started was changed before it was seen, not
// watched (see firstSightReplan).
type replanMarks struct {
	all   time.Time
	rules map[string]time.Time
}

// empty says whether there is no mark.
func (m replanMarks) empty() bool {
	return m.all.IsZero() && len(m.rules) == 0
}

// mark marks the named rules (all when all is true) as changed at.
func (m *replanMarks) mark(all bool, rules []string, at time.Time) {
	if all && at.After(m.all) {
		m.all = at
	}
	for _, r := range rules {
		if m.rules == nil {
			m.rules = map[string]time.Time{}
		}
		if at.After(m.rules[r]) {
			m.rules[r] = at
		}
	}
}

// add merges more into m, keeping the later time of each mark.
func (m *replanMarks) add(more replanMarks) {
	if more.all.After(m.all) {
		m.all = more.all
	}
	for r, at := range more.rules {
		if m.rules == nil {
			m.rules = map[string]time.Time{}
		}
		if at.After(m.rules[r]) {
			m.rules[r] = at
		}
	}
}

// markReplan asks the next sync to plan the named rules (all when all is
// true) from the change made at.
func (m *memory) markReplan(key cache.ObjectName, uid types.UID, all bool, rules []string, at time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.object(key, uid, true).marks.mark(all, rules, at)
}

// takeReplan returns and clears the replan marks. A sync that plans from them
// keeps the new plan in its status, written or pending, so they are not
// given back if the write fails.
func (m *memory) takeReplan(key cache.ObjectName, uid types.UID) replanMarks {
	m.mu.Lock()
	defer m.mu.Unlock()
	o := m.object(key, uid, false)
	if o == nil {
		return replanMarks{}
	}
	marks := o.marks
	o.marks = replanMarks{}
	m.prune(key, o)
	return marks
}

// peekReplan returns the replan marks without clearing them.
func (m *memory) peekReplan(key cache.ObjectName, uid types.UID) replanMarks {
	m.mu.Lock()
	defer m.mu.Unlock()
	o := m.object(key, uid, false)
	if o == nil {
		return replanMarks{}
	}
	return replanMarks{all: o.marks.all, rules: maps.Clone(o.marks.rules)}
}

// replanned returns whether every rule must be planned again, or which ones.
func replanned(oldCron, newCron *autoscalingv1alpha1.CronFederatedHPA) (bool, []string) {
	if !equality.Semantic.DeepEqual(oldCron.Spec.ScaleTargetRef, newCron.Spec.ScaleTargetRef) {
		return true, nil
	}
	old := make(map[string]*autoscalingv1alpha1.CronFederatedHPARule, len(oldCron.Spec.Rules))
	for i := range oldCron.Spec.Rules {
		old[oldCron.Spec.Rules[i].Name] = &oldCron.Spec.Rules[i]
	}
	var rules []string
	for i := range newCron.Spec.Rules {
		r := &newCron.Spec.Rules[i]
		o, ok := old[r.Name]
		if !ok {
			rules = append(rules, r.Name)
			continue
		}
		resumed := ptr.Deref(o.Suspend, false) && !ptr.Deref(r.Suspend, false)
		if resumed || o.Schedule != r.Schedule || ptr.Deref(o.TimeZone, "") != ptr.Deref(r.TimeZone, "") {
			rules = append(rules, r.Name)
		}
	}
	return false, rules
}

// changeMade is when a change the watch delivered at now was made: the
// newest time of a write other than a status write in the object's
// managedFields (see timeline), now without them. An edit made just
// before a slot and delivered just after it is thus planned from before the
// slot, whose first slot of the new plan runs (issue 26, case 3). The
// apiserver keeps seconds: an edit in the slot's own second reads as the
// slot's time and is planned from there, so the slot, which it may have
// followed, is not the new plan's.
//
// A time more than maxChangeLag before now is not taken: the watch delivers
// a change within seconds, or within the relist after a gap, and a change
// that reads as much older says that the apiserver's clock and this
// process's are apart; planning from it could replay a slot skipped before
// the change (a rule resumed, say). Such a change is planned from now.
func changeMade(obj *autoscalingv1alpha1.CronFederatedHPA, now time.Time) time.Time {
	if at := timelineOf(obj).lastSpecChange(now); !at.IsZero() && now.Sub(at) <= maxChangeLag {
		return at
	}
	return now
}

// maxChangeLag bounds how long before it is seen a change may have been
// made to be planned from then (see changeMade).
const maxChangeLag = time.Hour

// firstSightReplan is the replan mark of every rule of an object the event
// handlers see for the first time (an add, or an object re-created under a
// name they knew) when it was changed after it was created, after this
// process started, and after the cron-scaler's last status write to it;
// zero otherwise. Such a change was not watched: a relist after 410 Gone
// hands over only the newest version of an object created and edited while
// the watch delivered nothing, so no update marked the edit, and a rule
// without history would be planned from the object's creation
// (cronplan.RuleStart). managedFields say when it changed, not what: it may
// have been the target, so the rules are planned from the change (see
// changeMade), as one made before the process started is
// (cronplan.From.Unwatched), and a slot before it, which belongs to the
// object as it was, is not run (docs/cron-scaler.md: a rule given a new
// target is planned from the time of that change; an unseen edit takes
// effect at the relist). Issue 36, seed 10109815 of -sim.edges -sim.model:
// created on web-0 at 10:45:56, retargeted to web-1 at 10:54:06, first seen
// at the relist at 10:54:59, when r13's 10:50 slot, planned from the
// creation, was applied to web-1.
func firstSightReplan(obj *autoscalingv1alpha1.CronFederatedHPA, start processStart, now time.Time) time.Time {
	changed := timelineOf(obj).lastSpecChange(now)
	if changed.IsZero() || !changed.After(obj.CreationTimestamp.Time) || !changed.After(start.time()) ||
		!changed.After(cronplan.OwnStatusWrite(obj)) {
		return time.Time{}
	}
	return changeMade(obj, now)
}
