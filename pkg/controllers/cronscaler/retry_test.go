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
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
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

// apiserverDown is what client-go returns while kube-apiserver is down: no
// answer at all.
var apiserverDown = &url.Error{Op: "Patch", URL: "https://127.0.0.1:6443/apis/apps/v1/namespaces/default/deployments/web/scale",
	Err: &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}}

// Issue 9: a slot that falls in a control-plane outage runs afterwards if
// it still may, else it is recorded as missed, saying why. It used to be
// recorded as failed with "connection refused" once its retries ran out,
// as if the target had refused it.
func TestUnreachableAPIServerMissesTheSlot(t *testing.T) {
	forEachSchema(t, func(t *testing.T, crd schemaVariant) {
		h := newHarnessOn(t, crd, utc("2024-05-01 07:30:00"), cron("c", rule("r", "0 * * * *", 10)))
		h.scales.set("deployments", "web", 1)
		h.syncAt(utc("2024-05-01 07:30:00"), "c")
		h.scales.failWith(apiserverDown)

		// Down from before 08:00 until after 09:00, the 08:00 slot's
		// deadline: attempts come at most a few seconds apart for the
		// first minutes, then at most every 30 s; only the first is an
		// event (the others could not be delivered anyway).
		start := utc("2024-05-01 08:00:00.100")
		at := start
		attempts := 0
		for at.Before(utc("2024-05-01 09:00:00")) {
			d := h.syncAt(at, "c")
			attempts++
			limit := maxUnreachableBackoff
			if at.Sub(start) >= fastUnreachableRetries {
				limit = maxUnreachableSlowBackoff
			}
			if d <= 0 || d > limit+time.Second {
				t.Fatalf("attempt %d at %v requeued after %v; want at most %v while the apiserver is unreachable", attempts, at, d, limit)
			}
			at = at.Add(d)
		}
		if attempts > 200 {
			t.Errorf("%d attempts in an hour of outage; want the retries to slow down after the first minutes", attempts)
		}
		want := `Warning ScaleFailed Rule "r" (scheduled 2024-05-01T08:00:00Z): attempt 1 failed, will retry until 2024-05-01T09:00:00Z`
		if events := h.events(); len(events) != 1 || !strings.HasPrefix(events[0], want) {
			t.Errorf("events for %d unreachable attempts: %q; want one, %q", attempts, events, want)
		}

		h.scales.failWith(nil)
		h.syncAt(at, "c")
		hist := h.history("c", "r")
		if len(hist.FailedExecutions) != 1 || !hist.FailedExecutions[0].ScheduleTime.Time.Equal(utc("2024-05-01 08:00:00")) ||
			!strings.HasPrefix(hist.FailedExecutions[0].Message, "missed the scheduled time 2024-05-01T08:00:00Z: the API server could not be reached from 2024-05-01T08:00:00Z") ||
			!strings.Contains(hist.FailedExecutions[0].Message, "connection refused") {
			t.Errorf("failed executions = %+v; want 08:00 recorded as missed, the API server unreachable", hist.FailedExecutions)
		}
		if len(hist.SuccessfulExecutions) != 1 || !hist.SuccessfulExecutions[0].ScheduleTime.Time.Equal(utc("2024-05-01 09:00:00")) {
			t.Errorf("successful executions = %+v; want 09:00 only", hist.SuccessfulExecutions)
		}
		h.expectEvent(`Warning MissedSchedule Rule "r" missed the scheduled time 2024-05-01T08:00:00Z: the API server could not be reached`)
	})
}

// Issue 9: a slot in an outage that ends before the slot's deadline runs
// within a few seconds of the apiserver's return, and is recorded once as
// applied.
func TestUnreachableAPIServerBackInTime(t *testing.T) {
	forEachSchema(t, func(t *testing.T, crd schemaVariant) {
		h := newHarnessOn(t, crd, utc("2024-05-01 07:30:00"), cron("c", rule("r", "0 * * * *", 10)))
		h.scales.set("deployments", "web", 1)
		h.syncAt(utc("2024-05-01 07:30:00"), "c")
		h.scales.failWith(apiserverDown)
		at := utc("2024-05-01 08:00:00.100")
		for at.Before(utc("2024-05-01 08:01:00")) {
			at = at.Add(h.syncAt(at, "c"))
		}
		// Back at 08:01:00: the next attempt is at most a few seconds away.
		h.scales.failWith(nil)
		if at.Sub(utc("2024-05-01 08:01:00")) > maxUnreachableBackoff {
			t.Errorf("next attempt at %v, more than %v after the apiserver came back", at, maxUnreachableBackoff)
		}
		h.syncAt(at, "c")
		hist := h.history("c", "r")
		if len(hist.FailedExecutions) != 0 {
			t.Errorf("failed executions = %+v; want none", hist.FailedExecutions)
		}
		if len(hist.SuccessfulExecutions) != 1 || !hist.SuccessfulExecutions[0].ScheduleTime.Time.Equal(utc("2024-05-01 08:00:00")) {
			t.Errorf("successful executions = %+v; want 08:00 once", hist.SuccessfulExecutions)
		}
		if h.scales.get("deployments", "web") != 10 {
			t.Errorf("08:00 was not applied after the outage")
		}
	})
}

// Issue 9: once the apiserver answered an attempt (a webhook that is down
// answers with a 500), the slot failed on its target: an outage after that
// does not turn it into a miss.
func TestAnsweredAttemptKeepsTheFailure(t *testing.T) {
	h := newHarness(t, utc("2024-05-01 07:30:00"), cron("c", rule("r", "0 * * * *", 10)))
	h.scales.set("deployments", "web", 1)
	h.syncAt(utc("2024-05-01 07:30:00"), "c")
	h.scales.failWith(webhookDown)
	at := utc("2024-05-01 08:00:00.100")
	at = at.Add(h.syncAt(at, "c"))
	h.scales.failWith(apiserverDown)
	for at.Before(utc("2024-05-01 09:00:00")) {
		at = at.Add(h.syncAt(at, "c"))
	}
	h.scales.failWith(nil)
	h.syncAt(at, "c")
	hist := h.history("c", "r")
	if len(hist.FailedExecutions) != 1 || !strings.HasPrefix(hist.FailedExecutions[0].Message, "not applied: ") ||
		!strings.Contains(hist.FailedExecutions[0].Message, "failed calling webhook") {
		t.Errorf("failed executions = %+v; want 08:00 failed (not applied) with the answered attempt's reason", hist.FailedExecutions)
	}
}

// Issue 9: unanswered attempts during an outage do not make the first
// answered error after it (a 5xx while the control plane settles) back off
// as if it were the n-th failure.
func TestAnsweredAfterOutageBacksOffFromItsOwnCount(t *testing.T) {
	h := newHarness(t, utc("2024-05-01 07:30:00"), cron("c", rule("r", "0 * * * *", 10)))
	h.scales.set("deployments", "web", 1)
	h.syncAt(utc("2024-05-01 07:30:00"), "c")
	h.scales.failWith(apiserverDown)
	at := utc("2024-05-01 08:00:00.100")
	for at.Before(utc("2024-05-01 08:01:00")) {
		at = at.Add(h.syncAt(at, "c"))
	}
	h.scales.failWith(webhookDown)
	if d := h.syncAt(at, "c"); d > 2*time.Second {
		t.Errorf("the first answered failure after the outage is retried after %v; want about a second", d)
	}
}

func TestIsUnreachable(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"connection refused", apiserverDown, true},
		{"connection reset", &url.Error{Op: "Patch", URL: "https://127.0.0.1:6443", Err: os.NewSyscallError("read", syscall.ECONNRESET)}, true},
		{"EOF", &url.Error{Op: "Patch", URL: "https://127.0.0.1:6443", Err: io.EOF}, true},
		{"no route to host", &url.Error{Op: "Patch", URL: "https://10.0.0.1:6443", Err: &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.EHOSTUNREACH)}}, true},
		{"HTTP/2 connection lost", &url.Error{Op: "Patch", URL: "https://127.0.0.1:6443", Err: errors.New("http2: client connection lost")}, true},
		{"TLS handshake timeout", &url.Error{Op: "Patch", URL: "https://127.0.0.1:6443", Err: errors.New("net/http: TLS handshake timeout")}, true},
		{"a TLS alert (bad certificate)", &url.Error{Op: "Patch", URL: "https://127.0.0.1:6443", Err: &net.OpError{Op: "remote error", Err: errors.New("tls: bad certificate")}}, false},
		{"a webhook's connection refused, answered by the apiserver", webhookDown, false},
		{"service unavailable", apierrors.NewServiceUnavailable("etcd is down"), false},
		{"not found", apierrors.NewNotFound(schema.GroupResource{Group: "apps", Resource: "deployments"}, "web"), false},
		{"nil", nil, false},
	} {
		if got := isUnreachable(tc.err); got != tc.want {
			t.Errorf("%s: isUnreachable(%v) = %v; want %v", tc.name, tc.err, got, tc.want)
		}
	}
}

// Issue 9: a status write that fails while the apiserver is down is retried
// with backoff, and the object keeps its next firing all the same: it used
// to be left to the backoff alone, which grows to many minutes in an outage
// and could pass the next scheduled time.
func TestFailedStatusWriteKeepsTheSchedule(t *testing.T) {
	h := newHarness(t, utc("2024-05-01 07:30:00"), cron("c", rule("r", "0 * * * *", 10)))
	h.client.PrependReactor("update", "cronfederatedhpas", func(action clienttesting.Action) (bool, runtime.Object, error) {
		return action.GetSubresource() == "status", nil, apiserverDown
	})
	d, err := h.trySyncAt(utc("2024-05-01 07:30:00"), "c")
	if err == nil {
		t.Fatal("the status write failed, but the sync reported no error to retry it")
	}
	if want := 30 * time.Minute; d < want || d > want+time.Second {
		t.Errorf("requeue after %v alongside the error; want the next firing, %v away", d, want)
	}
	if n := len(h.events()); n != 0 {
		t.Errorf("%d events for a status write the apiserver did not answer; want none", n)
	}
}

// A failing object is retried at least every maxFailureBackoff, however long
// it failed, and many failing objects are not spread out by a shared bucket.
func TestFailureBackoffIsBounded(t *testing.T) {
	l := failureRateLimiter()
	for i := 0; i < 10000; i++ {
		key := cache.ObjectName{Namespace: ns, Name: fmt.Sprintf("c%d", i)}
		if d := l.When(key); d > time.Second {
			t.Fatalf("the first failure of object %d waits %v; want milliseconds", i, d)
		}
	}
	key := cache.ObjectName{Namespace: ns, Name: "c0"}
	var d time.Duration
	for i := 0; i < 40; i++ {
		d = l.When(key)
	}
	if d != maxFailureBackoff {
		t.Errorf("after 40 failures the wait is %v; want %v", d, maxFailureBackoff)
	}
}

// A target write whose answer is an error may have been made all the same
// (the apiserver timed out after etcd committed it, the connection reset
// before the answer). A retry must not undo a change another manager made
// through the object since: the retry is checked like an inherited firing.
// The simulator's seed 15300 found a retry setting a Deployment's replicas
// back over a kubectl edit made between the attempts.
func TestRetryAfterALostAnswerNeverUndoesALaterChange(t *testing.T) {
	h := newHarness(t, utc("2024-05-01 07:30:00"), cron("c", rule("r", "0 * * * *", 10)))
	h.scales.set("deployments", "web", 1)
	h.syncAt(utc("2024-05-01 07:30:00"), "c")
	h.scales.failWith(apierrors.NewTimeoutError("request did not complete within 60s", 0))
	d := h.syncAt(utc("2024-05-01 08:00:00.100"), "c")
	// The write was committed; only its answer was lost.
	h.scales.failWith(nil)
	h.scales.scaleBy(FieldManager, "scale", "deployments", "web", 10)
	h.clock.SetTime(utc("2024-05-01 08:00:01"))
	h.scales.scaleBy("kubectl-edit", "", "deployments", "web", 3)
	h.syncAt(utc("2024-05-01 08:00:00.100").Add(d), "c")
	if got := h.scales.get("deployments", "web"); got != 3 {
		t.Errorf("replicas = %d; the retry undid the change made after the first attempt", got)
	}
	hist := h.history("c", "r")
	if len(hist.FailedExecutions) != 1 || !strings.Contains(hist.FailedExecutions[0].Message, "spec.replicas changed by kubectl-edit at 2024-05-01T08:00:01Z") {
		t.Errorf("failed executions %+v; want 08:00 recorded as not applied again, naming kubectl-edit", hist.FailedExecutions)
	}
	h.expectEvent(`Warning NotReapplied Rule "r" (scheduled 2024-05-01T08:00:00Z): not applied: an earlier attempt may have been applied`)
}

// Two rules of one object set the same field: 08:15 (6 replicas, may run
// until 09:15) fails for a transient reason and is retried; 08:20 (26
// replicas, maxDelaySeconds 120) comes due while it is, and one write now
// sets 26 for both: the later slot wins the field. That write commits but its
// answer is lost, and 08:20 is given up at 08:22. 08:15 must not take the
// field back then: the 26 of the later slot may be on the target (an error
// does not say the write was not made), and the latest slot wins. 08:15 is
// superseded once a later firing takes its field, as when that write fails
// for good. The simulator's seeds 40902, 43023 and 45152 found 08:15 written
// after 08:20 was given up, its value over the later slot's.
func TestRetriedFiringSupersededByALaterOneStaysSuperseded(t *testing.T) {
	late := rule("late", "20 * * * *", 26)
	late.MaxDelaySeconds = ptr.To[int32](120)
	h := newHarness(t, utc("2024-05-01 07:30:00"), cron("c", rule("early", "15 * * * *", 6), late))
	h.scales.set("deployments", "web", 1)
	h.syncAt(utc("2024-05-01 07:30:00"), "c")
	h.scales.failWith(webhookDown)
	h.syncAt(utc("2024-05-01 08:15:00.100"), "c")
	h.syncAt(utc("2024-05-01 08:20:00.100"), "c")
	// The 08:20 write committed; only its answer was lost.
	h.scales.failWith(nil)
	h.scales.scaleBy(FieldManager, "scale", "deployments", "web", 26)
	h.scales.failWith(webhookDown)
	h.syncAt(utc("2024-05-01 08:22:00.100"), "c")
	h.scales.failWith(nil)
	h.syncAt(utc("2024-05-01 08:23:00"), "c")

	if got := h.scales.get("deployments", "web"); got != 26 {
		t.Errorf("replicas = %d; want 26, the later slot's: 08:15 was written over it", got)
	}
	hist := h.history("c", "early")
	if len(hist.SuccessfulExecutions) != 0 || len(hist.FailedExecutions) != 1 ||
		!hist.FailedExecutions[0].ScheduleTime.Time.Equal(utc("2024-05-01 08:15:00")) ||
		!strings.Contains(hist.FailedExecutions[0].Message, `rule "late", scheduled later (2024-05-01T08:20:00Z)`) {
		t.Errorf("early's history %+v; want 08:15 recorded as superseded by late's 08:20", hist)
	}
	if got := timeOf(hist.NextExecutionTime); !got.Equal(utc("2024-05-01 09:15:00")) {
		t.Errorf("early's next = %v; want 09:15", got)
	}
	h.expectEvent(`Warning Superseded Rule "early" (scheduled 2024-05-01T08:15:00Z)`)
}
