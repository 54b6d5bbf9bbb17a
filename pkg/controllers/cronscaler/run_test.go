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
	"context"
	"errors"
	"testing"
	"time"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/scale"
	"k8s.io/client-go/tools/cache"
	"k8s.io/component-base/metrics/testutil"
)

// Issue 12, item 4 (the controller's part): when Run's context ends, the
// sync in flight finishes, target write and status write both, with a
// context that is not cancelled; no new work is taken; Run returns after.
func TestRunDrainsTheSyncInFlight(t *testing.T) {
	h := newHarness(t, utc("2024-05-01 07:59:59"), cron("c", rule("r", "0 8 * * *", 10)), cron("d", rule("r", "0 8 * * *", 10)))
	h.scales.set("deployments", "web", 1)
	h.syncAt(utc("2024-05-01 07:59:59"), "c")
	h.syncAt(utc("2024-05-01 07:59:59"), "d")
	h.clock.SetTime(utc("2024-05-01 08:00:00.100"))
	h.c.synced = func() bool { return true }
	h.scales.block, h.scales.entered = make(chan struct{}), make(chan struct{}, 10)

	ctx, cancel := context.WithCancel(h.ctx)
	returned := make(chan struct{})
	go func() {
		defer close(returned)
		h.c.Run(ctx)
	}()
	h.c.queue.Add(cache.ObjectName{Namespace: ns, Name: "c"})
	receive(t, h.scales.entered, "the sync of c writing the target")
	h.c.queue.Add(cache.ObjectName{Namespace: ns, Name: "d"})
	cancel()
	select {
	case <-returned:
		t.Fatal("Run returned while a sync was in flight")
	case <-time.After(200 * time.Millisecond):
	}
	close(h.scales.block)
	select {
	case <-returned:
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return once the sync in flight finished")
	}
	if hist := h.history("c", "r"); len(hist.SuccessfulExecutions) != 1 {
		t.Errorf("the sync in flight did not record its firing: %+v", hist)
	}
	if n := h.scales.updateCount(); n != 1 {
		t.Errorf("target writes = %d; want 1: no new work once stopping", n)
	}
}

// Syncs that do not finish within the drain timeout are cancelled, so Run
// returns in bounded time.
func TestRunDrainIsBounded(t *testing.T) {
	h := newHarness(t, utc("2024-05-01 07:59:59"), cron("c", rule("r", "0 8 * * *", 10)))
	h.syncAt(utc("2024-05-01 07:59:59"), "c")
	h.clock.SetTime(utc("2024-05-01 08:00:00.100"))
	h.c.synced = func() bool { return true }
	stuck := &stuckScales{entered: make(chan struct{}, 1)}
	h.c.scales = stuck

	ctx, cancel := context.WithCancel(h.ctx)
	returned := make(chan struct{})
	go func() {
		defer close(returned)
		h.c.Run(ctx)
	}()
	h.c.queue.Add(cache.ObjectName{Namespace: ns, Name: "c"})
	receive(t, stuck.entered, "the sync of c writing the target")
	cancel()
	// The drain timer runs on the controller's clock.
	eventually(t, h.clock.HasWaiters, "Run waiting on its drain timer")
	select {
	case <-returned:
		t.Fatal("Run returned before the drain timeout while a sync was in flight")
	case <-time.After(100 * time.Millisecond):
	}
	h.clock.Step(DefaultDrainTimeout)
	select {
	case <-returned:
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after the drain timeout")
	}
}

// stuckScales is a scale client whose writes hang until their context ends,
// like a request to an apiserver that does not answer.
type stuckScales struct {
	entered chan struct{}
}

func (s *stuckScales) Scales(string) scale.ScaleInterface { return s }

func (s *stuckScales) Get(context.Context, schema.GroupResource, string, metav1.GetOptions) (*autoscalingv1.Scale, error) {
	return nil, errors.New("not implemented")
}

func (s *stuckScales) Update(context.Context, schema.GroupResource, *autoscalingv1.Scale, metav1.UpdateOptions) (*autoscalingv1.Scale, error) {
	return nil, errors.New("not implemented")
}

func (s *stuckScales) Patch(ctx context.Context, _ schema.GroupVersionResource, _ string, _ types.PatchType, _ []byte, _ metav1.PatchOptions) (*autoscalingv1.Scale, error) {
	s.entered <- struct{}{}
	<-ctx.Done()
	return nil, ctx.Err()
}

// Issue 17, finding 3: a status write that fails once while Run drains used
// to be put back on a queue already shut down, and dropped; Run returned
// long before its drain timeout without recording the applied firing. It is
// now retried until it is written.
func TestRunRetriesAStatusWriteThatFailsWhileDraining(t *testing.T) {
	forEachSchema(t, func(t *testing.T, crd schemaVariant) {
		h, returned := runUntilStopping(t, crd, 1)
		for deadline := time.Now().Add(maxWait); !isClosed(returned); {
			if time.Now().After(deadline) {
				t.Fatalf("Run did not return within %v of stepping its clock", maxWait)
			}
			if h.clock.HasWaiters() {
				h.clock.Step(minDrainRetry)
			}
			time.Sleep(time.Millisecond)
		}
		h.refresh()
		if hist := h.history("c", "r"); len(hist.SuccessfulExecutions) != 1 {
			t.Errorf("the applied firing was not recorded before Run returned: %+v", hist)
		}
		if n := h.statusWrites(); n != 2 {
			t.Errorf("%d status writes; want 2, the failed one and its retry", n)
		}
	})
}

// Issue 17, finding 3: a status write that keeps failing is retried until
// the drain timeout, and then reported (metric, log), not dropped silently.
func TestRunReportsAStatusWriteAbandonedAtTheDrainTimeout(t *testing.T) {
	before, _ := testutil.GetCounterMetricValue(unrecordedStatuses)
	h, returned := runUntilStopping(t, projectSchema, 1000)
	stepped := time.Duration(0)
	for deadline := time.Now().Add(maxWait); !isClosed(returned); {
		if time.Now().After(deadline) {
			t.Fatalf("Run did not return within %v of stepping its clock (stepped %v)", maxWait, stepped)
		}
		if h.clock.HasWaiters() {
			h.clock.Step(minDrainRetry)
			stepped += minDrainRetry
		}
		time.Sleep(time.Millisecond)
	}
	if stepped < DefaultDrainTimeout {
		t.Errorf("Run returned after %v of retries; want it to retry until the drain timeout (%v)", stepped, DefaultDrainTimeout)
	}
	if n := h.statusWrites(); n < 5 {
		t.Errorf("%d status writes; want retries until the drain timeout", n)
	}
	after, _ := testutil.GetCounterMetricValue(unrecordedStatuses)
	if after-before != 1 {
		t.Errorf("cron_scaler_unrecorded_statuses_total went up by %v; want 1", after-before)
	}
}

// runUntilStopping runs the controller over one object due at 08:00 and
// stops it while its target write is in flight; the next failures status
// writes then fail. It returns once the target write finished; returned is
// closed when Run returns.
func runUntilStopping(t *testing.T, crd schemaVariant, failures int) (*harness, chan struct{}) {
	h := newHarnessOn(t, crd, utc("2024-05-01 07:59:59"), cron("c", rule("r", "0 8 * * *", 10)))
	h.scales.set("deployments", "web", 1)
	h.syncAt(utc("2024-05-01 07:59:59"), "c")
	h.client.ClearActions()
	h.clock.SetTime(utc("2024-05-01 08:00:00.100"))
	h.c.synced = func() bool { return true }
	h.runTimed()
	h.scales.block, h.scales.entered = make(chan struct{}), make(chan struct{}, 10)

	ctx, cancel := context.WithCancel(h.ctx)
	returned := make(chan struct{})
	go func() {
		defer close(returned)
		h.c.Run(ctx)
	}()
	h.c.queue.Add(cache.ObjectName{Namespace: ns, Name: "c"})
	receive(t, h.scales.entered, "the sync of c writing the target")
	cancel()
	h.failStatusWrites(failures)
	close(h.scales.block)
	return h, returned
}

// maxWait bounds a test's wait for what the controller's goroutines do, in
// real time: it takes milliseconds, so a wait that reaches it is a hang,
// named by the test instead of go test's timeout.
const maxWait = 10 * time.Second

// receive waits for a value on ch, what says what it stands for.
func receive(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(maxWait):
		t.Fatalf("waited %v for %s", maxWait, what)
	}
}

// eventually waits until cond holds.
func eventually(t *testing.T, cond func() bool, what string) {
	t.Helper()
	for deadline := time.Now().Add(maxWait); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("waited %v for %s", maxWait, what)
		}
	}
}

func isClosed(ch chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}
