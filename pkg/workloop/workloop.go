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

// Package workloop is the work loop the hpa-generator and the resizer share:
// N workers take keys from a rate-limited queue and sync them; an error
// retries the key with backoff, a requeue delay syncs it again later, and a
// panic in a sync or a worker is logged and turned into a retry, so one bad
// object cannot take the process down. (The cron-scaler has its own loop:
// two queues, drained in order on shutdown.)
package workloop

import (
	"context"
	"fmt"
	"runtime/debug"
	"sync"
	"time"

	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
)

// Queue is the queue the loop takes keys from.
type Queue = workqueue.TypedRateLimitingInterface[cache.ObjectName]

// SyncFunc syncs one key. An error retries it with backoff; a positive
// duration syncs it again after that long; zero forgets it until its next
// event.
type SyncFunc func(ctx context.Context, key cache.ObjectName) (time.Duration, error)

// Run starts workers that process keys with sync until ctx ends, then shuts
// the queue down and returns once every worker has stopped. name says whose
// loop it is in logs.
func Run(ctx context.Context, queue Queue, workers int, name string, syncKey SyncFunc) {
	logger := klog.FromContext(ctx)
	logger.Info("Starting workers", "workers", workers)
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// A panic ends only this call; wait.Until starts the worker again.
			wait.UntilWithContext(ctx, func(ctx context.Context) { work(ctx, queue, name, syncKey) }, time.Second)
		}()
	}
	<-ctx.Done()
	queue.ShutDown()
	wg.Wait()
	logger.Info("Workers stopped")
}

func work(ctx context.Context, queue Queue, name string, sync SyncFunc) {
	defer func() {
		if r := recover(); r != nil {
			utilruntime.HandleErrorWithContext(ctx, fmt.Errorf("%v", r), "Worker panicked", "controller", name, "stack", string(debug.Stack()))
		}
	}()
	for ProcessNext(ctx, queue, name, sync) {
	}
}

// ProcessNext takes one key from the queue and syncs it, and reports whether
// the queue is still open.
func ProcessNext(ctx context.Context, queue Queue, name string, sync SyncFunc) bool {
	key, quit := queue.Get()
	if quit {
		return false
	}
	defer queue.Done(key)

	requeueAfter, err := Recovered(sync)(ctx, key)
	switch {
	case err != nil:
		utilruntime.HandleErrorWithContext(ctx, err, "Sync failed, will retry", "controller", name, "key", key)
		queue.AddRateLimited(key)
	case requeueAfter > 0:
		queue.Forget(key)
		queue.AddAfter(key, requeueAfter)
	default:
		queue.Forget(key)
	}
	return true
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
