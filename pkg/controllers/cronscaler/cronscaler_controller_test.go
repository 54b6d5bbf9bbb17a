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
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"

	autoscalingv1alpha1 "github.com/scaleplane/scaleplane/pkg/apis/autoscaling/v1alpha1"
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
		if got := lastHandled(&hist); !got.Equal(utc("2024-05-01 09:03:00")) {
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
		if _, ok := findHistory(&st, "up"); ok {
			t.Errorf("history of the renamed rule is kept: %+v", st)
		}
		if hist, _ := findHistory(&st, "morning"); len(hist.SuccessfulExecutions) != 0 || !lastHandled(&hist).IsZero() {
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

func TestTimeZones(t *testing.T) {
	forEachSchema(t, func(t *testing.T, crd schemaVariant) {
		r1 := rule("shanghai", "30 8 * * *", 1000)
		r1.TimeZone = ptr.To("Asia/Shanghai")
		r2 := rule("la", "0 11 * * *", 1)
		r2.TimeZone = ptr.To("America/Los_Angeles")
		h := newHarnessOn(t, crd, utc("2024-05-01 00:00:00"), cron("c", r1, r2))
		h.scales.set("deployments", "web", 1)
		d := h.syncAt(utc("2024-05-01 00:00:00"), "c")
		if want := 30*time.Minute + requeueSlack; d != want {
			t.Errorf("requeue after %v; want %v (08:30 in Shanghai is 00:30 UTC)", d, want)
		}
		h.syncAt(utc("2024-05-01 00:30:00.100"), "c")
		if h.scales.get("deployments", "web") != 1000 {
			t.Errorf("Shanghai rule did not fire at 00:30 UTC")
		}
		if got := timeOf(h.history("c", "la").NextExecutionTime); !got.Equal(utc("2024-05-01 18:00:00")) {
			t.Errorf("LA next = %v; want 18:00 UTC (11:00 PDT)", got)
		}
		h.syncAt(utc("2024-05-01 18:00:00.100"), "c")
		if h.scales.get("deployments", "web") != 1 {
			t.Errorf("LA rule did not fire")
		}
	})
}

func TestDaylightSaving(t *testing.T) {
	forEachSchema(t, func(t *testing.T, crd schemaVariant) {
		t.Run("spring forward fires once after the gap", func(t *testing.T) {
			r := rule("r", "*/30 2 * * *", 7)
			r.TimeZone = ptr.To("America/Los_Angeles")
			// 2024-03-10 01:00 PST = 09:00 UTC; 02:00 PST never comes, 03:00 PDT = 10:00 UTC.
			h := newHarnessOn(t, crd, utc("2024-03-10 09:00:00"), cron("c", r))
			h.scales.set("deployments", "web", 1)
			d := h.syncAt(utc("2024-03-10 09:00:00"), "c")
			if want := time.Hour + requeueSlack; d != want {
				t.Errorf("requeue after %v; want %v", d, want)
			}
			h.syncAt(utc("2024-03-10 10:00:00.100"), "c")
			hist := h.history("c", "r")
			if len(hist.SuccessfulExecutions) != 1 || h.scales.get("deployments", "web") != 7 {
				t.Fatalf("skipped 02:00 and 02:30 did not fire once at 03:00 PDT: %+v", hist)
			}
			h.scales.set("deployments", "web", 1)
			h.syncAt(utc("2024-03-10 10:00:01"), "c")
			if h.scales.get("deployments", "web") != 1 {
				t.Errorf("the gap fired twice")
			}
			if got := timeOf(hist.NextExecutionTime); !got.Equal(utc("2024-03-11 09:00:00")) {
				t.Errorf("next = %v; want 02:00 PDT the next day", got)
			}
		})
		t.Run("fall back fires once at the first occurrence", func(t *testing.T) {
			r := rule("r", "30 1 * * *", 7)
			r.TimeZone = ptr.To("Europe/Berlin")
			// Berlin 2024-10-27: 02:30 occurs at 00:30 UTC (CEST) and 01:30 UTC (CET).
			r.Schedule = "30 2 * * *"
			h := newHarnessOn(t, crd, utc("2024-10-27 00:00:00"), cron("c", r))
			h.scales.set("deployments", "web", 1)
			h.syncAt(utc("2024-10-27 00:00:00"), "c")
			h.syncAt(utc("2024-10-27 00:30:00.100"), "c")
			if h.scales.get("deployments", "web") != 7 {
				t.Fatalf("did not fire at the first 02:30")
			}
			h.scales.set("deployments", "web", 1)
			h.syncAt(utc("2024-10-27 01:30:00.100"), "c")
			if h.scales.get("deployments", "web") != 1 {
				t.Errorf("fired again at the second 02:30")
			}
			if got := timeOf(h.history("c", "r").NextExecutionTime); !got.Equal(utc("2024-10-28 01:30:00")) {
				t.Errorf("next = %v", got)
			}
		})
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

func TestMissedFirings(t *testing.T) {
	forEachSchema(t, func(t *testing.T, crd schemaVariant) {
		newH := func(maxDelay *int32) *harness {
			r := rule("r", "0 8 * * *", 10)
			r.MaxDelaySeconds = maxDelay
			h := newHarnessOn(t, crd, utc("2024-05-01 07:00:00"), cron("c", r))
			h.scales.set("deployments", "web", 1)
			h.syncAt(utc("2024-05-01 07:00:00"), "c")
			// The controller is down from 07:59 to the next sync.
			h.newController()
			return h
		}
		t.Run("within maxDelaySeconds runs late", func(t *testing.T) {
			h := newH(ptr.To[int32](120))
			h.syncAt(utc("2024-05-01 08:01:00"), "c")
			hist := h.history("c", "r")
			if h.scales.get("deployments", "web") != 10 || len(hist.SuccessfulExecutions) != 1 {
				t.Errorf("a firing 60s late with maxDelaySeconds 120 did not run: %+v", hist)
			}
			if e := hist.SuccessfulExecutions[0]; !e.ScheduleTime.Time.Equal(utc("2024-05-01 08:00:00")) || !e.ExecutionTime.Time.Equal(utc("2024-05-01 08:01:00")) {
				t.Errorf("execution = %+v", e)
			}
		})
		t.Run("beyond maxDelaySeconds is recorded as missed", func(t *testing.T) {
			h := newH(ptr.To[int32](120))
			h.syncAt(utc("2024-05-01 08:03:00"), "c")
			hist := h.history("c", "r")
			if !crd.stored.MaxDelaySeconds {
				// The schema pruned maxDelaySeconds: unset, the firing runs
				// until the next scheduled time.
				if h.scales.get("deployments", "web") != 10 || len(hist.SuccessfulExecutions) != 1 {
					t.Errorf("without maxDelaySeconds a firing 3m late must run: %+v", hist)
				}
				return
			}
			if h.scales.get("deployments", "web") != 1 {
				t.Errorf("a firing beyond maxDelaySeconds ran")
			}
			if len(hist.FailedExecutions) != 1 || !strings.Contains(hist.FailedExecutions[0].Message, "missed") ||
				!lastHandled(&hist).Equal(utc("2024-05-01 08:00:00")) {
				t.Errorf("history = %+v", hist)
			}
			h.expectEvent("Warning MissedSchedule")
			// And it is not retried.
			h.syncAt(utc("2024-05-01 08:04:00"), "c")
			if h.scales.get("deployments", "web") != 1 || len(h.history("c", "r").FailedExecutions) != 1 {
				t.Errorf("missed firing was retried")
			}
		})
		t.Run("unset maxDelaySeconds runs until the next scheduled time", func(t *testing.T) {
			h := newH(nil)
			h.syncAt(utc("2024-05-01 20:00:00"), "c")
			if h.scales.get("deployments", "web") != 10 {
				t.Errorf("latest scheduled time did not run 12h late")
			}
		})
		t.Run("older scheduled times are missed, the latest runs", func(t *testing.T) {
			h := newH(nil)
			h.syncAt(utc("2024-05-04 09:00:00"), "c")
			hist := h.history("c", "r")
			if h.scales.get("deployments", "web") != 10 || len(hist.SuccessfulExecutions) != 1 ||
				!hist.SuccessfulExecutions[0].ScheduleTime.Time.Equal(utc("2024-05-04 08:00:00")) {
				t.Errorf("latest firing did not run: %+v", hist)
			}
			if len(hist.FailedExecutions) != 1 || !strings.Contains(hist.FailedExecutions[0].Message, "missed 3 scheduled times") {
				t.Errorf("failed executions = %+v; want one recording 3 missed", hist.FailedExecutions)
			}
		})
	})
}

// The proposal's story after downtime: up to 1000 at 08:30 and down to 1 at
// 11:00 both passed; only the latest is applied, with one write.
func TestCoalescedMisses(t *testing.T) {
	forEachSchema(t, func(t *testing.T, crd schemaVariant) {
		h := newHarnessOn(t, crd, utc("2024-05-01 07:00:00"), cron("c", rule("up", "30 8 * * *", 1000), rule("down", "0 11 * * *", 1)))
		h.scales.set("deployments", "web", 5)
		h.syncAt(utc("2024-05-01 07:00:00"), "c")
		h.newController()
		h.syncAt(utc("2024-05-01 12:00:00"), "c")
		if got := h.scales.get("deployments", "web"); got != 1 {
			t.Errorf("replicas = %d; want 1 (the latest firing)", got)
		}
		if h.scales.updateCount() != 1 {
			t.Errorf("target writes = %d; want 1 (no flapping through 1000)", h.scales.updateCount())
		}
		up := h.history("c", "up")
		if len(up.FailedExecutions) != 1 || !strings.Contains(up.FailedExecutions[0].Message, `rule "down"`) ||
			!lastHandled(&up).Equal(utc("2024-05-01 08:30:00")) {
			t.Errorf("superseded rule history = %+v", up)
		}
		if down := h.history("c", "down"); len(down.SuccessfulExecutions) != 1 {
			t.Errorf("latest rule history = %+v", down)
		}
	})
}

// A restarted controller, and a stale cache, never fire a slot twice.
func TestNoDoubleFiring(t *testing.T) {
	forEachSchema(t, func(t *testing.T, crd schemaVariant) {
		t.Run("restart", func(t *testing.T) {
			h := newHarnessOn(t, crd, utc("2024-05-01 07:00:00"), cron("c", rule("r", "0 8 * * *", 10)))
			h.scales.set("deployments", "web", 1)
			h.syncAt(utc("2024-05-01 07:00:00"), "c")
			h.syncAt(utc("2024-05-01 08:00:00.100"), "c")
			h.scales.set("deployments", "web", 3) // someone scales by hand
			h.newController()
			h.syncAt(utc("2024-05-01 08:00:05"), "c")
			if got := h.scales.get("deployments", "web"); got != 3 {
				t.Errorf("restart re-applied the 08:00 firing: replicas %d", got)
			}
		})
		t.Run("stale cache after the status write", func(t *testing.T) {
			h := newHarnessOn(t, crd, utc("2024-05-01 07:00:00"), cron("c", rule("r", "0 8 * * *", 10)))
			h.scales.set("deployments", "web", 1)
			h.syncAt(utc("2024-05-01 07:00:00"), "c")
			if _, err := h.trySyncAt(utc("2024-05-01 08:00:00.100"), "c"); err != nil {
				t.Fatal(err)
			}
			h.scales.set("deployments", "web", 3)
			// The cache has not seen the status write yet.
			if _, err := h.trySyncAt(utc("2024-05-01 08:00:00.200"), "c"); err != nil {
				t.Fatal(err)
			}
			if got := h.scales.get("deployments", "web"); got != 3 {
				t.Errorf("stale cache re-applied the firing: replicas %d", got)
			}
		})
		t.Run("status write conflicts", func(t *testing.T) {
			h := newHarnessOn(t, crd, utc("2024-05-01 07:00:00"), cron("c", rule("r", "0 8 * * *", 10)))
			h.scales.set("deployments", "web", 1)
			h.syncAt(utc("2024-05-01 07:00:00"), "c")
			conflicts := 1
			h.client.PrependReactor("update", "cronfederatedhpas", func(action clienttesting.Action) (bool, runtime.Object, error) {
				if action.GetSubresource() == "status" && conflicts > 0 {
					conflicts--
					return true, nil, apierrors.NewConflict(schema.GroupResource{Resource: "cronfederatedhpas"}, "c", nil)
				}
				return false, nil, nil
			})
			if _, err := h.trySyncAt(utc("2024-05-01 08:00:00.100"), "c"); err == nil {
				t.Fatal("want the conflict to be returned for a retry")
			}
			h.scales.set("deployments", "web", 3)
			h.syncAt(utc("2024-05-01 08:00:00.200"), "c")
			if got := h.scales.get("deployments", "web"); got != 3 {
				t.Errorf("retry after a status conflict re-applied the firing: replicas %d", got)
			}
			hist := h.history("c", "r")
			if len(hist.SuccessfulExecutions) != 1 || !lastHandled(&hist).Equal(utc("2024-05-01 08:00:00")) {
				t.Errorf("retry did not record the firing: %+v", hist)
			}
		})
	})
}

func TestTargetConflictRetried(t *testing.T) {
	h := newHarness(t, utc("2024-05-01 07:00:00"), cron("c", rule("r", "0 8 * * *", 10)))
	h.scales.set("deployments", "web", 1)
	h.scales.conflicts = 2
	h.syncAt(utc("2024-05-01 07:00:00"), "c")
	h.syncAt(utc("2024-05-01 08:00:00.100"), "c")
	if h.scales.get("deployments", "web") != 10 {
		t.Errorf("conflicts were not retried")
	}
}

func TestMissingTarget(t *testing.T) {
	h := newHarness(t, utc("2024-05-01 07:00:00"), cron("c", rule("r", "0 8 * * *", 10)))
	h.syncAt(utc("2024-05-01 07:00:00"), "c")
	h.syncAt(utc("2024-05-01 08:00:00.100"), "c")
	hist := h.history("c", "r")
	if len(hist.FailedExecutions) != 1 || !strings.Contains(hist.FailedExecutions[0].Message, "not found") {
		t.Errorf("failed executions = %+v", hist.FailedExecutions)
	}
	h.expectEvent("Warning ScaleFailed")
}

func TestScaleFromZero(t *testing.T) {
	h := newHarness(t, utc("2024-05-01 07:00:00"), cron("c", rule("r", "0 8 * * *", 4)))
	h.scales.set("deployments", "web", 0)
	h.syncAt(utc("2024-05-01 07:00:00"), "c")
	h.syncAt(utc("2024-05-01 08:00:00.100"), "c")
	if got := h.scales.get("deployments", "web"); got != 4 {
		t.Errorf("replicas = %d; want 4", got)
	}
}

func TestUnknownKindResetsMapperOnce(t *testing.T) {
	// A custom resource whose CRD was installed after discovery was cached.
	widget := schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Widget"}
	obj := cron("c", rule("r", "0 8 * * *", 2))
	obj.Spec.ScaleTargetRef = autoscalingv2.CrossVersionObjectReference{APIVersion: "example.com/v1", Kind: "Widget", Name: "w"}
	h := newHarness(t, utc("2024-05-01 07:00:00"), obj)
	h.mapper.onReset = []schema.GroupVersionKind{widget}
	h.scales.set("widgets", "w", 0)
	h.syncAt(utc("2024-05-01 07:00:00"), "c")
	h.syncAt(utc("2024-05-01 08:00:00.100"), "c")
	if h.mapper.resets != 1 || h.scales.get("widgets", "w") != 2 {
		t.Errorf("resets = %d, replicas = %d; want 1 reset and 2 replicas", h.mapper.resets, h.scales.get("widgets", "w"))
	}

	obj = cron("d", rule("r", "0 8 * * *", 2))
	obj.Spec.ScaleTargetRef = autoscalingv2.CrossVersionObjectReference{APIVersion: "example.com/v1", Kind: "Nope", Name: "x"}
	h = newHarness(t, utc("2024-05-01 07:00:00"), obj)
	h.syncAt(utc("2024-05-01 07:00:00"), "d")
	h.syncAt(utc("2024-05-01 08:00:00.100"), "d")
	hist := h.history("d", "r")
	if h.mapper.resets != 1 || len(hist.FailedExecutions) != 1 || !strings.Contains(hist.FailedExecutions[0].Message, "CRD installed") {
		t.Errorf("resets = %d, history = %+v", h.mapper.resets, hist)
	}
}

func TestAutoscalerTargets(t *testing.T) {
	minMax := func(name string, min, max *int32) autoscalingv1alpha1.CronFederatedHPARule {
		return autoscalingv1alpha1.CronFederatedHPARule{Name: name, Schedule: "0 8 * * *", TimeZone: ptr.To("UTC"), TargetMinReplicas: min, TargetMaxReplicas: max}
	}
	t.Run("FederatedHPA with nil minReplicas", func(t *testing.T) {
		obj := cron("c", minMax("r", ptr.To[int32](5), nil))
		obj.Spec.ScaleTargetRef = autoscalingv2.CrossVersionObjectReference{APIVersion: "autoscaling.karmada.io/v1alpha1", Kind: "FederatedHPA", Name: "f"}
		fhpa := &autoscalingv1alpha1.FederatedHPA{ObjectMeta: metav1.ObjectMeta{Name: "f", Namespace: ns}, Spec: autoscalingv1alpha1.FederatedHPASpec{MaxReplicas: 20}}
		h := newHarness(t, utc("2024-05-01 07:00:00"), obj, fhpa)
		h.syncAt(utc("2024-05-01 07:00:00"), "c")
		h.syncAt(utc("2024-05-01 08:00:00.100"), "c")
		got, err := h.client.AutoscalingV1alpha1().FederatedHPAs(ns).Get(h.ctx, "f", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if ptr.Deref(got.Spec.MinReplicas, 0) != 5 || got.Spec.MaxReplicas != 20 {
			t.Errorf("FederatedHPA min/max = %v/%d; want 5/20", got.Spec.MinReplicas, got.Spec.MaxReplicas)
		}
		if e := h.history("c", "r").SuccessfulExecutions; len(e) != 1 || *e[0].AppliedMinReplicas != 5 || e[0].AppliedMaxReplicas != nil {
			t.Errorf("executions = %+v", e)
		}
	})
	t.Run("HorizontalPodAutoscaler", func(t *testing.T) {
		obj := cron("c", minMax("r", ptr.To[int32](2), ptr.To[int32](50)))
		obj.Spec.ScaleTargetRef = autoscalingv2.CrossVersionObjectReference{APIVersion: "autoscaling/v2", Kind: "HorizontalPodAutoscaler", Name: "hpa"}
		hpa := &autoscalingv2.HorizontalPodAutoscaler{ObjectMeta: metav1.ObjectMeta{Name: "hpa", Namespace: ns}, Spec: autoscalingv2.HorizontalPodAutoscalerSpec{MinReplicas: ptr.To[int32](1), MaxReplicas: 10}}
		h := newHarness(t, utc("2024-05-01 07:00:00"), obj, hpa)
		h.syncAt(utc("2024-05-01 07:00:00"), "c")
		h.syncAt(utc("2024-05-01 08:00:00.100"), "c")
		got, err := h.kube.AutoscalingV2().HorizontalPodAutoscalers(ns).Get(h.ctx, "hpa", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if *got.Spec.MinReplicas != 2 || got.Spec.MaxReplicas != 50 {
			t.Errorf("HPA min/max = %d/%d; want 2/50", *got.Spec.MinReplicas, got.Spec.MaxReplicas)
		}
	})
	t.Run("rule without values for the target kind fails, no panic", func(t *testing.T) {
		obj := cron("c", autoscalingv1alpha1.CronFederatedHPARule{Name: "r", Schedule: "0 8 * * *", TimeZone: ptr.To("UTC")})
		h := newHarness(t, utc("2024-05-01 07:00:00"), obj)
		h.scales.set("deployments", "web", 1)
		h.syncAt(utc("2024-05-01 07:00:00"), "c")
		h.syncAt(utc("2024-05-01 08:00:00.100"), "c")
		if f := h.history("c", "r").FailedExecutions; len(f) != 1 || !strings.Contains(f[0].Message, "targetReplicas is not set") {
			t.Errorf("failed executions = %+v", f)
		}
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
