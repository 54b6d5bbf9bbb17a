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
	"fmt"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Inherited firings.
//
// A firing is applied to its target first and recorded in status second. A
// process that dies in between (a crash, a lost lease, a drain that timed
// out) leaves the firing applied but unrecorded, and its successor finds it
// due. Applying it again is harmless if nobody touched the target since, but
// would undo a change someone made after the first write (a user scaling
// down by hand, say). So a firing whose scheduled time came before this
// process started (an inherited firing: a predecessor may have applied it)
// is checked against the target's managedFields before it is applied: the
// apiserver keeps, per field manager, the fields it owns and when it last
// changed them, and the cron-scaler writes as FieldManager.
//
//   - The cron-scaler's entry owns a field the firing sets and says it was
//     changed at or after the scheduled time, and the target's fields hold
//     the firing's values: the predecessor applied it. It is recorded as
//     applied, with that time, and not written again (see confirmed).
//   - Another manager owns such a field and changed it at or after the
//     scheduled time: it is not applied, and recorded as failed with who
//     changed what and when (the predecessor may have applied it first, and
//     applying it now could undo that change).
//   - Otherwise it is applied as any firing.
//
// What the apiserver does not say: writes through the scale subresource get
// no time in managedFields (the scale handler of k8s.io/apimachinery takes
// the time from the parent resource's entries, where a manager that writes
// only through the scale subresource has none; checked on kube-apiserver
// 1.37 by the integration test InheritedFiringNotReapplied). For a target
// scaled through it, the cron-scaler's own entry only says that it was the
// last to change replicas, and the firing is applied again: the same value
// written again, which undoes nobody's change. A change by another manager
// through the object (kubectl edit, apply or patch, a GitOps tool) has its
// time and is never undone; one through the scale subresource (kubectl
// scale, an HPA) has none and is undone if it came inside the window
// between the predecessor's target write and its death. FederatedHPAs and
// HPAs are updated as objects: every entry has its time.
//
// Reading a FederatedHPA or HPA target costs nothing more: the cron-scaler
// reads it before it updates it anyway. A target written through its scale
// subresource is read once as metadata. Firings that are not inherited are
// never checked: this process knows what it applied.

// priorWrite is what a target's managedFields say about an inherited firing.
type priorWrite struct {
	// applied is set when the cron-scaler changed the firing's fields at or
	// after its scheduled time; at is when.
	applied bool
	at      time.Time
	// by is another manager that changed them at or after the scheduled
	// time (at, or byAt while applied is set too), and fields what it owns
	// of them.
	by     string
	byAt   time.Time
	fields []string
}

// confirmed keeps what managedFields say about an inherited firing only
// where the target's fields hold the firing's values (holds). The
// cron-scaler has one Update entry per target, whatever fields each write
// changed, and it keeps owning what it set before: its time moving past the
// slot says that the cron-scaler wrote the target since, not that it wrote
// these values. Two objects on one HPA, one setting minReplicas and one
// maxReplicas at the same slot, is such a case (issue 26, case 4): after the
// first is written, the entry moved past the slot for the second too. So the
// firing is taken as applied only if the values are there as well;
// otherwise it is applied, unless another manager changed one of its fields
// at or after the slot too: that change is kept and the firing is not
// applied. When the firing sets both bounds, the cron-scaler's entry owns
// the bound the other manager left alone, with a time past the slot (it
// moves with every write): the other manager's change must be looked for
// all the same, or the firing undoes it (issue 26, found by the simulator).
// Another manager's change is kept as it is: its values are not the
// firing's, by design.
func confirmed(w priorWrite, holds bool) priorWrite {
	switch {
	case w.applied && holds:
		return priorWrite{applied: true, at: w.at}
	case w.by != "":
		return priorWrite{by: w.by, at: w.byAt, fields: w.fields}
	}
	return priorWrite{}
}

// decided says whether the target must not be written.
func (w priorWrite) decided() bool { return w.applied || w.by != "" }

func (w priorWrite) String() string {
	if w.applied {
		return fmt.Sprintf("applied at %s by %s (the target's managedFields say so)", w.at.UTC().Format(time.RFC3339), FieldManager)
	}
	return fmt.Sprintf("%s changed by %s at %s", strings.Join(w.fields, ", "), w.by, w.at.UTC().Format(time.RFC3339))
}

// fieldPaths are the fields of the target that v sets, as managedFields
// name them. The scale subresource of the built-in workloads and of
// LeaderWorkerSets maps to spec.replicas; a custom resource whose scale
// subresource reads another path is only checked for the cron-scaler's own
// entry. A LeaderWorkerSet's bounds are those of its scalePolicy.
func fieldPaths(t target, v values) []string {
	var paths []string
	if v.replicas != nil {
		paths = append(paths, "spec.replicas")
	}
	prefix := "spec."
	if t.kind == targetLeaderWorkerSet {
		prefix = "spec.scalePolicy."
	}
	if v.min != nil {
		paths = append(paths, prefix+"minReplicas")
	}
	if v.max != nil {
		paths = append(paths, prefix+"maxReplicas")
	}
	return paths
}

// inspectManagedFields reads what entries say about a firing of slot that
// sets paths: both whether the cron-scaler's entry moved past the slot and
// the latest other manager that changed one of paths since (confirmed
// chooses between them). Entries without a time (writes through the scale
// subresource) say nothing about when, and are passed over.
func inspectManagedFields(entries []metav1.ManagedFieldsEntry, paths []string, slot time.Time) priorWrite {
	// managedFields keep seconds: a write in the scheduled second counts as
	// at or after it.
	since := slot.Truncate(time.Second)
	var w priorWrite
	for _, e := range entries {
		if e.Time == nil || e.Time.Time.Before(since) {
			continue
		}
		owned := ownedPaths(e.FieldsV1, paths)
		if len(owned) == 0 {
			continue
		}
		if e.Manager == FieldManager {
			w.applied, w.at = true, e.Time.Time
			continue
		}
		if w.by == "" || e.Time.Time.After(w.byAt) {
			w.by, w.byAt, w.fields = e.Manager, e.Time.Time, owned
		}
	}
	return w
}

// ownedPaths returns which of paths ("spec.replicas") the fieldsV1 set owns.
func ownedPaths(fields *metav1.FieldsV1, paths []string) []string {
	if fields == nil || len(fields.GetRawBytes()) == 0 {
		return nil
	}
	var set map[string]any
	if err := json.Unmarshal(fields.GetRawBytes(), &set); err != nil {
		return nil
	}
	var owned []string
	for _, p := range paths {
		node := set
		found := true
		for _, step := range strings.Split(p, ".") {
			next, ok := node["f:"+step].(map[string]any)
			if !ok {
				found = false
				break
			}
			node = next
		}
		if found {
			owned = append(owned, p)
		}
	}
	return owned
}
