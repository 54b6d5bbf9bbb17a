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

// Package gcpace is the one owner of the Go garbage collector's target
// (GOGC) in the controller manager: nothing else calls debug.SetGCPercent.
// The manager sets the process's own target at start (SetPercent); parts of
// it change it for a while. The resizer lowers it while a cluster's pod list
// streams in (Cap); the cron-scaler's scale client gives the heap room to
// grow while a burst of scale writes is in flight (Headroom). Each change is
// a hold, released by the function it returns. The target in force follows
// from the process's own target and every hold in place, so holds may end in
// any order: two parts that each saved and restored the value they found
// could leave the other's value behind for good.
//
// A GOGC that is off (-1) is the choice of whoever runs the process; no hold
// changes it.
package gcpace

import (
	"math"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
)

// pacer holds the holds in place and the process's own target.
type pacer struct {
	mu sync.Mutex
	// readPercent, setPercent and liveHeap read and set the target and read
	// the heap the last collection found live; afterGC has f called once
	// after a coming collection. Tests replace them.
	readPercent func() int
	setPercent  func(int) int
	liveHeap    func() uint64
	afterGC     func(f func())
	// base is the process's own target, read before the first hold;
	// meaningful while holds is not empty.
	base  int
	holds map[*hold]struct{}
	// armed tells whether afterGC is waiting for the next collection, to
	// work out a Headroom's percent again from the new live heap.
	armed bool
}

// hold is one Cap or Headroom.
type hold struct {
	headroom bool
	percent  int    // a Cap's
	bytes    uint64 // a Headroom's
}

var process = &pacer{readPercent: Percent, setPercent: debug.SetGCPercent, liveHeap: liveHeap, afterGC: afterGC}

// SetPercent sets the process's own target, the one in force when no hold
// is: at once when none is, at the release of the last one otherwise.
func SetPercent(percent int) {
	process.setBase(percent)
}

// Cap holds the target at percent at most (0 or more) until release is
// called (more than once is safe). A Cap wins over any Headroom: it is there
// to keep a peak of memory down.
func Cap(percent int) (release func()) {
	if percent < 0 {
		panic("gcpace: a cap below 0 would turn the collector off")
	}
	return process.add(&hold{percent: percent})
}

// Headroom lets the heap grow by about bytes between collections until
// release is called (more than once is safe): while no Cap is in place the
// target is raised to what bytes is of the live heap, worked out again after
// each collection as the live heap changes. Where the target already gives
// that much room (a live heap of 32 MiB at GOGC=50 for 16 MiB), it changes
// nothing. The runtime scales the room with the stacks and globals it scans
// too, and never collects below a minimum heap of 4 MiB times the target's
// share; a live heap under 4 MiB counts as 4 MiB, so that minimum stays
// within bytes.
func Headroom(bytes uint64) (release func()) {
	if bytes == 0 {
		return func() {}
	}
	return process.add(&hold{headroom: true, bytes: bytes})
}

func (p *pacer) setBase(percent int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.holds) == 0 || percent < 0 {
		// Off is the runner's choice and wins over every hold at once.
		p.base = percent
		p.setPercent(percent)
		return
	}
	p.base = percent
	p.update()
}

func (p *pacer) add(h *hold) func() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.holds) == 0 {
		p.base = p.readPercent()
		p.holds = map[*hold]struct{}{}
	}
	p.holds[h] = struct{}{}
	p.update()
	var once sync.Once
	return func() { once.Do(func() { p.remove(h) }) }
}

func (p *pacer) remove(h *hold) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.holds, h)
	if len(p.holds) == 0 {
		if p.base >= 0 {
			p.setPercent(p.base)
		}
		return
	}
	p.update()
}

// update sets the target the holds in place call for and, while a Headroom
// is among them, has it worked out again after the next collection; p.mu is
// held. An off target is left alone: setting it again waits for a
// collection under way.
func (p *pacer) update() {
	if p.base < 0 {
		return
	}
	p.setPercent(p.target())
	if p.armed {
		return
	}
	for h := range p.holds {
		if h.headroom {
			p.armed = true
			p.afterGC(p.collected)
			return
		}
	}
}

// target is the base, lowered to the lowest Cap if there is one, else raised
// to the largest Headroom's share of the live heap.
func (p *pacer) target() int {
	capped, percent := false, p.base
	var room uint64
	for h := range p.holds {
		if h.headroom {
			room = max(room, h.bytes)
			continue
		}
		capped, percent = true, min(percent, h.percent)
	}
	if capped || room == 0 {
		return percent
	}
	return max(percent, headroomPercent(room, p.liveHeap()))
}

// minLive is the live heap a Headroom's target is worked out on at least:
// the runtime's minimum heap is 4 MiB times the target's share, so a target
// worked out on a smaller heap (0 before the first collection) would let the
// heap grow by more than the room asked for.
const minLive = 4 << 20

// headroomPercent is the target that lets a live heap of live bytes grow by
// room bytes before the next collection.
func headroomPercent(room, live uint64) int {
	return int(math.Ceil(float64(room) * 100 / float64(max(live, minLive))))
}

// collected works the target out again from the live heap a collection
// found, and waits for the next one while a Headroom is in place. A target
// worked out from a small heap would otherwise stay in force as the heap
// grows (a relist in the middle of a burst), and let it grow by that share
// of a much larger heap.
func (p *pacer) collected() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.armed = false
	if len(p.holds) > 0 {
		p.update()
	}
}

// afterGC has f called once, some time after the first collection that
// finds a fresh sentinel unreachable (once its span is swept, on the
// runtime's cleanup goroutine).
func afterGC(f func()) {
	runtime.AddCleanup(new(sentinel), func(f func()) { f() }, f)
}

// sentinel holds a pointer so that it is not made in the runtime's tiny
// allocator, whose blocks are shared by small pointer-free objects: a
// cleanup on one of those may never run.
type sentinel struct{ _ *byte }

// Percent reads the target without setting it (debug.SetGCPercent sets one
// to read one, and setting -1 waits for a collection under way to end).
func Percent() int {
	v, ok := readMetric("/gc/gogc:percent")
	if !ok {
		return 100
	}
	// The runtime reports an off target as its int32 -1, converted.
	return int(int32(v))
}

// liveHeap is the heap the last collection marked live.
func liveHeap() uint64 {
	v, _ := readMetric("/gc/heap/live:bytes")
	return v
}

// readMetric reads one of the runtime's uint64 metrics; false when this
// runtime has none of that name.
func readMetric(name string) (uint64, bool) {
	s := []metrics.Sample{{Name: name}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		return 0, false
	}
	return s[0].Value.Uint64(), true
}
