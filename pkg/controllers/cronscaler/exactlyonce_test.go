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

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"

	autoscalingv1alpha1 "github.com/scaleplane/scaleplane/pkg/apis/autoscaling/v1alpha1"
)

// The five paths of issue 17 that repeated or lost a slot, each on both
// schemas and through the workers' path.

// failStatusWrites makes the next n status writes fail as an apiserver that
// answers 500 does.
func (h *harness) failStatusWrites(n int) {
	h.client.PrependReactor("update", "cronfederatedhpas", func(action clienttesting.Action) (bool, runtime.Object, error) {
		if action.GetSubresource() != "status" || n == 0 {
			return false, nil, nil
		}
		n--
		return true, nil, apierrors.NewInternalError(errEtcdTimeout)
	})
}

var errEtcdTimeout = apierrors.NewTimeoutError("etcdserver: request timed out", 0)

// 1. A sync that read the object from the apiserver, because the cache was
// behind this process's status write, used to drop its memory of that write;
// a third sync inside the watch lag then planned from the cache's older
// status and applied the slot again.
func TestLiveReadKeepsTheWriteUntilTheCacheShowsIt(t *testing.T) {
	forEachSchema(t, func(t *testing.T, crd schemaVariant) {
		h := newHarnessOn(t, crd, utc("2024-05-01 07:00:00"), cron("c", rule("r", "0 8 * * *", 10)))
		h.scales.set("deployments", "web", 1)
		h.syncAt(utc("2024-05-01 07:00:00"), "c")
		// The cache is not refreshed: it stays behind every write below.
		for _, at := range []string{"08:00:00.100", "08:00:00.200", "08:00:00.300", "08:00:00.400"} {
			if _, err := h.trySyncAt(utc("2024-05-01 "+at), "c"); err != nil {
				t.Fatalf("sync at %s: %v", at, err)
			}
		}
		if n := h.scales.updateCount(); n != 1 {
			t.Errorf("%d target writes for the 08:00 slot; want 1", n)
		}
		h.refresh()
		if hist := h.history("c", "r"); len(hist.SuccessfulExecutions) != 1 {
			t.Errorf("successful executions %+v; want 08:00 once", hist.SuccessfulExecutions)
		}
		// Once the cache shows the write, the memory lets go of it.
		h.syncAt(utc("2024-05-01 08:00:01"), "c")
		if n := h.c.memory.size(); n != 0 {
			t.Errorf("memory holds %d objects once the cache caught up; want 0", n)
		}
	})
}

// 2. Emptying rules used to write an empty status; a rule added back while
// the controller was down was then planned from the object's creation and
// repeated a slot applied before the rules were emptied.
func TestRuleReaddedAfterRulesWereEmptied(t *testing.T) {
	forEachSchema(t, func(t *testing.T, crd schemaVariant) {
		obj := cron("c", rule("r", "0 8 * * *", 10))
		obj.CreationTimestamp = metav1Time("2024-04-01 00:00:00")
		h := newHarnessOn(t, crd, utc("2024-05-01 07:00:00"), obj)
		h.scales.set("deployments", "web", 1)
		h.syncAt(utc("2024-05-01 07:00:00"), "c")
		h.syncAt(utc("2024-05-01 08:00:00.100"), "c")
		h.scales.set("deployments", "web", 3) // scaled by hand after the slot

		h.clock.SetTime(utc("2024-05-01 09:00:00"))
		h.update("c", func(o *autoscalingv1alpha1.CronFederatedHPA) { o.Spec.Rules = nil })
		h.syncAt(utc("2024-05-01 09:00:00"), "c")

		// Down; the rule is added back at 10:00.
		h.clock.SetTime(utc("2024-05-01 10:00:00"))
		h.edit("c", func(o *autoscalingv1alpha1.CronFederatedHPA) {
			o.Spec.Rules = []autoscalingv1alpha1.CronFederatedHPARule{rule("r", "0 8 * * *", 10)}
		})
		h.newController()
		h.syncAt(utc("2024-05-01 10:00:05"), "c")
		if got := h.scales.get("deployments", "web"); got != 3 {
			t.Errorf("the 08:00 slot, applied before the rules were emptied, ran again: replicas %d", got)
		}
		hist := h.history("c", "r")
		if got := timeOf(hist.NextExecutionTime); !got.Equal(utc("2024-05-02 08:00:00")) {
			t.Errorf("next = %v; want tomorrow 08:00", got)
		}
	})
}

// 4. A schedule edited, or a rule resumed, while the controller was down was
// planned from the time it came back: the first slot of the new plan that
// passed meanwhile never ran, with no record. It is now planned from the
// edit, as a rule added while down is.
func TestEditWhileDownRunsTheSlotAfterTheEdit(t *testing.T) {
	forEachSchema(t, func(t *testing.T, crd schemaVariant) {
		t.Run("schedule edited", func(t *testing.T) {
			h := newHarnessOn(t, crd, utc("2024-05-01 06:00:00"), cron("c", rule("r", "0 9 * * *", 10)))
			h.scales.set("deployments", "web", 1)
			h.syncAt(utc("2024-05-01 06:00:00"), "c")
			h.clock.SetTime(utc("2024-05-01 07:30:00"))
			h.edit("c", func(o *autoscalingv1alpha1.CronFederatedHPA) { o.Spec.Rules[0].Schedule = "0 8 * * *" })
			h.newController()
			h.syncAt(utc("2024-05-01 08:00:30"), "c")
			hist := h.history("c", "r")
			if h.scales.get("deployments", "web") != 10 || len(hist.SuccessfulExecutions) != 1 ||
				!hist.SuccessfulExecutions[0].ScheduleTime.Time.Equal(utc("2024-05-01 08:00:00")) {
				t.Errorf("08:00 of the schedule edited at 07:30 did not run: %+v", hist)
			}
		})
		t.Run("resumed", func(t *testing.T) {
			r := rule("r", "0 * * * *", 10)
			r.Suspend = ptr.To(true)
			h := newHarnessOn(t, crd, utc("2024-05-01 06:00:00"), cron("c", r))
			h.scales.set("deployments", "web", 1)
			h.syncAt(utc("2024-05-01 06:00:00"), "c")
			h.clock.SetTime(utc("2024-05-01 07:30:00"))
			h.edit("c", func(o *autoscalingv1alpha1.CronFederatedHPA) { o.Spec.Rules[0].Suspend = ptr.To(false) })
			h.newController()
			h.syncAt(utc("2024-05-01 08:00:30"), "c")
			hist := h.history("c", "r")
			if h.scales.get("deployments", "web") != 10 || len(hist.SuccessfulExecutions) != 1 ||
				!hist.SuccessfulExecutions[0].ScheduleTime.Time.Equal(utc("2024-05-01 08:00:00")) {
				t.Errorf("08:00 of the rule resumed at 07:30 did not run: %+v", hist)
			}
			if len(hist.FailedExecutions) != 0 {
				t.Errorf("failed executions %+v; want none: 07:00 came while suspended and is not replayed or missed", hist.FailedExecutions)
			}
		})
		t.Run("edited after its slot", func(t *testing.T) {
			h := newHarnessOn(t, crd, utc("2024-05-01 06:00:00"), cron("c", rule("r", "0 9 * * *", 10)))
			h.scales.set("deployments", "web", 1)
			h.syncAt(utc("2024-05-01 06:00:00"), "c")
			h.clock.SetTime(utc("2024-05-01 08:10:00"))
			h.edit("c", func(o *autoscalingv1alpha1.CronFederatedHPA) { o.Spec.Rules[0].Schedule = "0 8 * * *" })
			h.newController()
			h.syncAt(utc("2024-05-01 08:20:00"), "c")
			if h.scales.get("deployments", "web") != 1 {
				t.Errorf("a slot from before the edit ran")
			}
		})
	})
}

// 5. After a watched edit, a status write that failed gave back the replan
// mark although the pending status already held the new plan; the requeue
// at the slot then planned from its own time and skipped the slot.
func TestFailedStatusWriteAfterAnEditKeepsTheNewPlan(t *testing.T) {
	forEachSchema(t, func(t *testing.T, crd schemaVariant) {
		h := newHarnessOn(t, crd, utc("2024-05-01 06:00:00"), cron("c", rule("r", "0 9 * * *", 10)))
		h.scales.set("deployments", "web", 1)
		h.syncAt(utc("2024-05-01 06:00:00"), "c")
		h.clock.SetTime(utc("2024-05-01 07:30:00"))
		h.update("c", func(o *autoscalingv1alpha1.CronFederatedHPA) { o.Spec.Rules[0].Schedule = "0 8 * * *" })
		h.failStatusWrites(1)
		d, err := h.trySyncAt(utc("2024-05-01 07:30:00"), "c")
		if err == nil {
			t.Fatal("want the failed status write retried")
		}
		at := utc("2024-05-01 07:30:00").Add(d)
		if !at.After(utc("2024-05-01 08:00:00")) || at.After(utc("2024-05-01 08:00:01")) {
			t.Fatalf("requeued for %v; want just after 08:00", at)
		}
		h.syncAt(at, "c")
		hist := h.history("c", "r")
		if h.scales.get("deployments", "web") != 10 || len(hist.SuccessfulExecutions) != 1 {
			t.Errorf("08:00 of the new schedule did not run after a failed status write: %+v", hist)
		}
	})
}

func metav1Time(s string) metav1.Time { return metav1.NewTime(utc(s)) }

// Issue 17: a read of a stale object that gets no answer during an outage
// used to fail the sync, which then backed off up to 30 s, while the README
// promises attempts at most 4 s apart. The sync plans from the status it
// last wrote, and the due firing keeps its own retry schedule.
func TestLiveReadDuringAnOutageKeepsTheFiringsRetries(t *testing.T) {
	forEachSchema(t, func(t *testing.T, crd schemaVariant) {
		h := newHarnessOn(t, crd, utc("2024-05-01 07:30:00"), cron("c", rule("r", "0 * * * *", 10)))
		h.scales.set("deployments", "web", 1)
		h.syncAt(utc("2024-05-01 07:30:00"), "c")
		// 08:00 is applied and recorded; the cache does not see the write.
		if _, err := h.trySyncAt(utc("2024-05-01 08:00:00.100"), "c"); err != nil {
			t.Fatal(err)
		}
		// At 09:00 the apiserver gives no answer.
		h.client.PrependReactor("get", "cronfederatedhpas", func(clienttesting.Action) (bool, runtime.Object, error) {
			return true, nil, apiserverDown
		})
		h.scales.failWith(apiserverDown)
		for i, at := range []string{"09:00:00.100", "09:00:02", "09:00:05", "09:00:09", "09:00:13"} {
			d, _ := h.trySyncAt(utc("2024-05-01 "+at), "c")
			if d <= 0 || d > maxUnreachableBackoff+time.Second {
				t.Fatalf("attempt %d at %s: requeued after %v; want the next attempt within %v", i+1, at, d, maxUnreachableBackoff)
			}
		}
		if got := h.scales.get("deployments", "web"); got != 10 {
			t.Errorf("replicas = %d; want 10 (08:00, and not applied twice)", got)
		}
		// Back: 09:00 runs once, 08:00 is not repeated.
		h.client.ReactionChain = h.client.ReactionChain[1:]
		h.scales.failWith(nil)
		h.scales.set("deployments", "web", 3)
		h.refresh() // the watch resumes
		h.syncAt(utc("2024-05-01 09:00:15"), "c")
		hist := h.history("c", "r")
		if len(hist.SuccessfulExecutions) != 2 || !hist.SuccessfulExecutions[0].ScheduleTime.Time.Equal(utc("2024-05-01 09:00:00")) {
			t.Errorf("successful executions %+v; want 09:00 and 08:00", hist.SuccessfulExecutions)
		}
		if got := h.scales.get("deployments", "web"); got != 10 {
			t.Errorf("replicas = %d; want 10 from 09:00", got)
		}
	})
}
