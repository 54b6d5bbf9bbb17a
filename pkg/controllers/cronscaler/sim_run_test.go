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
	"math/rand/v2"
	"runtime"
	"sort"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/scaleplane/scaleplane/pkg/generated/informers/externalversions"
	"github.com/scaleplane/scaleplane/pkg/workloop"
)

// The simulated processes and the driver of TestSim. A process is a
// Controller built with NewController, as the manager builds it, on
// clients answered by the simulated apiserver. It runs single-threaded on
// the simulated clock: the driver feeds its informer's indexer from the
// server's watch log (with lag, and with a first list that may be stale),
// calls its event handlers as the informer does, and runs its two stages
// through workloop's Stage.ProcessNext, the function Run's workers run: the
// syncs first, then the status writers (targets first). Keys requeued with
// a delay or backoff are held by simQueue and come back when the clock
// reaches them. A graceful stop runs workloop.RunStages itself (the stop
// path: syncs in flight finish, status writes drain and are retried until
// the drain timeout), stepping the clock from timer to timer so that it
// replays exactly.

// How a process ends.
const (
	endCrash         = "crash"            // dies between two steps
	endCrashRecorded = "crash-unrecorded" // dies after a target write, before its status write
	endCrashRequest  = "crash-in-request" // dies inside a request
	endStop          = "graceful stop"    // releases its lease: the stop path drains
)

// maxCrashWait bounds how long a process meant to die in a request, or
// between a target write and its status write, waits for one.
const maxCrashWait = 15 * time.Minute

// simProc is one controller process (one leader term).
type simProc struct {
	s       *sim
	id      int
	c       *Controller
	ctx     context.Context
	syncs   *simQueue
	records *simQueue
	indexer cache.Indexer
	// The watch: cursor is the next event of the server's log to deliver,
	// nextAt when (zero: not drawn yet), lastAt when the previous one was.
	cursor         int
	nextAt, lastAt time.Time
	// cacheAt is, per object, when the version the cache holds was
	// committed; seen logs every delivery for the oracle.
	cacheAt map[types.UID]time.Time
	seen    []delivery
	start   time.Time
	// end is when it stopped firing (crashed, or began to stop); dead once
	// it does nothing more; cancelled once its drain timed out.
	end             time.Time
	dead, cancelled bool
	endKind         string
	// endAt is when the scenario ends it.
	endAt        time.Time
	clearActions func()
	// relisted is when its informer last relisted (sim_model_test.go).
	relisted time.Time
}

// delivery is a version of an object a process's cache got: by its first
// list or by the watch, at, and the last spec change that version holds.
type delivery struct {
	at        time.Time
	uid       types.UID
	versionAt time.Time
	specAt    time.Time
	list      bool
}

func (p *simProc) cacheSnapshot() map[types.UID]time.Time {
	out := make(map[types.UID]time.Time, len(p.cacheAt))
	for k, v := range p.cacheAt {
		out[k] = v
	}
	return out
}

// crashInRequest says whether the process dies in a request made now.
func (p *simProc) crashInRequest(now time.Time) bool {
	return p.endKind == endCrashRequest && !p.endAt.After(now)
}

func (p *simProc) die(now time.Time) {
	if p.dead {
		return
	}
	p.dead = true
	if p.end.IsZero() {
		p.end = now
	}
}

// sim is one simulation: a seed, its scenario, the server, the processes.
type sim struct {
	seed     uint64
	rng      *rand.Rand
	clock    *simClock
	srv      *simServer
	scenario *scenario
	ctx      context.Context
	mu       sync.Mutex
	procs    []*simProc
	leader   *simProc
	events   []simEvent
	stats    simStats

	// edges, when set, draws the generator's edge cases (see edgeTerm);
	// model, the model's relists and faults per request (sim_model_test.go).
	edges, model *rand.Rand
}

type simStats struct {
	syncs, records, refused, failed, lost, crashesInRequest int
	hung, relists, coalesced, tombstones, recreated         int
	objectSeconds                                           float64
}

// simMode says what a seed plays beyond every seed's scenario: the
// generator's edge cases (edgeTerm), the model's relists and faults per
// request (sim_model_test.go).
type simMode struct{ edges, model bool }

// newSimOf is newSim, with the generator's edge cases and the model when
// mode says so. They are drawn from random sources of their own, so a seed
// without them plays what it always played.
func newSimOf(seed uint64, days float64, mode simMode) *sim {
	s := &sim{seed: seed, rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))}
	if mode.edges {
		s.edges = rand.New(rand.NewPCG(seed^0x5bd1e9955bd1e995, seed+0x2545f4914f6cdd1d))
	}
	if mode.model {
		s.model = rand.New(rand.NewPCG(seed^0x7f4a7c159e3779b9, seed+0x94d049bb133111eb))
	}
	s.ctx = klog.NewContext(context.Background(), logr.Discard())
	s.scenario = generateScenario(s, days)
	s.clock = &simClock{FakeClock: testingclock.NewFakeClock(s.scenario.begin)}
	s.srv = newSimServer(s)
	return s
}

// run plays the scenario to its end.
func (s *sim) run() {
	sc := s.scenario
	idle := 0
	for {
		now := s.clock.Now()
		next := sc.nextAt()
		if p := s.leader; p != nil {
			delivery := p.nextDelivery()
			if at := sc.watchDown(p, delivery); !at.IsZero() {
				delivery = at
			}
			for _, t := range []time.Time{p.syncs.next(), p.records.next(), delivery, p.endAt, p.endAt.Add(maxCrashWait), sc.nextRelist(p, now)} {
				if !t.After(now) && (t.Equal(p.endAt) || t.Equal(p.endAt.Add(maxCrashWait))) {
					continue
				}
				if !t.IsZero() && (next.IsZero() || t.Before(next)) {
					next = t
				}
			}
		}
		if next.IsZero() || next.After(sc.end) {
			break
		}
		if next.After(now) {
			s.clock.SetTime(next)
			idle = 0
		} else if idle++; idle > 100000 {
			panic(fmt.Sprintf("seed %d: the simulation makes no progress at %s", s.seed, now))
		}
		s.step()
	}
	s.clock.SetTime(sc.end)
	if p := s.leader; p != nil {
		p.die(sc.end)
		s.stop(p)
	}
}

// step does what is due now: the scenario's events, the end of the leader
// term, the watch, then the leader's syncs and status writes.
func (s *sim) step() {
	now := s.clock.Now()
	for _, e := range s.scenario.due(now) {
		e.do()
	}
	p := s.leader
	if p == nil {
		return
	}
	if !p.endAt.After(now) {
		switch {
		case p.endKind == endCrash, !p.endAt.Add(maxCrashWait).After(now):
			s.crash(p)
			return
		case p.endKind == endStop:
			s.gracefulStop(p)
			return
		}
	}
	p.clearActions()
	if s.model != nil {
		s.relistDue(p, now)
	}
	s.deliver(p, now)
	p.syncs.release(now)
	p.records.release(now)
	syncs, records := p.c.stages()[0], p.c.stages()[1]
	for p.c.queue.Len() > 0 && !p.dead {
		syncs.ProcessNext(p.ctx, p.ctx)
		s.stats.syncs++
	}
	if !p.dead && p.endKind == endCrashRecorded && !p.endAt.After(now) && p.c.records.Len() > 0 {
		// Targets written, statuses not: the crash window.
		s.crash(p)
		return
	}
	for p.c.records.Len() > 0 && !p.dead {
		records.ProcessNext(p.ctx, p.ctx)
		s.stats.records++
	}
	if p.dead {
		s.crash(p)
	}
}

// startProc starts a new leader: a new process, its informer listed from
// the server (perhaps from a watch cache behind the last write).
func (s *sim) startProc(endKind string, endAt time.Time) {
	now := s.clock.Now()
	p := &simProc{s: s, id: len(s.procs) + 1, start: now, endKind: endKind, endAt: endAt, cacheAt: map[types.UID]time.Time{}}
	p.ctx = klog.NewContext(context.Background(), logr.Discard())
	client, kube, scales, meta := s.srv.clients(p)
	// The fake clients keep every request; the simulation keeps its own
	// history, so they are emptied at every step.
	p.clearActions = func() {
		client.ClearActions()
		kube.ClearActions()
		scales.ClearActions()
		meta.ClearActions()
	}
	factory := externalversions.NewSharedInformerFactory(client, 0)
	informer := factory.Autoscaling().V1alpha1().CronFederatedHPAs()
	c, err := NewController(p.ctx, Config{
		Informer: informer, Client: client, KubeClient: kube, Scales: scales, Metadata: meta,
		Mapper: newTestMapper(), Recorder: &simRecorder{s: s, p: p}, Clock: s.clock, Workers: 1, Stored: AllStoredFields,
	})
	if err != nil {
		panic(err)
	}
	p.syncs, p.records = newSimQueue(c.queue, s.clock), newSimQueue(c.records, s.clock)
	c.queue, c.records = p.syncs, p.records
	p.c = c
	p.indexer = informer.Informer().GetIndexer()
	s.procs = append(s.procs, p)
	s.leader = p

	// The first list: the state at some point of the log, perhaps behind
	// its end (a watch cache behind the last write).
	s.srv.mu.Lock()
	upTo := len(s.srv.log)
	if s.rng.Float64() < s.scenario.staleList {
		behind := now.Add(-time.Duration(s.rng.Int64N(int64(2 * time.Minute))))
		upTo = sort.Search(len(s.srv.log), func(i int) bool { return s.srv.log[i].at.After(behind) })
	}
	state := map[string]watchEvent{}
	for _, e := range s.srv.log[:upTo] {
		if e.deleted {
			delete(state, e.obj.Name)
		} else {
			state[e.obj.Name] = e
		}
	}
	s.srv.mu.Unlock()
	p.cursor = upTo
	names := make([]string, 0, len(state))
	for n := range state {
		names = append(names, n)
	}
	sort.Strings(names)
	objs := make([]any, 0, len(names))
	for _, n := range names {
		e := state[n]
		obj, _ := stripForCache(e.obj.DeepCopy())
		objs = append(objs, obj)
		p.cacheAt[e.obj.UID] = e.at
		p.seen = append(p.seen, delivery{at: now, uid: e.obj.UID, versionAt: e.at, specAt: e.version.specAt, list: true})
	}
	if err := p.indexer.Replace(objs, ""); err != nil {
		panic(err)
	}
	for _, o := range objs {
		c.onAdd(p.ctx, o)
	}
}

// nextDelivery is when the next watch event reaches the leader; zero if
// none is left.
func (p *simProc) nextDelivery() time.Time {
	srv := p.s.srv
	srv.mu.Lock()
	defer srv.mu.Unlock()
	if p.cursor >= len(srv.log) {
		return time.Time{}
	}
	if p.nextAt.IsZero() {
		at := srv.log[p.cursor].at.Add(p.s.scenario.watchLag())
		if at.Before(p.lastAt) {
			at = p.lastAt
		}
		p.nextAt = at
	}
	return p.nextAt
}

// deliver feeds the leader's informer the watch events due by now, and
// calls its handlers as the informer does.
func (s *sim) deliver(p *simProc, now time.Time) {
	for {
		at := p.nextDelivery()
		if at.IsZero() || at.After(now) || !s.scenario.watchDown(p, at).IsZero() {
			return
		}
		s.srv.mu.Lock()
		e := s.srv.log[p.cursor]
		s.srv.mu.Unlock()
		p.cursor++
		p.lastAt, p.nextAt = at, time.Time{}
		// As the informer holds it (see stripForCache).
		obj, _ := stripForCache(e.obj.DeepCopy())
		cron, _ := cronOf(obj)
		old, exists, _ := p.indexer.Get(obj)
		switch {
		case e.deleted:
			if exists {
				_ = p.indexer.Delete(old)
				p.c.onDelete(p.ctx, old)
			}
			delete(p.cacheAt, cron.UID)
			continue
		case exists:
			_ = p.indexer.Update(obj)
			p.c.onUpdate(p.ctx, old, obj)
		default:
			_ = p.indexer.Add(obj)
			p.c.onAdd(p.ctx, obj)
		}
		p.cacheAt[cron.UID] = e.at
		p.seen = append(p.seen, delivery{at: now, uid: cron.UID, versionAt: e.at, specAt: e.version.specAt})
	}
}

// crash ends the leader at once: what it held in memory is gone.
func (s *sim) crash(p *simProc) {
	p.die(s.clock.Now())
	s.stop(p)
}

func (s *sim) stop(p *simProc) {
	p.dead = true
	p.c.queue.ShutDown()
	p.c.records.ShutDown()
	if s.leader == p {
		s.leader = nil
	}
}

// maxSimDrainWait bounds the real time a graceful stop of the simulation
// may take.
const maxSimDrainWait = time.Minute

// gracefulStop runs the stop path of Run (workloop.RunStages with its
// context ended): no new syncs, the status writes of the firings applied
// drain, retried until the drain timeout. The clock is stepped from timer
// to timer, each time the status writer waits on one, so the drain replays
// exactly.
func (s *sim) gracefulStop(p *simProc) {
	now := s.clock.Now()
	p.end = now
	ctx, cancel := context.WithCancel(p.ctx)
	cancel()
	// Queued in a fixed order before the stop queues them (from a map).
	keys := p.c.memory.pendingKeys()
	sort.Slice(keys, func(i, j int) bool { return keys[i].Name < keys[j].Name })
	for _, k := range keys {
		p.c.records.Add(k)
	}
	// The status writer takes no key before the stop path queued its own
	// (see holdUntilShutDown), and a retry due with the drain timeout
	// loses to it (see simClock.NewTimer): the drain's goroutines then
	// take turns the harness decides.
	p.records.holdUntilShutDown()
	first := len(s.clock.timersFrom(0))
	drainEnd := now.Add(p.c.drainTimeout)
	s.clock.draining(drainEnd, p.c.drainTimeout)
	defer s.clock.draining(time.Time{}, 0)
	done := make(chan struct{})
	go func() {
		defer close(done)
		workloop.RunStages(ctx, workloop.Options{DrainTimeout: p.c.drainTimeout, Clock: p.c.clock}, p.c.stages()...)
	}()
	// The drain runs in a few milliseconds; one that does not end is a
	// bug in the loop or in this driver, named here instead of hanging
	// until go test's timeout.
	deadline := time.Now().Add(maxSimDrainWait)
	stepped := 0
	for {
		var retry *simTimer
		for retry == nil {
			select {
			case <-done:
				s.stop(p)
				return
			default:
			}
			if time.Now().After(deadline) {
				panic(fmt.Sprintf("seed %d: the graceful stop of process %d at %s did not end within %v of real time: after %d retries stepped, no drain timer or next retry of the status writer (timers %v)",
					s.seed, p.id, now.UTC().Format(time.RFC3339Nano), maxSimDrainWait, stepped, s.clock.timersFrom(first)))
			}
			// The drain timer and the writer's first retry may be made in
			// either order. Each look at the timers starts afresh: a drain
			// timer noted by an earlier look, and counted as a retry by
			// this one, stepped the clock to the drain's end early, or not,
			// as the goroutines happened to run.
			var retries []simTimer
			drainTimer := false
			for _, t := range s.clock.timersFrom(first) {
				if t.d == p.c.drainTimeout && !drainTimer {
					drainTimer = true
					continue
				}
				retries = append(retries, t)
			}
			if stepped < len(retries) {
				retry = &retries[stepped]
			}
			if retry == nil || !drainTimer {
				retry = nil
				runtime.Gosched()
				time.Sleep(20 * time.Microsecond)
			}
		}
		stepped++
		if !retry.at.Before(drainEnd) {
			s.srv.mu.Lock()
			p.cancelled = true
			s.srv.mu.Unlock()
			s.clock.SetTime(drainEnd)
			select {
			case <-done:
			case <-time.After(time.Until(deadline)):
				panic(fmt.Sprintf("seed %d: the graceful stop of process %d at %s did not end within %v of real time once the clock reached its drain timeout (timers %v)",
					s.seed, p.id, now.UTC().Format(time.RFC3339Nano), maxSimDrainWait, s.clock.timersFrom(first)))
			}
			s.stop(p)
			return
		}
		s.clock.SetTime(retry.at)
	}
}
