//go:build reliability_long

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
	"testing"
	"time"

	"github.com/scaleplane/scaleplane/test/integration/framework"
	"github.com/scaleplane/scaleplane/test/reliability/internal/recorder"
)

// outageDown is how long kube-apiserver and etcd are both down: far beyond
// the renew deadline.
const outageDown = time.Minute

// TestControlPlaneDownForAMinute takes kube-apiserver and etcd away for a
// minute, first under a controller manager without leader election, which
// must keep running and resume, then under two with it, whose leader must
// lose its lease and exit (its replacement, and the standby, elect a new
// leader once the control plane is back). Either way every slot of the
// outage is recorded once: applied late within maxDelaySeconds, or missed.
// It belongs to the long run only (two minutes of outage): the build tag
// keeps it out of make test, so that nothing there is skipped;
// make test-reliability builds it in.
func TestControlPlaneDownForAMinute(t *testing.T) {
	cp := framework.Get(t)
	ctx := context.Background()
	bin, err := framework.Binary("scaleplane-controller-manager")
	if err != nil {
		t.Fatal(err)
	}
	ns := cp.CreateNamespace(t)
	created := createTargets(ctx, t, cp, ns, 5)

	outage := func() (time.Time, time.Time) {
		start := time.Now()
		cp.StopAPIServer()
		cp.StopEtcd()
		time.Sleep(outageDown)
		if err := cp.StartEtcd(ctx); err != nil {
			t.Fatalf("starting etcd: %v", err)
		}
		if err := cp.StartAPIServer(ctx); err != nil {
			t.Fatalf("starting kube-apiserver: %v", err)
		}
		return start, time.Now()
	}

	t.Run("without leader election", func(t *testing.T) {
		m := framework.StartManager(t, cp.KubeconfigPath(), "cron-scaler")
		r := &replica{name: "manager", port: m.Port}
		waitReady(t, r, 60*time.Second)
		start, end := outage()
		if m.Exited() {
			t.Fatalf("the manager exited during the outage:\n%s", m.Tail(40))
		}
		waitReady(t, r, 60*time.Second)
		checkSlotsUpTo(t, cp, ns, created, end)
		t.Logf("outage %v; the manager kept running and is ready %v after the control plane came back", end.Sub(start).Round(100*time.Millisecond), time.Since(end).Round(100*time.Millisecond))
		m.Stop(30 * time.Second)
	})

	t.Run("with leader election", func(t *testing.T) {
		stats := &recorder.WatchStats{}
		recordCtx, stop := context.WithCancel(ctx)
		defer stop()
		lease := recorder.RecordLease(recordCtx, cp.KubeClient(), leaseNamespace, leaseName, stats)
		f := startFleet(t, 2, cp.Dir(), bin, []string{
			"--kubeconfig=" + cp.KubeconfigPath(),
			"--controllers=cron-scaler",
			"--leader-elect=true",
			"--leader-elect-resource-namespace=" + leaseNamespace,
			"-v=2",
		})
		defer f.stop()
		holder, err := waitForHolder(ctx, lease, "", 60*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		start, end := outage()
		newHolder, err := waitForHolder(ctx, lease, holder, 60*time.Second)
		if err != nil {
			t.Fatalf("no new leader after the outage: %v", err)
		}
		checkSlotsUpTo(t, cp, ns, created, end)
		lost := 0
		for _, r := range f.replicas {
			for _, e := range r.exitsSnapshot() {
				if e.lostLease {
					lost++
				}
			}
		}
		if lost == 0 {
			t.Errorf("the leader did not exit after losing its lease")
		}
		t.Logf("outage %v; %d exits after losing the lease; new leader %s %v after kube-apiserver was ready again (0: it had taken the lease before /readyz passed)",
			end.Sub(start).Round(100*time.Millisecond), lost, newHolder, time.Since(end).Round(100*time.Millisecond))
	})

}

// checkSlotsUpTo waits (while the manager under test runs) until every
// scheduled time up to end is recorded, and checks each is recorded once:
// those in the outage applied late within maxDelaySeconds, or missed.
func checkSlotsUpTo(t *testing.T, cp *framework.ControlPlane, ns string, created, end time.Time) {
	t.Helper()
	lastSlot := end.Truncate(time.Minute)
	crons := waitForSlots(context.Background(), t, cp, ns, created, lastSlot, 90*time.Second)
	r := checkHistories(t, chaosConfig{objects: len(crons)}, crons, lastSlot)
	t.Logf("slots up to %s: %d; applied %d, missed %d, failed %d; reasons %v",
		lastSlot.UTC().Format(time.TimeOnly), r.slots, r.applied, r.missed, r.failed, r.missedReasons)
}

// waitReady waits until the replica's /readyz answers 200.
func waitReady(t *testing.T, r *replica, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for r.ready() != 200 {
		if time.Now().After(deadline) {
			t.Fatalf("%s not ready within %v (last answer %d)", r.name, timeout, r.ready())
		}
		time.Sleep(250 * time.Millisecond)
	}
}
