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

	"k8s.io/utils/ptr"

	autoscalingv1alpha1 "github.com/scaleplane/scaleplane/pkg/apis/autoscaling/v1alpha1"
)

// Tests of pieces of the cron-scaler's plan state that TestSim's fixed seeds
// do not need (docs/architecture.md, "The cron-scaler's plan state"): each
// fails without its piece.

// The event handlers' replan mark of a rule (resumed, rescheduled, added)
// holds the one rule of docs/cron-scaler.md that planning from managedFields
// alone would not: a change the watch delivers more than an hour after its
// managedFields time says that the apiserver's clock and the controller's are
// apart, and is planned from when the controller saw it. Here the
// apiserver's clock is two hours behind: a rule suspended at 05:10 and
// resumed at what the apiserver calls 06:20 is seen resumed at 08:20. The
// 07:00 and 08:00 slots came while it was suspended, as far as this
// controller can tell: neither runs, nor is recorded missed. Planned from
// the managedFields time (06:20) instead, 07:00 would be recorded missed
// and 08:00 applied (see docs/architecture.md, "The cron-scaler's plan
// state").
func TestResumeSeenAnHourAfterItsManagedFieldsTimeIsPlannedFromWhenSeen(t *testing.T) {
	h := newHarness(t, utc("2024-05-01 05:00:00"), cron("c", rule("r", "0 * * * *", 10)))
	h.scales.set("deployments", "web", 1)
	h.syncAt(utc("2024-05-01 05:00:30"), "c")
	h.clock.SetTime(utc("2024-05-01 05:10:00"))
	h.update("c", func(c *autoscalingv1alpha1.CronFederatedHPA) { c.Spec.Rules[0].Suspend = ptr.To(true) })
	h.syncAt(utc("2024-05-01 05:10:00"), "c")

	old := h.get("c")
	h.clock.SetTime(utc("2024-05-01 06:20:00")) // the apiserver's clock, for managedFields
	updated := h.edit("c", func(c *autoscalingv1alpha1.CronFederatedHPA) { c.Spec.Rules[0].Suspend = ptr.To(false) })
	h.clock.SetTime(utc("2024-05-01 08:20:00"))
	h.c.onUpdate(h.ctx, old, updated)
	h.syncAt(utc("2024-05-01 08:20:00"), "c")

	if got := h.scales.get("deployments", "web"); got != 1 {
		t.Errorf("web replicas = %d; want 1: 08:00 came while the rule was suspended, as this controller saw it", got)
	}
	hist := h.history("c", "r")
	if len(hist.FailedExecutions) != 0 || len(hist.SuccessfulExecutions) != 0 {
		t.Errorf("history %+v; want no execution: nothing was due since the resume", hist)
	}
	if got := timeOf(hist.NextExecutionTime); !got.Equal(utc("2024-05-01 09:00:00")) {
		t.Errorf("next = %v; want 09:00", got)
	}
}

// Latest wins across objects inside the watch lag: the cross-object
// decision reads another object's status merged with what this process
// wrote of it and the cache does not show yet (memory.peek), not the cache
// alone. Here "late" applies its 08:30 slot (maxDelaySeconds 30) at
// 08:30:10, and the cache has not shown that status write when "early",
// down since 07:55 too, is synced at 08:31: from the cache, late's 08:30 is
// neither applied nor due any more (past its maxDelaySeconds), and early's
// 08:00 would set the replicas back to 10 (issue 26, case 7). From what this
// process wrote, it is superseded (see docs/architecture.md, "The
// cron-scaler's plan state").
func TestLatestSlotWinsAcrossObjectsInsideTheWatchLag(t *testing.T) {
	late := rule("r", "30 8 * * *", 20)
	late.MaxDelaySeconds = ptr.To[int32](30)
	h := newHarness(t, utc("2024-05-01 07:55:00"), cron("early", rule("r", "0 8 * * *", 10)), cron("late", late))
	h.scales.set("deployments", "web", 1)
	h.syncAt(utc("2024-05-01 07:55:00"), "early")
	h.syncAt(utc("2024-05-01 07:55:00"), "late")
	h.clock.SetTime(utc("2024-05-01 08:30:10"))
	h.newController()
	if _, err := h.trySyncAt(utc("2024-05-01 08:30:10"), "late"); err != nil {
		t.Fatal(err)
	}
	// The cache has not shown late's status write.
	if _, err := h.trySyncAt(utc("2024-05-01 08:31:00"), "early"); err != nil {
		t.Fatal(err)
	}
	if got := h.scales.get("deployments", "web"); got != 20 {
		t.Errorf("replicas = %d; want 20, the 08:30 slot's", got)
	}
	early := h.history("early", "r")
	if len(early.SuccessfulExecutions) != 0 || len(early.FailedExecutions) != 1 {
		t.Errorf("early: %+v; want 08:00 recorded as superseded by late's 08:30", early)
	}
}
