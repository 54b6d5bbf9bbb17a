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
// (GOGC) while parts of the process change it for a while. The resizer
// lowers it while a cluster's pod list streams in (Cap); the cron-scaler's
// scale client gives the heap room to grow while a burst of scale writes is
// in flight (Headroom). Each change is a hold, released by the function it
// returns. The target in force follows from the value found before the
// first hold and every hold in place, so holds may end in any order: two
// parts that each saved and restored the value they found could leave the
// other's value behind for good.
//
// A GOGC that is off (-1) is the choice of whoever runs the process and is
// never changed.
package gcpace

import (
	"math"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
)

// pacer holds the holds in place and the target found before the first.
type pacer struct {
	mu sync.Mutex
	// readPercent, setPercent and liveHeap read and set the target and read
	// the heap the last collection found live; tests replace them.
	readPercent func() int
	setPercent  func(int) int
	liveHeap    func() uint64
	// base is the target found before the first hold; meaningful while
	// holds is not empty.
	base  int
	holds map[*hold]struct{}
	// armed tells whether a sentinel is waiting for the next collection,
	// to work out a Headroom's percent again from the new live heap.
	armed bool
}

// hold is one Cap (percent) or Headroom (bytes).
type hold struct {
	percent int
	bytes   uint64
}

var process = &pacer{readPercent: readPercent, setPercent: debug.SetGCPercent, liveHeap: liveHeap}

// Cap holds the target at percent at most until release is called (more
// than once is safe). A Cap wins over any Headroom: it is there to keep a
// peak of memory down.
func Cap(percent int) (release func()) {
	return process.add(&hold{percent: percent})
}

// Headroom lets the heap grow by at least bytes between collections until
// release is called (more than once is safe): the target is raised, while no
// Cap is in place, to what bytes is of the live heap, and worked out again
// after each collection as the live heap changes. Where the target already
// gives that much room (a live heap of 32 MiB at GOGC=50 for 16 MiB), it
// changes nothing.
func Headroom(bytes uint64) (release func()) {
	return process.add(&hold{bytes: bytes})
}

func (p *pacer) add(h *hold) func() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.holds) == 0 {
		p.base = p.readPercent()
		p.holds = map[*hold]struct{}{}
	}
	p.holds[h] = struct{}{}
	p.apply()
	if h.bytes > 0 && !p.armed {
		p.armed = true
		p.arm()
	}
	var once sync.Once
	return func() { once.Do(func() { p.remove(h) }) }
}

func (p *pacer) remove(h *hold) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.holds, h)
	if len(p.holds) == 0 {
		p.setPercent(p.base)
		return
	}
	p.apply()
}

// apply sets the target the holds in place call for; p.mu is held.
func (p *pacer) apply() {
	p.setPercent(p.target())
}

// target is the base, lowered to the lowest Cap if there is one, else raised
// to the largest Headroom's share of the live heap.
func (p *pacer) target() int {
	if p.base < 0 {
		return p.base
	}
	capped, percent := false, p.base
	var room uint64
	for h := range p.holds {
		switch {
		case h.bytes > 0:
			room = max(room, h.bytes)
		case h.percent < percent:
			capped, percent = true, h.percent
		}
	}
	if capped || room == 0 {
		return percent
	}
	return max(percent, headroomPercent(room, p.liveHeap()))
}

// maxPercent bounds a Headroom's target when the live heap is tiny (before
// the first collection it reads 0).
const maxPercent = 10000

// headroomPercent is the target that lets a live heap of live bytes grow by
// room bytes before the next collection.
func headroomPercent(room, live uint64) int {
	if live == 0 {
		return maxPercent
	}
	return int(min(math.Ceil(float64(room)*100/float64(live)), maxPercent))
}

// arm leaves an unreachable sentinel whose finalizer runs after the next
// collection: it works the target out again from the live heap that
// collection found, and arms again while a Headroom is in place. A target
// worked out from a small heap would otherwise stay in force as the heap
// grows (a relist in the middle of a burst), and let it grow by that share
// of a much larger heap.
func (p *pacer) arm() {
	runtime.SetFinalizer(new(sentinel), func(*sentinel) { p.collected() })
}

// sentinel is a pointer-sized allocation: a finalizer needs the start of an
// allocation, and a zero-sized one may share its address with others.
type sentinel struct{ _ *byte }

func (p *pacer) collected() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for h := range p.holds {
		if h.bytes > 0 {
			p.apply()
			p.arm()
			return
		}
	}
	p.armed = false
}

// readPercent reads the target without setting it (debug.SetGCPercent
// sets one to read one, and setting -1 to read waits for a collection
// under way to end).
func readPercent() int {
	s := []metrics.Sample{{Name: "/gc/gogc:percent"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		return 100
	}
	// The runtime reports an off target as its int32 -1, converted.
	return int(int32(s[0].Value.Uint64()))
}

// liveHeap is the heap the last collection marked live.
func liveHeap() uint64 {
	s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return s[0].Value.Uint64()
}
