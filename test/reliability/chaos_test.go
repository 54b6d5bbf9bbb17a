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
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	autoscalingv1alpha1 "github.com/scaleplane/scaleplane/pkg/apis/autoscaling/v1alpha1"
	"github.com/scaleplane/scaleplane/test/integration/framework"
	"github.com/scaleplane/scaleplane/test/reliability/internal/recorder"
	"github.com/scaleplane/scaleplane/test/reliability/internal/workload"
)

// chaosConfig is what one chaos run does.
type chaosConfig struct {
	duration         time.Duration // of the chaos; the run then settles
	objects          int           // CronFederatedHPAs, one Deployment each
	replicas         int           // controller-manager replicas
	killMin, killMax time.Duration // between kills (or graceful stops) of the leader
	apiserverRestart []float64     // when, as fractions of duration
	etcdRestart      []float64
	apiserverDown    time.Duration
	etcdDown         time.Duration
}

// The short form runs in `make test` (next to the other integration
// packages, within CI's budget); the long one is the acceptance run
// (`make test-reliability`).
var (
	shortChaos = chaosConfig{
		duration: 150 * time.Second, objects: 50, replicas: 3,
		killMin: 20 * time.Second, killMax: 40 * time.Second,
		apiserverRestart: []float64{0.5},
		apiserverDown:    5 * time.Second,
	}
	longChaos = chaosConfig{
		duration: 11 * time.Minute, objects: 50, replicas: 3,
		killMin: 20 * time.Second, killMax: 60 * time.Second,
		apiserverRestart: []float64{0.25, 0.7},
		etcdRestart:      []float64{0.5},
		apiserverDown:    5 * time.Second,
		etcdDown:         5 * time.Second,
	}
)

const (
	leaseNamespace = "kube-system"
	leaseName      = "scaleplane-controller-manager"
	// The controller manager's defaults, which the run keeps.
	leaseDuration = 15 * time.Second
	renewDeadline = 10 * time.Second
	// maxDelay is every rule's maxDelaySeconds: a slot its leader could not
	// fire within it (an outage, a failover) is recorded as missed.
	maxDelay = 30 * time.Second
	// evenReplicas and oddReplicas are what the even- and odd-minute rules
	// set, so that the value of a write names the parity of its slot.
	evenReplicas, oddReplicas = workload.EvenReplicas, workload.OddReplicas
	// slack covers the distance between when the apiserver stored
	// something and when the test's watch saw it, on a loaded machine.
	slack = 3 * time.Second
)

// chaosEvent is one thing the test did to the system.
type chaosEvent struct {
	at     time.Time
	kind   string // "kill", "apiserver", "etcd"
	holder string // the leader killed
	atSlot bool   // the kill was aimed at a scheduled time
	// graceful: the kill was a graceful stop (SIGTERM), after which the
	// leader drains and releases the Lease, rather than a SIGKILL.
	graceful bool
	detail   string
	end      time.Time // of an outage
}

// gracefulStop says which kill (counting those done, from 0) is a graceful
// stop rather than a SIGKILL: every third, from the second on, so that the
// short form (2 to 5 kills) always has both.
func gracefulStop(kill int) bool { return kill%3 == 1 }

func TestChaos(t *testing.T) {
	cfg := shortChaos
	if os.Getenv("SCALEPLANE_CHAOS_LONG") != "" {
		cfg = longChaos
	}
	cp := framework.Get(t)
	ctx := context.Background()
	bin, err := framework.Binary("scaleplane-controller-manager")
	if err != nil {
		t.Fatal(err)
	}
	ns := cp.CreateNamespace(t)
	kube := cp.KubeClient()

	// The watches start first: every write the controllers make is seen.
	recordCtx, stopRecording := context.WithCancel(ctx)
	defer stopRecording()
	deployStats, leaseStats := &recorder.WatchStats{}, &recorder.WatchStats{}
	writes := recorder.RecordDeploymentWrites(recordCtx, kube, ns, deployStats)
	lease := recorder.RecordLease(recordCtx, kube, leaseNamespace, leaseName, leaseStats)

	created := createTargets(ctx, t, cp, ns, cfg.objects)

	// The replicas log next to the control plane's own processes
	// (SCALEPLANE_TEST_KEEP_DIR=1 keeps them).
	logDir := cp.Dir()
	f := startFleet(t, cfg.replicas, logDir, bin, []string{
		"--kubeconfig=" + cp.KubeconfigPath(),
		"--controllers=cron-scaler",
		"--leader-elect=true",
		"--leader-elect-resource-namespace=" + leaseNamespace,
		"-v=2",
	})
	fleetStopped := false
	stopFleet := func() {
		if !fleetStopped {
			fleetStopped = true
			f.stop()
		}
	}
	defer stopFleet()
	defer func() {
		if t.Failed() {
			for _, r := range f.replicas {
				r.mu.Lock()
				p := r.proc
				r.mu.Unlock()
				t.Logf("%s (log %s/%s.log), last lines:\n%s", r.name, logDir, r.name, p.Tail(60))
			}
		}
	}()

	// Wait for the first leader, then make chaos for cfg.duration.
	if _, err := waitForHolder(ctx, lease, "", 60*time.Second); err != nil {
		t.Fatalf("no leader: %v", err)
	}
	start := time.Now()
	end := start.Add(cfg.duration)
	var events []chaosEvent
	var readyzDown, readyzBack []string
	lastKilled := ""
	kills, lastKill := 0, start // kills tried
	done := 0                   // kills done (a leader was found)
	outages := mergeOutages(start, cfg)
	next := start.Add(randBetween(cfg.killMin, cfg.killMax))
	for time.Now().Before(end) {
		// An outage comes first when a kill would fall shortly before it:
		// a failover needs the apiserver, and the test measures each alone.
		if len(outages) > 0 && !outages[0].at.After(next.Add(leaseDuration+5*time.Second)) {
			o := outages[0]
			outages = outages[1:]
			sleepUntil(o.at)
			if o.at.Before(time.Now()) {
				o.at = time.Now()
			}
			e, down, back := runOutage(ctx, t, cp, f, lease, o.kind, o.down)
			events = append(events, e)
			readyzDown = append(readyzDown, down)
			readyzBack = append(readyzBack, back)
			if next.Before(time.Now().Add(cfg.killMin / 2)) {
				next = time.Now().Add(cfg.killMin / 2)
			}
			continue
		}
		if !next.Before(end) {
			sleepUntil(end)
			break
		}
		// Every other kill lands just after a scheduled time, when the
		// leader is firing (between its target writes and status writes),
		// if a minute boundary is at most a minute after the last kill.
		atSlot := kills%2 == 1
		if atSlot {
			boundary := lastKill.Add(cfg.killMin).Truncate(time.Minute).Add(time.Minute)
			// (An outage may have run past it meanwhile. And the kill
			// must not be pushed into the next outage's time: its
			// takeover would overlap it and go unmeasured.)
			beforeOutage := len(outages) == 0 || boundary.Add(leaseDuration+5*time.Second).Before(outages[0].at)
			if boundary.Sub(lastKill) <= time.Minute && boundary.Before(end) && boundary.After(time.Now()) && beforeOutage {
				next = boundary.Add(time.Duration(rand.IntN(500)) * time.Millisecond)
			} else {
				atSlot = false
			}
		}
		sleepUntil(next)
		kills++
		lastKill = time.Now()
		if e, ok := killLeader(ctx, kube, f, atSlot, gracefulStop(done)); ok {
			events = append(events, e)
			lastKilled = e.holder
			done++
		}
		next = time.Now().Add(randBetween(cfg.killMin, cfg.killMax))
	}
	chaosEnd := time.Now()

	// Settle: a leader fires the slots after the chaos; everything up to
	// lastSlot must be recorded.
	lastSlot := chaosEnd.Add(slack).Truncate(time.Minute)
	if _, err := waitForHolder(ctx, lease, lastKilled, 60*time.Second); err != nil {
		t.Errorf("no leader after the chaos: %v", err)
	}
	crons := waitForSlots(ctx, t, cp, ns, created, lastSlot, 90*time.Second)
	stopFleet()
	// The watch saw every write once the fleet stopped.
	time.Sleep(time.Second)
	stopRecording()

	r := check(t, cfg, crons, writes.Snapshot(), lease.Snapshot(), events, created, lastSlot, f.leaderNames())
	r.chaosDuration = chaosEnd.Sub(start)
	for _, rep := range f.replicas {
		for _, e := range rep.exitsSnapshot() {
			switch {
			case e.killed:
				r.exitsKilled++
			case e.stopped && e.code == 0:
				// Drained, released the Lease, exited cleanly.
				r.exitsStopped++
			case e.stopped:
				r.exitsOther++
				t.Errorf("%s, stopped gracefully, exited at %s with status %d instead of 0 after draining:\n%s", rep.name, e.at.Format(time.TimeOnly), e.code, e.tail)
			case e.lostLease:
				r.exitsLostLease++
			default:
				r.exitsOther++
				t.Logf("%s exited at %s without being killed or losing its lease:\n%s", rep.name, e.at.Format(time.TimeOnly), e.tail)
			}
		}
		if out := string(rep.output()); strings.Contains(out, "Observed a panic") || strings.Contains(out, "panic:") {
			t.Errorf("%s logged a panic", rep.name)
		}
	}
	r.deployWatch[0], r.deployWatch[1] = deployStats.Get()
	r.leaseWatch[0], r.leaseWatch[1] = leaseStats.Get()
	r.readyzDown, r.readyzBack = readyzDown, readyzBack
	t.Log("\n" + r.String())
}

// createTargets creates n Deployments at 1 replica, each with a
// CronFederatedHPA setting it to 2 on even minutes and 3 on odd ones, and
// returns when it started creating them.
func createTargets(ctx context.Context, t *testing.T, cp *framework.ControlPlane, ns string, n int) time.Time {
	t.Helper()
	// Objects are created away from a minute boundary, so that no rule's
	// first slot is its creation second.
	if s := time.Now().Second(); s > 50 {
		time.Sleep(time.Duration(62-s) * time.Second)
	}
	created := time.Now()
	for i := range n {
		if err := workload.Create(ctx, cp.KubeClient(), cp.Client(), ns, fmt.Sprintf("target-%02d", i), maxDelay, 32); err != nil {
			t.Fatal(err)
		}
	}
	return created
}

type plannedOutage struct {
	at   time.Time
	kind string
	down time.Duration
}

func mergeOutages(start time.Time, cfg chaosConfig) []plannedOutage {
	var out []plannedOutage
	for _, f := range cfg.apiserverRestart {
		out = append(out, plannedOutage{at: start.Add(time.Duration(f * float64(cfg.duration))), kind: "apiserver", down: cfg.apiserverDown})
	}
	for _, f := range cfg.etcdRestart {
		out = append(out, plannedOutage{at: start.Add(time.Duration(f * float64(cfg.duration))), kind: "etcd", down: cfg.etcdDown})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].at.Before(out[j].at) })
	return out
}

func randBetween(lo, hi time.Duration) time.Duration {
	return lo + time.Duration(rand.Int64N(int64(hi-lo)+1))
}

func sleepUntil(t time.Time) {
	if d := time.Until(t); d > 0 {
		time.Sleep(d)
	}
}

// waitForHolder waits until the Lease is held by someone other than notBy,
// and returns the holder.
func waitForHolder(ctx context.Context, lease *recorder.LeaseLog, notBy string, timeout time.Duration) (string, error) {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		if l, ok := lease.Latest(); ok && l.Holder != "" && l.Holder != notBy && time.Since(l.RenewTime) < leaseDuration {
			return l.Holder, nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return "", fmt.Errorf("no holder other than %q within %v", notBy, timeout)
}

// killLeader SIGKILLs the replica holding the Lease, as a crashed node or an
// OOM kill would, or, if graceful, stops it with SIGTERM, as a rollout, a
// node drain or a deleted pod does. The holder is read from the apiserver,
// not from the Lease watch, which may be behind (after a relist, say): the
// replica stopped must be the one leading.
func killLeader(ctx context.Context, kube kubernetes.Interface, f *fleet, atSlot, graceful bool) (chaosEvent, bool) {
	l, err := kube.CoordinationV1().Leases(leaseNamespace).Get(ctx, leaseName, metav1.GetOptions{})
	if err != nil || l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity == "" || l.Spec.RenewTime == nil ||
		time.Since(l.Spec.RenewTime.Time) >= leaseDuration {
		return chaosEvent{}, false
	}
	holder := *l.Spec.HolderIdentity
	for _, r := range f.replicas {
		at := time.Now()
		if graceful && r.stopIfIdentity(holder) || !graceful && r.killIfIdentity(holder) {
			return chaosEvent{at: at, kind: "kill", holder: holder, atSlot: atSlot, graceful: graceful, detail: r.name}, true
		}
	}
	return chaosEvent{}, false
}

// runOutage restarts kube-apiserver or etcd, watching the replicas' /readyz
// meanwhile. It returns the event and what /readyz said during and after.
func runOutage(ctx context.Context, t *testing.T, cp *framework.ControlPlane, f *fleet, lease *recorder.LeaseLog, kind string, down time.Duration) (chaosEvent, string, string) {
	before, _ := lease.Latest()
	e := chaosEvent{at: time.Now(), kind: kind, holder: before.Holder}
	// Poll /readyz of every replica while the outage lasts.
	sawNotReady := map[string]bool{}
	pollCtx, stopPolling := context.WithCancel(ctx)
	polled := make(chan struct{})
	go func() {
		defer close(polled)
		for pollCtx.Err() == nil {
			for _, r := range f.replicas {
				if code := r.ready(); code != 0 && code != 200 {
					sawNotReady[r.name] = true
				}
			}
			time.Sleep(250 * time.Millisecond)
		}
	}()
	var err error
	switch kind {
	case "apiserver":
		err = cp.RestartAPIServer(ctx, down)
	case "etcd":
		err = cp.RestartEtcd(ctx, down)
	}
	stopPolling()
	<-polled
	if err != nil {
		t.Fatalf("restarting %s: %v", kind, err)
	}
	e.detail = fmt.Sprintf("down %v (back after %v)", down, time.Since(e.at).Round(100*time.Millisecond))
	names := slices.Sorted(func(yield func(string) bool) {
		for n := range sawNotReady {
			if !yield(n) {
				return
			}
		}
	})
	downMsg := fmt.Sprintf("%s restart: /readyz not ready on %v", kind, names)
	if kind == "apiserver" && len(names) == 0 {
		t.Errorf("no replica's /readyz failed while kube-apiserver was down")
	}
	// Every running replica is ready again soon after.
	deadline := time.Now().Add(45 * time.Second)
	var notBack []string
	for {
		notBack = nil
		for _, r := range f.replicas {
			if code := r.ready(); code != 200 {
				notBack = append(notBack, fmt.Sprintf("%s:%d", r.name, code))
			}
		}
		if len(notBack) == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(250 * time.Millisecond)
	}
	backMsg := fmt.Sprintf("%s restart: every replica ready again %v after the outage began", kind, time.Since(e.at).Round(100*time.Millisecond))
	if len(notBack) > 0 {
		t.Errorf("%s restart: replicas not ready 45s after: %v", kind, notBack)
		backMsg = fmt.Sprintf("%s restart: not ready after 45s: %v", kind, notBack)
	}
	if _, err := waitForHolder(ctx, lease, "", 60*time.Second); err != nil {
		t.Errorf("no leader after the %s restart: %v", kind, err)
	}
	after, _ := lease.Latest()
	switch {
	case before.Holder == "":
		e.detail += ", no leader before it"
	case after.Holder == before.Holder && f.running(before.Holder):
		e.detail += ", the leader kept its lease"
	default:
		e.detail += fmt.Sprintf(", the leader lost its lease (new leader after %v)", time.Since(e.at).Round(100*time.Millisecond))
	}
	e.end = time.Now()
	return e, downMsg, backMsg
}

// waitForSlots waits until every slot of every rule up to lastSlot is in
// its status, or timeout, and returns the CronFederatedHPAs.
func waitForSlots(ctx context.Context, t *testing.T, cp *framework.ControlPlane, ns string, created, lastSlot time.Time, timeout time.Duration) []autoscalingv1alpha1.CronFederatedHPA {
	deadline := time.Now().Add(timeout)
	for {
		list, err := cp.Client().AutoscalingV1alpha1().CronFederatedHPAs(ns).List(ctx, metav1.ListOptions{})
		if err == nil {
			complete := true
			for _, c := range list.Items {
				for _, h := range c.Status.ExecutionHistories {
					for _, s := range slotsOf(h.RuleName, c.CreationTimestamp.Time, lastSlot) {
						if len(recordsCovering(h, s)) == 0 {
							complete = false
						}
					}
				}
				if len(c.Status.ExecutionHistories) < 2 {
					complete = false
				}
			}
			if complete || time.Now().After(deadline) {
				return list.Items
			}
		}
		time.Sleep(time.Second)
	}
}

// slotsOf are the scheduled times of rule "even" or "odd" after created, up
// to and including last.
func slotsOf(rule string, created, last time.Time) []time.Time {
	parity := 0
	if rule == "odd" {
		parity = 1
	}
	var slots []time.Time
	for s := created.Truncate(time.Minute).Add(time.Minute); !s.After(last); s = s.Add(time.Minute) {
		if s.Minute()%2 == parity {
			slots = append(slots, s)
		}
	}
	return slots
}

// slotOfWrite is the slot a write of replicas at t applied: the latest
// scheduled time of that value's rule at or before t.
func slotOfWrite(replicas int32, t time.Time) time.Time {
	s := t.Truncate(time.Minute)
	parity := 0
	if replicas == oddReplicas {
		parity = 1
	}
	if s.Minute()%2 != parity {
		s = s.Add(-time.Minute)
	}
	return s
}

var missedRange = regexp.MustCompile(`^missed (?:at least )?\d+ scheduled times from (\S+) to (\S+)`)

// historyRecord is one entry of a rule's status history.
type historyRecord struct {
	schedule, executed time.Time
	success            bool
	message            string
	// first is the first scheduled time a record of several missed ones
	// covers (the controller records a run of missed times once).
	first time.Time
}

func records(h autoscalingv1alpha1.ExecutionHistory) []historyRecord {
	var out []historyRecord
	for _, s := range h.SuccessfulExecutions {
		out = append(out, historyRecord{schedule: s.ScheduleTime.Time, first: s.ScheduleTime.Time, executed: s.ExecutionTime.Time, success: true})
	}
	for _, f := range h.FailedExecutions {
		r := historyRecord{schedule: f.ScheduleTime.Time, first: f.ScheduleTime.Time, executed: f.ExecutionTime.Time, message: f.Message}
		if m := missedRange.FindStringSubmatch(f.Message); m != nil {
			if first, err := time.Parse(time.RFC3339, m[1]); err == nil {
				r.first = first
			}
		}
		out = append(out, r)
	}
	return out
}

func recordsCovering(h autoscalingv1alpha1.ExecutionHistory, slot time.Time) []historyRecord {
	var out []historyRecord
	for _, r := range records(h) {
		if !slot.Before(r.first) && !slot.After(r.schedule) {
			out = append(out, r)
		}
	}
	return out
}

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
