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

// The tests of the cron-scaler's status writes whose answer is lost (they
// commit, then fail): such a write stays the cron-scaler's own through
// retries, the watch delivering it first and flip-flops, and a decision it
// held is not made again from a stale cache; with the fixtures that lose
// the answers and start a new leader.

import (
	"net"
	"os"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/component-base/metrics/testutil"
	"k8s.io/utils/ptr"

	autoscalingv1alpha1 "github.com/scaleplane/scaleplane/pkg/apis/autoscaling/v1alpha1"
)

// loseStatusWriteAnswers makes the next n status writes commit and then
// fail with err, as a write whose answer is lost does (an etcd timeout after
// the commit, a connection reset on the way back). committed, if set, runs
// between the commit and the failure (the watch may deliver the write
// first).
func (h *harness) loseStatusWriteAnswers(n int, err error, committed func(old, stored *autoscalingv1alpha1.CronFederatedHPA)) {
	h.client.PrependReactor("update", "cronfederatedhpas", func(action clienttesting.Action) (bool, runtime.Object, error) {
		if action.GetSubresource() != "status" || n == 0 {
			return false, nil, nil
		}
		n--
		obj := action.(clienttesting.UpdateAction).GetObject().(*autoscalingv1alpha1.CronFederatedHPA)
		old, getErr := h.client.Tracker().Get(autoscalingv1alpha1.SchemeGroupVersion.WithResource("cronfederatedhpas"), obj.Namespace, obj.Name)
		if getErr != nil {
			return true, nil, getErr
		}
		_, stored, commitErr := h.updateLikeAPIServer(action)
		if commitErr != nil {
			return true, nil, commitErr
		}
		if committed != nil {
			committed(old.(*autoscalingv1alpha1.CronFederatedHPA), stored.(*autoscalingv1alpha1.CronFederatedHPA))
		}
		return true, nil, err
	})
}

// Issue 26, case 6: a status write that commits but whose answer is lost
// is this process's own write when the watch delivers it, not another
// controller's; and the firing it records is applied and recorded once.
func TestStatusWriteWithLostAnswerIsOwn(t *testing.T) {
	for name, lost := range map[string]error{
		"etcd timeout":     apierrors.NewInternalError(errEtcdTimeout),
		"connection reset": &net.OpError{Op: "read", Net: "tcp", Err: os.NewSyscallError("read", syscall.ECONNRESET)},
	} {
		t.Run(name, func(t *testing.T) { testLostAnswer(t, lost, false) })
		t.Run(name+", the watch first", func(t *testing.T) { testLostAnswer(t, lost, true) })
	}
}

// testLostAnswer is TestStatusWriteWithLostAnswerIsOwn with the watch
// delivering the write after its failure returns, or (watchFirst) before.
func testLostAnswer(t *testing.T, lost error, watchFirst bool) {
	h := newHarness(t, utc("2024-05-01 07:00:00"), cron("c", rule("r", "0 8 * * *", 10)))
	h.scales.set("deployments", "web", 1)
	before := h.get("c")
	h.syncAt(utc("2024-05-01 07:00:00"), "c")
	h.c.onUpdate(h.ctx, before, h.get("c"))
	h.syncAt(utc("2024-05-01 07:00:01"), "c")

	var deliver func(old, stored *autoscalingv1alpha1.CronFederatedHPA)
	if watchFirst {
		deliver = func(old, stored *autoscalingv1alpha1.CronFederatedHPA) { h.c.onUpdate(h.ctx, old, stored) }
	}
	h.loseStatusWriteAnswers(1, lost, deliver)
	before = h.get("c")
	if _, err := h.trySyncAt(utc("2024-05-01 08:00:00.100"), "c"); err == nil {
		t.Fatal("the status write whose answer was lost did not fail")
	}
	// The watch delivers the write that committed.
	h.refresh()
	if !watchFirst {
		h.c.onUpdate(h.ctx, before, h.get("c"))
	}
	counted := func() float64 {
		v, _ := testutil.GetCounterMetricValue(foreignStatusWrites.WithLabelValues(FieldManager))
		return v
	}
	start := counted()
	h.syncAt(utc("2024-05-01 08:00:01"), "c")
	h.drainRecords()
	for _, e := range h.events() {
		if strings.HasPrefix(e, "Warning ManagedByAnotherController") {
			t.Errorf("the process's own write reported as another controller's: %q", e)
		}
	}
	if got := counted() - start; got != 0 {
		t.Errorf("foreign status writes counted %v; want 0", got)
	}
	if n := h.scales.updateCount(); n != 1 {
		t.Errorf("%d target writes; want 1", n)
	}
	if n := h.c.writers.size(); n != 0 {
		t.Errorf("the writers hold %d objects once the lost write was seen; want 0", n)
	}
	if hist := h.history("c", "r"); len(hist.SuccessfulExecutions) != 1 {
		t.Errorf("successful executions %+v; want 08:00 once", hist.SuccessfulExecutions)
	}
}

// Issue 26, case 6, the other outcome: a status write whose answer was lost
// but that was not stored leaves nothing behind once a later write of this
// process is seen (the watch delivers in order), so the digests kept for
// lost answers do not pile up.
func TestLostAnswerNotStoredIsForgotten(t *testing.T) {
	h := newHarness(t, utc("2024-05-01 07:00:00"), cron("c", rule("r", "0 8 * * *", 10)))
	h.scales.set("deployments", "web", 1)
	before := h.get("c")
	h.syncAt(utc("2024-05-01 07:00:00"), "c")
	h.c.onUpdate(h.ctx, before, h.get("c"))
	h.syncAt(utc("2024-05-01 07:00:01"), "c")

	h.failStatusWrites(1) // an etcd timeout before the commit
	before = h.get("c")
	if _, err := h.trySyncAt(utc("2024-05-01 08:00:00.100"), "c"); err == nil {
		t.Fatal("the status write did not fail")
	}
	h.syncAt(utc("2024-05-01 08:00:01"), "c") // the retry stores it
	h.c.onUpdate(h.ctx, before, h.get("c"))
	h.syncAt(utc("2024-05-01 08:00:02"), "c")
	if n := h.scales.updateCount(); n != 1 {
		t.Errorf("%d target writes; want 1", n)
	}
	if n := h.c.writers.size(); n != 0 {
		t.Errorf("the writers hold %d objects once a later own write was seen; want 0", n)
		for k, l := range h.c.writers.objects {
			t.Logf("DEBUG %v %+v", k, *l)
		}
	}
	for _, e := range h.events() {
		if strings.HasPrefix(e, "Warning ManagedByAnotherController") {
			t.Errorf("the process's own write reported as another controller's: %q", e)
		}
	}
}

// newLeaderListing starts a new controller, as a new leader, whose first
// list holds obj as it was (older than the apiserver's copy).
func (h *harness) newLeaderListing(obj *autoscalingv1alpha1.CronFederatedHPA) {
	h.t.Helper()
	h.newController()
	if err := h.indexer.Update(obj); err != nil {
		h.t.Fatal(err)
	}
}

// recordedAs says whether the history records slot as applied and as
// failed.
func recordedAs(history autoscalingv1alpha1.ExecutionHistory, slot time.Time) (applied, failed bool) {
	applied = slices.ContainsFunc(history.SuccessfulExecutions, func(e autoscalingv1alpha1.SuccessfulExecution) bool { return timeOf(e.ScheduleTime).Equal(slot) })
	failed = slices.ContainsFunc(history.FailedExecutions, func(e autoscalingv1alpha1.FailedExecution) bool { return timeOf(e.ScheduleTime).Equal(slot) })
	return applied, failed
}

// Issue 26, seeds 502706 and 507454: a status write that records only a
// decision (a slot missed here) commits, but its answer is lost; its retry
// conflicts, and the object cannot be read then. A sync that planned again
// from the cache, still older than that write, would decide the slot again
// at a new time, and a failed write of that second decision would keep it
// in memory, to be written over the first record once the cache caught up.
// Until the object is read or the cache shows a newer version, the sync
// decides nothing.
func TestLostDecisionIsNotMadeAgainFromAStaleCache(t *testing.T) {
	r := rule("r", "*/5 * * * *", 10)
	r.MaxDelaySeconds = ptr.To[int32](30)
	h := newHarness(t, utc("2024-05-01 07:59:59"), cron("c", r))
	h.scales.set("deployments", "web", 1)
	h.syncAt(utc("2024-05-01 07:59:59"), "c")
	h.events()

	h.loseStatusWriteAnswers(1, apierrors.NewInternalError(errEtcdTimeout), nil)
	if _, err := h.trySyncAt(utc("2024-05-01 08:01:00"), "c"); err == nil {
		t.Fatal("the status write whose answer was lost did not fail")
	}
	first := h.history("c", "r")
	if len(first.FailedExecutions) != 1 {
		t.Fatalf("08:00 not recorded missed by the write whose answer was lost: %+v", first)
	}

	unreadable := false
	h.client.PrependReactor("get", "cronfederatedhpas", func(clienttesting.Action) (bool, runtime.Object, error) {
		return unreadable, nil, apierrors.NewInternalError(errEtcdTimeout)
	})
	failWrites := false
	h.client.PrependReactor("update", "cronfederatedhpas", func(action clienttesting.Action) (bool, runtime.Object, error) {
		return failWrites && action.GetSubresource() == "status", nil, apierrors.NewInternalError(errEtcdTimeout)
	})
	unreadable = true
	// The retry conflicts (the cache is older than the write), and the
	// object cannot be read after it.
	writes := h.statusWrites()
	if _, err := h.trySyncAt(utc("2024-05-01 08:01:01"), "c"); err == nil || h.statusWrites() != writes+1 {
		t.Fatalf("the retry with the cache's older resourceVersion was not refused: %v", err)
	}
	// The next sync still cannot read it, and a status write fails.
	failWrites = true
	_, _ = h.trySyncAt(utc("2024-05-01 08:01:02"), "c")
	unreadable, failWrites = false, false
	h.refresh() // the watch delivers the write whose answer was lost
	h.syncAt(utc("2024-05-01 08:01:03"), "c")
	h.drainRecords()

	got := h.history("c", "r")
	if !reflect.DeepEqual(got.FailedExecutions, first.FailedExecutions) {
		t.Errorf("08:00 recorded again: %+v; want the first record kept: %+v", got.FailedExecutions, first.FailedExecutions)
	}
	missed := 0
	for _, e := range h.events() {
		if strings.HasPrefix(e, "Warning MissedSchedule") {
			missed++
		}
	}
	if missed > 1 {
		t.Errorf("08:00 reported missed %d times; want once", missed)
	}
}

// Issue 26, seed 1002879: a status write that was stored though its answer
// was lost stays this process's own however often a later status is
// retried before the watch shows it. In a flaky period each failed attempt
// may have been stored too, and kept apart, the attempts of one retried
// status pushed the stored write out of the bounded list, which then was
// reported as another controller's.
func TestLostStatusWriteStaysOwnThroughManyRetries(t *testing.T) {
	started := utc("2024-05-01 07:00:00")
	key := cache.ObjectName{Namespace: ns, Name: "c"}
	stored := autoscalingv1alpha1.CronFederatedHPAStatus{ExecutionHistories: []autoscalingv1alpha1.ExecutionHistory{{
		RuleName: "r", NextExecutionTime: &metav1.Time{Time: utc("2024-05-01 08:05:00")},
	}}}
	retried := *stored.DeepCopy()
	retried.ExecutionHistories[0].NextExecutionTime = &metav1.Time{Time: utc("2024-05-01 08:10:00")}

	w := newStatusWriters()
	w.unacknowledged(key, stored)
	for range 3 * maxOwnWrites {
		w.unacknowledged(key, retried)
	}
	obj := cron("c", rule("r", "*/5 * * * *", 10))
	obj.Status = stored
	obj.ManagedFields = cronStatusEntry("2024-05-01 08:00:01")
	w.saw(key, obj)
	if others := w.others(key, processStart{at: started}); len(others) > 0 {
		t.Errorf("the stored write whose answer was lost was taken for %v's", others)
	}
}

// cronStatusEntry is the managedFields entry of a status write of the
// cron-scaler at the time given.
func cronStatusEntry(at string) []metav1.ManagedFieldsEntry {
	return []metav1.ManagedFieldsEntry{{
		Manager: FieldManager, Operation: metav1.ManagedFieldsOperationUpdate, Subresource: "status",
		Time: &metav1.Time{Time: utc(at)},
	}}
}

// A status that flip-flops while its writes lose their answers: A is
// stored, then B, and a retry of A is not. The watch shows A, then B. A's
// retry came after B, but its first attempt before: showing A says nothing
// of B, which is still to come and is this process's own. Keeping only A's
// latest attempt, B looked older than A and was forgotten when A was shown,
// then reported as another controller's.
func TestLostStatusWritesThatFlipFlopStayOwn(t *testing.T) {
	started := utc("2024-05-01 07:00:00")
	key := cache.ObjectName{Namespace: ns, Name: "c"}
	status := func(next string) autoscalingv1alpha1.CronFederatedHPAStatus {
		return autoscalingv1alpha1.CronFederatedHPAStatus{ExecutionHistories: []autoscalingv1alpha1.ExecutionHistory{{
			RuleName: "r", NextExecutionTime: &metav1.Time{Time: utc(next)},
		}}}
	}
	a, b := status("2024-05-01 08:05:00"), status("2024-05-01 08:10:00")

	w := newStatusWriters()
	w.unacknowledged(key, a)
	w.unacknowledged(key, b)
	w.unacknowledged(key, a)
	for i, st := range []autoscalingv1alpha1.CronFederatedHPAStatus{a, b} {
		obj := cron("c", rule("r", "*/5 * * * *", 10))
		obj.ResourceVersion = strconv.Itoa(10 + i)
		obj.Status = st
		obj.ManagedFields = cronStatusEntry("2024-05-01 08:00:01")
		w.saw(key, obj)
		if others := w.others(key, processStart{at: started}); len(others) > 0 {
			t.Errorf("stored write %d of 2, whose answer was lost, was taken for %v's", i+1, others)
		}
	}
}
