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

package outage

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	autoscalingv1alpha1 "github.com/scaleplane/scaleplane/pkg/apis/autoscaling/v1alpha1"
	"github.com/scaleplane/scaleplane/test/integration/framework"
	"github.com/scaleplane/scaleplane/test/reliability/internal/recorder"
)

const (
	// The replicas' leader-election timings. Restarting kube-apiserver
	// takes 13–17 s on a loaded 2-core machine, and etcd about 13 s until
	// its clients recover: longer than the default 10 s renew deadline, so
	// with the defaults the leader would lose its lease to every restart.
	// These are what a cluster with such a control plane would set (lease
	// > renew deadline > retry period), so the outages here are shorter
	// than the renew deadline, the case the promise is about.
	leaseDuration = 60 * time.Second
	renewDeadline = 45 * time.Second
	retryPeriod   = 2 * time.Second
	leaseName     = "scaleplane-controller-manager"

	// etcdDown and apiserverDown are how long each stays down once its
	// process exited. Most of an outage is the shutdown before: on SIGTERM
	// kube-apiserver stops answering at once but its process takes 10 s
	// (the framework's grace) to exit; etcd takes about 7 s, and
	// kube-apiserver fails its health checks 2–3 s into it.
	etcdDown      = time.Second
	apiserverDown = 2 * time.Second
	// stopLead is how long before the minute boundary kube-apiserver is
	// stopped, so that it no longer answers at the boundary and the slot
	// falls in the outage.
	stopLead = 3 * time.Second
)

// TestControlPlaneOutages restarts etcd and kube-apiserver under running
// controller managers, and checks what the issue promises for outages of
// seconds: the managers keep running, a leader keeps its Lease through an
// outage shorter than the renew deadline, and a slot that fell in an outage
// runs once afterwards within its maxDelaySeconds, or is recorded missed,
// once, beyond it.
func TestControlPlaneOutages(t *testing.T) {
	cp := framework.Get(t)
	t.Run("leader keeps its lease across an etcd restart and a kube-apiserver restart", func(t *testing.T) {
		testLeaderKeepsLease(t, cp)
	})
	t.Run("without leader election, a slot that falls in an outage longer than maxDelaySeconds is recorded missed, once", func(t *testing.T) {
		testMissedInOutage(t, cp)
	})
}

// testLeaderKeepsLease runs two replicas with leader election over five
// CronFederatedHPAs (maxDelaySeconds 60), restarts etcd, then kube-apiserver
// across a minute boundary, and checks that nothing exited, the Lease never
// changed hands, the leader's /readyz followed kube-apiserver, and every
// slot, the one in the outage too, was applied once, in order.
func testLeaderKeepsLease(t *testing.T, cp *framework.ControlPlane) {
	const (
		objects  = 5
		maxDelay = 60 * time.Second
	)
	ctx := context.Background()
	ns := cp.CreateNamespace(t)
	kube := cp.KubeClient()

	// The watches start first: every write and every Lease state is seen.
	recordCtx, stopRecording := context.WithCancel(ctx)
	defer stopRecording()
	deployStats, leaseStats := &recorder.WatchStats{}, &recorder.WatchStats{}
	writes := recorder.RecordDeploymentWrites(recordCtx, kube, ns, deployStats)
	lease := recorder.RecordLease(recordCtx, kube, ns, leaseName, leaseStats)

	replicas := startManagers(t, cp, "replica", 2,
		"--leader-elect=true",
		"--leader-elect-resource-namespace="+ns,
		"--leader-elect-lease-duration="+leaseDuration.String(),
		"--leader-elect-renew-deadline="+renewDeadline.String(),
		"--leader-elect-retry-period="+retryPeriod.String(),
	)
	leader, before := waitForLeader(t, replicas, lease)
	for _, r := range replicas {
		waitReady(t, r.name, r.port, readyTimeout)
	}

	// Created away from a minute boundary, so that no slot is the creation
	// second.
	if time.Now().Second() > 50 {
		sleepUntil(time.Now().Truncate(time.Minute).Add(62 * time.Second))
	}
	created := time.Now()
	for i := range objects {
		createTarget(ctx, t, cp, ns, fmt.Sprintf("target-%d", i), maxDelay)
	}

	etcd := runOutage(t, cp, "etcd", leader.port, cp.StopEtcd,
		func() error { return cp.StartEtcd(ctx) },
		func(gone time.Time) time.Time { return gone.Add(etcdDown) })
	t.Logf("outage: %s", etcd)

	// kube-apiserver goes away stopLead before the first minute boundary
	// far enough ahead, so that the boundary's slot falls in the outage.
	slot := nextBoundary(time.Now().Add(stopLead + 2*time.Second))
	sleepUntil(slot.Add(-stopLead))
	api := runOutage(t, cp, "kube-apiserver", leader.port, cp.StopAPIServer,
		func() error { return cp.StartAPIServer(ctx) },
		func(gone time.Time) time.Time { return gone.Add(apiserverDown) })
	t.Logf("outage: %s", api)
	if !api.down.Before(slot) || !api.answers.After(slot) {
		t.Fatalf("kube-apiserver did not answer from %s to %s, not across the slot %s: the test could not place the outage",
			api.down.UTC().Format("15:04:05.000"), api.answers.UTC().Format("15:04:05.000"), slot.UTC().Format(time.TimeOnly))
	}
	if !api.notReady {
		t.Errorf("the leader's /readyz did not answer not-ready while kube-apiserver was down")
	}

	crons := waitRecorded(ctx, t, cp, ns, slot, maxDelay+30*time.Second)
	want := map[string]int{}
	for i := range objects {
		want[fmt.Sprintf("target-%d", i)] = len(slotsBetween(created, slot))
	}
	seen := waitWrites(t, writes, want)
	// Everything is in; the checks below look at what happened up to here.
	for _, r := range replicas {
		checkAlive(t, r.name, r.proc)
	}
	checkLeaseKept(ctx, t, cp, ns, lease.Snapshot(), before)
	late := checkAppliedOnce(t, crons, seen, created, slot, maxDelay, api)
	stopRecording()

	dr, dl := deployStats.Get()
	lr, ll := leaseStats.Get()
	t.Logf("leader %s (%s) kept the Lease; the slot %s in the kube-apiserver outage was applied %s after it; watches: Deployments resumed %d, relisted %d; Lease resumed %d, relisted %d",
		leader.name, before.Holder, slot.UTC().Format(time.TimeOnly), late, dr, dl, lr, ll)
}

// waitForLeader waits until the Lease has a holder and one of the replicas
// logged that it became the leader under that identity, and returns it and
// the Lease's state then.
func waitForLeader(t *testing.T, replicas []*manager, lease *recorder.LeaseLog) (*manager, recorder.LeaseRecord) {
	t.Helper()
	deadline := time.Now().Add(readyTimeout)
	for time.Now().Before(deadline) {
		if l, ok := lease.Latest(); ok && l.Holder != "" {
			for _, r := range replicas {
				if strings.Contains(r.log(), `identity="`+l.Holder+`"`) {
					return r, l
				}
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("no replica became the leader within %v", readyTimeout)
	return nil, recorder.LeaseRecord{}
}

// checkLeaseKept checks that every state of the Lease seen since before
// names the same holder with the same number of transitions, and that the
// holder still renews it.
func checkLeaseKept(ctx context.Context, t *testing.T, cp *framework.ControlPlane, ns string, states []recorder.LeaseRecord, before recorder.LeaseRecord) {
	t.Helper()
	for _, l := range states {
		if l.At.Before(before.At) {
			continue
		}
		if l.Holder != before.Holder || l.Transitions != before.Transitions {
			t.Errorf("the Lease changed at %s: holder %q, transitions %d; before the outages %q, %d",
				l.At.UTC().Format("15:04:05.000"), l.Holder, l.Transitions, before.Holder, before.Transitions)
		}
	}
	now, err := cp.KubeClient().CoordinationV1().Leases(ns).Get(ctx, leaseName, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("reading the Lease: %v", err)
	}
	holder, transitions := ptr.Deref(now.Spec.HolderIdentity, ""), ptr.Deref(now.Spec.LeaseTransitions, 0)
	if holder != before.Holder || transitions != before.Transitions {
		t.Errorf("the Lease is held by %q with %d transitions after the outages; before them by %q with %d", holder, transitions, before.Holder, before.Transitions)
	}
	if now.Spec.RenewTime == nil || time.Since(now.Spec.RenewTime.Time) > renewDeadline {
		t.Errorf("the leader no longer renews the Lease (renewTime %v)", now.Spec.RenewTime)
	}
}

// checkAppliedOnce checks that every slot after created up to last is
// recorded exactly once, as applied, that each Deployment's replicas went
// through the slots' values in order, each written after its slot and
// within maxDelay, and that the slot in the kube-apiserver outage (last)
// was applied after kube-apiserver came back. It returns how late that
// slot was applied, for the log.
func checkAppliedOnce(t *testing.T, crons []autoscalingv1alpha1.CronFederatedHPA, writes map[string][]recorder.TargetWrite,
	created, last time.Time, maxDelay time.Duration, api outage) string {
	t.Helper()
	var late, afterBack []time.Duration
	slots := slotsBetween(created, last)
	for i := range crons {
		c := &crons[i]
		for _, s := range slots {
			ok, failed := recordsOf(c, s)
			if len(ok) != 1 || len(failed) != 0 {
				t.Errorf("%s: slot %s recorded %d times applied and %d times failed or missed, want applied once: %+v", c.Name, s.UTC().Format(time.TimeOnly), len(ok), len(failed), failed)
				continue
			}
			if got := ptr.Deref(ok[0].AppliedReplicas, -1); got != valueOf(s) {
				t.Errorf("%s: slot %s recorded applying %d replicas, want %d", c.Name, s.UTC().Format(time.TimeOnly), got, valueOf(s))
			}
			if !s.Equal(last) {
				continue
			}
			// Nothing reaches the apiserver while it is gone: a record
			// made after it went away was made after it came back.
			executed := ok[0].ExecutionTime.Time
			if !executed.After(api.down) {
				t.Errorf("%s: the slot %s in the outage was applied at %s, before kube-apiserver stopped answering at %s",
					c.Name, s.UTC().Format(time.TimeOnly), executed.UTC().Format("15:04:05.000"), api.down.UTC().Format("15:04:05.000"))
			}
			late = append(late, executed.Sub(s))
			afterBack = append(afterBack, executed.Sub(api.answers))
		}
		checkWrites(t, c.Name, writes[c.Name], slots, maxDelay)
	}
	if len(late) == 0 {
		return "(not applied)"
	}
	return fmt.Sprintf("%s (%s after kube-apiserver answered again)", span(late), span(afterBack))
}

// span is "min to max" of ds, or one value when they are the same.
func span(ds []time.Duration) string {
	lo := slices.Min(ds).Round(100 * time.Millisecond)
	hi := slices.Max(ds).Round(100 * time.Millisecond)
	if lo == hi {
		return lo.String()
	}
	return fmt.Sprintf("%v to %v", lo, hi)
}

// checkWrites checks that a Deployment's replicas changed once per slot, to
// the slot's value, in order, each after its slot and within maxDelay (the
// watch may see a write up to slack late).
func checkWrites(t *testing.T, name string, writes []recorder.TargetWrite, slots []time.Time, maxDelay time.Duration) {
	t.Helper()
	var got, want []string
	for _, w := range writes {
		got = append(got, fmt.Sprintf("%d at %s", w.Replicas, w.At.UTC().Format("15:04:05.000")))
	}
	for _, s := range slots {
		want = append(want, fmt.Sprintf("%d after %s", valueOf(s), s.UTC().Format(time.TimeOnly)))
	}
	if len(writes) != len(slots) {
		t.Errorf("%s: replicas written %v, want %v", name, got, want)
		return
	}
	for i, w := range writes {
		if s := slots[i]; w.Replicas != valueOf(s) || w.At.Before(s) || w.At.After(s.Add(maxDelay+slack)) {
			t.Errorf("%s: replicas written %v, want %v (each within %v of its slot)", name, got, want, maxDelay)
			return
		}
	}
}

// testMissedInOutage runs one manager without leader election over two
// CronFederatedHPAs, one with maxDelaySeconds 5, one with 60, and keeps
// kube-apiserver away from a few seconds before a minute boundary until
// about 20 s after it. The slot of the first is then recorded missed, once,
// saying the API server could not be reached; the second's runs once
// kube-apiserver is back.
func testMissedInOutage(t *testing.T, cp *framework.ControlPlane) {
	const (
		short, long = "short-delay", "long-delay"
		shortDelay  = 5 * time.Second
		longDelay   = 60 * time.Second
		// downAfter is when, after the boundary, kube-apiserver is
		// started again. It stops answering at once on SIGTERM (stopLead
		// before the boundary) and answers again about 2 s after the
		// start, more on a loaded machine: about 17–20 s after the
		// boundary, well past the short rule's deadline and well before
		// the long rule's (the cron-scaler retries a firing that got no
		// answer at most 4 s apart, so it runs within seconds of
		// kube-apiserver's return).
		downAfter = 15 * time.Second
	)
	ctx := context.Background()
	ns := cp.CreateNamespace(t)
	recordCtx, stopRecording := context.WithCancel(ctx)
	defer stopRecording()
	writes := recorder.RecordDeploymentWrites(recordCtx, cp.KubeClient(), ns, &recorder.WatchStats{})

	m := startManagers(t, cp, "no-leader-election", 1, "--leader-elect=false")[0]
	waitReady(t, m.name, m.port, readyTimeout)

	// The boundary is far enough ahead for the manager to plan it first.
	slot := nextBoundary(time.Now().Add(15 * time.Second))
	createTarget(ctx, t, cp, ns, short, shortDelay)
	createTarget(ctx, t, cp, ns, long, longDelay)
	waitPlanned(ctx, t, cp, ns, slot, []string{short, long})

	sleepUntil(slot.Add(-stopLead))
	api := runOutage(t, cp, "kube-apiserver", m.port, cp.StopAPIServer,
		func() error { return cp.StartAPIServer(ctx) },
		func(time.Time) time.Time { return slot.Add(downAfter) })
	t.Logf("outage: %s", api)
	if !api.down.Before(slot) || api.answers.Before(slot.Add(shortDelay)) {
		t.Fatalf("kube-apiserver did not answer from %s to %s, not across the slot %s and its %v deadline: the test could not place the outage",
			api.down.UTC().Format("15:04:05.000"), api.answers.UTC().Format("15:04:05.000"), slot.UTC().Format(time.TimeOnly), shortDelay)
	}
	if !api.notReady {
		t.Errorf("the manager's /readyz did not answer not-ready while kube-apiserver was down")
	}

	crons := waitRecorded(ctx, t, cp, ns, slot, longDelay+30*time.Second)
	seen := waitWrites(t, writes, map[string]int{long: 1})
	stopRecording()
	checkAlive(t, m.name, m.proc)
	for i := range crons {
		c := &crons[i]
		switch c.Name {
		case short:
			checkMissed(ctx, t, cp, c, slot, seen[c.Name])
		case long:
			checkLateApplied(t, c, slot, seen[c.Name], api)
		}
	}
}

// waitPlanned waits until the manager planned slot for every one of names:
// its rule's nextExecutionTime in status is slot. It fails the test if that
// does not happen stopLead before the slot, when the outage begins.
func waitPlanned(ctx context.Context, t *testing.T, cp *framework.ControlPlane, ns string, slot time.Time, names []string) {
	t.Helper()
	crons := cp.Client().AutoscalingV1alpha1().CronFederatedHPAs(ns)
	for _, name := range names {
		for {
			c, err := crons.Get(ctx, name, metav1.GetOptions{})
			if err == nil {
				if h := history(c, ruleOf(slot)); h != nil && h.NextExecutionTime != nil && h.NextExecutionTime.Time.Equal(slot) {
					break
				}
			}
			if time.Now().After(slot.Add(-stopLead)) {
				t.Fatalf("%s: the manager did not plan the slot %s before the outage (err %v)", name, slot.UTC().Format(time.TimeOnly), err)
			}
			time.Sleep(250 * time.Millisecond)
		}
	}
}

// checkMissed checks that slot is recorded once, as missed because the API
// server could not be reached, and that the target was left alone.
func checkMissed(ctx context.Context, t *testing.T, cp *framework.ControlPlane, c *autoscalingv1alpha1.CronFederatedHPA, slot time.Time, writes []recorder.TargetWrite) {
	t.Helper()
	ok, failed := recordsOf(c, slot)
	if len(ok) != 0 || len(failed) != 1 {
		t.Errorf("%s: slot %s recorded %d times applied and %d times failed or missed, want missed once: %+v %+v", c.Name, slot.UTC().Format(time.TimeOnly), len(ok), len(failed), ok, failed)
		return
	}
	msg := failed[0].Message
	if !strings.Contains(msg, "the API server could not be reached") {
		t.Errorf("%s: slot %s recorded with %q, want a missed record saying \"the API server could not be reached\"", c.Name, slot.UTC().Format(time.TimeOnly), msg)
	}
	// No rule sets 1: a Deployment still at 1 was never written.
	d, err := cp.KubeClient().AppsV1().Deployments(c.Namespace).Get(ctx, c.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := ptr.Deref(d.Spec.Replicas, 1); got != 1 || len(writes) != 0 {
		t.Errorf("%s: replicas %d, written %+v; want 1, never written, for a missed slot", c.Name, got, writes)
	}
	t.Logf("%s: slot %s recorded at %s: %q", c.Name, slot.UTC().Format(time.TimeOnly), failed[0].ExecutionTime.UTC().Format("15:04:05"), msg)
}

// checkLateApplied checks that slot is recorded once, as applied after
// kube-apiserver came back, and that the target got the slot's value then,
// once.
func checkLateApplied(t *testing.T, c *autoscalingv1alpha1.CronFederatedHPA, slot time.Time, writes []recorder.TargetWrite, api outage) {
	t.Helper()
	ok, failed := recordsOf(c, slot)
	if len(ok) != 1 || len(failed) != 0 {
		t.Errorf("%s: slot %s recorded %d times applied and %d times failed or missed, want applied once: %+v", c.Name, slot.UTC().Format(time.TimeOnly), len(ok), len(failed), failed)
		return
	}
	if got := ptr.Deref(ok[0].AppliedReplicas, -1); got != valueOf(slot) {
		t.Errorf("%s: slot %s recorded applying %d replicas, want %d", c.Name, slot.UTC().Format(time.TimeOnly), got, valueOf(slot))
	}
	executed := ok[0].ExecutionTime.Time
	if !executed.After(api.down) {
		t.Errorf("%s: slot %s applied at %s, before kube-apiserver stopped answering at %s", c.Name, slot.UTC().Format(time.TimeOnly),
			executed.UTC().Format("15:04:05.000"), api.down.UTC().Format("15:04:05.000"))
	}
	if len(writes) != 1 || writes[0].Replicas != valueOf(slot) || writes[0].At.Before(api.down) {
		t.Errorf("%s: replicas written %+v, want %d once, after kube-apiserver came back", c.Name, writes, valueOf(slot))
	}
	t.Logf("%s: slot %s applied %v after it (%v after kube-apiserver answered again)", c.Name, slot.UTC().Format(time.TimeOnly),
		executed.Sub(slot).Round(100*time.Millisecond), executed.Sub(api.answers).Round(100*time.Millisecond))
}
