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
	"sort"
	"time"
)

// The generator's edge cases (issue 36, "the net, checked"). Random times
// seldom fall in the one second where managedFields cannot tell before from
// after, and a soak of 600 seeds found one of seven such breakages. With
// edges (newSimOf), some leader terms end at a five-minute boundary, where
// most schedules have a slot, in one of two ways:
//
//   - a graceful stop just after the slot's firings are applied and
//     recorded, and the successor started in the same second: the
//     predecessor's last status write is timed (in seconds) the second the
//     successor started, and its first list, when stale, misses it. The doc
//     says it is the predecessor's, not a second controller's (check 5).
//   - a crash between the slot's target writes and its status write, and
//     other writers changing target fields through the object in the slot's
//     own second, after the write: the successor inherits the firing, and a
//     change timed in the slot's second is at or after it (NotReapplied, check
//     4), on Deployments (written through /scale, read as metadata) as on the
//     autoscalers and LeaderWorkerSets.
//
// The edge draws come from a source of their own (sim.edges), so TestSim's
// fixed seeds (simSeeds), run without edges, play what they always played;
// simEdgeSeeds run with them.

// edgeTerm may move a leader term's end to a five-minute boundary (see
// above). It returns the term's kind and end, and when the next term starts
// (zero: after the usual gap).
func (sc *scenario) edgeTerm(kind string, endAt time.Time) (string, time.Time, time.Time) {
	e := sc.s.edges
	if e.Float64() >= 0.35 {
		return kind, endAt, time.Time{}
	}
	b := endAt.Truncate(5 * time.Minute).Add(5 * time.Minute)
	if !b.Add(time.Second).Before(sc.end) {
		return kind, endAt, time.Time{}
	}
	if e.IntN(2) == 0 {
		// The slot's firings run at b+10ms, their status is written in the
		// same step; the stop comes after, the successor in that second.
		end := b.Add(time.Duration(100+e.IntN(400)) * time.Millisecond)
		next := end.Add(time.Duration(1+e.IntN(int(b.Add(time.Second).Sub(end)/time.Millisecond)-1)) * time.Millisecond)
		return endStop, end, next
	}
	// The crash comes after the targets of the slot's firings are written
	// (b+10ms) and before their status is.
	end := b.Add(time.Duration(e.IntN(10)) * time.Millisecond)
	for range 3 {
		sc.add(b.Add(time.Duration(20+e.IntN(970))*time.Millisecond), "object writer in the slot's second", sc.objectWriter)
	}
	return endCrashRecorded, end, time.Time{}
}

// objectWriter changes a target field through the object, as kubectl edit
// or a GitOps tool would (never through /scale, whose writes have no time).
func (sc *scenario) objectWriter() {
	rng := sc.s.rng
	t := simTargets[rng.IntN(len(simTargets))]
	fields := simFieldsOf(t)
	field := fields[rng.IntN(len(fields))]
	v := int32(1 + rng.IntN(5))
	switch field {
	case fieldReplicas:
		v = int32(1 + rng.IntN(30))
	case fieldMax:
		v = int32(10 + rng.IntN(20))
	}
	sc.s.srv.otherWrite(t, field, v, []string{simEditor, simGitOps}[rng.IntN(2)], "")
}

func (srv *simServer) cronNames() []string {
	srv.mu.Lock()
	defer srv.mu.Unlock()
	names := make([]string, 0, len(srv.crons))
	for n := range srv.crons {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

func (srv *simServer) exists(name string) bool {
	srv.mu.Lock()
	defer srv.mu.Unlock()
	_, ok := srv.crons[name]
	return ok
}
