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
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	autoscalingv1alpha1 "github.com/scaleplane/scaleplane/pkg/apis/autoscaling/v1alpha1"
	"github.com/scaleplane/scaleplane/pkg/cronplan"
)

// The proposal's example: schedule "3 * * * *"; seen first at 09:01 the rule
// is next at 09:03, and after firing at 09:03 next at 10:03; seen first at
// 09:04 it is next at 10:03.
func TestNextExecutionTimeProposal(t *testing.T) {
	forEachSchema(t, func(t *testing.T, crd schemaVariant) {
		for _, tc := range []struct {
			first, wantNext string
		}{
			{"2024-05-01 09:01:00", "2024-05-01 09:03:00"},
			{"2024-05-01 09:04:00", "2024-05-01 10:03:00"},
		} {
			h := newHarnessOn(t, crd, utc(tc.first), cron("c", rule("r", "3 * * * *", 5)))
			h.scales.set("deployments", "web", 1)
			d := h.syncAt(utc(tc.first), "c")
			if got := timeOf(h.history("c", "r").NextExecutionTime); !got.Equal(utc(tc.wantNext)) {
				t.Errorf("first sight at %s: next = %v; want %s", tc.first, got, tc.wantNext)
			}
			if want := utc(tc.wantNext).Sub(utc(tc.first)) + requeueSlack; d != want {
				t.Errorf("requeue after %v; want %v", d, want)
			}
			if h.scales.get("deployments", "web") != 1 {
				t.Errorf("first sight must not fire")
			}
		}

		h := newHarnessOn(t, crd, utc("2024-05-01 09:01:00"), cron("c", rule("r", "3 * * * *", 5)))
		h.scales.set("deployments", "web", 1)
		h.syncAt(utc("2024-05-01 09:01:00"), "c")
		d := h.syncAt(utc("2024-05-01 09:03:00.100"), "c")
		hist := h.history("c", "r")
		if got := timeOf(hist.NextExecutionTime); !got.Equal(utc("2024-05-01 10:03:00")) {
			t.Errorf("after firing: next = %v; want 10:03", got)
		}
		if got := cronplan.LastHandled(&hist); !got.Equal(utc("2024-05-01 09:03:00")) {
			t.Errorf("lastScheduleTime = %v; want 09:03", got)
		}
		if d != time.Hour-100*time.Millisecond+requeueSlack {
			t.Errorf("requeue after %v", d)
		}
		if got := h.scales.get("deployments", "web"); got != 5 {
			t.Errorf("replicas = %d; want 5", got)
		}
		if len(hist.SuccessfulExecutions) != 1 || *hist.SuccessfulExecutions[0].AppliedReplicas != 5 ||
			!hist.SuccessfulExecutions[0].ScheduleTime.Time.Equal(utc("2024-05-01 09:03:00")) {
			t.Errorf("successful executions = %+v", hist.SuccessfulExecutions)
		}
		h.expectEvent("Normal Scaled")
	})
}

// One status write per sync, whatever the number of rules, and none when
// nothing changed.
func TestOneStatusWritePerSync(t *testing.T) {
	forEachSchema(t, func(t *testing.T, crd schemaVariant) {
		h := newHarnessOn(t, crd, utc("2024-05-01 07:59:00"), cron("c",
			rule("a", "0 8 * * *", 2), rule("b", "0 8 * * *", 3), rule("d", "0 9 * * *", 4)))
		h.scales.set("deployments", "web", 1)
		h.syncAt(utc("2024-05-01 07:59:00"), "c")
		before := h.statusWrites()
		h.syncAt(utc("2024-05-01 08:00:00.100"), "c")
		if got := h.statusWrites() - before; got != 1 {
			t.Errorf("status writes = %d; want 1", got)
		}
		if h.scales.updateCount() != 1 {
			t.Errorf("target writes = %d; want 1", h.scales.updateCount())
		}
		before = h.statusWrites()
		h.syncAt(utc("2024-05-01 08:10:00"), "c")
		if got := h.statusWrites() - before; got != 0 {
			t.Errorf("status writes in a sync that fires nothing = %d; want 0", got)
		}
	})
}

func TestRuleLifecycle(t *testing.T) {
	forEachSchema(t, func(t *testing.T, crd schemaVariant) {
		h := newHarnessOn(t, crd, utc("2024-05-01 07:00:00"), cron("c", rule("up", "0 8 * * *", 10)))
		h.scales.set("deployments", "web", 1)
		h.syncAt(utc("2024-05-01 07:00:00"), "c")
		h.syncAt(utc("2024-05-01 08:00:00.100"), "c")
		if h.scales.get("deployments", "web") != 10 {
			t.Fatalf("rule did not fire")
		}

		// Add a rule: planned from now, the past is not replayed.
		h.update("c", func(c *autoscalingv1alpha1.CronFederatedHPA) {
			c.Spec.Rules = append(c.Spec.Rules, rule("down", "0 7 * * *", 1))
		})
		h.syncAt(utc("2024-05-01 08:01:00"), "c")
		if got := timeOf(h.history("c", "down").NextExecutionTime); !got.Equal(utc("2024-05-02 07:00:00")) {
			t.Errorf("added rule next = %v", got)
		}
		if h.scales.get("deployments", "web") != 10 {
			t.Errorf("adding a rule replayed its past")
		}

		// Change a schedule: re-planned from now.
		h.update("c", func(c *autoscalingv1alpha1.CronFederatedHPA) { c.Spec.Rules[1].Schedule = "30 8 * * *" })
		h.syncAt(utc("2024-05-01 08:02:00"), "c")
		if got := timeOf(h.history("c", "down").NextExecutionTime); !got.Equal(utc("2024-05-01 08:30:00")) {
			t.Errorf("changed rule next = %v", got)
		}
		h.syncAt(utc("2024-05-01 08:30:00.100"), "c")
		if h.scales.get("deployments", "web") != 1 {
			t.Errorf("changed rule did not fire at its new time")
		}

		// Rename a rule: the old history goes, the new name starts fresh.
		h.update("c", func(c *autoscalingv1alpha1.CronFederatedHPA) { c.Spec.Rules[0].Name = "morning" })
		h.syncAt(utc("2024-05-01 08:31:00"), "c")
		st := h.get("c").Status
		if _, ok := cronplan.FindHistory(&st, "up"); ok {
			t.Errorf("history of the renamed rule is kept: %+v", st)
		}
		if hist, _ := cronplan.FindHistory(&st, "morning"); len(hist.SuccessfulExecutions) != 0 || !cronplan.LastHandled(&hist).IsZero() {
			t.Errorf("renamed rule inherited history: %+v", hist)
		}

		// Delete a rule: its history goes.
		h.update("c", func(c *autoscalingv1alpha1.CronFederatedHPA) { c.Spec.Rules = c.Spec.Rules[:1] })
		h.syncAt(utc("2024-05-01 08:32:00"), "c")
		if st := h.get("c").Status; len(st.ExecutionHistories) != 1 || st.ExecutionHistories[0].RuleName != "morning" {
			t.Errorf("histories after deleting a rule = %+v", st.ExecutionHistories)
		}

		// Delete the object: sync is a no-op.
		if err := h.client.AutoscalingV1alpha1().CronFederatedHPAs(ns).Delete(h.ctx, "c", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		h.refresh()
		if d := h.syncAt(utc("2024-05-01 08:33:00"), "c"); d != 0 {
			t.Errorf("deleted object requeued after %v", d)
		}
	})
}

func TestSuspendAndResume(t *testing.T) {
	forEachSchema(t, func(t *testing.T, crd schemaVariant) {
		h := newHarnessOn(t, crd, utc("2024-05-01 07:00:00"), cron("c", rule("r", "0 * * * *", 10)))
		h.scales.set("deployments", "web", 1)
		h.syncAt(utc("2024-05-01 07:00:30"), "c")

		h.update("c", func(c *autoscalingv1alpha1.CronFederatedHPA) { c.Spec.Rules[0].Suspend = ptr.To(true) })
		if d := h.syncAt(utc("2024-05-01 07:10:00"), "c"); d != 0 {
			t.Errorf("suspended rule requeued after %v", d)
		}
		if n := h.history("c", "r").NextExecutionTime; n != nil {
			t.Errorf("suspended rule has nextExecutionTime %v", n)
		}
		h.syncAt(utc("2024-05-01 08:00:00.100"), "c")
		if h.scales.get("deployments", "web") != 1 {
			t.Errorf("suspended rule fired")
		}

		// Resumed at 08:20 with no maxDelaySeconds: 08:00 is still the latest
		// scheduled time, but it was skipped while suspended: not replayed.
		h.update("c", func(c *autoscalingv1alpha1.CronFederatedHPA) { c.Spec.Rules[0].Suspend = ptr.To(false) })
		h.syncAt(utc("2024-05-01 08:20:00"), "c")
		if h.scales.get("deployments", "web") != 1 {
			t.Errorf("resuming replayed a firing skipped while suspended")
		}
		hist := h.history("c", "r")
		if got := timeOf(hist.NextExecutionTime); !got.Equal(utc("2024-05-01 09:00:00")) {
			t.Errorf("resumed next = %v", got)
		}
		if len(hist.FailedExecutions) != 0 {
			t.Errorf("skipped firings recorded as failures: %+v", hist.FailedExecutions)
		}
		h.syncAt(utc("2024-05-01 09:00:00.100"), "c")
		if h.scales.get("deployments", "web") != 10 {
			t.Errorf("resumed rule did not fire")
		}
	})
}

// A resume the controller did not see (it was down) is still not replayed:
// the suspended sync cleared nextExecutionTime, which the new process plans
// from.
func TestResumeWhileDown(t *testing.T) {
	forEachSchema(t, func(t *testing.T, crd schemaVariant) {
		h := newHarnessOn(t, crd, utc("2024-05-01 07:00:00"), cron("c", rule("r", "0 * * * *", 10)))
		h.scales.set("deployments", "web", 1)
		h.syncAt(utc("2024-05-01 07:00:30"), "c")
		h.update("c", func(c *autoscalingv1alpha1.CronFederatedHPA) { c.Spec.Rules[0].Suspend = ptr.To(true) })
		h.syncAt(utc("2024-05-01 07:10:00"), "c")
		h.clock.SetTime(utc("2024-05-01 08:19:00"))
		h.update("c", func(c *autoscalingv1alpha1.CronFederatedHPA) { c.Spec.Rules[0].Suspend = nil })
		h.newController()
		h.syncAt(utc("2024-05-01 08:20:00"), "c")
		if h.scales.get("deployments", "web") != 1 {
			t.Errorf("resume seen after a restart replayed a skipped firing")
		}
	})
}

func TestTargetChangeReplans(t *testing.T) {
	forEachSchema(t, func(t *testing.T, crd schemaVariant) {
		obj := cron("c", rule("r", "0 8 * * *", 10))
		obj.Spec.Rules[0].MaxDelaySeconds = ptr.To[int32](3600)
		h := newHarnessOn(t, crd, utc("2024-05-01 07:00:00"), obj)
		h.scales.set("deployments", "web", 1)
		h.scales.set("statefulsets", "db", 1)
		h.syncAt(utc("2024-05-01 07:00:00"), "c")
		// 08:00 passes unseen (say, the API server was unreachable); at 08:05
		// the target changes: the old target's firing is not moved to the new one.
		h.clock.SetTime(utc("2024-05-01 08:05:00"))
		h.update("c", func(c *autoscalingv1alpha1.CronFederatedHPA) {
			c.Spec.ScaleTargetRef = autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "StatefulSet", Name: "db"}
		})
		h.syncAt(utc("2024-05-01 08:05:00"), "c")
		if h.scales.get("statefulsets", "db") != 1 || h.scales.get("deployments", "web") != 1 {
			t.Errorf("target change replayed a firing")
		}
		if got := timeOf(h.history("c", "r").NextExecutionTime); !got.Equal(utc("2024-05-02 08:00:00")) {
			t.Errorf("next after target change = %v", got)
		}
		h.syncAt(utc("2024-05-02 08:00:00.100"), "c")
		if h.scales.get("statefulsets", "db") != 10 {
			t.Errorf("new target not scaled")
		}
	})
}

func TestHistoryLimits(t *testing.T) {
	forEachSchema(t, func(t *testing.T, crd schemaVariant) {
		r := rule("r", "0 * * * *", 3)
		r.SuccessfulHistoryLimit = ptr.To[int32](2)
		h := newHarnessOn(t, crd, utc("2024-05-01 00:30:00"), cron("c", r))
		h.scales.set("deployments", "web", 1)
		h.syncAt(utc("2024-05-01 00:30:00"), "c")
		for hour := 1; hour <= 4; hour++ {
			h.syncAt(utc("2024-05-01 00:00:00.100").Add(time.Duration(hour)*time.Hour), "c")
		}
		hist := h.history("c", "r")
		if len(hist.SuccessfulExecutions) != 2 ||
			!hist.SuccessfulExecutions[0].ScheduleTime.Time.Equal(utc("2024-05-01 04:00:00")) ||
			!hist.SuccessfulExecutions[1].ScheduleTime.Time.Equal(utc("2024-05-01 03:00:00")) {
			t.Errorf("successful executions = %+v; want 04:00 and 03:00, newest first", hist.SuccessfulExecutions)
		}

		t.Run("failedHistoryLimit 0 keeps none and does not crash", func(t *testing.T) {
			r := rule("r", "0 * * * *", 3)
			r.FailedHistoryLimit = ptr.To[int32](0)
			h := newHarnessOn(t, crd, utc("2024-05-01 00:30:00"), cron("c", r))
			// No Deployment "web": every firing fails.
			h.syncAt(utc("2024-05-01 00:30:00"), "c")
			h.syncAt(utc("2024-05-01 01:00:00.100"), "c")
			hist := h.history("c", "r")
			if len(hist.FailedExecutions) != 0 {
				t.Errorf("failed executions kept: %+v", hist.FailedExecutions)
			}
			// Where lastScheduleTime is stored it keeps the failure that
			// the history does not; either way the plan moved past it.
			if got := timeOf(hist.LastScheduleTime); crd.stored.LastScheduleTime && !got.Equal(utc("2024-05-01 01:00:00")) {
				t.Errorf("lastScheduleTime = %v; the failed firing must still count as run", got)
			}
			if got := timeOf(hist.NextExecutionTime); !got.Equal(utc("2024-05-01 02:00:00")) {
				t.Errorf("nextExecutionTime = %v; want 02:00, after the failed firing", got)
			}
			h.expectEvent("Warning ScaleFailed")
		})
	})
}

func TestInvalidScheduleDoesNotCrash(t *testing.T) {
	obj := cron("c", rule("r", "0 8 31 2 *", 1))
	h := newHarness(t, utc("2024-05-01 07:00:00"), obj)
	if d := h.syncAt(utc("2024-05-01 07:00:00"), "c"); d != 0 {
		t.Errorf("unschedulable rule requeued after %v", d)
	}
	h.expectEvent("Warning InvalidRule")
}
