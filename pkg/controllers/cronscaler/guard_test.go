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

// The tests of telling the cron-scaler's status writes from others': another
// controller writing status is reported (and the writes compared are then
// forgotten), a predecessor's write is not, a first list older than the
// predecessor's record does not write over it, and a second scaleplane is
// reported. The writes whose answer is lost are in
// guard_lostanswers_test.go.

import (
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/component-base/metrics/testutil"
	"k8s.io/utils/ptr"

	autoscalingv1alpha1 "github.com/scaleplane/scaleplane/pkg/apis/autoscaling/v1alpha1"
)

// writeStatusAs writes the object's status as manager would, and tells the
// controller, as the informer would.
func (h *harness) writeStatusAs(manager, name string, change func(*autoscalingv1alpha1.CronFederatedHPA)) {
	h.t.Helper()
	old := h.get(name)
	updated := old.DeepCopy()
	change(updated)
	stored, err := h.client.AutoscalingV1alpha1().CronFederatedHPAs(ns).UpdateStatus(h.ctx, updated, metav1.UpdateOptions{FieldManager: manager})
	if err != nil {
		h.t.Fatal(err)
	}
	h.refresh()
	h.c.onUpdate(h.ctx, old, stored)
}

// Issue 16's guard: a status change this process did not make is another
// cron controller (Karmada's, switched back on by an installer's upgrade):
// a Warning event naming it, once per writer and interval, a metric for
// every such write, and the controller's own writes never count.
func TestAnotherStatusWriterIsReported(t *testing.T) {
	forEachSchema(t, func(t *testing.T, crd schemaVariant) {
		h := newHarnessOn(t, crd, utc("2024-05-01 07:00:00"), cron("c", rule("r", "0 8 * * *", 10)))
		h.scales.set("deployments", "web", 1)
		before := h.get("c")
		h.syncAt(utc("2024-05-01 07:00:00"), "c")
		// The informer shows the controller's own write.
		h.c.onUpdate(h.ctx, before, h.get("c"))
		h.syncAt(utc("2024-05-01 07:00:01"), "c")
		if events := h.events(); len(events) != 0 {
			t.Fatalf("events %q for the controller's own status write; want none", events)
		}

		counted := func() float64 {
			v, _ := testutil.GetCounterMetricValue(foreignStatusWrites.WithLabelValues("karmada-controller-manager"))
			return v
		}
		start := counted()
		// Karmada's controller records the 08:00 slot too.
		h.clock.SetTime(utc("2024-05-01 08:00:00.300"))
		h.writeStatusAs("karmada-controller-manager", "c", func(o *autoscalingv1alpha1.CronFederatedHPA) {
			o.Status.ExecutionHistories[0].SuccessfulExecutions = []autoscalingv1alpha1.SuccessfulExecution{{
				ScheduleTime: metaTime(utc("2024-05-01 08:00:00")), ExecutionTime: metaTime(utc("2024-05-01 08:00:00")),
			}}
		})
		h.syncAt(utc("2024-05-01 08:00:00.400"), "c")
		var warned []string
		for _, e := range h.events() {
			if strings.HasPrefix(e, "Warning ManagedByAnotherController") {
				warned = append(warned, e)
			}
		}
		if len(warned) != 1 || !strings.Contains(warned[0], "karmada-controller-manager") {
			t.Errorf("events %q; want one ManagedByAnotherController Warning naming karmada-controller-manager", warned)
		}
		if got := counted() - start; got != 1 {
			t.Errorf("foreign status writes counted %v; want 1", got)
		}

		// Again soon after: counted, not another event.
		h.clock.SetTime(utc("2024-05-01 08:01:00"))
		h.writeStatusAs("karmada-controller-manager", "c", func(o *autoscalingv1alpha1.CronFederatedHPA) {
			o.Status.ExecutionHistories[0].NextExecutionTime = metaTime(utc("2024-05-03 08:00:00"))
		})
		h.syncAt(utc("2024-05-01 08:01:01"), "c")
		for _, e := range h.events() {
			if strings.HasPrefix(e, "Warning ManagedByAnotherController") {
				t.Errorf("a second event within the interval: %q", e)
			}
		}
		if got := counted() - start; got != 2 {
			t.Errorf("foreign status writes counted %v; want 2", got)
		}
	})
}

// Issue 21: once the informer showed the controller's own status write and a
// sync compared it, nothing is kept for the object (at 100,000 objects an
// entry each was megabytes); one that saw another writer keeps when it was
// reported.
func TestStatusWritersForgetComparedWrites(t *testing.T) {
	h := newHarness(t, utc("2024-05-01 07:00:00"), cron("c", rule("r", "0 8 * * *", 10)), cron("d", rule("r", "0 8 * * *", 10)))
	h.scales.set("deployments", "web", 1)
	for _, name := range []string{"c", "d"} {
		before := h.get(name)
		h.syncAt(utc("2024-05-01 07:00:00"), name)
		h.c.onUpdate(h.ctx, before, h.get(name))
		h.syncAt(utc("2024-05-01 07:00:01"), name)
	}
	if n := h.c.writers.size(); n != 0 {
		t.Errorf("the writers hold %d objects after their own writes were compared; want 0", n)
	}
	if n := h.c.memory.size(); n != 0 {
		t.Errorf("memory holds %d objects; want 0", n)
	}

	h.writeStatusAs("karmada-controller-manager", "d", func(o *autoscalingv1alpha1.CronFederatedHPA) {
		o.Status.ExecutionHistories[0].NextExecutionTime = metaTime(utc("2024-05-03 08:00:00"))
	})
	h.syncAt(utc("2024-05-01 07:00:02"), "d")
	if n := h.c.writers.size(); n != 1 {
		t.Errorf("the writers hold %d objects after another writer was reported; want 1 (when it was reported)", n)
	}
}

// size is the number of objects the writers hold.
func (w *statusWriters) size() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.objects)
}

// Issue 26, case 5: a new leader whose first list is older than its
// predecessor's last status write sees that write come in by the watch. The
// predecessor is the same field manager and wrote before this process
// started: it is not a second controller, and is not reported as one.
func TestPredecessorStatusWriteIsNotAnotherController(t *testing.T) {
	h := newHarness(t, utc("2024-05-01 07:59:59"), cron("c", rule("r", "0 8 * * *", 10)))
	h.scales.set("deployments", "web", 1)
	h.syncAt(utc("2024-05-01 07:59:59"), "c")
	before := h.get("c")
	h.syncAt(utc("2024-05-01 08:00:00.100"), "c") // the predecessor applies and records 08:00
	h.clock.SetTime(utc("2024-05-01 08:00:01"))
	// The new leader's first list missed the predecessor's last status
	// write; the watch delivers it.
	h.newLeaderListing(before)
	h.refresh()
	h.c.onUpdate(h.ctx, before, h.get("c"))
	counted := func() float64 {
		v, _ := testutil.GetCounterMetricValue(foreignStatusWrites.WithLabelValues(FieldManager))
		return v
	}
	start := counted()
	h.syncAt(utc("2024-05-01 08:00:02"), "c")
	for _, e := range h.events() {
		if strings.HasPrefix(e, "Warning ManagedByAnotherController") {
			t.Errorf("the predecessor's status write reported as another controller's: %q", e)
		}
	}
	if got := counted() - start; got != 0 {
		t.Errorf("foreign status writes counted %v; want 0", got)
	}
}

// Issue 26, seed 204865: a new leader whose first list is older than its
// predecessor's last status write plans from that older status, finds the
// slot the predecessor applied and recorded more than maxDelaySeconds late,
// and records it missed. Here the read made to check the first list (see
// readBeforeInherited) gets no answer, so the decision is made from the older status;
// its status write conflicts (the cache is behind), and that decision must
// not be kept and written once the cache catches up: the slot would then be
// recorded both applied and missed, and the predecessor's record of it
// lost. The retry plans again from the newer status.
func TestStaleFirstListMissIsNotWrittenOverPredecessorsRecord(t *testing.T) {
	r := rule("r", "*/5 * * * *", 10)
	r.MaxDelaySeconds = ptr.To[int32](30)
	h := newHarness(t, utc("2024-05-01 07:59:59"), cron("c", r))
	h.scales.set("deployments", "web", 1)
	h.syncAt(utc("2024-05-01 07:59:59"), "c")
	before := h.get("c")
	h.syncAt(utc("2024-05-01 08:00:00.010"), "c") // the predecessor applies and records 08:00
	if got := h.history("c", "r"); len(got.SuccessfulExecutions) != 1 {
		t.Fatalf("the predecessor did not record 08:00 as applied: %+v", got)
	}
	h.events()
	h.clock.SetTime(utc("2024-05-01 08:00:31"))
	// The new leader's first list missed the predecessor's last status
	// write.
	h.newLeaderListing(before)
	unanswered := 1
	h.client.PrependReactor("get", "cronfederatedhpas", func(clienttesting.Action) (bool, runtime.Object, error) {
		if unanswered == 0 {
			return false, nil, nil
		}
		unanswered--
		return true, nil, apiserverDown
	})
	if _, err := h.trySyncAt(utc("2024-05-01 08:00:31"), "c"); err == nil {
		t.Fatal("a status write with the older resourceVersion did not conflict")
	}
	h.refresh() // the watch delivers the predecessor's write
	h.syncAt(utc("2024-05-01 08:00:32"), "c")

	got := h.history("c", "r")
	applied, failed := recordedAs(got, utc("2024-05-01 08:00:00"))
	if !applied || failed {
		t.Errorf("08:00 recorded applied %v, failed %v; want applied only: %+v", applied, failed, got)
	}
	if next := timeOf(got.NextExecutionTime); !next.Equal(utc("2024-05-01 08:05:00")) {
		t.Errorf("next execution %v; want 08:05", next)
	}
}

// The same stale first list, with another rule of the object due in the
// new leader's first sync: that sync applies a firing, so its histories are
// kept whatever their status write is answered, and the slot found late from
// the older status must not be among them. A slot found late that came
// before the process started is decided from a fresh read, as an inherited
// firing is.
func TestStaleFirstListMissBesideAFiringIsNotWrittenOverPredecessorsRecord(t *testing.T) {
	a := rule("a", "*/5 * * * *", 10)
	a.MaxDelaySeconds = ptr.To[int32](30)
	b := rule("b", "1 8 * * *", 20)
	obj := cron("c", a, b)
	h := newHarness(t, utc("2024-05-01 07:59:59"), obj)
	h.scales.set("deployments", "web", 1)
	h.syncAt(utc("2024-05-01 07:59:59"), "c")
	before := h.get("c")
	h.syncAt(utc("2024-05-01 08:00:00.010"), "c") // the predecessor applies and records a's 08:00
	h.events()
	h.clock.SetTime(utc("2024-05-01 08:00:59.500"))
	h.newLeaderListing(before)
	// b's 08:01 is due in the first sync, a's 08:00 is 60 s late.
	_, _ = h.trySyncAt(utc("2024-05-01 08:01:00.010"), "c")
	h.refresh()
	h.syncAt(utc("2024-05-01 08:01:00.020"), "c")
	h.drainRecords()
	h.refresh()

	got := h.history("c", "a")
	applied, failed := recordedAs(got, utc("2024-05-01 08:00:00"))
	if !applied || failed {
		t.Errorf("a's 08:00 recorded applied %v, failed %v; want applied only: %+v", applied, failed, got)
	}
	if hb := h.history("c", "b"); len(hb.SuccessfulExecutions) != 1 || !timeOf(hb.SuccessfulExecutions[0].ScheduleTime).Equal(utc("2024-05-01 08:01:00")) {
		t.Errorf("b's 08:01 not recorded applied once: %+v", hb)
	}
}

// A second scaleplane (the same field manager, a Lease of its own) writing
// after this process started is still reported.
func TestSecondScaleplaneIsReported(t *testing.T) {
	h := newHarness(t, utc("2024-05-01 07:00:00"), cron("c", rule("r", "0 8 * * *", 10)))
	h.scales.set("deployments", "web", 1)
	before := h.get("c")
	h.syncAt(utc("2024-05-01 07:00:00"), "c")
	h.c.onUpdate(h.ctx, before, h.get("c"))
	h.syncAt(utc("2024-05-01 07:00:01"), "c")
	h.clock.SetTime(utc("2024-05-01 08:00:00.300"))
	h.writeStatusAs(FieldManager, "c", func(o *autoscalingv1alpha1.CronFederatedHPA) {
		o.Status.ExecutionHistories[0].SuccessfulExecutions = []autoscalingv1alpha1.SuccessfulExecution{{
			ScheduleTime: metaTime(utc("2024-05-01 08:00:00")), ExecutionTime: metaTime(utc("2024-05-01 08:00:00")),
		}}
	})
	h.syncAt(utc("2024-05-01 08:00:00.400"), "c")
	h.expectEvent("Warning ManagedByAnotherController Status was written by " + FieldManager + " from another process")
}

// Issue 36, seed 10007590 of -sim.edges -sim.model: another controller
// writes status in the second a new leader started and made its own first
// status write. managedFields keep seconds, so the newest status entry is a
// tie; taken for the cron-scaler's own, in the start second, the write
// counted as the predecessor's and was not reported. The other manager is
// named, whatever the order of the entries (the apiserver sorts one
// second's entries by manager name), also in the cache.
func TestAnotherWriterInTheStartSecondOfOwnWriteIsReported(t *testing.T) {
	h := newHarness(t, utc("2024-03-31 08:59:13.369"), cron("c", rule("r", "*/7 * * * *", 10)))
	h.scales.set("deployments", "web", 1)
	before := h.get("c")
	h.syncAt(utc("2024-03-31 08:59:13.369"), "c")
	h.c.onUpdate(h.ctx, before, h.get("c"))
	h.syncAt(utc("2024-03-31 08:59:13.400"), "c")
	h.events()
	h.clock.SetTime(utc("2024-03-31 08:59:13.838"))
	h.writeStatusAs("karmada-controller-manager", "c", func(o *autoscalingv1alpha1.CronFederatedHPA) {
		o.Status.ExecutionHistories[0].NextExecutionTime = metaTime(utc("2024-03-31 09:07:00"))
	})
	stored := h.get("c")
	h.syncAt(utc("2024-03-31 08:59:14.449"), "c")
	h.expectEvent("Warning ManagedByAnotherController Status was written by karmada-controller-manager,")
	for _, reversed := range []bool{false, true} {
		obj := stored.DeepCopy()
		if reversed {
			slices.Reverse(obj.ManagedFields)
		}
		if m, _ := timelineOf(obj).newestStatusWrite(); m != "karmada-controller-manager" {
			t.Errorf("entries reversed %v: newest status write by %q; want karmada-controller-manager", reversed, m)
		}
		out, _ := stripForCache(obj)
		cached, _ := cronOf(out)
		if m, _ := timelineOf(cached).newestStatusWrite(); m != "karmada-controller-manager" {
			t.Errorf("entries reversed %v: newest status write of the cached object by %q; want karmada-controller-manager", reversed, m)
		}
	}
}

// A watch that relists (after 410 Gone) delivers the latest state only: a
// status write of this process and a later change of the object that is not
// status (a label, say) come as one change, at a resourceVersion this
// process never got back. That is its own write, not a second controller's
// (found by the simulator's relist model, seed 4000053).
func TestOwnWriteMergedByARelistIsNotAnotherController(t *testing.T) {
	w := newStatusWriters()
	key := cache.ObjectName{Namespace: "ns", Name: "c"}
	written := autoscalingv1alpha1.CronFederatedHPAStatus{ExecutionHistories: []autoscalingv1alpha1.ExecutionHistory{{RuleName: "r"}}}
	w.wrote(key, "115", written)
	merged := &autoscalingv1alpha1.CronFederatedHPA{ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "ns", ResourceVersion: "116", Labels: map[string]string{"team": "a"},
		ManagedFields: []metav1.ManagedFieldsEntry{{Manager: FieldManager, Operation: metav1.ManagedFieldsOperationUpdate, Subresource: "status", Time: ptr.To(metav1.Now())}}}}
	merged.Status = *written.DeepCopy()
	w.saw(key, merged)
	if got := w.others(key, processStart{at: time.Now().Add(-time.Hour)}); len(got) != 0 {
		t.Errorf("own write merged by a relist reported as %v", got)
	}
	if n := w.size(); n != 0 {
		t.Errorf("the writers hold %d objects after the merged write was compared; want 0", n)
	}
	// Another status at that resourceVersion is someone else's.
	w.wrote(key, "117", written)
	other := merged.DeepCopy()
	other.ResourceVersion = "118"
	other.Status.ExecutionHistories[0].RuleName = "x"
	w.saw(key, other)
	if got := w.others(key, processStart{at: time.Now().Add(-time.Hour)}); len(got) != 1 {
		t.Errorf("a different status at an unknown resourceVersion: %v, want it reported", got)
	}
}
