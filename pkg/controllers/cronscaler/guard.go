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

// statusWriters tracks, per object, the status changes the informer showed
// and the status writes this process made, until a sync compares them.
type statusWriters struct {
	mu      sync.Mutex
	objects map[cache.ObjectName]*writerLog
}

type writerLog struct {
	// own are this process's status writes the watch has not shown yet
	// (see ownWrites).
	own ownWrites
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

// wrote records a status write of this process, stored at rv with status
// (see ownWrites.stored).
func (w *statusWriters) wrote(key cache.ObjectName, rv string, status autoscalingv1alpha1.CronFederatedHPAStatus) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.log(key).own.stored(rv, status)
}

// unacknowledged records a status write of this process that failed but
// may have been stored (see ownWrites.lost).
func (w *statusWriters) unacknowledged(key cache.ObjectName, status autoscalingv1alpha1.CronFederatedHPAStatus) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.log(key).own.lost(status)
}

// saw records a status change the informer showed.
func (w *statusWriters) saw(key cache.ObjectName, obj *autoscalingv1alpha1.CronFederatedHPA) {
	w.mu.Lock()
	defer w.mu.Unlock()
	l := w.log(key)
	manager, at := timelineOf(obj).newestStatusWrite()
	l.seen = append(l.seen, seenWrite{resourceVersion: obj.ResourceVersion, manager: manager, at: at, status: &obj.Status})
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
		if l.own.shows(s) {
			continue
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
	if l.own.empty() && len(l.seen) == 0 && len(l.reported) == 0 {
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
