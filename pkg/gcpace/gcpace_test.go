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
	"runtime/debug"
	"testing"
)

const mib = 1 << 20

// fakeRuntime is a GOGC and a live heap.
type fakeRuntime struct {
	percent int
	live    uint64
	sets    int
}

func newFake(percent int, live uint64) (*fakeRuntime, *pacer) {
	f := &fakeRuntime{percent: percent, live: live}
	return f, &pacer{
		readPercent: func() int { return f.percent },
		setPercent:  func(p int) int { old := f.percent; f.percent = p; f.sets++; return old },
		liveHeap:    func() uint64 { return f.live },
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
		{name: "small heap", before: 50, live: 5 * mib, wantDuring: 320},
		{name: "rounded up", before: 50, live: 3 * mib, wantDuring: 534},
		// 50 % of 64 MiB is 32 MiB, more than 16.
		{name: "room already", before: 50, live: 64 * mib, wantDuring: 50},
		{name: "before the first collection", before: 50, live: 0, wantDuring: maxPercent},
		{name: "off", before: -1, live: 5 * mib, wantDuring: -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, p := newFake(tc.before, tc.live)
			release := p.add(&hold{bytes: 16 * mib})
			f.want(t, "during the headroom", tc.wantDuring)
			release()
			f.want(t, "after", tc.before)
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
			releaseRoom = p.add(&hold{bytes: 16 * mib})
		} else {
			releaseRoom = p.add(&hold{bytes: 16 * mib})
			f.want(t, "headroom alone", 320)
			releaseCap = p.add(&hold{percent: 50})
		}
		f.want(t, "cap and headroom", 50)
		releaseCap()
		f.want(t, "headroom left", 320)
		releaseRoom()
		f.want(t, "none left", 100)

		releaseRoom = p.add(&hold{bytes: 16 * mib})
		releaseCap = p.add(&hold{percent: 50})
		releaseRoom()
		f.want(t, "cap left", 50)
		releaseCap()
		f.want(t, "none left again", 100)
	}
}

// The lowest cap and the largest headroom win.
func TestSeveralHolds(t *testing.T) {
	f, p := newFake(100, 4*mib)
	r1 := p.add(&hold{bytes: 8 * mib})
	r2 := p.add(&hold{bytes: 16 * mib})
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
	release := p.add(&hold{bytes: 16 * mib})
	if !p.armed {
		t.Fatal("a headroom armed no sentinel")
	}
	f.want(t, "first", 320)
	f.live = 100 * mib // a relist in the middle of the burst
	p.collected()
	f.want(t, "after a collection on a larger heap", 50)
	f.live = 8 * mib
	p.collected()
	f.want(t, "after a collection on a smaller heap", 200)
	release()
	f.want(t, "released", 50)
	sets := f.sets
	p.collected()
	if p.armed {
		t.Error("the sentinel is armed again with no headroom left")
	}
	if f.sets != sets {
		t.Errorf("a collection with no hold set GOGC %d times", f.sets-sets)
	}
}

// The process's pacer reads and sets the runtime's own target.
func TestProcessPacer(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(60))
	if got := readPercent(); got != 60 {
		t.Fatalf("readPercent = %d; want 60", got)
	}
	release := Cap(30)
	if got := readPercent(); got != 30 {
		t.Errorf("GOGC under Cap(30) = %d; want 30", got)
	}
	release()
	if got := readPercent(); got != 60 {
		t.Errorf("GOGC after the cap = %d; want 60", got)
	}
	release = Headroom(1 << 40)
	if got := readPercent(); got <= 60 {
		t.Errorf("GOGC under a headroom of 1 TiB = %d; want it raised above 60", got)
	}
	release()
	if got := readPercent(); got != 60 {
		t.Errorf("GOGC after the headroom = %d; want 60", got)
	}
	debug.SetGCPercent(-1)
	if got := readPercent(); got != -1 {
		t.Errorf("readPercent of an off target = %d; want -1", got)
	}
}
