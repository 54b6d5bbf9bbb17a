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
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	autoscalingv1alpha1 "github.com/scaleplane/scaleplane/pkg/apis/autoscaling/v1alpha1"
)

// A second cron controller on the same objects.
//
// Next to Karmada, its own cronFederatedHorizontalPodAutoscaler controller
// must be off: an installer's upgrade can switch it back on (see
// docs/karmada), and a second scaleplane with a Lease of its own would do the
// same. Two controllers apply every slot twice and overwrite each other's
// status. Nothing in the API prevents it, so the cron-scaler watches for it:
// every change of a CronFederatedHPA's status that the informer shows is
// compared with the status writes this process made; one it did not make was
// made by someone else. It is named by the newest status entry in the
// object's managedFields (Karmada's controller writes as
// karmada-controller-manager; a second scaleplane has the cron-scaler's own
// field manager).
//
// The cron-scaler keeps firing: the other writer applies the same values at
// the same slots, and stopping would lose slots if the other one is not a
// cron controller at all. It says so instead: a Warning event on the object
// (ManagedByAnotherController, at most every foreignReportInterval per
// writer), a log line, and cron_scaler_foreign_status_writes_total{manager}
// for alerting.

// foreignReportInterval bounds the Warning events per object and writer.
const foreignReportInterval = 10 * time.Minute

// maxOwnWrites bounds the resourceVersions of own writes kept per object;
// they are matched, and dropped, at the next sync.
const maxOwnWrites = 8

// statusWriters tracks, per object, the status changes the informer showed
// and the status writes this process made, until a sync compares them.
type statusWriters struct {
	mu      sync.Mutex
	objects map[cache.ObjectName]*writerLog
}

type writerLog struct {
	// own are the resourceVersions this process's status writes stored.
	own []string
	// unacked are the digests (see statusDigest) of status writes of this
	// process that failed in a way that may have stored them all the same
	// (see mayHaveCommitted); a seen change of the same status is this
	// process's own. Each is kept until such a change is seen or a later
	// write of this process is: the watch delivers changes in order.
	unacked []unackedWrite
	// writes counts this process's status writes on the object, to order
	// unacked writes and own ones.
	writes uint64
	// ownSeq are the counts of the writes in own.
	ownSeq []uint64
	// ownDigest are the digests (see statusDigest) of the statuses stored
	// at own: a watch that relists (after 410 Gone) delivers the latest
	// state only, so a write of this process and a later change of the
	// object that is not status come as one change, at a resourceVersion
	// this process never got back.
	ownDigest []uint64
	// seen are status changes the informer showed, not compared yet.
	seen []seenWrite
	// reported is when each other writer was last reported; nil until one
	// is.
	reported map[string]time.Time
}

type seenWrite struct {
	resourceVersion string
	manager         string
	// at is the time of the write (managedFields keep seconds).
	at time.Time
	// status is the status written, as the cache holds it (not copied:
	// the cache never changes an object), for comparing with the writes of
	// this process that lost their answer; kept only until the next sync.
	status *autoscalingv1alpha1.CronFederatedHPAStatus
}

func newStatusWriters() *statusWriters {
	return &statusWriters{objects: map[cache.ObjectName]*writerLog{}}
}

func (w *statusWriters) log(key cache.ObjectName) *writerLog {
	l := w.objects[key]
	if l == nil {
		l = &writerLog{}
		w.objects[key] = l
	}
	return l
}

// unackedWrite is a status whose writes lost their answer: first and last
// are the counts (see writerLog.writes) of its first and latest attempt. A
// status retried through a flaky period, and one that flip-flops (A, B,
// A), is one entry that spans its attempts: which attempt was stored is not
// known, so an entry is taken as written before another only when its last
// attempt came before the other's first.
type unackedWrite struct {
	digest      uint64
	first, last uint64
}

// wrote records a status write of this process, stored at rv with status.
func (w *statusWriters) wrote(key cache.ObjectName, rv string, status autoscalingv1alpha1.CronFederatedHPAStatus) {
	w.mu.Lock()
	defer w.mu.Unlock()
	l := w.log(key)
	l.writes++
	l.own = append(l.own, rv)
	l.ownSeq = append(l.ownSeq, l.writes)
	l.ownDigest = append(l.ownDigest, statusDigest(status))
	if len(l.own) > maxOwnWrites {
		l.own = l.own[len(l.own)-maxOwnWrites:]
		l.ownSeq = l.ownSeq[len(l.ownSeq)-maxOwnWrites:]
		l.ownDigest = l.ownDigest[len(l.ownDigest)-maxOwnWrites:]
	}
}

// ownIndex returns the index in own of the write of this process that a
// seen change shows: stored at its resourceVersion, or, by a watch that
// relisted, merged with later changes that left its status as it was
// written (the newest status entry is this process's field manager's). -1
// when none.
func (l *writerLog) ownIndex(s seenWrite) int {
	if i := slices.Index(l.own, s.resourceVersion); i >= 0 {
		return i
	}
	if s.manager != FieldManager || s.status == nil || len(l.ownDigest) == 0 {
		return -1
	}
	d := statusDigest(*s.status)
	// The latest such write: an older one with the same status was
	// followed by this process's later writes.
	for i := len(l.ownDigest) - 1; i >= 0; i-- {
		if l.ownDigest[i] == d {
			return i
		}
	}
	return -1
}

// unacknowledged records a status write of this process that failed but
// may have been stored (see mayHaveCommitted): an etcd timeout after the
// commit, a connection reset on the way back. Its resourceVersion is
// unknown, so the change the watch delivers for it is told by its content
// (issue 26, case 6).
func (w *statusWriters) unacknowledged(key cache.ObjectName, status autoscalingv1alpha1.CronFederatedHPAStatus) {
	w.mu.Lock()
	defer w.mu.Unlock()
	l := w.log(key)
	l.writes++
	d := statusDigest(status)
	// A retry of the same status is one entry, moved to the end with its
	// latest attempt: in a flaky period a status is retried many times,
	// and each attempt that got an error kept apart would push out an
	// earlier write that was stored (issue 26, seed 1002879). The list is
	// thus in the order of the last attempts, and the oldest goes first.
	u := unackedWrite{digest: d, first: l.writes, last: l.writes}
	if i := slices.IndexFunc(l.unacked, func(u unackedWrite) bool { return u.digest == d }); i >= 0 {
		u.first = l.unacked[i].first
		l.unacked = slices.Delete(l.unacked, i, i+1)
	}
	l.unacked = append(l.unacked, u)
	if len(l.unacked) > maxOwnWrites {
		l.unacked = l.unacked[len(l.unacked)-maxOwnWrites:]
	}
}

// saw records a status change the informer showed.
func (w *statusWriters) saw(key cache.ObjectName, obj *autoscalingv1alpha1.CronFederatedHPA) {
	w.mu.Lock()
	defer w.mu.Unlock()
	l := w.log(key)
	manager, at := timelineOf(obj).newestStatusWrite()
	l.seen = append(l.seen, seenWrite{resourceVersion: obj.ResourceVersion, manager: manager, at: at, status: &obj.Status})
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

// others returns the writers of the seen changes this process did not make,
// and forgets what it compared. A sync calls it holding the object's lock,
// which every status write of the object holds too: a write of this process
// whose change the informer showed has returned, and is in own.
//
// A write by the cron-scaler's own field manager made before this process
// started (see processStart) is its predecessor's, not a second controller's: a new
// leader's first list may be older than the last status write of the leader
// before it (client-go lists from the apiserver's watch cache), and the
// watch then delivers that write as a change this process did not make
// (issue 26, case 5). managedFields keep seconds: a write in the second this
// process started counts as the predecessor's, so a second scaleplane is
// reported from its first write after that second (at its next slot at the
// latest).
func (w *statusWriters) others(key cache.ObjectName, start processStart) []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	l := w.objects[key]
	if l == nil || len(l.seen) == 0 {
		return nil
	}
	var out []string
	for _, s := range l.seen {
		if i := l.ownIndex(s); i >= 0 {
			// The watch delivers in order: an unacknowledged write made
			// before this one was not stored, or was shown before.
			// Nor will an older own write be shown any more: a relist
			// merged it into a later change.
			seq := l.ownSeq[i]
			l.unacked = slices.DeleteFunc(l.unacked, func(u unackedWrite) bool { return u.last < seq })
			l.own, l.ownSeq, l.ownDigest = l.own[i+1:], l.ownSeq[i+1:], l.ownDigest[i+1:]
			continue
		}
		// Not a write whose answer came back: one whose answer was lost
		// has the status it sent. Compared here, not when seen: the watch
		// may show the write before its failure returns, and a write that
		// came back (a retry of the same status) is matched by its
		// resourceVersion first.
		if s.manager == FieldManager && len(l.unacked) > 0 {
			d := statusDigest(*s.status)
			if i := slices.IndexFunc(l.unacked, func(u unackedWrite) bool { return u.digest == d }); i >= 0 {
				// The watch delivers in order: a status whose every
				// attempt came before this one's first was not
				// stored, or was shown before. One retried after it
				// (A, B, A: B between the two A) may still come.
				first := l.unacked[i].first
				l.unacked = slices.DeleteFunc(l.unacked, func(u unackedWrite) bool { return u.digest == d || u.last < first })
				continue
			}
		}
		if s.manager == FieldManager && start.predecessorWrote(s.at) {
			continue
		}
		if !slices.Contains(out, s.manager) {
			out = append(out, s.manager)
		}
	}
	l.seen = nil
	w.prune(key, l)
	return out
}

// prune drops the object's log once every write is compared and no writer
// is to be remembered: at 100,000 objects an entry kept per object would be
// megabytes.
func (w *statusWriters) prune(key cache.ObjectName, l *writerLog) {
	if len(l.own) == 0 && len(l.unacked) == 0 && len(l.seen) == 0 && len(l.reported) == 0 {
		delete(w.objects, key)
	}
}

// shouldReport says whether manager's writes on the object are to be
// reported now, and notes that they are.
func (w *statusWriters) shouldReport(key cache.ObjectName, manager string, now time.Time) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	l := w.log(key)
	if last, ok := l.reported[manager]; ok && now.Sub(last) < foreignReportInterval {
		return false
	}
	if l.reported == nil {
		l.reported = map[string]time.Time{}
	}
	l.reported[manager] = now
	return true
}

func (w *statusWriters) forget(key cache.ObjectName) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.objects, key)
}

// reportOtherWriters reports the status writes of the object that this
// process did not make (see statusWriters).
func (c *Controller) reportOtherWriters(logger klog.Logger, obj *autoscalingv1alpha1.CronFederatedHPA) {
	key := cache.MetaObjectToName(obj)
	for _, manager := range c.writers.others(key, c.start) {
		foreignStatusWrites.WithLabelValues(manager).Inc()
		if !c.writers.shouldReport(key, manager, c.clock.Now()) {
			continue
		}
		who := manager
		if manager == FieldManager {
			who = manager + " from another process (a second scaleplane with a Lease of its own?)"
		}
		logger.Info("Another controller writes the status of this CronFederatedHPA: its rules may be applied twice", "writer", who)
		c.recorder.Eventf(obj, corev1.EventTypeWarning, reasonManagedByAnother,
			"Status was written by %s, not by this cron-scaler: two cron controllers run these rules and may apply every slot twice. "+
				"This one keeps firing; switch the other off (next to Karmada: its cronFederatedHorizontalPodAutoscaler controller, see docs/karmada)", who)
	}
}
