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
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	autoscalingv1alpha1 "github.com/scaleplane/scaleplane/pkg/apis/autoscaling/v1alpha1"
	"github.com/scaleplane/scaleplane/pkg/cronplan"
)

// timeline is what an object's managedFields say about when it changed,
// read from the object as the informer's cache keeps it: the last change of
// its spec or metadata (lastSpecChange), the newest status write and its
// writer (newestStatusWrite), and the cron-scaler's own newest status write
// (cronplan.OwnStatusWrite). It is the only record of a change this process
// did not watch (it was down, or not the leader), and it is kept by the
// apiserver, not by this process: a restart loses nothing of it.
//
// Invariants (docs/cron-scaler.md, "When a firing runs" and "The crash
// window"):
//   - Way in: the cache's transform keeps of managedFields exactly the
//     three entries these times are read from, without field sets (see
//     keepTimeline); nothing else of managedFields is cached.
//   - Way out: these methods, and pure planning (cronplan.Object), which
//     reads the same entries with cronplan.LastSpecChange and
//     cronplan.OwnStatusWrite, so that kubectl-scaleplane's preview plans
//     as the controller does.
//   - Times are the apiserver's and keep whole seconds: a change in a
//     slot's own second counts as after the slot, and the plan in status
//     is stale when the last change came after the cron-scaler's own last
//     status write (cronplan.From.Stale); one in the same second stands.
//   - A change the watch delivers more than maxChangeLag after its time says
//     the clocks are apart, and its replan mark takes when it was seen
//     instead (see changeMade).
type timeline struct {
	obj *autoscalingv1alpha1.CronFederatedHPA
}

// timelineOf is the timeline of obj, as its managedFields say.
func timelineOf(obj *autoscalingv1alpha1.CronFederatedHPA) timeline {
	return timeline{obj: obj}
}

// lastSpecChange is the last change of the object's spec or metadata (see
// cronplan.LastSpecChange); zero without managed fields, never after now.
func (t timeline) lastSpecChange(now time.Time) time.Time {
	return cronplan.LastSpecChange(t.obj, now)
}

// newestStatusWrite is the manager and time of the object's newest status
// write (see newerStatusWrite); "unknown" and zero without managed fields.
func (t timeline) newestStatusWrite() (string, time.Time) {
	var newest *metav1.ManagedFieldsEntry
	for i := range t.obj.ManagedFields {
		if f := &t.obj.ManagedFields[i]; f.Subresource == "status" && f.Time != nil && (newest == nil || newerStatusWrite(f, newest)) {
			newest = f
		}
	}
	if newest == nil {
		return "unknown", time.Time{}
	}
	return newest.Manager, newest.Time.Time
}

// keepTimeline is what the cache's transform keeps of an object's
// managedFields (see stripForCache): without field sets, the newest entry
// of the object itself, the newest of its status subresource and the
// newest status entry of the cron-scaler's own field manager, all that the
// timeline reads. Entries of other subresources are dropped (a
// CronFederatedHPA has none but status).
func keepTimeline(entries []metav1.ManagedFieldsEntry) []metav1.ManagedFieldsEntry {
	var object, status, own *metav1.ManagedFieldsEntry
	for i := range entries {
		e := &entries[i]
		switch e.Subresource {
		case "":
			if object == nil || newer(e, object) {
				object = e
			}
		case "status":
			if status == nil || newerStatusWrite(e, status) {
				status = e
			}
			if e.Manager == FieldManager && (own == nil || newer(e, own)) {
				own = e
			}
		}
	}
	if own == status {
		own = nil
	}
	var kept []metav1.ManagedFieldsEntry
	for _, e := range []*metav1.ManagedFieldsEntry{object, status, own} {
		if e != nil {
			kept = append(kept, metav1.ManagedFieldsEntry{
				Manager: intern(e.Manager), Operation: metav1.ManagedFieldsOperationType(intern(string(e.Operation))),
				Subresource: intern(e.Subresource), Time: e.Time,
			})
		}
	}
	return kept
}

// newer says whether a was written after b; an entry without a time is
// never newer (the apiserver sets one on every write it tracks).
func newer(a, b *metav1.ManagedFieldsEntry) bool {
	return a.Time != nil && (b.Time == nil || a.Time.After(b.Time.Time))
}

// newerStatusWrite says whether status entry a is taken for a later write
// than b: it was written after b, or in the same second by another manager
// when b is the cron-scaler's own. managedFields keep seconds, and the
// order of entries of one second is the apiserver's (it sorts them by
// manager name), so a tie decided by order could name the cron-scaler for
// another controller's write; the guard would then take that write for
// this process's predecessor's when it came in the second this process
// started (processStart.predecessorWrote) and not report it. Naming the
// other manager reports a controller that did write status in that second.
// Issue 36, seed 10007590 of -sim.edges -sim.model: Karmada's write 0.47 s
// after a new leader's start and first write went unreported.
func newerStatusWrite(a, b *metav1.ManagedFieldsEntry) bool {
	if newer(a, b) {
		return true
	}
	return a.Time != nil && b.Time != nil && a.Time.Equal(b.Time) && b.Manager == FieldManager && a.Manager != FieldManager
}
