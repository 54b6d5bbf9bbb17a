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
	"slices"
	"sort"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/scaleplane/scaleplane/test/integration/framework"
	"github.com/scaleplane/scaleplane/test/reliability/internal/recorder"
)

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
