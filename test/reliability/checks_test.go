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
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	autoscalingv1alpha1 "github.com/scaleplane/scaleplane/pkg/apis/autoscaling/v1alpha1"
	"github.com/scaleplane/scaleplane/test/reliability/internal/recorder"
)

var timestamps = regexp.MustCompile(`\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ`)

// check asserts the properties and returns the figures.
func check(t *testing.T, cfg chaosConfig, crons []autoscalingv1alpha1.CronFederatedHPA, writes map[string][]recorder.TargetWrite,
	leases []recorder.LeaseRecord, events []chaosEvent, created, lastSlot time.Time, leaders map[string]string) *report {
	r := checkHistories(t, cfg, crons, lastSlot)
	r.replicas = cfg.replicas
	success := r.success
	firstSlot := created.Truncate(time.Minute).Add(time.Minute)
	r.window = fmt.Sprintf("%s to %s UTC", firstSlot.UTC().Format(time.TimeOnly), lastSlot.UTC().Format(time.TimeOnly))

	// 2. Writes go forward only, each within maxDelaySeconds of its slot,
	// each matching a successful record, and only while a leader holds the
	// Lease.
	names := make([]string, 0, len(writes))
	for name := range writes {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		var prev time.Time
		for _, w := range writes[name] {
			r.writes++
			if w.Replicas != evenReplicas && w.Replicas != oddReplicas {
				t.Errorf("%s: write of %d replicas (rv %s), not a rule's value", name, w.Replicas, w.ResourceVersion)
				continue
			}
			slot := slotOfWrite(w.Replicas, w.At)
			if !prev.IsZero() && !slot.After(prev) {
				r.backwards++
				t.Errorf("%s: write of %d at %s (slot %s, rv %s) after slot %s's value was applied",
					name, w.Replicas, w.At.UTC().Format(time.StampMilli), slot.UTC().Format(time.TimeOnly), w.ResourceVersion, prev.UTC().Format(time.TimeOnly))
			}
			prev = slot
			if w.At.Sub(slot) > maxDelay+slack {
				r.lateWrites++
				t.Errorf("%s: write of %d at %s is %v after its slot %s", name, w.Replicas, w.At.UTC().Format(time.StampMilli), w.At.Sub(slot).Round(time.Millisecond), slot.UTC().Format(time.TimeOnly))
			}
			if !slot.After(lastSlot) {
				if rec, ok := success[name][slot]; !ok {
					// The accepted repeat's other face: the leader died
					// between this write and its status write, and its
					// successor came after maxDelaySeconds and recorded
					// the slot as missed.
					r.appliedButMissed++
					t.Logf("%s: write of %d at %s for slot %s, which status does not record as applied", name, w.Replicas, w.At.UTC().Format(time.StampMilli), slot.UTC().Format(time.TimeOnly))
				} else if d := rec.executed.Sub(w.At); d > slack+time.Second {
					// The accepted repeat: the leader wrote the target and
					// died before its status write; its successor applied
					// the same value again (not a change, so the watch does
					// not see it) and recorded the slot then.
					r.repeats++
					t.Logf("%s: write at %s, recorded execution at %s", name, w.At.UTC().Format(time.StampMilli), rec.executed.UTC().Format(time.TimeOnly))
				}
			}
			if !ledAt(leases, w.At) {
				r.unled++
				t.Errorf("%s: write of %d at %s while no replica held the Lease", name, w.Replicas, w.At.UTC().Format(time.StampMilli))
			}
		}
	}

	// 3. Failovers: from a kill or a graceful stop to the Lease held by
	// another replica.
	for _, e := range events {
		switch e.kind {
		case "kill":
			checkTakeover(t, r, e, events, leases, leaders)
		default:
			r.outages = append(r.outages, fmt.Sprintf("%s at %s UTC, %s", e.kind, e.at.UTC().Format(time.TimeOnly), e.detail))
			r.timeline = append(r.timeline, fmt.Sprintf("%s %s restart, %s", e.at.UTC().Format(time.TimeOnly), e.kind, e.detail))
		}
	}
	if r.kills == 0 {
		t.Error("no leader was killed with SIGKILL")
	}
	if r.stops == 0 {
		t.Error("no leader was stopped gracefully")
	} else if len(r.takeovers) == 0 {
		t.Error("every graceful stop overlapped an outage: no takeover after a graceful stop was checked")
	}
	if r.applied == 0 {
		t.Error("no slot was applied")
	}
	return r
}

// checkTakeover measures how long after the kill (or graceful stop) e
// another replica held the Lease, and bounds it: after a SIGKILL the old
// lease must expire first, so lease duration plus renew deadline; after a
// graceful stop the leader released the Lease (ReleaseOnCancel), so the new
// leader must have acquired it before the stopped one's last renewal would
// have expired. Takeovers an outage overlapped are listed, not bounded.
// leaders names the replica of each leader's identity, for the timeline.
func checkTakeover(t *testing.T, r *report, e chaosEvent, events []chaosEvent, leases []recorder.LeaseRecord, leaders map[string]string) {
	t.Helper()
	what := "kill"
	if e.graceful {
		what = "stop (SIGTERM)"
		r.stops++
		if e.atSlot {
			r.stopsAtSlot++
		}
	} else {
		r.kills++
		if e.atSlot {
			r.killsAtSlot++
		}
	}
	i := slices.IndexFunc(leases, func(l recorder.LeaseRecord) bool { return l.At.After(e.at) && l.Holder != "" && l.Holder != e.holder })
	if i < 0 {
		t.Errorf("after the %s of %s (%s) at %s no other replica took the Lease", what, e.detail, e.holder, e.at.UTC().Format(time.StampMilli))
		return
	}
	d := leases[i].At.Sub(e.at)
	r.timeline = append(r.timeline, fmt.Sprintf("%s %s %s%s, new leader %s after %v", e.at.UTC().Format(time.TimeOnly), what, e.detail,
		map[bool]string{true: " (at a slot)"}[e.atSlot], leaders[leases[i].Holder], d.Round(100*time.Millisecond)))
	if slices.ContainsFunc(events, func(o chaosEvent) bool { return o.kind != "kill" && o.at.Before(e.at.Add(d)) && o.end.After(e.at) }) {
		// The apiserver was down during this failover: that outage, not
		// the lease, bounds it.
		r.timeline[len(r.timeline)-1] += " (an outage overlapped)"
		return
	}
	if !e.graceful {
		r.failovers = append(r.failovers, d)
		if d > leaseDuration+renewDeadline+slack {
			t.Errorf("failover after killing %s took %v, more than the lease duration (%v) allows", e.detail, d, leaseDuration)
		}
		return
	}
	r.takeovers = append(r.takeovers, d)
	// The stopped leader's last renewal before the takeover.
	var lastRenew time.Time
	for _, l := range leases[:i] {
		if l.Holder == e.holder {
			lastRenew = l.RenewTime
		}
	}
	switch expiry := lastRenew.Add(leaseDuration); {
	case leases[i].AcquireTime.Before(e.at):
		t.Errorf("stop of %s at %s: %s had acquired the Lease at %s, before the stop: the replica stopped was not the leader",
			e.detail, e.at.UTC().Format(time.StampMilli), leases[i].Holder, leases[i].AcquireTime.UTC().Format(time.StampMilli))
	case lastRenew.IsZero():
		t.Errorf("stop of %s: the Lease watch never saw %s hold the Lease", e.detail, e.holder)
	case !leases[i].AcquireTime.Before(expiry):
		t.Errorf("stop of %s at %s: %s acquired the Lease at %s, not before %s's lease would have expired (%s): the release was not used, the lease expired",
			e.detail, e.at.UTC().Format(time.StampMilli), leases[i].Holder, leases[i].AcquireTime.UTC().Format(time.StampMilli), e.holder, expiry.UTC().Format(time.StampMilli))
	}
}

// checkHistories checks that every scheduled time up to lastSlot is
// recorded exactly once in status, and counts how.
func checkHistories(t *testing.T, cfg chaosConfig, crons []autoscalingv1alpha1.CronFederatedHPA, lastSlot time.Time) *report {
	t.Helper()
	r := &report{objects: cfg.objects, missedReasons: map[string]int{}, success: map[string]map[time.Time]historyRecord{}}
	if len(crons) != cfg.objects {
		t.Errorf("found %d CronFederatedHPAs, want %d", len(crons), cfg.objects)
	}
	success := r.success // object -> slot -> its successful record
	for _, c := range crons {
		success[c.Name] = map[time.Time]historyRecord{}
		if len(c.Status.ExecutionHistories) != 2 {
			t.Errorf("%s: %d execution histories, want 2", c.Name, len(c.Status.ExecutionHistories))
		}
		for _, h := range c.Status.ExecutionHistories {
			slots := slotsOf(h.RuleName, c.CreationTimestamp.Time, lastSlot)
			for _, s := range slots {
				r.slots++
				covering := recordsCovering(h, s)
				switch {
				case len(covering) == 0:
					r.gaps++
					t.Errorf("%s rule %s: scheduled time %s is not recorded", c.Name, h.RuleName, s.UTC().Format(time.TimeOnly))
					continue
				case len(covering) > 1:
					r.duplicates++
					t.Errorf("%s rule %s: scheduled time %s is recorded %d times: %+v", c.Name, h.RuleName, s.UTC().Format(time.TimeOnly), len(covering), covering)
				}
				rec := covering[0]
				switch {
				case rec.success:
					r.applied++
					success[c.Name][s] = rec
				case strings.HasPrefix(rec.message, "missed"):
					r.missed++
					r.missedReasons[timestamps.ReplaceAllString(rec.message, "T")]++
				default:
					r.failed++
					r.missedReasons[timestamps.ReplaceAllString(rec.message, "T")]++
				}
			}
			// Nothing recorded for a time that was not scheduled.
			for _, rec := range records(h) {
				if rec.schedule.After(lastSlot) {
					continue
				}
				if !slices.ContainsFunc(slots, func(s time.Time) bool { return s.Equal(rec.schedule) }) {
					t.Errorf("%s rule %s: record for %s, not a scheduled time of the rule", c.Name, h.RuleName, rec.schedule.UTC().Format(time.TimeOnly))
				}
			}
		}
	}

	return r
}

// ledAt reports whether some replica held the Lease at t, from the Lease's
// states the test saw: one of them, seen by t plus slack (the Lease watch
// may see a takeover after the Deployment watch saw the new leader's first
// write), names a holder that had acquired or renewed it by t and whose
// renewal had not expired at t. A later state (a release at the end, say)
// does not undo that.
func ledAt(leases []recorder.LeaseRecord, t time.Time) bool {
	for _, l := range leases {
		if l.At.After(t.Add(slack)) {
			break
		}
		// renewTime has microsecond precision; the leader writes it
		// before it acts, on the same clock as t.
		if l.Holder != "" && !l.RenewTime.After(t) && t.Sub(l.RenewTime) <= leaseDuration+slack {
			return true
		}
	}
	return false
}
