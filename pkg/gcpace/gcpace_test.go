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

package gcpace

import (
	"runtime"
	"runtime/debug"
	"testing"
	"time"
)

const mib = 1 << 20

// fakeRuntime is a GOGC, a live heap, and the calls waiting for the next
// collection.
type fakeRuntime struct {
	percent int
	live    uint64
	sets    int
	afterGC []func()
}

func newFake(percent int, live uint64) (*fakeRuntime, *pacer) {
	f := &fakeRuntime{percent: percent, live: live}
	return f, &pacer{
		readPercent: func() int { return f.percent },
		setPercent:  func(p int) int { old := f.percent; f.percent = p; f.sets++; return old },
		liveHeap:    func() uint64 { return f.live },
		afterGC:     func(g func()) { f.afterGC = append(f.afterGC, g) },
	}
}

// collect runs what waits for a collection, on a live heap of live bytes.
func (f *fakeRuntime) collect(live uint64) {
	f.live = live
	waiting := f.afterGC
	f.afterGC = nil
	for _, g := range waiting {
		g()
	}
}

func (f *fakeRuntime) want(t *testing.T, when string, percent int) {
	t.Helper()
	if f.percent != percent {
		t.Errorf("%s: GOGC = %d; want %d", when, f.percent, percent)
	}
}

func TestCap(t *testing.T) {
	for _, tc := range []struct {
		name       string
		before     int
		wantDuring int
	}{
		{name: "default", before: 100, wantDuring: 50},
		{name: "set higher", before: 400, wantDuring: 50},
		{name: "lower already", before: 20, wantDuring: 20},
		{name: "off", before: -1, wantDuring: -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, p := newFake(tc.before, 5*mib)
			release := p.add(&hold{percent: 50})
			f.want(t, "during the cap", tc.wantDuring)
			release()
			f.want(t, "after", tc.before)
			if tc.before < 0 && f.sets != 0 {
				t.Errorf("an off target was set %d times", f.sets)
			}
			f.percent = 77 // set by someone else since
			release()
			f.want(t, "after a second release", 77)
		})
	}
}

func TestHeadroom(t *testing.T) {
	for _, tc := range []struct {
		name       string
		before     int
		live       uint64
		wantDuring int
	}{
		// 16 MiB on 5 MiB is 320 %.
		{name: "5 MiB", before: 50, live: 5 * mib, wantDuring: 320},
		{name: "rounded up", before: 50, live: 6 * mib, wantDuring: 267},
		// 50 % of 64 MiB is 32 MiB, more than 16.
		{name: "room already", before: 50, live: 64 * mib, wantDuring: 50},
		// Under 4 MiB (0 before the first collection) the runtime's
		// minimum heap, 4 MiB times the share, would give more room than
		// asked for: counted as 4 MiB.
		{name: "small heap", before: 50, live: 1 * mib, wantDuring: 400},
		{name: "before the first collection", before: 50, live: 0, wantDuring: 400},
		{name: "off", before: -1, live: 5 * mib, wantDuring: -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, p := newFake(tc.before, tc.live)
			release := p.add(&hold{headroom: true, bytes: 16 * mib})
			f.want(t, "during the headroom", tc.wantDuring)
			f.collect(tc.live)
			f.want(t, "after a collection", tc.wantDuring)
			release()
			f.want(t, "after", tc.before)
			if tc.before < 0 && (f.sets != 0 || len(f.afterGC) != 0) {
				t.Errorf("an off target was set %d times, %d calls wait for a collection", f.sets, len(f.afterGC))
			}
		})
	}
}

// Holds ending in any order leave the target found before the first: the
// resizer's cap of its pod list and the cron-scaler's headroom in a burst may
// overlap either way.
func TestHoldsEndInAnyOrder(t *testing.T) {
	for _, capFirst := range []bool{true, false} {
		f, p := newFake(100, 5*mib)
		var releaseCap, releaseRoom func()
		if capFirst {
			releaseCap = p.add(&hold{percent: 50})
			releaseRoom = p.add(&hold{headroom: true, bytes: 16 * mib})
		} else {
			releaseRoom = p.add(&hold{headroom: true, bytes: 16 * mib})
			f.want(t, "headroom alone", 320)
			releaseCap = p.add(&hold{percent: 50})
		}
		f.want(t, "cap and headroom", 50)
		releaseCap()
		f.want(t, "headroom left", 320)
		releaseRoom()
		f.want(t, "none left", 100)

		releaseRoom = p.add(&hold{headroom: true, bytes: 16 * mib})
		releaseCap = p.add(&hold{percent: 50})
		releaseRoom()
		f.want(t, "cap left", 50)
		releaseCap()
		f.want(t, "none left again", 100)
	}
}

// A cap at the target in force still wins over a headroom: the
// manager's own target is 50 and the resizer caps at 50 while its pod list
// streams in.
func TestCapAtTheBaseWinsOverHeadroom(t *testing.T) {
	f, p := newFake(50, 5*mib)
	releaseCap := p.add(&hold{percent: 50})
	releaseRoom := p.add(&hold{headroom: true, bytes: 16 * mib})
	f.want(t, "cap of 50 and a headroom", 50)
	f.collect(5 * mib)
	f.want(t, "after a collection", 50)
	releaseCap()
	f.want(t, "headroom left", 320)
	releaseRoom()
	f.want(t, "none left", 50)
}

// The process's own target set while holds are in place is the one they
// end with, and is set at once when none is.
func TestSetBase(t *testing.T) {
	f, p := newFake(100, 5*mib)
	p.setBase(50)
	f.want(t, "no hold", 50)
	release := p.add(&hold{percent: 30})
	p.setBase(20)
	f.want(t, "a cap of 30 over a base of 20", 20)
	p.setBase(80)
	f.want(t, "a cap of 30 over a base of 80", 30)
	release()
	f.want(t, "released", 80)

	// Off wins at once over a headroom in place, and a target set again
	// brings the headroom back, worked out again after each collection.
	release = p.add(&hold{headroom: true, bytes: 16 * mib})
	f.collect(5 * mib)
	p.setBase(-1)
	f.want(t, "off over a headroom", -1)
	f.collect(5 * mib)
	f.want(t, "off after a collection", -1)
	if len(f.afterGC) != 0 {
		t.Errorf("off: %d calls wait for the next collection; want none", len(f.afterGC))
	}
	p.setBase(50)
	f.want(t, "50 again under the headroom", 320)
	f.collect(8 * mib)
	f.want(t, "after a collection on 8 MiB", 200)
	release()
	f.want(t, "released again", 50)
}

// The lowest cap and the largest headroom win.
func TestSeveralHolds(t *testing.T) {
	f, p := newFake(100, 4*mib)
	r1 := p.add(&hold{headroom: true, bytes: 8 * mib})
	r2 := p.add(&hold{headroom: true, bytes: 16 * mib})
	f.want(t, "two headrooms", 400)
	r2()
	f.want(t, "the smaller headroom", 200)
	c1 := p.add(&hold{percent: 80})
	c2 := p.add(&hold{percent: 30})
	f.want(t, "two caps", 30)
	c2()
	f.want(t, "the higher cap", 80)
	c1()
	r1()
	f.want(t, "none", 100)
}

// After each collection the headroom's target follows the live heap, and the
// sentinel is not armed again once no headroom is left.
func TestHeadroomFollowsTheLiveHeap(t *testing.T) {
	f, p := newFake(50, 5*mib)
	release := p.add(&hold{headroom: true, bytes: 16 * mib})
	second := p.add(&hold{headroom: true, bytes: 8 * mib})
	if len(f.afterGC) != 1 {
		t.Fatalf("%d calls wait for the next collection; want 1", len(f.afterGC))
	}
	f.want(t, "first", 320)
	f.collect(100 * mib) // a relist in the middle of the burst
	f.want(t, "after a collection on a larger heap", 50)
	f.collect(8 * mib)
	f.want(t, "after a collection on a smaller heap", 200)
	release()
	second()
	f.want(t, "released", 50)
	sets := f.sets
	f.collect(8 * mib)
	if len(f.afterGC) != 0 || p.armed {
		t.Error("waiting for a collection again with no headroom left")
	}
	if f.sets != sets {
		t.Errorf("a collection with no hold set GOGC %d times", f.sets-sets)
	}
	release = p.add(&hold{headroom: true, bytes: 16 * mib})
	if len(f.afterGC) != 1 {
		t.Errorf("a new headroom after the last: %d calls wait for the next collection; want 1", len(f.afterGC))
	}
	release()
}

// The process's pacer reads and sets the runtime's own target, and works a
// headroom out again after a real collection.
func TestProcessPacer(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(60))
	if got := Percent(); got != 60 {
		t.Fatalf("Percent = %d; want 60", got)
	}
	release := Cap(30)
	if got := Percent(); got != 30 {
		t.Errorf("GOGC under Cap(30) = %d; want 30", got)
	}
	release()
	if got := Percent(); got != 60 {
		t.Errorf("GOGC after the cap = %d; want 60", got)
	}
	// Told when the pacer has worked the target out after a collection.
	worked := make(chan struct{}, 8)
	process.mu.Lock()
	realAfterGC := process.afterGC
	process.afterGC = func(f func()) {
		realAfterGC(func() {
			f()
			select { // never block the runtime's cleanup goroutine
			case worked <- struct{}{}:
			default:
			}
		})
	}
	process.mu.Unlock()
	defer func() {
		process.mu.Lock()
		process.afterGC = realAfterGC
		process.mu.Unlock()
	}()
	// The live heap as of now, not as a run before left it (-count).
	runtime.GC()
	room := uint64(64 * mib)
	release = Headroom(room)
	defer release()
	if want := headroomPercent(room, liveHeap()); Percent() != want {
		t.Errorf("GOGC under a headroom of 64 MiB = %d; want %d", Percent(), want)
	}
	before := Percent()
	// A collection on a live heap 32 MiB larger lowers it.
	ballast := make([]*[1 << 20]byte, 32)
	for i := range ballast {
		ballast[i] = new([1 << 20]byte)
	}
	// A sentinel made while a collection marks lives through it, so
	// collect until the target is worked out from the larger heap.
	deadline := time.After(10 * time.Second)
	var want int
	for {
		runtime.GC()
		if want = headroomPercent(room, liveHeap()); Percent() == want {
			break
		}
		select {
		case <-worked:
		case <-time.After(100 * time.Millisecond):
		case <-deadline:
			t.Fatalf("GOGC 10 s after collections on a live heap 32 MiB larger = %d (was %d); want %d", Percent(), before, want)
		}
	}
	if want >= before {
		t.Errorf("GOGC after a collection on a live heap 32 MiB larger = %d; want it lower than %d", want, before)
	}
	runtime.KeepAlive(ballast)
	release()
	if got := Percent(); got != 60 {
		t.Errorf("GOGC after the headroom = %d; want 60", got)
	}
	SetPercent(-1)
	if got := Percent(); got != -1 {
		t.Errorf("Percent of an off target = %d; want -1", got)
	}
}

func TestZeroHeadroomAndNegativeCap(t *testing.T) {
	before := Percent()
	Headroom(0)()
	if got := Percent(); got != before {
		t.Errorf("GOGC after a headroom of 0 = %d; want %d", got, before)
	}
	defer func() {
		if recover() == nil {
			t.Error("Cap(-1) did not panic")
		}
	}()
	Cap(-1)
}
