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
