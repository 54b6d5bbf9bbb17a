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

// Package workloop is the work loop the three controllers share: N workers
// take keys from a rate-limited queue and sync them; an error retries the key
// with backoff, a requeue delay syncs it again later, and a panic in a sync
// or a worker is logged and turned into a retry, so one bad object cannot
// take the process down.
//
// They also stop the same way: when the loop's context ends, no new key is
// taken, the syncs in flight finish with a context that is not cancelled,
// and only then does Run return (and the controller manager release its
// leader-election lease); the drain timeout bounds the wait, after which the
// syncs' context is cancelled. A controller with more than one queue (the
// cron-scaler writes targets from one and statuses from a second) runs them
// as stages of one loop: they stop in order, and a stage can drain its queue
// instead of dropping it.
package workloop

import (
	"context"
	"fmt"
	"runtime/debug"
	"sync"
	"time"

	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
)

// Queue is the queue the loop takes keys from.
type Queue = workqueue.TypedRateLimitingInterface[cache.ObjectName]

// SyncFunc syncs one key. An error retries it with backoff; a positive
// duration syncs it again after that long (also alongside an error, so a
// backoff cannot push the key past a time it must run at); zero forgets it
// until its next event.
type SyncFunc func(ctx context.Context, key cache.ObjectName) (time.Duration, error)

// DefaultDrainTimeout bounds how long Run waits for the syncs in flight once
// its context ended.
const DefaultDrainTimeout = 15 * time.Second

// Stage is one queue of a loop and its workers.
type Stage struct {
	// Name says whose stage it is in logs.
	Name    string
	Queue   Queue
	Workers int
	Sync    SyncFunc
	// Drain makes the stage's workers sync what its queue holds when the
	// loop stops, instead of taking no new keys: for work that must not be
	// left undone (the cron-scaler's status writes of firings already
	// applied). A key requeued with a delay while stopping is dropped, as
	// the queue shuts down: a sync that must not lose it retries itself
	// while Stopping says so.
	Drain bool
	// BeforeShutDown, if set, runs once the stages before this one stopped
	// and before this stage's queue shuts down (the cron-scaler queues the
	// firings whose status is still to write).
	BeforeShutDown func()
}

// Options are a loop's settings beyond its stages.
type Options struct {
	// DrainTimeout bounds the wait for the syncs in flight once the loop
	// stops; zero is DefaultDrainTimeout.
	DrainTimeout time.Duration
	// Clock runs the drain timeout; nil is the real clock.
	Clock clock.Clock
}

type stoppingKey struct{}

// Stopping says whether the loop whose sync got ctx is stopping: its
// context ended, and the sync runs on until it finishes or the drain
// timeout passes.
func Stopping(ctx context.Context) bool {
	stop, ok := ctx.Value(stoppingKey{}).(context.Context)
	return ok && stop.Err() != nil
}

// Run starts workers that process keys with sync until ctx ends, then stops
// as the package says and returns once every worker has stopped. name says
// whose loop it is in logs.
func Run(ctx context.Context, queue Queue, workers int, name string, sync SyncFunc) {
	RunStages(ctx, Options{}, Stage{Name: name, Queue: queue, Workers: workers, Sync: sync})
}

// RunStages runs the stages' workers until ctx ends, then stops the stages
// in order (see Stage) and returns once every worker has stopped.
func RunStages(ctx context.Context, opts Options, stages ...Stage) {
	logger := klog.FromContext(ctx)
	if opts.DrainTimeout == 0 {
		opts.DrainTimeout = DefaultDrainTimeout
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	// The syncs' context outlives ctx until the drain ends, and tells them
	// (Stopping) that the loop stops.
	work, cancelWork := context.WithCancel(context.WithValue(context.WithoutCancel(ctx), stoppingKey{}, ctx))
	defer cancelWork()
	wgs := make([]sync.WaitGroup, len(stages))
	for i := range stages {
		st := &stages[i]
		logger.Info("Starting workers", "stage", st.Name, "workers", st.Workers)
		for range st.Workers {
			wgs[i].Add(1)
			go func() {
				defer wgs[i].Done()
				// A panic in the worker itself ends one run of it; it is
				// started again until its queue is shut down.
				for !worker(ctx, work, st) {
				}
			}()
		}
	}
	<-ctx.Done()
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		for i := range stages {
			if stages[i].BeforeShutDown != nil {
				stages[i].BeforeShutDown()
			}
			stages[i].Queue.ShutDown()
			wgs[i].Wait()
		}
	}()
	logger.Info("Stopping: no new work, waiting for the syncs in flight", "timeout", opts.DrainTimeout)
	timer := opts.Clock.NewTimer(opts.DrainTimeout)
	defer timer.Stop()
	select {
	case <-stopped:
	case <-timer.C():
		logger.Info("The syncs in flight did not finish in time, cancelling them", "timeout", opts.DrainTimeout)
		cancelWork()
		<-stopped
	}
	logger.Info("Workers stopped")
}

// worker processes keys of the stage until it has nothing more to do, and
// reports true then; false after a panic.
func worker(stop, work context.Context, st *Stage) (done bool) {
	defer func() {
		if r := recover(); r != nil {
			utilruntime.HandleErrorWithContext(work, fmt.Errorf("%v", r), "Worker panicked", "controller", st.Name, "stack", string(debug.Stack()))
		}
	}()
	for processNext(stop, work, st) {
	}
	return true
}

// ProcessNext takes one key from the stage's queue and syncs it with work,
// as the stage's workers do, and reports whether the worker goes on: not
// once the queue is shut down and empty, nor, for a stage that does not
// drain, once stop ended.
func (st *Stage) ProcessNext(stop, work context.Context) bool {
	return processNext(stop, work, st)
}

func processNext(stop, work context.Context, st *Stage) bool {
	key, quit := st.Queue.Get()
	if quit {
		return false
	}
	defer st.Queue.Done(key)
	// A queue that is shut down still hands out what it holds.
	if !st.Drain && stop.Err() != nil {
		return false
	}
	handle(work, st.Queue, st.Name, key)(Recovered(st.Sync)(work, key))
	return true
}

// handle returns what to do with the key once synced: see SyncFunc.
func handle(ctx context.Context, queue Queue, name string, key cache.ObjectName) func(time.Duration, error) {
	return func(requeueAfter time.Duration, err error) {
		switch {
		case err != nil:
			utilruntime.HandleErrorWithContext(ctx, err, "Sync failed, will retry", "controller", name, "key", key)
			queue.AddRateLimited(key)
			if requeueAfter > 0 {
				queue.AddAfter(key, requeueAfter)
			}
		case requeueAfter > 0:
			queue.Forget(key)
			queue.AddAfter(key, requeueAfter)
		default:
			queue.Forget(key)
		}
	}
}

// ProcessNext takes one key from the queue and syncs it, as a worker of a
// loop that is not stopping does, and reports whether the queue is still
// open.
func ProcessNext(ctx context.Context, queue Queue, name string, sync SyncFunc) bool {
	return processNext(ctx, ctx, &Stage{Name: name, Queue: queue, Sync: sync})
}

// Recovered returns sync with a panic turned into an error, so that the
// object is retried with backoff instead of the process going down.
func Recovered(sync SyncFunc) SyncFunc {
	return func(ctx context.Context, key cache.ObjectName) (d time.Duration, err error) {
		defer func() {
			if r := recover(); r != nil {
				err = fmt.Errorf("panic while syncing %s: %v\n%s", key, r, debug.Stack())
			}
		}()
		return sync(ctx, key)
	}
}
