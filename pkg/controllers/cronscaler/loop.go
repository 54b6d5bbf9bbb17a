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
	"sync"
	"time"

	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/scaleplane/scaleplane/pkg/workloop"
)

// Run starts the workers and blocks until ctx ends and the workers stopped.
//
// It is the shared work loop (pkg/workloop) with two stages: the syncs,
// which fire and write targets, and the status writers, which record them
// (targets first). When ctx ends the syncs take no more firings and those
// in flight finish; then the status writes of every firing applied are made,
// retried while they fail, until the drain timeout; only then does Run
// return, and the controller manager release its leader-election lease. A
// firing applied but not recorded by then is reported, and inherited by the
// next leader (see priorWrite).
func (c *Controller) Run(ctx context.Context) {
	defer c.queue.ShutDown()
	defer c.records.ShutDown()
	if !cache.WaitForNamedCacheSyncWithContext(ctx, c.synced) {
		return
	}
	workloop.RunStages(ctx, workloop.Options{DrainTimeout: c.drainTimeout, Clock: c.clock}, c.stages()...)
}

// stages are the loop's two stages: the syncs, then the status writers.
func (c *Controller) stages() []workloop.Stage {
	return []workloop.Stage{
		{Name: Name, Queue: c.queue, Workers: c.workers, Sync: c.syncKey},
		{
			Name: Name + " status", Queue: c.records, Workers: c.workers, Sync: c.recordKey, Drain: true,
			// A status write that failed before the stop waits for its
			// retry in the queue's delayed adds, which a shut-down queue
			// drops: every object with applied firings not yet recorded is
			// queued once more.
			BeforeShutDown: func() {
				for _, key := range c.memory.pendingKeys() {
					c.records.Add(key)
				}
			},
		},
	}
}

// syncKey is what a sync worker runs for a key: fireSync, counted as a
// firing in progress (see waitForFirings) and apart from a status write of
// the same object; a sync that applied firings leaves their status write to
// the second stage.
func (c *Controller) syncKey(ctx context.Context, key cache.ObjectName) (time.Duration, error) {
	c.firing.Add(1)
	defer c.firing.Add(-1)
	unlock := c.locks.lock(key)
	defer unlock()
	d, record, err := c.fireSync(ctx, key)
	if record {
		c.records.Add(key)
	}
	return d, err
}

// recordKey is what a status writer runs for a key: it waits while firings
// are pending or running (targets first), unless stopping, and writes the
// status of the firings applied. While the loop stops a failed write is
// retried here: put back on the queue it would be dropped, as the queue
// shuts down, and the next leader would find the firing unrecorded.
func (c *Controller) recordKey(ctx context.Context, key cache.ObjectName) (time.Duration, error) {
	c.waitForFirings(ctx)
	err := c.recordLocked(ctx, key)
	if err != nil && workloop.Stopping(ctx) {
		c.recordWhileDraining(ctx, key, err)
		return 0, nil
	}
	return 0, err
}

// recordLocked is record holding the object's lock, with a panic turned
// into an error.
func (c *Controller) recordLocked(ctx context.Context, key cache.ObjectName) error {
	unlock := c.locks.lock(key)
	defer unlock()
	_, err := workloop.Recovered(func(ctx context.Context, key cache.ObjectName) (time.Duration, error) {
		return 0, c.record(ctx, key)
	})(ctx, key)
	return err
}

// waitForFirings returns once no firing is pending or running, when the
// loop stops, or after maxRecordWait. It paces status writes behind target
// writes and schedules nothing, so it runs on the wall clock. Only one status
// writer polls at a time; the others wait for it on firingsGate, then see the
// firings done at once: tens of writers polling would take CPU from the
// target writes they wait for. (A sync taken from the queue in the instant
// before it is counted may overlap one status write: that costs a little
// time, nothing else.)
func (c *Controller) waitForFirings(ctx context.Context) {
	// Counted from before the gate: writers queued behind it must not each
	// wait maxRecordWait in turn.
	deadline := time.Now().Add(maxRecordWait)
	c.firingsGate.Lock()
	defer c.firingsGate.Unlock()
	for !workloop.Stopping(ctx) && (c.queue.Len() > 0 || c.firing.Load() > 0) && time.Now().Before(deadline) {
		time.Sleep(recordPollInterval)
	}
}

// Retries of a status write that fails while the loop stops start
// minDrainRetry apart and double up to maxDrainRetry; the drain timeout
// bounds them.
const (
	minDrainRetry = 100 * time.Millisecond
	maxDrainRetry = 2 * time.Second
)

// recordWhileDraining retries a status write that failed while the loop
// stops, until it succeeds or the drain timeout cancels ctx; then the
// firings it held are reported as applied but not recorded.
func (c *Controller) recordWhileDraining(ctx context.Context, key cache.ObjectName, err error) {
	logger := klog.FromContext(ctx)
	for wait := minDrainRetry; err != nil; wait = min(2*wait, maxDrainRetry) {
		logger.Info("Recording applied firings failed while stopping, will retry until the drain timeout", "cronFederatedHPA", key, "retryAfter", wait, "err", err)
		timer := c.clock.NewTimer(wait)
		select {
		case <-ctx.Done():
			timer.Stop()
			c.reportUnrecorded(ctx, key, err)
			return
		case <-timer.C():
		}
		err = c.recordLocked(ctx, key)
	}
}

// reportUnrecorded says that firings of the object were applied to their
// targets but could not be recorded in its status before the controller
// stopped. The next leader plans from status, finds them due, and checks
// the target before applying them again (see priorWrite).
func (c *Controller) reportUnrecorded(ctx context.Context, key cache.ObjectName, err error) {
	if !c.memory.abandon(key) {
		// Reported already: the key was queued twice while stopping.
		return
	}
	unrecordedStatuses.Inc()
	klog.FromContext(ctx).Error(err, "Firings were applied to their targets but could not be recorded in status before the drain timeout; the next leader finds them unrecorded",
		"cronFederatedHPA", key, "rules", c.memory.pendingRules(key))
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
