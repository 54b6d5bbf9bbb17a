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
	"fmt"
	"sort"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeobj "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"
	testingclock "k8s.io/utils/clock/testing"
)

// The simulated processes' queues, clock and event recorder (the driver
// that uses them: sim_run_test.go).

// simQueue is one of a process's queues: keys added at once go to the real
// queue; keys added with a delay are held until the clock reaches them, the
// failure backoff coming from the controller's own rate limiter.
type simQueue struct {
	workqueue.TypedRateLimitingInterface[cache.ObjectName]
	limiter workqueue.TypedRateLimiter[cache.ObjectName]
	clock   clock.Clock
	mu      sync.Mutex
	due     map[cache.ObjectName]time.Time
	// gate, while set, holds the stage's worker in Get until the queue is
	// shut down (see gracefulStop); closed once.
	gate     chan struct{}
	gateOnce sync.Once
}

// holdUntilShutDown makes Get wait for ShutDown: the worker RunStages
// starts for the queue takes no key while the stop path still queues
// (BeforeShutDown), so which keys it syncs, and how often, does not depend
// on how the goroutines are scheduled.
func (q *simQueue) holdUntilShutDown() {
	q.gate = make(chan struct{})
}

func (q *simQueue) Get() (cache.ObjectName, bool) {
	if q.gate != nil {
		<-q.gate
	}
	return q.TypedRateLimitingInterface.Get()
}

func (q *simQueue) ShutDown() {
	q.TypedRateLimitingInterface.ShutDown()
	if q.gate != nil {
		q.gateOnce.Do(func() { close(q.gate) })
	}
}

func newSimQueue(q workqueue.TypedRateLimitingInterface[cache.ObjectName], clk clock.Clock) *simQueue {
	return &simQueue{TypedRateLimitingInterface: q, limiter: failureRateLimiter(), clock: clk, due: map[cache.ObjectName]time.Time{}}
}

func (q *simQueue) AddAfter(key cache.ObjectName, d time.Duration) {
	if d <= 0 {
		q.Add(key)
		return
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	at := q.clock.Now().Add(d)
	if cur, ok := q.due[key]; !ok || at.Before(cur) {
		q.due[key] = at
	}
}

func (q *simQueue) AddRateLimited(key cache.ObjectName) { q.AddAfter(key, q.limiter.When(key)) }
func (q *simQueue) Forget(key cache.ObjectName)         { q.limiter.Forget(key) }
func (q *simQueue) NumRequeues(key cache.ObjectName) int {
	return q.limiter.NumRequeues(key)
}

// next is when the earliest held key is due; zero if none.
func (q *simQueue) next() time.Time {
	q.mu.Lock()
	defer q.mu.Unlock()
	var next time.Time
	for _, at := range q.due {
		if next.IsZero() || at.Before(next) {
			next = at
		}
	}
	return next
}

// release adds the keys due by now, earliest first (ties by name).
func (q *simQueue) release(now time.Time) {
	q.mu.Lock()
	var keys []cache.ObjectName
	for k, at := range q.due {
		if !at.After(now) {
			keys = append(keys, k)
		}
	}
	sort.Slice(keys, func(i, j int) bool {
		if !q.due[keys[i]].Equal(q.due[keys[j]]) {
			return q.due[keys[i]].Before(q.due[keys[j]])
		}
		return keys[i].Name < keys[j].Name
	})
	for _, k := range keys {
		delete(q.due, k)
	}
	q.mu.Unlock()
	for _, k := range keys {
		q.Add(k)
	}
}

// simClock is the fake clock, noting every timer made on it (the drain of a
// graceful stop waits on them).
type simClock struct {
	*testingclock.FakeClock
	mu     sync.Mutex
	timers []simTimer
	// drainEnd, while a graceful stop drains, is when its drain timeout
	// fires (see NewTimer).
	drainEnd     time.Time
	drainTimeout time.Duration
}

type simTimer struct {
	at time.Time
	d  time.Duration
}

// NewTimer makes the timer on the fake clock before it notes it, both under
// mu: a timer that timersFrom shows already waits on the clock, so setting
// the clock to its time fires it. Noted first, a graceful stop could step
// the clock to it before it was made; it was then made from the new time,
// fired d later than noted, and the drain waited forever for a retry that
// never came (TestSim hung under -race; TestSimClockTimerSeenIsWaiting).
// Its time is read once it is made, so a clock set in between can only
// make the noted time later than the timer's, which still fires it.
func (c *simClock) NewTimer(d time.Duration) clock.Timer {
	c.mu.Lock()
	defer c.mu.Unlock()
	fire := d
	if c.Now().Add(d).Equal(c.drainEnd) && d != c.drainTimeout {
		// A retry due at the very instant the drain times out would fire
		// with the drain timer, and the writer's select would pick one of
		// the two at random: the drain timeout wins the tie.
		fire += time.Nanosecond
	}
	t := c.FakeClock.NewTimer(fire)
	c.timers = append(c.timers, simTimer{at: c.Now().Add(d), d: d})
	return t
}

// draining notes when the drain of a graceful stop ends (zero: none runs).
func (c *simClock) draining(end time.Time, timeout time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.drainEnd, c.drainTimeout = end, timeout
}

func (c *simClock) timersFrom(i int) []simTimer {
	c.mu.Lock()
	defer c.mu.Unlock()
	if i >= len(c.timers) {
		return nil
	}
	return append([]simTimer(nil), c.timers[i:]...)
}

// simEvent is an event a process emitted.
type simEvent struct {
	at      time.Time
	proc    int
	uid     types.UID
	name    string
	reason  string
	message string
}

type simRecorder struct {
	s *sim
	p *simProc
}

func (r *simRecorder) Event(obj runtimeobj.Object, eventtype, reason, message string) {
	r.s.mu.Lock()
	defer r.s.mu.Unlock()
	if r.p.dead {
		return
	}
	e := simEvent{at: r.s.clock.Now(), proc: r.p.id, reason: reason, message: message}
	if m, ok := obj.(metav1.Object); ok {
		e.uid, e.name = m.GetUID(), m.GetName()
	}
	r.s.events = append(r.s.events, e)
}

func (r *simRecorder) Eventf(obj runtimeobj.Object, eventtype, reason, messageFmt string, args ...any) {
	r.Event(obj, eventtype, reason, fmt.Sprintf(messageFmt, args...))
}

func (r *simRecorder) AnnotatedEventf(obj runtimeobj.Object, _ map[string]string, eventtype, reason, messageFmt string, args ...any) {
	r.Eventf(obj, eventtype, reason, messageFmt, args...)
}
