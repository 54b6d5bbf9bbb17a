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
	"slices"
	"sort"
	"sync"
	"time"

	autoscalingv1alpha1 "github.com/scaleplane/scaleplane/pkg/apis/autoscaling/v1alpha1"
	"github.com/scaleplane/scaleplane/pkg/cronplan"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
)

// memory is what this process knows about CronFederatedHPAs that their
// status, as the informer cache shows it, may not say yet.
//
// Why it exists: a firing applies the target first and records it in status
// second (one status write per sync), and in a burst the status write waits
// until the other targets are written: meanwhile the firing is recorded in
// the pending histories here, and a sync plans from them. If the status write fails (a conflict
// because the cache was stale, or the API server was briefly unavailable),
// the firing is recorded nowhere but here: the next sync plans from these
// pending histories and writes them. If the write succeeds but the cache has
// not seen it yet when the object is synced again, the cache still shows the
// old status, and the same scheduled time would be applied twice: so the
// status the apiserver stored, and its resourceVersion, are kept until the
// cache shows them, and a sync that finds the cache showing something else
// reads the object from the apiserver instead. What that read returns is
// kept the same way (it holds the write, or something newer), so however
// many syncs come inside the watch lag, none plans from the older status.
//
// It never outlives what it is for: a stored status is dropped as soon as the
// cache shows it (compared as stored, so fields a schema prunes cannot keep
// it alive), and pending histories as soon as a write succeeds. Across
// restarts and leader changes status is the only record: the new process
// lists fresh objects, and the one case left is a process that dies between
// the target write and the status write; the next one then sets the same
// value again, which is harmless.
//
// It also holds replan marks set by the event handlers (target changed, rule
// added, resumed or rescheduled, with the time the change was made) until a
// sync has planned from them, the
// retries of firings that failed for a transient reason, and whether an
// object was refused (duplicate rule names) at its current generation.
type memory struct {
	mu      sync.Mutex
	objects map[cache.ObjectName]*objectMemory
}

type objectMemory struct {
	uid types.UID
	// written is the status the apiserver stored from this process's last
	// successful write, or returned to a read made because the cache was
	// behind it, until the cache shows it; writtenRV is its resourceVersion.
	written   *autoscalingv1alpha1.CronFederatedHPAStatus
	writtenRV string
	// behindRV is the resourceVersion of a cached object whose status
	// write conflicted, until the object is read from the apiserver or the
	// cache shows a newer version: the apiserver's status is newer than the
	// cache's, and may hold a decision of this process whose answer was
	// lost, which a plan from the cache would make again at a new time
	// (issue 26, seed 502706).
	behindRV string
	// pending are the histories of a sync whose status is not written yet,
	// one per rule. A slice, not a map by rule: objects have a few rules,
	// and in a burst every object holds pending histories (a map's buckets
	// cost a kilobyte each).
	pending []autoscalingv1alpha1.ExecutionHistory
	// pendingApplied says the pending histories hold firings applied to
	// their targets: they are then the only record of those firings and
	// are kept whatever a status write is answered. Otherwise they hold
	// only what syncs decided (slots missed or superseded, the next
	// execution of a new plan), from the replan marks kept in
	// pendingMarks, which discardPlan gives back.
	pendingApplied bool
	pendingMarks   replanMarks
	// marks are the replan marks of the event handlers (see replanMarks).
	marks replanMarks
	// attempts are the attempts of firings being retried, by rule (see
	// firingAttempts); nil while empty: most objects never need them.
	attempts map[string]firingAttempts
	// refused is set, with the generation, once an object with duplicate
	// rule names was reported, so it is reported once per change.
	refused           bool
	refusedGeneration int64
	// abandoned is set once pending histories that could not be written
	// before the controller stopped were reported.
	abandoned bool
}

func newMemory() *memory {
	return &memory{objects: map[cache.ObjectName]*objectMemory{}}
}

// object returns the memory of the object with that uid, creating it if
// create is true; a different uid means the object was re-created, and what
// was known is dropped. Objects with nothing to remember take no memory.
func (m *memory) object(key cache.ObjectName, uid types.UID, create bool) *objectMemory {
	o := m.objects[key]
	if o != nil && o.uid != uid {
		delete(m.objects, key)
		o = nil
	}
	if o == nil && create {
		o = &objectMemory{uid: uid}
		m.objects[key] = o
	}
	return o
}

// prune drops the object's memory once it holds nothing.
func (m *memory) prune(key cache.ObjectName, o *objectMemory) {
	if o != nil && o.written == nil && o.behindRV == "" && len(o.pending) == 0 && o.marks.empty() &&
		len(o.attempts) == 0 && !o.refused {
		delete(m.objects, key)
	}
}

func (m *memory) forget(key cache.ObjectName) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.objects, key)
}

// base decides which status to plan from. It returns stale when the cache is
// known to be behind the apiserver (see behindRV), or behind the status this
// process last wrote or read (see written), and the object must be read from
// the apiserver; otherwise the pending histories of a failed write merged
// over the cached status, or the cached status (and forgets the write the
// cache has caught up with).
func (m *memory) base(key cache.ObjectName, obj *autoscalingv1alpha1.CronFederatedHPA) (status *autoscalingv1alpha1.CronFederatedHPAStatus, stale bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	o := m.object(key, obj.UID, false)
	cached := obj.Status.DeepCopy()
	if o != nil && o.behindRV != "" && obj.ResourceVersion != o.behindRV {
		// The cache moved on past the version whose write conflicted.
		o.behindRV = ""
	}
	switch {
	case o == nil:
		return cached, false
	case o.behindRV != "":
		return nil, true
	case len(o.pending) > 0:
		mergePending(cached, o.pending)
		// Kept until a write succeeds (setWritten) or the cache shows them
		// (settled).
		return cached, false
	case o.written != nil && obj.ResourceVersion != o.writtenRV && !sameStatus(*o.written, *cached):
		return nil, true
	}
	o.written, o.writtenRV = nil, ""
	m.prune(key, o)
	return cached, false
}

// peek returns the status base would plan from, without changing anything:
// the pending histories merged over the cached status, or the status last
// written when the cache does not show it yet, or the cached status. It is
// how another object's sync reads this one (see yieldToOtherObjects).
func (m *memory) peek(key cache.ObjectName, obj *autoscalingv1alpha1.CronFederatedHPA) *autoscalingv1alpha1.CronFederatedHPAStatus {
	m.mu.Lock()
	defer m.mu.Unlock()
	cached := obj.Status.DeepCopy()
	o := m.objects[key]
	switch {
	case o == nil || o.uid != obj.UID:
		return cached
	case len(o.pending) > 0:
		mergePending(cached, o.pending)
		return cached
	case o.written != nil && obj.ResourceVersion != o.writtenRV:
		return o.written.DeepCopy()
	}
	return cached
}

// mergePending puts the pending histories over those of status.
func mergePending(status *autoscalingv1alpha1.CronFederatedHPAStatus, pending []autoscalingv1alpha1.ExecutionHistory) {
	for i := range pending {
		h := pending[i].DeepCopy()
		if j := historyIndex(status, h.RuleName); j >= 0 {
			status.ExecutionHistories[j] = *h
		} else {
			status.ExecutionHistories = append(status.ExecutionHistories, *h)
		}
	}
}

// writtenStatus returns the status kept in written, if any.
func (m *memory) writtenStatus(key cache.ObjectName, uid types.UID) (*autoscalingv1alpha1.CronFederatedHPAStatus, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	o := m.object(key, uid, false)
	if o == nil || o.written == nil {
		return nil, false
	}
	return o.written.DeepCopy(), true
}

// setWritten remembers the status the apiserver stored, or returned to a
// read, at resourceVersion rv, until the cache shows it.
func (m *memory) setWritten(key cache.ObjectName, uid types.UID, stored autoscalingv1alpha1.CronFederatedHPAStatus, rv string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	o := m.object(key, uid, true)
	o.written, o.writtenRV = stored.DeepCopy(), rv
	o.behindRV = ""
	o.clearPending()
}

// settled forgets pending histories once the cache shows them: the sync
// found nothing to write.
func (m *memory) settled(key cache.ObjectName, uid types.UID) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if o := m.object(key, uid, false); o != nil {
		o.clearPending()
		m.prune(key, o)
	}
}

// setPending keeps the histories of a sync whose status is not written: one
// that applied firings (applied), or whose status write failed, planned from
// the replan marks. Histories planned over pending ones that hold applied
// firings hold them too.
func (m *memory) setPending(key cache.ObjectName, uid types.UID, histories []autoscalingv1alpha1.ExecutionHistory, applied bool, marks replanMarks) {
	m.mu.Lock()
	defer m.mu.Unlock()
	o := m.object(key, uid, true)
	o.written, o.writtenRV = nil, ""
	o.pendingApplied = applied || (o.pendingApplied && len(o.pending) > 0)
	if len(o.pending) == 0 {
		o.pendingMarks = replanMarks{}
	}
	o.pendingMarks.add(marks)
	o.pending = make([]autoscalingv1alpha1.ExecutionHistory, len(histories))
	for i := range histories {
		histories[i].DeepCopyInto(&o.pending[i])
	}
}

// discardPlan drops pending histories that hold no applied firing, after a
// status write was refused because the status they were planned from is
// not the apiserver's newest (a conflict): a decision made from an older
// status (a slot found late, say, that a predecessor applied and recorded
// in a status the new leader's first list did not show yet) must not be
// written over the newer one. The replan marks the plans were made from,
// marks those of the sync that failed, are given back, so
// the retry plans again, from the newer status, as of the same changes; rv
// is the cached resourceVersion the refused write was made with, older than
// the apiserver's (see behindRV). It says whether it dropped them; pending
// histories that hold applied firings are their only record and are kept.
func (m *memory) discardPlan(key cache.ObjectName, uid types.UID, rv string, marks replanMarks) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	o := m.object(key, uid, true)
	if o.pendingApplied && len(o.pending) > 0 {
		return false
	}
	given := o.pendingMarks
	given.add(marks)
	o.marks.add(given)
	o.clearPending()
	// What this process last wrote is not the newest status either: a
	// later write of it, whose answer was lost, may be.
	o.written, o.writtenRV = nil, ""
	o.behindRV = rv
	return true
}

// clearPending forgets the pending histories and what they were planned
// from.
func (o *objectMemory) clearPending() {
	o.pending = nil
	o.pendingApplied = false
	o.pendingMarks = replanMarks{}
}

// pendingStatus returns the status to write for the pending histories: for
// each rule of obj, in spec order, its pending history, or its cached one if
// it has none pending. ok is false when nothing is pending.
func (m *memory) pendingStatus(key cache.ObjectName, obj *autoscalingv1alpha1.CronFederatedHPA) (status autoscalingv1alpha1.CronFederatedHPAStatus, ok bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	o := m.object(key, obj.UID, false)
	if o == nil || len(o.pending) == 0 {
		return status, false
	}
	for i := range obj.Spec.Rules {
		name := obj.Spec.Rules[i].Name
		if i := slices.IndexFunc(o.pending, func(h autoscalingv1alpha1.ExecutionHistory) bool { return h.RuleName == name }); i >= 0 {
			status.ExecutionHistories = append(status.ExecutionHistories, *o.pending[i].DeepCopy())
		} else if h, found := cronplan.FindHistory(&obj.Status, name); found {
			status.ExecutionHistories = append(status.ExecutionHistories, h)
		}
	}
	return status, true
}

// pendingKeys returns the objects whose applied firings are not written to
// status yet.
func (m *memory) pendingKeys() []cache.ObjectName {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []cache.ObjectName
	for key, o := range m.objects {
		if len(o.pending) > 0 {
			out = append(out, key)
		}
	}
	return out
}

// pendingRules returns the names of the rules whose histories are pending.
func (m *memory) pendingRules(key cache.ObjectName) []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []string
	if o := m.objects[key]; o != nil {
		for i := range o.pending {
			out = append(out, o.pending[i].RuleName)
		}
	}
	sort.Strings(out)
	return out
}

// abandon marks the object's pending histories as reported unrecorded and
// says whether they were not reported yet.
func (m *memory) abandon(key cache.ObjectName) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	o := m.objects[key]
	if o == nil || len(o.pending) == 0 || o.abandoned {
		return false
	}
	o.abandoned = true
	return true
}

// refuse records that the object was reported as refused at generation and
// says whether this is news (it was not reported at that generation yet).
func (m *memory) refuse(key cache.ObjectName, uid types.UID, generation int64) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	o := m.object(key, uid, true)
	news := !o.refused || o.refusedGeneration != generation
	o.refused, o.refusedGeneration = true, generation
	return news
}

// accept clears a refusal once the object is valid again.
func (m *memory) accept(key cache.ObjectName, uid types.UID) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if o := m.object(key, uid, false); o != nil {
		o.refused = false
		m.prune(key, o)
	}
}

// sameStatus compares two statuses as the apiserver stores them.
func sameStatus(a, b autoscalingv1alpha1.CronFederatedHPAStatus) bool {
	return equality.Semantic.DeepEqual(normalize(a), normalize(b))
}

// normalize makes status comparable after a round trip through JSON: times
// have second precision and empty lists are nil.
func normalize(s autoscalingv1alpha1.CronFederatedHPAStatus) autoscalingv1alpha1.CronFederatedHPAStatus {
	out := *s.DeepCopy()
	if len(out.ExecutionHistories) == 0 {
		out.ExecutionHistories = nil
	}
	for i := range out.ExecutionHistories {
		h := &out.ExecutionHistories[i]
		h.NextExecutionTime = truncate(h.NextExecutionTime)
		h.LastScheduleTime = truncate(h.LastScheduleTime)
		if len(h.SuccessfulExecutions) == 0 {
			h.SuccessfulExecutions = nil
		}
		if len(h.FailedExecutions) == 0 {
			h.FailedExecutions = nil
		}
		for j := range h.SuccessfulExecutions {
			e := &h.SuccessfulExecutions[j]
			e.ScheduleTime, e.ExecutionTime = truncate(e.ScheduleTime), truncate(e.ExecutionTime)
		}
		for j := range h.FailedExecutions {
			e := &h.FailedExecutions[j]
			e.ScheduleTime, e.ExecutionTime = truncate(e.ScheduleTime), truncate(e.ExecutionTime)
		}
	}
	return out
}

func truncate(t *metav1.Time) *metav1.Time {
	if t == nil {
		return nil
	}
	return &metav1.Time{Time: t.Time.Truncate(time.Second)}
}

// historyIndex is the index of the rule's history in status, -1 if none.
func historyIndex(status *autoscalingv1alpha1.CronFederatedHPAStatus, rule string) int {
	return slices.IndexFunc(status.ExecutionHistories, func(h autoscalingv1alpha1.ExecutionHistory) bool { return h.RuleName == rule })
}
