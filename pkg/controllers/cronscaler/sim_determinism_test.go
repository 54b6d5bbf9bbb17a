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
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// simDeterminismSeeds are run twice each by TestSimDeterministic. Before
// the drain of a graceful stop replayed exactly, 204865 and 200134 ended a
// drain cancelled in some runs and not in others, 200073 wrote a status
// more or less in it, and 200129 went on from there to a different history.
// (Seeds 200028 and 200041, where two other objects' slots tie and the
// lister's order named either in a Superseded message, take too long for
// make test: run them with -sim.seed.)
var simDeterminismSeeds = []uint64{204865, 200134, 200073, 200129}

// TestSimDeterministic runs seeds twice and requires the same history
// from both runs: the watch log, the status commits, the target field
// changes, the events, the processes and the oracle's verdict. Issue 26
// asks that a failing seed replay exactly; a history that depends on
// goroutine scheduling, map order or the real clock fails here, with the
// first entry where the runs part. Across GOMAXPROCS, compare the digests
// it logs:
//
//	go test ./pkg/controllers/cronscaler -run TestSimDeterministic -cpu 1,2,4 -v
//
// and as a soak, -args -sim.seeds=N -sim.first=F runs N seeds from F.
func TestSimDeterministic(t *testing.T) {
	for _, seed := range seedsToRun(simDeterminismSeeds) {
		first := simHistory(runSim(seed, *simDays))
		second := simHistory(runSim(seed, *simDays))
		if i := firstDifference(first, second); i >= 0 {
			t.Errorf("seed %d: the two runs part at entry %d of %d/%d:\n  first:  %s\n  second: %s",
				seed, i, len(first), len(second), entryAt(first, i), entryAt(second, i))
			continue
		}
		// Compared across processes (-test.cpu 1,2,4 -v): the same seed
		// must give the same digest with any GOMAXPROCS.
		t.Logf("seed %d: %d entries, digest %x", seed, len(first), sha256.Sum256([]byte(strings.Join(first, "\n"))))
	}
}

func firstDifference(a, b []string) int {
	for i := range max(len(a), len(b)) {
		if i >= len(a) || i >= len(b) || a[i] != b[i] {
			return i
		}
	}
	return -1
}

func entryAt(h []string, i int) string {
	if i >= len(h) {
		return "<end>"
	}
	return h[i]
}

// simHistory is everything a run produced, one entry a line, in an order
// that depends only on the run.
func simHistory(s *sim, o *oracle) []string {
	var h []string
	ts := func(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }
	js := func(v any) string { b, _ := json.Marshal(v); return string(b) }
	for _, p := range s.procs {
		h = append(h, fmt.Sprintf("process %d %s to %s %s cancelled=%v", p.id, ts(p.start), ts(p.end), p.endKind, p.cancelled))
	}
	for _, e := range s.srv.log {
		h = append(h, fmt.Sprintf("watch %s deleted=%v %s", ts(e.at), e.deleted, js(e.obj)))
	}
	for _, c := range s.srv.statuses {
		h = append(h, fmt.Sprintf("status %s %s %s %s", ts(c.at), c.name, c.manager, js(c.status)))
	}
	keys := make([]string, 0, len(s.srv.fields))
	for k := range s.srv.fields {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		for _, ch := range s.srv.fields[k] {
			proc := 0
			if ch.proc != nil {
				proc = ch.proc.id
			}
			h = append(h, fmt.Sprintf("field %s %s = %d by %s %q p%d", ts(ch.at), k, ch.value, ch.manager, ch.subresource, proc))
		}
	}
	for _, e := range s.events {
		h = append(h, fmt.Sprintf("event %s p%d %s %s: %s", ts(e.at), e.proc, e.name, e.reason, e.message))
	}
	for _, l := range s.srv.lostStatus {
		h = append(h, fmt.Sprintf("lost status %s p%d %s", ts(l.at), l.proc.id, l.uid))
	}
	uids := make([]string, 0, len(s.srv.foreign))
	for uid := range s.srv.foreign {
		uids = append(uids, string(uid))
	}
	sort.Strings(uids)
	for _, uid := range uids {
		for _, at := range s.srv.foreign[types.UID(uid)] {
			h = append(h, fmt.Sprintf("foreign status %s %s", ts(at), uid))
		}
	}
	h = append(h, fmt.Sprintf("stats %+v", s.stats))
	for _, v := range o.violations {
		h = append(h, "violation "+v)
	}
	return h
}
