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
	"strings"
	"testing"
	"time"

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
	// Nothing writes the targets now: once the watch has seen each at its
	// current resourceVersion, it has seen every write.
	waitWatchCaughtUp(ctx, t, kube, ns, writes)
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
