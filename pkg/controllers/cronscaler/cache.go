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
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	autoscalingv1alpha1 "github.com/scaleplane/scaleplane/pkg/apis/autoscaling/v1alpha1"
)

// lastAppliedAnnotation is where kubectl apply keeps a copy of the object:
// as large as the spec, and never read here.
const lastAppliedAnnotation = "kubectl.kubernetes.io/last-applied-configuration"

// stripForCache is the CronFederatedHPA informer's transform: it drops from
// each cached object what the cron-scaler never reads, which at 100,000
// objects is much of the cache (test/bench/README.md has the heap profiles).
// Kept: spec, status, and of managedFields the newest entry of the object,
// the newest of its status and the cron-scaler's own status entry, each with
// its manager, operation, subresource and time (planning reads when the
// object was last changed and when the cron-scaler last wrote its plan, the
// guard who wrote status last); dropped: the other entries, the entries'
// field sets, and kubectl's last-applied copy. The strings every object
// repeats (its kind, namespace, the managers, the target's kind) are shared
// (see interner). Writes stay correct: a status write sends no managedFields
// (the apiserver keeps its own) and the apiserver takes nothing but status
// from it.
func stripForCache(obj any) (any, error) {
	cron, ok := obj.(*autoscalingv1alpha1.CronFederatedHPA)
	if !ok {
		// A tombstone of a deleted object passes as it is.
		return obj, nil
	}
	cron.ManagedFields = newestEntries(cron.ManagedFields)
	if _, ok := cron.Annotations[lastAppliedAnnotation]; ok {
		delete(cron.Annotations, lastAppliedAnnotation)
		if len(cron.Annotations) == 0 {
			cron.Annotations = nil
		}
	}
	internStrings(cron)
	return cron, nil
}

// newestEntries keeps, without field sets, the newest managedFields entry of
// the object itself, the newest of its status subresource and the newest
// status entry of the cron-scaler's own field manager: all that
// cronplan.LastSpecChange, newestStatusWrite and cronplan.OwnStatusWrite
// read. Entries of other subresources are dropped (a CronFederatedHPA has none but status).
func newestEntries(entries []metav1.ManagedFieldsEntry) []metav1.ManagedFieldsEntry {
	var object, status, own *metav1.ManagedFieldsEntry
	for i := range entries {
		e := &entries[i]
		switch e.Subresource {
		case "":
			if object == nil || newer(e, object) {
				object = e
			}
		case "status":
			if status == nil || newer(e, status) {
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

// internStrings shares the strings that repeat across objects.
func internStrings(cron *autoscalingv1alpha1.CronFederatedHPA) {
	cron.APIVersion, cron.Kind = intern(cron.APIVersion), intern(cron.Kind)
	cron.Namespace = intern(cron.Namespace)
	ref := &cron.Spec.ScaleTargetRef
	ref.APIVersion, ref.Kind = intern(ref.APIVersion), intern(ref.Kind)
	for i := range cron.Spec.Rules {
		r := &cron.Spec.Rules[i]
		r.Name, r.Schedule = intern(r.Name), intern(r.Schedule)
		if r.TimeZone != nil {
			tz := intern(*r.TimeZone)
			r.TimeZone = &tz
		}
	}
	for i := range cron.Status.ExecutionHistories {
		h := &cron.Status.ExecutionHistories[i]
		h.RuleName = intern(h.RuleName)
	}
}

// maxInterned bounds the strings shared: the fields interned take few
// distinct values (kinds, namespaces, managers, schedules, rule names such
// as "scale-up"), and a cluster where they do not just shares fewer.
const maxInterned = 4096

// interner holds one copy of each string interned.
var interner = struct {
	sync.Mutex
	m map[string]string
}{m: map[string]string{}}

// intern returns the shared copy of s, making s the shared copy if there is
// none yet and room for it.
func intern(s string) string {
	if s == "" {
		return s
	}
	interner.Lock()
	defer interner.Unlock()
	if shared, ok := interner.m[s]; ok {
		return shared
	}
	if len(interner.m) < maxInterned {
		interner.m[s] = s
	}
	return s
}
