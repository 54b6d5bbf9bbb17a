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
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	autoscalingv1alpha1 "github.com/scaleplane/scaleplane/pkg/apis/autoscaling/v1alpha1"
)

const (
	defaultSuccessfulHistoryLimit = 3
	defaultFailedHistoryLimit     = 3
)

func metaTime(t time.Time) *metav1.Time {
	if t.IsZero() {
		return nil
	}
	return &metav1.Time{Time: t}
}

// recordSuccess adds a successful execution, newest first, within the rule's
// limit.
func recordSuccess(h *autoscalingv1alpha1.ExecutionHistory, rule *autoscalingv1alpha1.CronFederatedHPARule, e autoscalingv1alpha1.SuccessfulExecution) {
	limit := int(ptr.Deref(rule.SuccessfulHistoryLimit, defaultSuccessfulHistoryLimit))
	h.SuccessfulExecutions = prepend(h.SuccessfulExecutions, e, limit)
	setLastScheduleTime(h, e.ScheduleTime.Time)
}

// recordFailure adds a failed or missed execution, newest first, within the
// rule's limit; a limit of 0 keeps none but still moves lastScheduleTime, so
// the scheduled time is never run again.
func recordFailure(h *autoscalingv1alpha1.ExecutionHistory, rule *autoscalingv1alpha1.CronFederatedHPARule, e autoscalingv1alpha1.FailedExecution) {
	limit := int(ptr.Deref(rule.FailedHistoryLimit, defaultFailedHistoryLimit))
	h.FailedExecutions = prepend(h.FailedExecutions, e, limit)
	setLastScheduleTime(h, e.ScheduleTime.Time)
}

func setLastScheduleTime(h *autoscalingv1alpha1.ExecutionHistory, t time.Time) {
	if h.LastScheduleTime == nil || t.After(h.LastScheduleTime.Time) {
		h.LastScheduleTime = metaTime(t)
	}
}

// prepend puts e first and keeps at most limit entries (none for limit <= 0).
func prepend[T any](list []T, e T, limit int) []T {
	if limit <= 0 {
		return nil
	}
	out := make([]T, 0, min(len(list)+1, limit))
	out = append(out, e)
	for _, x := range list {
		if len(out) == limit {
			break
		}
		out = append(out, x)
	}
	return out
}

// findHistory returns the history of the named rule in status.
func findHistory(status *autoscalingv1alpha1.CronFederatedHPAStatus, rule string) (autoscalingv1alpha1.ExecutionHistory, bool) {
	for i := range status.ExecutionHistories {
		if status.ExecutionHistories[i].RuleName == rule {
			return *status.ExecutionHistories[i].DeepCopy(), true
		}
	}
	return autoscalingv1alpha1.ExecutionHistory{RuleName: rule}, false
}

// memory is what this process knows about CronFederatedHPAs that their
// status, as the informer cache shows it, may not say yet.
//
// Why it exists: a firing applies the target first and records it in status
// second (one status write per sync). If that status write fails (a conflict
// because the cache was stale, or the API server was briefly unavailable), or
// succeeds but the cache has not seen it yet when the object is synced again,
// the cache still shows the old lastScheduleTime, and the same scheduled time
// would be applied twice. So every history a sync records is kept here until
// the cache shows a lastScheduleTime at least as new, and a sync plans from
// whichever of the two is newer. Across restarts and leader changes status is
// the only record: the new process lists fresh objects, and the one case left
// is a process that dies between the target write and the status write; the
// next one then sets the same value again, which is harmless.
//
// It also holds replan marks set by the event handlers (target changed, rule
// resumed, schedule changed) until a sync has planned from them.
type memory struct {
	mu      sync.Mutex
	objects map[cache.ObjectName]*objectMemory
}

type objectMemory struct {
	uid       types.UID
	histories map[string]autoscalingv1alpha1.ExecutionHistory
	replanAll bool
	replan    map[string]bool
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
		o = &objectMemory{uid: uid, histories: map[string]autoscalingv1alpha1.ExecutionHistory{}, replan: map[string]bool{}}
		m.objects[key] = o
	}
	return o
}

// prune drops the object's memory once it holds nothing.
func (m *memory) prune(key cache.ObjectName, o *objectMemory) {
	if o != nil && len(o.histories) == 0 && len(o.replan) == 0 && !o.replanAll {
		delete(m.objects, key)
	}
}

func (m *memory) forget(key cache.ObjectName) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.objects, key)
}

// markReplan asks the next sync to plan the named rules (all when all is
// true) from the time of that sync.
func (m *memory) markReplan(key cache.ObjectName, uid types.UID, all bool, rules []string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	o := m.object(key, uid, true)
	o.replanAll = o.replanAll || all
	for _, r := range rules {
		o.replan[r] = true
	}
}

// takeReplan returns and clears the replan marks; a sync that fails gives
// them back with markReplan.
func (m *memory) takeReplan(key cache.ObjectName, uid types.UID) (bool, map[string]bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	o := m.object(key, uid, false)
	if o == nil {
		return false, nil
	}
	all, rules := o.replanAll, o.replan
	o.replanAll, o.replan = false, map[string]bool{}
	m.prune(key, o)
	return all, rules
}

// merge returns the history to plan the rule from: the cached status's, or
// the one this process recorded if it is newer. Recorded histories the cache
// has caught up with, and those of rules no longer in the spec, are dropped.
func (m *memory) merge(key cache.ObjectName, uid types.UID, rules []autoscalingv1alpha1.CronFederatedHPARule, status *autoscalingv1alpha1.CronFederatedHPAStatus) map[string]autoscalingv1alpha1.ExecutionHistory {
	m.mu.Lock()
	defer m.mu.Unlock()
	o := m.object(key, uid, false)
	out := make(map[string]autoscalingv1alpha1.ExecutionHistory, len(rules))
	inSpec := make(map[string]bool, len(rules))
	for i := range rules {
		name := rules[i].Name
		inSpec[name] = true
		h, _ := findHistory(status, name)
		if o == nil {
			out[name] = h
			continue
		}
		if mem, ok := o.histories[name]; ok {
			if newer(mem.LastScheduleTime, h.LastScheduleTime) {
				h = *mem.DeepCopy()
			} else {
				delete(o.histories, name)
			}
		}
		out[name] = h
	}
	if o != nil {
		for name := range o.histories {
			if !inSpec[name] {
				delete(o.histories, name)
			}
		}
		m.prune(key, o)
	}
	return out
}

// remember keeps a history a sync recorded a firing in.
func (m *memory) remember(key cache.ObjectName, uid types.UID, h autoscalingv1alpha1.ExecutionHistory) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.object(key, uid, true).histories[h.RuleName] = *h.DeepCopy()
}

func newer(a, b *metav1.Time) bool {
	return a != nil && (b == nil || a.Time.After(b.Time))
}
