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

package workloop

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2/ktesting"
	testingclock "k8s.io/utils/clock/testing"
)

func newQueue(clk *testingclock.FakeClock) Queue {
	return workqueue.NewTypedRateLimitingQueueWithConfig(
		workqueue.DefaultTypedControllerRateLimiter[cache.ObjectName](),
		workqueue.TypedRateLimitingQueueConfig[cache.ObjectName]{Name: "test", Clock: clk},
	)
}

// TestProcessNext: a synced key is forgotten, a failed or panicking one is
// retried with backoff, a requeue delay adds it back after that long, and a
// shut-down queue ends the worker.
func TestProcessNext(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	clk := testingclock.NewFakeClock(time.Now())
	q := newQueue(clk)
	defer q.ShutDown()
	key := cache.ObjectName{Namespace: "ns", Name: "a"}
	cases := []struct {
		name         string
		sync         SyncFunc
		wantRequeues int
		wantLater    bool
	}{
		{"ok", func(context.Context, cache.ObjectName) (time.Duration, error) { return 0, nil }, 0, false},
		{"error", func(context.Context, cache.ObjectName) (time.Duration, error) { return 0, errors.New("boom") }, 1, false},
		{"panic", func(context.Context, cache.ObjectName) (time.Duration, error) { panic("bad object") }, 2, false},
		{"requeue after", func(context.Context, cache.ObjectName) (time.Duration, error) { return time.Minute, nil }, 0, true},
	}
	for _, tc := range cases {
		q.Add(key)
		if !ProcessNext(ctx, q, "test", tc.sync) {
			t.Fatalf("%s: the worker stopped", tc.name)
		}
		if got := q.NumRequeues(key); got != tc.wantRequeues {
			t.Errorf("%s: requeues %d, want %d", tc.name, got, tc.wantRequeues)
		}
		if tc.wantLater {
			if q.Len() != 0 {
				t.Errorf("%s: requeued at once", tc.name)
			}
			clk.Step(time.Minute)
			if err := waitLen(q, 1); err != nil {
				t.Errorf("%s: %v", tc.name, err)
			}
			k, _ := q.Get()
			q.Done(k)
		}
		// Drain what a retry put back.
		for q.Len() > 0 {
			k, _ := q.Get()
			q.Done(k)
		}
		clk.Step(time.Hour)
		for q.Len() > 0 {
			k, _ := q.Get()
			q.Done(k)
		}
	}
	q.ShutDown()
	if ProcessNext(ctx, q, "test", cases[0].sync) {
		t.Error("the worker went on after the queue shut down")
	}
}

func waitLen(q Queue, n int) error {
	deadline := time.Now().Add(5 * time.Second)
	for q.Len() != n {
		if time.Now().After(deadline) {
			return errors.New("the key was not added back after the delay")
		}
		time.Sleep(time.Millisecond)
	}
	return nil
}

// TestRun: every queued key is synced by the workers, and Run returns once
// ctx ends and the workers stopped.
func TestRun(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	q := newQueue(testingclock.NewFakeClock(time.Now()))
	var synced atomic.Int32
	for _, name := range []string{"a", "b", "c"} {
		q.Add(cache.ObjectName{Namespace: "ns", Name: name})
	}
	done := make(chan struct{})
	go func() {
		Run(ctx, q, 2, "test", func(context.Context, cache.ObjectName) (time.Duration, error) {
			if synced.Add(1) == 3 {
				cancel()
			}
			return 0, nil
		})
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("Run did not return after ctx ended")
	}
	if synced.Load() != 3 || !q.ShuttingDown() {
		t.Errorf("synced %d keys, queue shut down %v; want 3, true", synced.Load(), q.ShuttingDown())
	}
}

// TestRunDrains: once ctx ends, the sync in flight finishes with a context
// that is not cancelled and knows the loop is stopping, no new key is
// taken, and Run returns after it.
func TestRunDrains(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	clk := testingclock.NewFakeClock(time.Now())
	q := newQueue(clk)
	entered, release := make(chan struct{}), make(chan struct{})
	var synced atomic.Int32
	var ctxErr error
	var stopping bool
	q.Add(cache.ObjectName{Namespace: "ns", Name: "a"})
	done := make(chan struct{})
	go func() {
		defer close(done)
		RunStages(ctx, Options{Clock: clk}, Stage{Name: "test", Queue: q, Workers: 1, Sync: func(ctx context.Context, key cache.ObjectName) (time.Duration, error) {
			synced.Add(1)
			if key.Name == "a" {
				close(entered)
				<-release
				ctxErr, stopping = ctx.Err(), Stopping(ctx)
			}
			return 0, nil
		}})
	}()
	<-entered
	q.Add(cache.ObjectName{Namespace: "ns", Name: "b"})
	cancel()
	select {
	case <-done:
		t.Fatal("Run returned while a sync was in flight")
	case <-time.After(100 * time.Millisecond):
	}
	close(release)
	<-done
	if ctxErr != nil || !stopping {
		t.Errorf("the sync in flight saw ctx.Err() = %v, Stopping = %v; want nil, true", ctxErr, stopping)
	}
	if n := synced.Load(); n != 1 {
		t.Errorf("%d syncs; want 1: no new key once stopping", n)
	}
}

// TestRunDrainIsBounded: a sync that does not finish is cancelled at the
// drain timeout, on the loop's clock.
func TestRunDrainIsBounded(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	clk := testingclock.NewFakeClock(time.Now())
	q := newQueue(testingclock.NewFakeClock(time.Now())) // the drain timer is the only waiter on clk
	entered := make(chan struct{})
	q.Add(cache.ObjectName{Namespace: "ns", Name: "a"})
	done := make(chan struct{})
	go func() {
		defer close(done)
		RunStages(ctx, Options{Clock: clk, DrainTimeout: time.Minute}, Stage{Name: "test", Queue: q, Workers: 1, Sync: func(ctx context.Context, _ cache.ObjectName) (time.Duration, error) {
			close(entered)
			<-ctx.Done()
			return 0, ctx.Err()
		}})
	}()
	<-entered
	cancel()
	for !clk.HasWaiters() {
		time.Sleep(time.Millisecond)
	}
	clk.Step(time.Minute)
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after the drain timeout")
	}
}

// TestStagesStopInOrder: a draining stage syncs what its queue holds once
// the stage before it stopped, after its BeforeShutDown.
func TestStagesStopInOrder(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	clk := testingclock.NewFakeClock(time.Now())
	first, second := newQueue(clk), newQueue(clk)
	var order []string
	var mu sync.Mutex
	note := func(s string) {
		mu.Lock()
		defer mu.Unlock()
		order = append(order, s)
	}
	entered, release := make(chan struct{}), make(chan struct{})
	first.Add(cache.ObjectName{Name: "x"})
	done := make(chan struct{})
	go func() {
		defer close(done)
		RunStages(ctx, Options{Clock: clk},
			Stage{Name: "first", Queue: first, Workers: 1, Sync: func(context.Context, cache.ObjectName) (time.Duration, error) {
				close(entered)
				<-release
				note("first")
				second.Add(cache.ObjectName{Name: "x"})
				return 0, nil
			}},
			Stage{Name: "second", Queue: second, Workers: 1, Drain: true,
				BeforeShutDown: func() { note("before"); second.Add(cache.ObjectName{Name: "y"}) },
				Sync: func(_ context.Context, key cache.ObjectName) (time.Duration, error) {
					note("second " + key.Name)
					return 0, nil
				}},
		)
	}()
	<-entered
	cancel()
	close(release)
	<-done
	mu.Lock()
	defer mu.Unlock()
	if len(order) != 4 || order[0] != "first" || order[1] != "before" && order[2] != "before" || !slices.Contains(order, "second y") {
		t.Errorf("order %q; want the first stage's sync, then BeforeShutDown, and both keys of the second stage synced", order)
	}
}
