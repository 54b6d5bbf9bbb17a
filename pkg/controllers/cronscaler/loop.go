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
	"fmt"
	"runtime/debug"
	"sync"
	"time"

	utilruntime "k8s.io/apimachinery/pkg/util/runtime"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
)

// Run starts the workers and blocks until ctx ends and the workers stopped.
//
// When ctx ends the workers take no more firings, and the syncs in flight
// finish with a context of their own, then the status writes still queued
// are made; the context is cancelled only if all this takes longer than the
// drain timeout: a firing applied but not recorded is applied once more by
// the next leader. The controller manager releases its leader-election lease
// only after Run returned.
func (c *Controller) Run(ctx context.Context) {
	defer c.queue.ShutDown()
	defer c.records.ShutDown()
	logger := klog.FromContext(ctx)
	if !cache.WaitForNamedCacheSyncWithContext(ctx, c.synced) {
		return
	}
	logger.Info("Starting workers", "workers", c.workers)
	workCtx, cancelWork := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelWork()
	var wg, recordWG sync.WaitGroup
	for i := 0; i < c.workers; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			wait.UntilWithContext(ctx, func(ctx context.Context) { c.worker(ctx, workCtx) }, time.Second)
		}()
		recordWG.Add(1)
		go func() {
			defer recordWG.Done()
			// Restarted after a panic until the queue is drained, even once
			// stopping: firings applied are recorded.
			for !c.recordWorker(ctx, workCtx) {
			}
		}()
	}
	<-ctx.Done()
	c.queue.ShutDown()
	stopped := make(chan struct{})
	go func() {
		wg.Wait()
		// No firing is left: the status writers drain their queue. A status
		// write that failed before the stop waits for its retry in the
		// queue's delayed adds, which a shut-down queue drops: every object
		// with applied firings not yet recorded is queued once more.
		for _, key := range c.memory.pendingKeys() {
			c.records.Add(key)
		}
		c.records.ShutDown()
		recordWG.Wait()
		close(stopped)
	}()
	logger.Info("Stopping: no new syncs, waiting for the syncs in flight", "timeout", c.drainTimeout)
	timer := c.clock.NewTimer(c.drainTimeout)
	defer timer.Stop()
	select {
	case <-stopped:
	case <-timer.C():
		logger.Info("The syncs in flight did not finish in time, cancelling them", "timeout", c.drainTimeout)
		cancelWork()
		<-stopped
	}
	logger.Info("Workers stopped")
}

// worker processes keys until stop ends or the queue shuts down; syncs run
// with work. A panic ends only this call; wait.Until starts the worker again.
func (c *Controller) worker(stop, work context.Context) {
	defer func() {
		if r := recover(); r != nil {
			utilruntime.HandleErrorWithContext(work, fmt.Errorf("%v", r), "Cron-scaler worker panicked", "stack", string(debug.Stack()))
		}
	}()
	for c.processNextWorkItem(stop, work) {
	}
}

func (c *Controller) processNextWorkItem(stop, work context.Context) bool {
	key, quit := c.queue.Get()
	if quit {
		return false
	}
	defer c.queue.Done(key)
	// A queue that is shut down still hands out what it holds: take no new
	// work once stopping.
	if stop.Err() != nil {
		return false
	}

	c.firing.Add(1)
	unlock := c.locks.lock(key)
	requeueAfter, record, err := c.fireRecovered(work, key)
	unlock()
	c.firing.Add(-1)
	if record {
		c.records.Add(key)
	}
	switch {
	case err != nil:
		utilruntime.HandleErrorWithContext(work, err, "Syncing CronFederatedHPA failed, will retry", "cronFederatedHPA", key)
		c.queue.AddRateLimited(key)
		if requeueAfter > 0 {
			// The retry may back off past the next firing: keep it too.
			c.queue.AddAfter(key, requeueAfter)
		}
	case requeueAfter > 0:
		c.queue.Forget(key)
		c.queue.AddAfter(key, requeueAfter)
	default:
		c.queue.Forget(key)
	}
	return true
}

// recordWorker writes the statuses of firings already applied until the
// status queue shuts down and is empty: on stop it drains the queue rather
// than leave firings unrecorded. It waits while firings are pending or
// running (targets first) unless stopping. It returns true once the queue is
// drained, false after a panic, which ends only this call.
func (c *Controller) recordWorker(stop, work context.Context) (drained bool) {
	defer func() {
		if r := recover(); r != nil {
			utilruntime.HandleErrorWithContext(work, fmt.Errorf("%v", r), "Cron-scaler status writer panicked", "stack", string(debug.Stack()))
		}
	}()
	for c.processNextRecord(stop, work) {
	}
	return true
}

func (c *Controller) processNextRecord(stop, work context.Context) bool {
	key, quit := c.records.Get()
	if quit {
		return false
	}
	defer c.records.Done(key)
	c.waitForFirings(stop)

	unlock := c.locks.lock(key)
	err := c.recordRecovered(work, key)
	unlock()
	if err != nil && stop.Err() != nil {
		// Stopping: a retry put back on the queue would be dropped once it
		// shuts down, and the next leader would apply the firing again.
		c.recordWhileDraining(work, key, err)
		return true
	}
	if err != nil {
		utilruntime.HandleErrorWithContext(work, err, "Recording the firings of a CronFederatedHPA failed, will retry", "cronFederatedHPA", key)
		c.records.AddRateLimited(key)
		return true
	}
	c.records.Forget(key)
	return true
}

// Retries of a status write that fails while Run drains its queues start
// minDrainRetry apart and double up to maxDrainRetry; the drain timeout
// bounds them.
const (
	minDrainRetry = 100 * time.Millisecond
	maxDrainRetry = 2 * time.Second
)

// recordWhileDraining retries a status write that failed while the
// controller stops, until it succeeds or the drain timeout cancels work;
// then the firings it held are reported as applied but not recorded.
func (c *Controller) recordWhileDraining(work context.Context, key cache.ObjectName, err error) {
	logger := klog.FromContext(work)
	for wait := minDrainRetry; err != nil; wait = min(2*wait, maxDrainRetry) {
		logger.Info("Recording applied firings failed while stopping, will retry until the drain timeout", "cronFederatedHPA", key, "retryAfter", wait, "err", err)
		timer := c.clock.NewTimer(wait)
		select {
		case <-work.Done():
			timer.Stop()
			c.reportUnrecorded(work, key, err)
			return
		case <-timer.C():
		}
		unlock := c.locks.lock(key)
		err = c.recordRecovered(work, key)
		unlock()
	}
}

// reportUnrecorded says that firings of the object were applied to their
// targets but could not be recorded in its status before the controller
// stopped. The next leader plans from status, finds them due, and checks
// the target before applying them again (see inherited firings).
func (c *Controller) reportUnrecorded(ctx context.Context, key cache.ObjectName, err error) {
	if !c.memory.abandon(key) {
		// Reported already: the key was queued twice while stopping.
		return
	}
	unrecordedStatuses.Inc()
	klog.FromContext(ctx).Error(err, "Firings were applied to their targets but could not be recorded in status before the drain timeout; the next leader finds them unrecorded",
		"cronFederatedHPA", key, "rules", c.memory.pendingRules(key))
}

// waitForFirings returns once no firing is pending or running, when stop
// ends, or after maxRecordWait. It paces status writes behind target writes
// and schedules nothing, so it runs on the wall clock. Only one status writer
// polls at a time; the others wait for it on firingsGate, then see the
// firings done at once: tens of writers polling would take CPU from the
// target writes they wait for. (A sync taken from the queue in the instant
// before it is counted may overlap one status write: that costs a little
// time, nothing else.)
func (c *Controller) waitForFirings(stop context.Context) {
	// Counted from before the gate: writers queued behind it must not each
	// wait maxRecordWait in turn.
	deadline := time.Now().Add(maxRecordWait)
	c.firingsGate.Lock()
	defer c.firingsGate.Unlock()
	for stop.Err() == nil && (c.queue.Len() > 0 || c.firing.Load() > 0) && time.Now().Before(deadline) {
		time.Sleep(recordPollInterval)
	}
}

// fireRecovered is fireSync with a panic turned into an error.
func (c *Controller) fireRecovered(ctx context.Context, key cache.ObjectName) (d time.Duration, record bool, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("panic while syncing: %v\n%s", r, debug.Stack())
		}
	}()
	return c.fireSync(ctx, key)
}

// recordRecovered is record with a panic turned into an error.
func (c *Controller) recordRecovered(ctx context.Context, key cache.ObjectName) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("panic while recording: %v\n%s", r, debug.Stack())
		}
	}()
	return c.record(ctx, key)
}

// keyLocks are per-object locks: a sync and a status write of the same object
// (from the two queues) must not interleave.
type keyLocks struct {
	mu    sync.Mutex
	locks map[cache.ObjectName]*keyLock
}

type keyLock struct {
	mu   sync.Mutex
	refs int
}

func newKeyLocks() *keyLocks {
	return &keyLocks{locks: map[cache.ObjectName]*keyLock{}}
}

// lock locks key and returns its unlock.
func (l *keyLocks) lock(key cache.ObjectName) func() {
	l.mu.Lock()
	k := l.locks[key]
	if k == nil {
		k = &keyLock{}
		l.locks[key] = k
	}
	k.refs++
	l.mu.Unlock()
	k.mu.Lock()
	return func() {
		k.mu.Unlock()
		l.mu.Lock()
		k.refs--
		if k.refs == 0 {
			delete(l.locks, key)
		}
		l.mu.Unlock()
	}
}
