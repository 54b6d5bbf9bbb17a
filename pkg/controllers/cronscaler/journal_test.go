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
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
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

// A pending history planned from a status older than the one the cache now
// holds (a successor's first list, behind its predecessor's last status
// write) does not replace a newer record of the rule: the slot the newer
// record handled stays handled, so it is neither applied nor recorded again,
// and what only the pending history recorded is kept (issue 36, seed 8000495
// of -sim.edges -sim.model, which simEdgeModelSeeds replays end to end). A
// pending history as new as the cached one replaces it, as before.
func TestPendingHistoryPlannedFromAnOlderStatusYieldsToANewerRecord(t *testing.T) {
	ok := func(at string) autoscalingv1alpha1.SuccessfulExecution {
		return autoscalingv1alpha1.SuccessfulExecution{ScheduleTime: metaTime(utc(at)), ExecutionTime: metaTime(utc(at))}
	}
	history := func(rule, next string, oks ...string) autoscalingv1alpha1.ExecutionHistory {
		h := autoscalingv1alpha1.ExecutionHistory{RuleName: rule, NextExecutionTime: metaTime(utc(next))}
		for _, at := range oks {
			h.SuccessfulExecutions = append(h.SuccessfulExecutions, ok(at))
		}
		return h
	}
	// The predecessor recorded a's 15:20; this process's pending history,
	// from the older status, still has 15:20 to retry, and it recorded b's
	// 15:19, which the cache does not show.
	cached := autoscalingv1alpha1.CronFederatedHPAStatus{ExecutionHistories: []autoscalingv1alpha1.ExecutionHistory{
		history("a", "2024-05-01 15:25:00", "2024-05-01 15:20:00", "2024-05-01 15:15:00"),
		history("b", "2024-05-01 15:19:00", "2024-05-01 15:18:00"),
	}}
	pending := []autoscalingv1alpha1.ExecutionHistory{
		history("a", "2024-05-01 15:20:00", "2024-05-01 15:15:00", "2024-05-01 15:10:00"),
		history("b", "2024-05-01 15:20:00", "2024-05-01 15:19:00", "2024-05-01 15:18:00"),
	}
	mergePending(&cached, pending)

	a, b := cached.ExecutionHistories[0], cached.ExecutionHistories[1]
	if next := timeOf(a.NextExecutionTime); !next.Equal(utc("2024-05-01 15:25:00")) {
		t.Errorf("a's nextExecutionTime = %v, want the newer record's 15:25 (15:20 handled)", next)
	}
	var got []string
	for _, e := range a.SuccessfulExecutions {
		got = append(got, timeOf(e.ScheduleTime).Format("15:04"))
	}
	if want := "15:20 15:15 15:10"; strings.Join(got, " ") != want {
		t.Errorf("a's successful executions = %v, want %s: the newer record, with what only the pending history holds, newest first", got, want)
	}
	if next := timeOf(b.NextExecutionTime); !next.Equal(utc("2024-05-01 15:20:00")) || len(b.SuccessfulExecutions) != 2 {
		t.Errorf("b = %+v, want the pending history (it handled 15:19, after the cached record)", b)
	}
}

// A pending history that decided a slot the cached record already holds,
// with the same outcome, writes the record's entry, not one of its own: a
// slot's first record stands (seed 8001611 of -sim.edges -sim.model: a
// successor started in the second of its predecessor's last status write
// recorded the predecessor's last superseded slots again, with its own
// time).
func TestPendingHistoryKeepsTheFirstRecordOfASlot(t *testing.T) {
	failed := func(at, exec, msg string) autoscalingv1alpha1.FailedExecution {
		return autoscalingv1alpha1.FailedExecution{ScheduleTime: metaTime(utc(at)), ExecutionTime: metaTime(utc(exec)), Message: msg}
	}
	cached := autoscalingv1alpha1.CronFederatedHPAStatus{ExecutionHistories: []autoscalingv1alpha1.ExecutionHistory{{
		RuleName: "a", NextExecutionTime: metaTime(utc("2024-05-01 19:25:00")),
		FailedExecutions: []autoscalingv1alpha1.FailedExecution{failed("2024-05-01 19:20:00", "2024-05-01 19:20:45", "superseded, by the predecessor")},
	}}}
	pending := []autoscalingv1alpha1.ExecutionHistory{{
		RuleName: "a", NextExecutionTime: metaTime(utc("2024-05-01 19:25:00")),
		FailedExecutions: []autoscalingv1alpha1.FailedExecution{failed("2024-05-01 19:20:00", "2024-05-01 19:21:31", "superseded, again")},
	}}
	mergePending(&cached, pending)
	got := cached.ExecutionHistories[0].FailedExecutions
	if len(got) != 1 || got[0].Message != "superseded, by the predecessor" || !timeOf(got[0].ExecutionTime).Equal(utc("2024-05-01 19:20:45")) {
		t.Errorf("19:20's record = %+v, want the predecessor's (the first) only", got)
	}
}

// Memory is of one object: an object re-created under the same name (a new
// uid) plans from its own status, not from the pending histories of the
// object it replaced, whether the uids are the apiserver's UUIDs or any
// other string (memory.object, uidKey).
func TestMemoryOfARecreatedObjectIsNotCarriedOver(t *testing.T) {
	for _, uids := range [][2]types.UID{
		{"0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0", "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f1"},
		{"uid-old", "uid-new"},
	} {
		m := newMemory()
		key := cache.ObjectName{Namespace: ns, Name: "c"}
		old := &autoscalingv1alpha1.CronFederatedHPA{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "c", UID: uids[0]},
			Spec: autoscalingv1alpha1.CronFederatedHPASpec{Rules: []autoscalingv1alpha1.CronFederatedHPARule{{Name: "a"}}}}
		m.setPending(key, old.UID, []autoscalingv1alpha1.ExecutionHistory{{RuleName: "a", SuccessfulExecutions: []autoscalingv1alpha1.SuccessfulExecution{
			{ScheduleTime: metaTime(utc("2024-05-01 08:00:00")), ExecutionTime: metaTime(utc("2024-05-01 08:00:00"))}}}}, true, replanMarks{})
		if _, ok := m.pendingStatus(key, old); !ok {
			t.Fatalf("%s: nothing pending for the object that fired", uids[0])
		}
		recreated := old.DeepCopy()
		recreated.UID = uids[1]
		if status := m.peek(key, recreated); len(status.ExecutionHistories) != 0 {
			t.Errorf("%s after %s: peek gave %+v; want the re-created object's own (empty) status", uids[1], uids[0], status.ExecutionHistories)
		}
		if status, stale := m.base(key, recreated); stale || len(status.ExecutionHistories) != 0 {
			t.Errorf("%s after %s: base gave %+v (stale %v); want the re-created object's own (empty) status", uids[1], uids[0], status, stale)
		}
	}
}
