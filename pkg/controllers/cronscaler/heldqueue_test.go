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
	"sync"
	"time"

	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
)

// heldQueue is one of the controller's queues as the harness drives it: keys
// added at once go to the real queue, and the worker functions of Run take
// them from it; keys added with a delay (a requeue at the next firing, a
// retry with backoff) are held and recorded instead of timed, so the test
// decides when they come back. With timed set it passes everything through,
// for tests that run Run.
type heldQueue struct {
	workqueue.TypedRateLimitingInterface[cache.ObjectName]
	mu      sync.Mutex
	timed   bool
	delays  map[cache.ObjectName]time.Duration
	retries map[cache.ObjectName]int
}

func (q *heldQueue) AddAfter(key cache.ObjectName, d time.Duration) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.timed {
		q.TypedRateLimitingInterface.AddAfter(key, d)
		return
	}
	if q.delays == nil {
		q.delays = map[cache.ObjectName]time.Duration{}
	}
	q.delays[key] = d
}

func (q *heldQueue) AddRateLimited(key cache.ObjectName) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.timed {
		q.TypedRateLimitingInterface.AddRateLimited(key)
		return
	}
	if q.retries == nil {
		q.retries = map[cache.ObjectName]int{}
	}
	q.retries[key]++
}

// after returns the delay key was last requeued with.
func (q *heldQueue) after(key cache.ObjectName) (time.Duration, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	d, ok := q.delays[key]
	return d, ok
}

// retried says whether key was requeued with backoff.
func (q *heldQueue) retried(key cache.ObjectName) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.retries[key] > 0
}

func (q *heldQueue) forget(key cache.ObjectName) {
	q.mu.Lock()
	defer q.mu.Unlock()
	delete(q.delays, key)
	delete(q.retries, key)
}
