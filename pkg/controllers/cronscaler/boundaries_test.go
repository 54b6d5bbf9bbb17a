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

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/component-base/metrics/testutil"
	"k8s.io/utils/ptr"

	autoscalingv1alpha1 "github.com/scaleplane/scaleplane/pkg/apis/autoscaling/v1alpha1"
)

// The edges of the doc's promises, each one second or one comparison wide:
// the simulator's random times seldom land on them (issue 36, "the net,
// checked": each test here fails on a single-line breakage that every fixed
// seed passed).

// docs/cron-scaler.md, "Two cron controllers": a status write of the
// cron-scaler's own field manager timed (in managedFields, whole seconds) no
// later than the second this process started is its predecessor's. A new
// leader that starts in the very second of its predecessor's last status
// write, with a first list that missed it, is not told of a second
// controller when the watch delivers it; a write of that field manager in
// the next second is another process's, and is reported.
func TestPredecessorStatusWriteInTheStartSecondIsNotAnotherController(t *testing.T) {
	h := newHarness(t, utc("2024-05-01 07:59:59"), cron("c", rule("r", "0 8 * * *", 10)))
	h.scales.set("deployments", "web", 1)
	h.syncAt(utc("2024-05-01 07:59:59"), "c")
	before := h.get("c")
	h.syncAt(utc("2024-05-01 08:00:00.100"), "c") // the predecessor applies and records 08:00, timed 08:00:00
	h.events()
	// The successor starts in the same second; its first list missed the
	// predecessor's last status write, which the watch then delivers.
	h.clock.SetTime(utc("2024-05-01 08:00:00.600"))
	h.newLeaderListing(before)
	h.refresh()
	h.c.onUpdate(h.ctx, before, h.get("c"))
	counted := func() float64 {
		v, _ := testutil.GetCounterMetricValue(foreignStatusWrites.WithLabelValues(FieldManager))
		return v
	}
	start := counted()
	h.syncAt(utc("2024-05-01 08:00:00.700"), "c")
	for _, e := range h.events() {
		if strings.HasPrefix(e, "Warning ManagedByAnotherController") {
			t.Errorf("the predecessor's status write in the second this process started reported as another controller's: %q", e)
		}
	}
	if got := counted() - start; got != 0 {
		t.Errorf("foreign status writes counted %v; want 0", got)
	}

	// The same field manager writing in the next second is not the
	// predecessor: a second scaleplane.
	h.clock.SetTime(utc("2024-05-01 08:00:01.000"))
	h.writeStatusAs(FieldManager, "c", func(o *autoscalingv1alpha1.CronFederatedHPA) {
		o.Status.ExecutionHistories[0].FailedExecutions = []autoscalingv1alpha1.FailedExecution{{
			ScheduleTime: metaTime(utc("2024-05-01 08:00:00")), ExecutionTime: metaTime(utc("2024-05-01 08:00:01")), Message: "also ran",
		}}
	})
	h.syncAt(utc("2024-05-01 08:00:01.100"), "c")
	h.expectEvent("Warning ManagedByAnotherController Status was written by " + FieldManager + " from another process")
}

// docs/cron-scaler.md, "When a firing runs": a firing missed while the
// controller was down runs when it comes back if it is at most
// maxDelaySeconds late. Found exactly maxDelaySeconds late, it runs; a
// millisecond later, it is recorded missed.
func TestSlotFoundExactlyMaxDelaySecondsLateRuns(t *testing.T) {
	for _, tc := range []struct {
		found string
		runs  bool
	}{
		{"2024-05-01 08:00:30.000", true},
		{"2024-05-01 08:00:30.001", false},
	} {
		t.Run(tc.found, func(t *testing.T) {
			r := rule("r", "0 8 * * *", 10)
			r.MaxDelaySeconds = ptr.To[int32](30)
			h := newHarness(t, utc("2024-05-01 07:00:00"), cron("c", r))
			h.scales.set("deployments", "web", 1)
			h.syncAt(utc("2024-05-01 07:00:00"), "c")
			// Down from 07:00 until the slot is found.
			h.clock.SetTime(utc(tc.found))
			h.newController()
			h.syncAt(utc(tc.found), "c")
			applied, failed := recordedAs(h.history("c", "r"), utc("2024-05-01 08:00:00"))
			if got := h.scales.get("deployments", "web"); tc.runs && (got != 10 || !applied || failed) {
				t.Errorf("08:00 found at %s (maxDelaySeconds 30): replicas %d, recorded applied %v, failed %v; want 10, applied", tc.found, got, applied, failed)
			}
			if got := h.scales.get("deployments", "web"); !tc.runs && (got != 1 || applied || !failed) {
				t.Errorf("08:00 found at %s (maxDelaySeconds 30): replicas %d, recorded applied %v, failed %v; want 1, missed", tc.found, got, applied, failed)
			}
		})
	}
}

// docs/cron-scaler.md, the crash window: a field another manager changed
// through the object at or after the slot is not written back, and
// managedFields keep seconds, so a change in the slot's own second counts as
// after it. On a Deployment (written through /scale, its managedFields read
// as metadata): the predecessor applied 08:00 at 08:00:00.100 and died
// before recording it, kubectl edit set replicas at 08:00:00.600; the
// successor must not set them back.
func TestInheritedFiringKeepsAChangeInTheSlotsOwnSecond(t *testing.T) {
	h := crashAfterTargetWrite(t, projectSchema)
	h.clock.SetTime(utc("2024-05-01 08:00:00.600"))
	h.scales.scaleBy("kubectl-edit", "", "deployments", "web", 3)
	h.clock.SetTime(utc("2024-05-01 08:00:04"))
	h.newController()
	h.syncAt(utc("2024-05-01 08:00:05"), "c")
	if got := h.scales.get("deployments", "web"); got != 3 {
		t.Errorf("replicas = %d; the successor undid kubectl edit's change made in the slot's second", got)
	}
	hist := h.history("c", "r")
	if len(hist.FailedExecutions) != 1 || !strings.Contains(hist.FailedExecutions[0].Message, "spec.replicas changed by kubectl-edit at 2024-05-01T08:00:00Z") {
		t.Errorf("failed executions %+v; want 08:00 recorded as not applied again, naming kubectl-edit", hist.FailedExecutions)
	}
	h.expectEvent(`Warning NotReapplied Rule "r" (scheduled 2024-05-01T08:00:00Z): not applied`)
}

// docs/cron-scaler.md, "When a firing runs": a target write that fails for
// a transient reason is retried until the firing's deadline. An etcd
// timeout (a 504: the write may have been stored) is such a reason: the slot
// is not recorded failed at the first answer, and runs at the next attempt
// once the apiserver answers.
func TestEtcdTimeoutIsRetriedNotRecordedFailed(t *testing.T) {
	h := newHarness(t, utc("2024-05-01 07:59:59"), cron("c", rule("r", "0 8 * * *", 10)))
	h.scales.set("deployments", "web", 1)
	h.syncAt(utc("2024-05-01 07:59:59"), "c")
	h.scales.failWith(apierrors.NewTimeoutError("etcdserver: request timed out", 0))
	d := h.syncAt(utc("2024-05-01 08:00:00.010"), "c")
	if applied, failed := recordedAs(h.history("c", "r"), utc("2024-05-01 08:00:00")); applied || failed {
		t.Fatalf("08:00 recorded applied %v, failed %v after an etcd timeout; want neither: it is retried", applied, failed)
	}
	if got := timeOf(h.history("c", "r").NextExecutionTime); !got.Equal(utc("2024-05-01 08:00:00")) {
		t.Errorf("while retrying, next = %v; want 08:00, the slot still to run", got)
	}
	h.scales.failWith(nil)
	h.syncAt(utc("2024-05-01 08:00:00.010").Add(d), "c")
	applied, failed := recordedAs(h.history("c", "r"), utc("2024-05-01 08:00:00"))
	if got := h.scales.get("deployments", "web"); got != 10 || !applied || failed {
		t.Errorf("after the retry: replicas %d, 08:00 recorded applied %v, failed %v; want 10, applied", got, applied, failed)
	}
}
