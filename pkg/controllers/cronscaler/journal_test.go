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
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	autoscalingv1alpha1 "github.com/scaleplane/scaleplane/pkg/apis/autoscaling/v1alpha1"
)

// A sync planned from a spec that lacks a rule (the cache, behind a watch
// that stalled while the rule was added) replaces the pending histories of
// the rules it planned and keeps the pending history of the rule it did not:
// that history holds a firing a sync from a fresh read applied, and is its
// only record. Dropped, the rule was found due again once the cache showed
// it, and its slot applied a second time over a later slot's value (issue
// 36, seed 4000134 of -sim.model, which simModelSeeds replays end to end).
func TestPendingHistoryOfARuleTheSyncDidNotPlanIsKept(t *testing.T) {
	m := newMemory()
	key := cache.ObjectName{Namespace: ns, Name: "c"}
	obj := &autoscalingv1alpha1.CronFederatedHPA{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "c", UID: "uid-c"},
		Spec: autoscalingv1alpha1.CronFederatedHPASpec{Rules: []autoscalingv1alpha1.CronFederatedHPARule{{Name: "a"}, {Name: "b"}}}}
	applied := func(rule, at string) autoscalingv1alpha1.ExecutionHistory {
		return autoscalingv1alpha1.ExecutionHistory{RuleName: rule, SuccessfulExecutions: []autoscalingv1alpha1.SuccessfulExecution{
			{ScheduleTime: metaTime(utc(at)), ExecutionTime: metaTime(utc(at))}}}
	}
	// From a fresh read that has rule b: a's 08:00 and b's 08:01.
	m.setPending(key, obj.UID, []autoscalingv1alpha1.ExecutionHistory{applied("a", "2024-05-01 08:00:00"), applied("b", "2024-05-01 08:01:00")}, true, replanMarks{})
	// From the cache, which has only rule a: a's 08:02.
	m.setPending(key, obj.UID, []autoscalingv1alpha1.ExecutionHistory{applied("a", "2024-05-01 08:02:00")}, true, replanMarks{})

	status, ok := m.pendingStatus(key, obj)
	if !ok {
		t.Fatal("nothing pending")
	}
	got := map[string]string{}
	for _, h := range status.ExecutionHistories {
		got[h.RuleName] = timeOf(h.SuccessfulExecutions[0].ScheduleTime).Format("15:04")
	}
	if len(got) != 2 || got["a"] != "08:02" || got["b"] != "08:01" {
		t.Errorf("pending after a sync that did not plan rule b: %v; want a's 08:02 (replaced) and b's 08:01 (kept)", got)
	}

	// Once a write succeeds, nothing is pending.
	m.setWritten(key, obj.UID, status, "7")
	if _, ok := m.pendingStatus(key, obj); ok {
		t.Error("histories still pending after the status was written")
	}
}
