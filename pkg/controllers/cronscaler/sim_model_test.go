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
	"errors"
	"net/url"
	"sort"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
)

// What the simulated apiserver plays with -sim.model (issue 36: "the
// simulator's model"), on top of what every seed plays:
//
//   - a watch relist: the leader's watch breaks and delivers nothing for 1 s
//     to 10 minutes, then ends (410 Gone: its resourceVersion was compacted)
//     and its informer lists again, as client-go's reflector and DeltaFIFO
//     do. The list is the newest state (a consistent read after 410) or, a
//     quarter of the time, the watch cache's at some point no older than the
//     last event the watch delivered; the object's changes in
//     between reach the handlers as one update (coalesced: the versions in
//     between are never seen), an object deleted in between as a delete with
//     a cache.DeletedFinalStateUnknown tombstone, and one deleted and
//     re-created under its name as an update whose old and new objects have
//     different UIDs (the informer keys objects by namespace and name).
//   - faults per request: periods in which each request draws its own
//     answer, so that inside one sync (the simulated clock does not move
//     within one otherwise) a read is answered and the next write is not, or
//     the other way round. A request is refused (no answer, nothing stored),
//     or hangs: the apiserver accepted it and does not answer. A hung
//     request takes simulated time inside the sync: the clock moves while it
//     waits, as a worker blocked on it would. It ends with an answer after a
//     few seconds (a slow apiserver), a 504 after the apiserver's 60 s request
//     timeout, or the client's HTTP/2 health check giving up on the
//     connection after 45 s ("http2: client connection lost"; the manager's
//     clients set no request timeout of their own). A write that hangs and
//     ends in an error was stored or not, as for a flaky period's lost
//     answers. The oracle takes these periods, extended by the longest hang,
//     as flaky periods (see oracle.flakies).
//
// The draws come from a random source of their own (sim.model), so TestSim's
// fixed seeds, run without the model, play what they always played;
// simModelSeeds run with it.

// maxHang is the longest a hung request waits for its answer: the
// apiserver's request timeout.
const maxHang = 60 * time.Second

// requestFaults is a period of faults per request: each request is refused
// with probability refused, hangs with probability hung.
type requestFaults struct {
	interval
	refused, hung float64
}

// errConnLost is what client-go's HTTP/2 transport returns when its health
// check gives up on a connection that stopped answering.
var errConnLost = &url.Error{Op: "Put", URL: "https://apiserver", Err: errors.New("http2: client connection lost")}

// generateModel draws the model's relists and periods of faults per request
// (from sim.model only).
func (sc *scenario) generateModel(days float64) {
	m := sc.s.model
	span := int64(days * 24 * float64(time.Hour))
	nearSlot := func(t time.Time) time.Time {
		if m.Float64() < 0.4 {
			b := t.Truncate(5 * time.Minute).Add(5 * time.Minute)
			return b.Add(time.Duration(m.Int64N(int64(3*time.Second))) - 1500*time.Millisecond)
		}
		return t
	}
	for range int(days*10) + m.IntN(4) {
		at := nearSlot(sc.begin.Add(time.Duration(m.Int64N(span))))
		down := time.Duration(1+m.IntN(600)) * time.Second
		if m.IntN(3) == 0 {
			down = time.Duration(1+m.IntN(30)) * time.Second
		}
		sc.relists = append(sc.relists, relistAt{at: at, down: down})
	}
	sort.Slice(sc.relists, func(i, j int) bool { return sc.relists[i].at.Before(sc.relists[j].at) })
	for range int(days*6) + m.IntN(3) {
		from := nearSlot(sc.begin.Add(time.Duration(m.Int64N(span))))
		d := time.Duration(5+m.IntN(600)) * time.Second
		sc.requestFaults = append(sc.requestFaults, requestFaults{
			interval: interval{from, from.Add(d)}, refused: 0.05 + 0.4*m.Float64(), hung: 0.02 + 0.2*m.Float64(),
		})
	}
}

func (sc *scenario) requestFault(t time.Time) *requestFaults {
	for i := range sc.requestFaults {
		if sc.requestFaults[i].holds(t) {
			return &sc.requestFaults[i]
		}
	}
	return nil
}

// modelFault answers a request of p in a period of faults per request, if
// its draw says so (handled); the caller holds srv.mu. A process that is
// stopping is not given hung requests: its drain is stepped by the driver.
func (srv *simServer) modelFault(p *simProc, action clienttesting.Action, metadata, write bool, now time.Time) (bool, runtime.Object, error) {
	s := srv.s
	f := s.scenario.requestFault(now)
	if s.model == nil || f == nil || !p.end.IsZero() {
		return false, nil, nil
	}
	r := s.model.Float64()
	switch {
	case r < f.refused:
		s.stats.refused++
		return true, nil, errRefused
	case r >= f.refused+f.hung:
		return false, nil, nil
	}
	s.stats.hung++
	switch s.model.IntN(3) {
	case 0:
		// A slow answer: stored now, answered later.
		obj, err := srv.serve(p, action, metadata)
		s.clock.SetTime(now.Add(time.Duration(1+s.model.IntN(20)) * time.Second))
		return true, obj, err
	case 1:
		srv.hungWrite(p, action, metadata, write, now)
		s.clock.SetTime(now.Add(maxHang))
		return true, nil, apierrors.NewTimeoutError("request did not complete within requested timeout - context deadline exceeded", 0)
	}
	srv.hungWrite(p, action, metadata, write, now)
	s.clock.SetTime(now.Add(45*time.Second + time.Duration(s.model.IntN(1000))*time.Millisecond))
	return true, nil, errConnLost
}

// hungWrite stores a write whose answer will not come, or not (half the
// time), as a flaky period's lost answers do.
func (srv *simServer) hungWrite(p *simProc, action clienttesting.Action, metadata, write bool, now time.Time) {
	if !write || srv.s.model.IntN(2) == 0 {
		return
	}
	srv.answerLost = true
	obj, err := srv.serve(p, action, metadata)
	srv.answerLost = false
	if u, ok := obj.(interface{ GetUID() types.UID }); ok && err == nil && action.GetSubresource() == "status" {
		srv.lostStatus = append(srv.lostStatus, lostWrite{at: now, proc: p, uid: u.GetUID()})
	}
}

// relistAt is a relist at at, after a watch that delivered nothing for
// down before it.
type relistAt struct {
	at   time.Time
	down time.Duration
}

// nextRelist is the first relist of the scenario after the leader's last
// one (or its start) and at or after from; zero if none.
func (sc *scenario) nextRelist(p *simProc, from time.Time) time.Time {
	for _, r := range sc.relists {
		if r.at.After(p.relisted) && r.at.After(p.start) && !r.at.Before(from) {
			return r.at
		}
	}
	return time.Time{}
}

// watchDown says, for a watch event due at t, when the relist comes that
// replaces it: t falls in the time the watch delivers nothing before a
// relist of the leader's; zero if it does not.
func (sc *scenario) watchDown(p *simProc, t time.Time) time.Time {
	for _, r := range sc.relists {
		if r.at.After(p.relisted) && r.at.After(p.start) && !t.Before(r.at.Add(-r.down)) && t.Before(r.at) {
			return r.at
		}
	}
	return time.Time{}
}

// relistDue relists the leader's informer if a relist is due by now.
func (s *sim) relistDue(p *simProc, now time.Time) {
	for _, r := range s.scenario.relists {
		if r.at.After(p.relisted) && r.at.After(p.start) && !r.at.After(now) {
			p.relisted = now
			s.relist(p, now)
			return
		}
	}
}

// relist is the informer's list after its watch ended (see above): the
// server's state at a point of its log no older than the watch's cursor,
// handed to the handlers as client-go's DeltaFIFO.Replace and
// sharedIndexInformer do.
func (s *sim) relist(p *simProc, now time.Time) {
	s.srv.mu.Lock()
	upTo := len(s.srv.log)
	if s.model.IntN(4) == 0 {
		upTo = p.cursor + s.model.IntN(len(s.srv.log)-p.cursor+1)
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
	s.stats.relists++
	p.cursor, p.nextAt, p.lastAt = upTo, time.Time{}, now
	names := make([]string, 0, len(state))
	for n := range state {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		e := state[n]
		// As the informer holds it (see stripForCache).
		obj, _ := stripForCache(e.obj.DeepCopy())
		cron, _ := cronOf(obj)
		if held, ok := p.cacheAt[cron.UID]; ok && held.Before(e.at) && s.srv.versionsBetween(cron.UID, held, e.at) > 1 {
			s.stats.coalesced++
		}
		if old, exists, _ := p.indexer.Get(obj); exists {
			_ = p.indexer.Update(obj)
			if o, _ := cronOf(old); o.UID != cron.UID {
				delete(p.cacheAt, o.UID)
				s.stats.recreated++
			}
			p.c.onUpdate(p.ctx, old, obj)
		} else {
			_ = p.indexer.Add(obj)
			p.c.onAdd(p.ctx, obj)
		}
		if held, ok := p.cacheAt[cron.UID]; ok && held.Equal(e.at) {
			// The version it held: the handler takes it for a resync.
			continue
		}
		p.cacheAt[cron.UID] = e.at
		p.seen = append(p.seen, delivery{at: now, uid: cron.UID, versionAt: e.at, specAt: e.version.specAt})
	}
	// What the list no longer holds: a delete with a tombstone, in key order.
	keys := p.indexer.ListKeys()
	sort.Strings(keys)
	for _, key := range keys {
		old, exists, _ := p.indexer.GetByKey(key)
		if !exists {
			continue
		}
		o, _ := cronOf(old)
		if _, ok := state[o.Name]; ok {
			continue
		}
		_ = p.indexer.Delete(old)
		delete(p.cacheAt, o.UID)
		s.stats.tombstones++
		p.c.onDelete(p.ctx, cache.DeletedFinalStateUnknown{Key: key, Obj: old})
	}
}

// flakies are the periods the oracle takes as flaky: the scenario's; its
// periods of faults per request, extended by the longest hang; and the time
// a watch delivers nothing before a relist, extended by the longest backoff
// of a failed status write. While the watch delivers nothing, the status
// write of a firing applied meanwhile conflicts (it is made with the cached
// resourceVersion, see record) and is retried until the relist shows the
// newer object: the slot is recorded when the cache catches up, as the doc's
// watch lag says (seed 4000002 -sim.model: a 9-minute stall).
func (o *oracle) flakies() []flakyPeriod {
	sc := o.s.scenario
	if len(sc.requestFaults) == 0 && len(sc.relists) == 0 {
		return sc.flakies
	}
	out := append([]flakyPeriod(nil), sc.flakies...)
	for _, f := range sc.requestFaults {
		out = append(out, flakyPeriod{interval: interval{f.from, f.to.Add(maxHang + time.Second)}})
	}
	for _, r := range sc.relists {
		out = append(out, flakyPeriod{interval: interval{r.at.Add(-r.down), r.at.Add(maxFailureBackoff + time.Second)}})
	}
	return out
}

// versionsBetween counts the versions of uid committed in (from, to].
func (srv *simServer) versionsBetween(uid types.UID, from, to time.Time) int {
	srv.mu.Lock()
	defer srv.mu.Unlock()
	n := 0
	for _, v := range srv.versions[uid] {
		if v.at.After(from) && !v.at.After(to) {
			n++
		}
	}
	return n
}
