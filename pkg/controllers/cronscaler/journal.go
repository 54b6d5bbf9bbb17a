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
	"encoding/json"
	"hash/fnv"
	"slices"
	"sort"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"

	autoscalingv1alpha1 "github.com/scaleplane/scaleplane/pkg/apis/autoscaling/v1alpha1"
	"github.com/scaleplane/scaleplane/pkg/cronplan"
)

// statusJournal is this process's journal of its own status writes of one
// object, as far as planning needs it: what it has decided and not written
// (pending), what it wrote or read fresh and the cache does not show yet
// (written), and that the cache is known to be behind the apiserver
// (behindRV). The object's memory holds it (objectMemory.journal).
//
// Why it exists: a firing applies the target first and records it in
// status second, and in a burst the status write waits until the other
// targets are written; a status write may fail; and once it succeeds, the
// cache shows it only after the watch lag. In each of these windows the
// cache's status is older than what this process decided, and a sync that
// planned from it would apply the same slot again. So a sync plans from the
// journal merged over the cache (see base), and reads the object fresh when
// the journal says the cache is behind.
//
// Invariants (docs/cron-scaler.md, "Exactly once"):
//   - At most one of pending and written: a plan not written is newer than
//     any write before it (setPending drops written), and a stored write
//     holds every pending history (setWritten drops them).
//   - Pending histories that hold applied firings (pendingApplied) are kept
//     whatever a status write is answered: they are those firings' only
//     record until written. Pending histories that hold only decisions
//     (missed, superseded, a new plan) are dropped after a conflict, with
//     the replan marks they were planned from given back (discardPlan), so
//     a decision made from an older status is never written over a newer
//     one.
//   - behindRV is set only after a conflict, and cleared by a fresh read or
//     by the cache moving past that resourceVersion: until then no sync
//     plans from the cache, which may lack a decision of this process whose
//     answer was lost (issue 26, seed 502706).
//   - Nothing outlives what it is for: written goes as soon as the cache
//     shows it (compared as stored, so fields a schema prunes cannot keep
//     it alive), pending as soon as a write succeeds or the cache shows it.
//     Across restarts status is the only record.
//
// The other half of the journal, the resourceVersions and digests of this
// process's status writes that tell them from another controller's
// (ownWrites), is kept by name for the guard (statusWriters): it is held
// until the watch shows each write, which is not when planning is done
// with it.
type statusJournal struct {
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
}

// empty says whether the journal holds nothing planning needs.
func (j *statusJournal) empty() bool {
	return j.written == nil && j.behindRV == "" && len(j.pending) == 0
}

// clearPending forgets the pending histories and what they were planned
// from.
func (j *statusJournal) clearPending() {
	j.pending = nil
	j.pendingApplied = false
	j.pendingMarks = replanMarks{}
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
	if o != nil && o.journal.behindRV != "" && obj.ResourceVersion != o.journal.behindRV {
		// The cache moved on past the version whose write conflicted.
		o.journal.behindRV = ""
	}
	switch {
	case o == nil:
		return cached, false
	case o.journal.behindRV != "":
		return nil, true
	case len(o.journal.pending) > 0:
		mergePending(cached, o.journal.pending)
		// Kept until a write succeeds (setWritten) or the cache shows them
		// (settled).
		return cached, false
	case o.journal.written != nil && obj.ResourceVersion != o.journal.writtenRV && !sameStatus(*o.journal.written, *cached):
		return nil, true
	}
	o.journal.written, o.journal.writtenRV = nil, ""
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
	case o == nil || o.uid != uidKey(obj.UID):
		return cached
	case len(o.journal.pending) > 0:
		mergePending(cached, o.journal.pending)
		return cached
	case o.journal.written != nil && obj.ResourceVersion != o.journal.writtenRV:
		return o.journal.written.DeepCopy()
	}
	return cached
}

// mergePending puts the pending histories over those of status, but for a
// rule whose history in status handled a later slot than its pending one:
// the pending history was planned from an older status than the cache now
// holds (a new leader's first list, behind its predecessor's last status
// write), and the newer record stands, with any execution only the pending
// history holds added to it (the record of a firing this process applied is
// never lost). Taken whole, the pending history would replan the slot the
// newer record says was handled: applied again and recorded twice (issue 36,
// seeds 8000495 and 8001611 of -sim.edges -sim.model).
func mergePending(status *autoscalingv1alpha1.CronFederatedHPAStatus, pending []autoscalingv1alpha1.ExecutionHistory) {
	for i := range pending {
		h := pending[i].DeepCopy()
		j := historyIndex(status, h.RuleName)
		switch {
		case j < 0:
			status.ExecutionHistories = append(status.ExecutionHistories, *h)
		case cronplan.LastHandled(&status.ExecutionHistories[j]).After(cronplan.LastHandled(h)):
			addMissingExecutions(&status.ExecutionHistories[j], h)
		default:
			keepFirstRecords(h, &status.ExecutionHistories[j])
			status.ExecutionHistories[j] = *h
		}
	}
}

// keepFirstRecords gives each execution of pending that recorded also
// holds, for the same scheduled time and outcome, recorded's entry: a slot's
// first record stands. A successor started in the second of its
// predecessor's last status write, its first list older than that write,
// decides the predecessor's last slots again (superseded, say) and would
// write them again with its own time and message (seed 8001611 of
// -sim.edges -sim.model). Executions this process recorded are the same in
// both, so nothing changes for them.
func keepFirstRecords(pending, recorded *autoscalingv1alpha1.ExecutionHistory) {
	for i := range pending.SuccessfulExecutions {
		e := &pending.SuccessfulExecutions[i]
		if k := slices.IndexFunc(recorded.SuccessfulExecutions, func(r autoscalingv1alpha1.SuccessfulExecution) bool { return r.ScheduleTime.Equal(e.ScheduleTime) }); k >= 0 {
			recorded.SuccessfulExecutions[k].DeepCopyInto(e)
		}
	}
	for i := range pending.FailedExecutions {
		e := &pending.FailedExecutions[i]
		if k := slices.IndexFunc(recorded.FailedExecutions, func(r autoscalingv1alpha1.FailedExecution) bool { return r.ScheduleTime.Equal(e.ScheduleTime) }); k >= 0 {
			recorded.FailedExecutions[k].DeepCopyInto(e)
		}
	}
}

// writtenStatus returns the status kept in written, if any.
func (m *memory) writtenStatus(key cache.ObjectName, uid types.UID) (*autoscalingv1alpha1.CronFederatedHPAStatus, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	o := m.object(key, uid, false)
	if o == nil || o.journal.written == nil {
		return nil, false
	}
	return o.journal.written.DeepCopy(), true
}

// setWritten remembers the status the apiserver stored, or returned to a
// read, at resourceVersion rv, until the cache shows it.
func (m *memory) setWritten(key cache.ObjectName, uid types.UID, stored autoscalingv1alpha1.CronFederatedHPAStatus, rv string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	j := &m.object(key, uid, true).journal
	j.written, j.writtenRV = stored.DeepCopy(), rv
	j.behindRV = ""
	j.clearPending()
}

// settled forgets pending histories once the cache shows them: the sync
// found nothing to write.
func (m *memory) settled(key cache.ObjectName, uid types.UID) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if o := m.object(key, uid, false); o != nil {
		o.journal.clearPending()
		m.prune(key, o)
	}
}

// setPending keeps the histories of a sync whose status is not written: one
// that applied firings (applied), or whose status write failed, planned from
// the replan marks. Histories planned over pending ones that hold applied
// firings hold them too. A pending history of a rule the sync did not plan
// is kept as it is: the sync's spec may be older than the one the pending
// history was planned from (a rule added while the watch lagged, fired from
// a fresh read, then a sync from the stale cache), and that history may be
// the only record of a firing applied to the target (issue 36, seed 4000134
// of -sim.model: dropped, the rule was found due again once the cache showed
// it, and its slot applied a second time, over a later slot's value).
func (m *memory) setPending(key cache.ObjectName, uid types.UID, histories []autoscalingv1alpha1.ExecutionHistory, applied bool, marks replanMarks) {
	m.mu.Lock()
	defer m.mu.Unlock()
	j := &m.object(key, uid, true).journal
	j.written, j.writtenRV = nil, ""
	j.pendingApplied = applied || (j.pendingApplied && len(j.pending) > 0)
	if len(j.pending) == 0 {
		j.pendingMarks = replanMarks{}
	}
	j.pendingMarks.add(marks)
	pending := make([]autoscalingv1alpha1.ExecutionHistory, len(histories), len(histories)+len(j.pending))
	for i := range histories {
		histories[i].DeepCopyInto(&pending[i])
	}
	for i := range j.pending {
		name := j.pending[i].RuleName
		if !slices.ContainsFunc(histories, func(h autoscalingv1alpha1.ExecutionHistory) bool { return h.RuleName == name }) {
			pending = append(pending, j.pending[i])
		}
	}
	j.pending = pending
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
	j := &o.journal
	if j.pendingApplied && len(j.pending) > 0 {
		return false
	}
	given := j.pendingMarks
	given.add(marks)
	o.marks.add(given)
	j.clearPending()
	// What this process last wrote is not the newest status either: a
	// later write of it, whose answer was lost, may be.
	j.written, j.writtenRV = nil, ""
	j.behindRV = rv
	return true
}

// pendingStatus returns the status to write for the pending histories: for
// each rule of obj, in spec order, its pending history, or its cached one if
// it has none pending. ok is false when nothing is pending.
func (m *memory) pendingStatus(key cache.ObjectName, obj *autoscalingv1alpha1.CronFederatedHPA) (status autoscalingv1alpha1.CronFederatedHPAStatus, ok bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	o := m.object(key, obj.UID, false)
	if o == nil || len(o.journal.pending) == 0 {
		return status, false
	}
	pending := o.journal.pending
	for i := range obj.Spec.Rules {
		name := obj.Spec.Rules[i].Name
		if i := slices.IndexFunc(pending, func(h autoscalingv1alpha1.ExecutionHistory) bool { return h.RuleName == name }); i >= 0 {
			status.ExecutionHistories = append(status.ExecutionHistories, *pending[i].DeepCopy())
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
		if len(o.journal.pending) > 0 {
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
		for i := range o.journal.pending {
			out = append(out, o.journal.pending[i].RuleName)
		}
	}
	sort.Strings(out)
	return out
}

// journalStored records a status write of this process that the apiserver
// stored at rv: the guard tells it from another controller's when the
// watch shows it (ownWrites), and syncs plan from it until the cache shows
// it (statusJournal.written).
func (c *Controller) journalStored(key cache.ObjectName, uid types.UID, stored autoscalingv1alpha1.CronFederatedHPAStatus, rv string) {
	c.writers.wrote(key, rv, stored)
	c.memory.setWritten(key, uid, stored, rv)
}

// journalLost records a status write of this process that failed in a way
// that may have stored it all the same (see mayHaveCommitted): the guard
// tells it by its content when the watch shows it (ownWrites.lost).
// Planning keeps what it wrote pending, as after any failed write.
func (c *Controller) journalLost(key cache.ObjectName, status autoscalingv1alpha1.CronFederatedHPAStatus) {
	c.writers.unacknowledged(key, status)
}

// ownWrites are the status writes of this process on one object that the
// watch has not shown yet: the resourceVersions they were stored at, and
// the digests of those whose answer was lost, so that the guard tells them
// from another controller's (docs/cron-scaler.md, "Two cron controllers").
//
// Invariants:
//   - The watch delivers an object's changes in order: once it shows one of
//     these writes, every earlier one was shown or will never be (a relist
//     merged it into a later change), and is forgotten (see shows).
//   - A write whose answer was lost (an etcd timeout after the commit, a
//     connection reset) is told by its content: its digest, one entry per
//     status however often it is retried, spanning its first and latest
//     attempt (issue 26, case 6; seed 1002879).
//   - At most maxOwnWrites of each are kept; the oldest go first.
type ownWrites struct {
	// rvs are the resourceVersions this process's status writes stored.
	rvs []string
	// unacked are the digests (see statusDigest) of status writes of this
	// process that failed in a way that may have stored them all the same
	// (see mayHaveCommitted); a seen change of the same status is this
	// process's own. Each is kept until such a change is seen or a later
	// write of this process is: the watch delivers changes in order.
	unacked []unackedWrite
	// writes counts this process's status writes on the object, to order
	// unacked writes and own ones.
	writes uint64
	// seq are the counts of the writes in rvs.
	seq []uint64
	// digests are the digests (see statusDigest) of the statuses stored
	// at rvs: a watch that relists (after 410 Gone) delivers the latest
	// state only, so a write of this process and a later change of the
	// object that is not status come as one change, at a resourceVersion
	// this process never got back.
	digests []uint64
}

// unackedWrite is a status whose writes lost their answer: first and last
// are the counts (see ownWrites.writes) of its first and latest attempt. A
// status retried through a flaky period, and one that flip-flops (A, B,
// A), is one entry that spans its attempts: which attempt was stored is not
// known, so an entry is taken as written before another only when its last
// attempt came before the other's first.
type unackedWrite struct {
	digest      uint64
	first, last uint64
}

// maxOwnWrites bounds the resourceVersions of own writes kept per object;
// they are matched, and dropped, at the next sync.
const maxOwnWrites = 8

// empty says whether no write is waiting for the watch.
func (o *ownWrites) empty() bool {
	return len(o.rvs) == 0 && len(o.unacked) == 0
}

// stored records a status write of this process, stored at rv with status.
func (o *ownWrites) stored(rv string, status autoscalingv1alpha1.CronFederatedHPAStatus) {
	o.writes++
	o.rvs = append(o.rvs, rv)
	o.seq = append(o.seq, o.writes)
	o.digests = append(o.digests, statusDigest(status))
	if len(o.rvs) > maxOwnWrites {
		o.rvs = o.rvs[len(o.rvs)-maxOwnWrites:]
		o.seq = o.seq[len(o.seq)-maxOwnWrites:]
		o.digests = o.digests[len(o.digests)-maxOwnWrites:]
	}
}

// lost records a status write of this process that failed but may have
// been stored (see mayHaveCommitted): an etcd timeout after the commit, a
// connection reset on the way back. Its resourceVersion is unknown, so the
// change the watch delivers for it is told by its content (issue 26, case
// 6).
func (o *ownWrites) lost(status autoscalingv1alpha1.CronFederatedHPAStatus) {
	o.writes++
	d := statusDigest(status)
	// A retry of the same status is one entry, moved to the end with its
	// latest attempt: in a flaky period a status is retried many times,
	// and each attempt that got an error kept apart would push out an
	// earlier write that was stored (issue 26, seed 1002879). The list is
	// thus in the order of the last attempts, and the oldest goes first.
	u := unackedWrite{digest: d, first: o.writes, last: o.writes}
	if i := slices.IndexFunc(o.unacked, func(u unackedWrite) bool { return u.digest == d }); i >= 0 {
		u.first = o.unacked[i].first
		o.unacked = slices.Delete(o.unacked, i, i+1)
	}
	o.unacked = append(o.unacked, u)
	if len(o.unacked) > maxOwnWrites {
		o.unacked = o.unacked[len(o.unacked)-maxOwnWrites:]
	}
}

// index returns the index in rvs of the write of this process that a
// seen change shows: stored at its resourceVersion, or, by a watch that
// relisted, merged with later changes that left its status as it was
// written (the newest status entry is this process's field manager's). -1
// when none.
func (o *ownWrites) index(s seenWrite) int {
	if i := slices.Index(o.rvs, s.resourceVersion); i >= 0 {
		return i
	}
	if s.manager != FieldManager || s.status == nil || len(o.digests) == 0 {
		return -1
	}
	d := statusDigest(*s.status)
	// The latest such write: an older one with the same status was
	// followed by this process's later writes.
	for i := len(o.digests) - 1; i >= 0; i-- {
		if o.digests[i] == d {
			return i
		}
	}
	return -1
}

// shows says whether a status change the watch showed is a write of this
// process, and forgets the writes the watch has passed.
func (o *ownWrites) shows(s seenWrite) bool {
	if i := o.index(s); i >= 0 {
		// The watch delivers in order: an unacknowledged write made
		// before this one was not stored, or was shown before.
		// Nor will an older own write be shown any more: a relist
		// merged it into a later change.
		seq := o.seq[i]
		o.unacked = slices.DeleteFunc(o.unacked, func(u unackedWrite) bool { return u.last < seq })
		o.rvs, o.seq, o.digests = o.rvs[i+1:], o.seq[i+1:], o.digests[i+1:]
		return true
	}
	// Not a write whose answer came back: one whose answer was lost
	// has the status it sent. Compared here, not when seen: the watch
	// may show the write before its failure returns, and a write that
	// came back (a retry of the same status) is matched by its
	// resourceVersion first.
	if s.manager == FieldManager && len(o.unacked) > 0 {
		d := statusDigest(*s.status)
		if i := slices.IndexFunc(o.unacked, func(u unackedWrite) bool { return u.digest == d }); i >= 0 {
			// The watch delivers in order: a status whose every
			// attempt came before this one's first was not
			// stored, or was shown before. One retried after it
			// (A, B, A: B between the two A) may still come.
			first := o.unacked[i].first
			o.unacked = slices.DeleteFunc(o.unacked, func(u unackedWrite) bool { return u.digest == d || u.last < first })
			return true
		}
	}
	return false
}

// statusDigest is a digest of the status as the apiserver stores it (see
// normalize): 8 bytes per unacknowledged write instead of a copy of it.
func statusDigest(status autoscalingv1alpha1.CronFederatedHPAStatus) uint64 {
	b, err := json.Marshal(normalize(status))
	if err != nil {
		return 0
	}
	h := fnv.New64a()
	_, _ = h.Write(b)
	return h.Sum64()
}
