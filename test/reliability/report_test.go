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

package reliability

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// report holds the run's figures.
type report struct {
	objects, replicas            int
	chaosDuration                time.Duration
	window                       string
	slots, applied, missed       int
	failed, duplicates, gaps     int
	missedReasons                map[string]int
	writes, backwards, unled     int
	lateWrites, appliedButMissed int
	repeats                      int
	kills, killsAtSlot           int
	failovers                    []time.Duration
	stops, stopsAtSlot           int
	takeovers                    []time.Duration
	outages                      []string
	exitsKilled, exitsLostLease  int
	exitsStopped, exitsOther     int
	deployWatch, leaseWatch      [2]int
	readyzDown, readyzBack       []string
	timeline                     []string
	success                      map[string]map[time.Time]historyRecord
}

func (r *report) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "chaos: %d CronFederatedHPAs x 2 rules, %d replicas, %v of chaos, slots checked %s\n", r.objects, r.replicas, r.chaosDuration.Round(time.Second), r.window)
	fmt.Fprintf(&b, "slots: %d; applied %d, missed %d, failed %d; recorded twice %d, not recorded %d\n", r.slots, r.applied, r.missed, r.failed, r.duplicates, r.gaps)
	for reason, n := range r.missedReasons {
		fmt.Fprintf(&b, "  missed/failed x%d: %s\n", n, reason)
	}
	fmt.Fprintf(&b, "target writes seen: %d; back to an older slot's value %d; later than maxDelaySeconds %d; with no leader %d; applied but recorded missed (leader died between its writes) %d\n",
		r.writes, r.backwards, r.lateWrites, r.unled, r.appliedButMissed)
	fmt.Fprintf(&b, "accepted repeats (target written, leader killed before its status write, successor applied again): %d\n", r.repeats)
	fmt.Fprintf(&b, "leader kills (SIGKILL): %d (%d at a scheduled time); failover (kill to new holder, no outage overlapping): %s\n", r.kills, r.killsAtSlot, durations(r.failovers))
	fmt.Fprintf(&b, "graceful stops (SIGTERM): %d (%d at a scheduled time); takeover (stop to new holder, no outage overlapping): %s\n", r.stops, r.stopsAtSlot, durations(r.takeovers))
	for _, o := range r.outages {
		fmt.Fprintf(&b, "outage: %s\n", o)
	}
	for i := range r.readyzDown {
		fmt.Fprintf(&b, "  %s; %s\n", r.readyzDown[i], r.readyzBack[i])
	}
	fmt.Fprintf(&b, "process exits: %d killed, %d stopped (exit 0), %d after losing the lease, %d other\n", r.exitsKilled, r.exitsStopped, r.exitsLostLease, r.exitsOther)
	b.WriteString("timeline (UTC):\n")
	for _, l := range r.timeline {
		fmt.Fprintf(&b, "  %s\n", l)
	}
	fmt.Fprintf(&b, "watches: Deployments resumed %d times, relisted %d; Lease resumed %d, relisted %d\n", r.deployWatch[0], r.deployWatch[1], r.leaseWatch[0], r.leaseWatch[1])
	return b.String()
}

func durations(ds []time.Duration) string {
	if len(ds) == 0 {
		return "none"
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	var sum time.Duration
	for _, d := range s {
		sum += d
	}
	return fmt.Sprintf("min %v, median %v, mean %v, max %v", s[0].Round(100*time.Millisecond), s[len(s)/2].Round(100*time.Millisecond),
		(sum / time.Duration(len(s))).Round(100*time.Millisecond), s[len(s)-1].Round(100*time.Millisecond))
}
