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

	autoscalingv1alpha1 "github.com/scaleplane/scaleplane/pkg/apis/autoscaling/v1alpha1"
)

// lastAppliedAnnotation is where kubectl apply keeps a copy of the object:
// as large as the spec, and never read here.
const lastAppliedAnnotation = "kubectl.kubernetes.io/last-applied-configuration"

// stripForCache is the CronFederatedHPA informer's transform: it drops from
// each cached object what the cron-scaler never reads, which at 100,000
// objects is much of the cache (test/bench/README.md has the heap profiles).
// Kept: spec, status, and of managedFields the entries the object's
// timeline is read from (see keepTimeline); dropped: the other entries, the
// entries' field sets, and kubectl's last-applied copy. The strings every object
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
	cron.ManagedFields = keepTimeline(cron.ManagedFields)
	if _, ok := cron.Annotations[lastAppliedAnnotation]; ok {
		delete(cron.Annotations, lastAppliedAnnotation)
		if len(cron.Annotations) == 0 {
			cron.Annotations = nil
		}
	}
	internStrings(cron)
	return cron, nil
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
