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
	"errors"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// webhookDown is what the apiserver answers when a validating webhook on the
// target is down: a 500.
var webhookDown = apierrors.NewInternalError(errors.New(`failed calling webhook "validate.example.com": connection refused`))

// Issue 12, item 2: a transient target error (a webhook that is down) is
// retried while the slot may still run, and every attempt leaves a trace: a
// Warning event per attempt, nextExecutionTime naming the slot being retried,
// and a failed execution with the reason once the slot is given up. It used
// to return before recording anything: from 08:00 to the next slot no failed
// execution, no Warning event, and nextExecutionTime still 08:00.
func TestTransientTargetErrorIsRecorded(t *testing.T) {
	forEachSchema(t, func(t *testing.T, crd schemaVariant) {
		h := newHarnessOn(t, crd, utc("2024-05-01 07:30:00"), cron("c", rule("r", "0 * * * *", 10)))
		h.scales.set("deployments", "web", 1)
		h.syncAt(utc("2024-05-01 07:30:00"), "c")
		h.scales.failWith(webhookDown)

		d, err := h.trySyncAt(utc("2024-05-01 08:00:00.100"), "c")
		h.refresh()
		if err != nil {
			t.Fatalf("a transient failure is handled by the sync, not returned: %v", err)
		}
		if d <= 0 || d > 2*time.Second {
			t.Errorf("requeue after %v; want the first retry about a second later", d)
		}
		h.expectEvent(`Warning ScaleFailed Rule "r" (scheduled 2024-05-01T08:00:00Z): attempt 1 failed, will retry until 2024-05-01T09:00:00Z`)
		if got := timeOf(h.history("c", "r").NextExecutionTime); !got.Equal(utc("2024-05-01 08:00:00")) {
			t.Errorf("while retrying, next = %v; want 08:00, the slot still to run", got)
		}

		// Retries back off and stay before the deadline.
		at := utc("2024-05-01 08:00:00.100")
		for i := 2; i <= 12; i++ {
			at = at.Add(d)
			d = h.syncAt(at, "c")
			if at.Add(d).After(utc("2024-05-01 09:00:00.100")) {
				t.Fatalf("attempt %d at %v requeued after %v, past the slot's deadline", i, at, d)
			}
		}
		if n := len(h.events()); n != 11 {
			t.Errorf("%d events for 11 more attempts; want one Warning each", n)
		}

		// At 09:00 the 08:00 slot is given up with the reason, and 09:00 runs
		// once the target is back.
		h.scales.failWith(nil)
		h.syncAt(utc("2024-05-01 09:00:00.100"), "c")
		hist := h.history("c", "r")
		if len(hist.FailedExecutions) != 1 || !hist.FailedExecutions[0].ScheduleTime.Time.Equal(utc("2024-05-01 08:00:00")) ||
			!strings.Contains(hist.FailedExecutions[0].Message, "12 attempts") || !strings.Contains(hist.FailedExecutions[0].Message, "failed calling webhook") {
			t.Errorf("failed executions = %+v; want 08:00 given up with the webhook's reason", hist.FailedExecutions)
		}
		if len(hist.SuccessfulExecutions) != 1 || !hist.SuccessfulExecutions[0].ScheduleTime.Time.Equal(utc("2024-05-01 09:00:00")) {
			t.Errorf("successful executions = %+v; want 09:00", hist.SuccessfulExecutions)
		}
		if got := timeOf(hist.NextExecutionTime); !got.Equal(utc("2024-05-01 10:00:00")) {
			t.Errorf("next = %v; want 10:00", got)
		}
		h.expectEvent(`Warning ScaleFailed Rule "r" (scheduled 2024-05-01T08:00:00Z): gave up: not applied: 12 attempts`)
		if h.scales.get("deployments", "web") != 10 {
			t.Errorf("09:00 did not apply")
		}
	})
}

// Issue 12, item 2: the missed scheduled times a sync finds are recorded
// even when its firing fails for a transient reason; they used to be
// computed and dropped with the early return.
func TestTransientErrorKeepsMissedRecords(t *testing.T) {
	forEachSchema(t, func(t *testing.T, crd schemaVariant) {
		h := newHarnessOn(t, crd, utc("2024-05-01 07:30:00"), cron("c", rule("r", "0 * * * *", 10)))
		h.scales.set("deployments", "web", 1)
		h.syncAt(utc("2024-05-01 07:30:00"), "c")
		// Down from 07:59 to 09:10: 08:00 is missed, 09:00 is due, and the
		// target fails.
		h.newController()
		h.scales.failWith(webhookDown)
		h.syncAt(utc("2024-05-01 09:10:00"), "c")
		hist := h.history("c", "r")
		if len(hist.FailedExecutions) != 1 || !strings.Contains(hist.FailedExecutions[0].Message, "missed the scheduled time 2024-05-01T08:00:00Z") {
			t.Errorf("failed executions = %+v; want 08:00 recorded as missed", hist.FailedExecutions)
		}
		if got := timeOf(hist.NextExecutionTime); !got.Equal(utc("2024-05-01 09:00:00")) {
			t.Errorf("next = %v; want 09:00, being retried", got)
		}
		h.expectEvent("Warning MissedSchedule")
	})
}
