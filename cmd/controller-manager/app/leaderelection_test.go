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

package app

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	kubefake "k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/klog/v2/ktesting"
	"k8s.io/utils/ptr"

	"github.com/scaleplane/scaleplane/cmd/controller-manager/app/options"
)

// eventLog records what happened, in order, from several goroutines.
type eventLog struct {
	mu     sync.Mutex
	events []string
}

func (l *eventLog) add(e string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.events = append(l.events, e)
}

func (l *eventLog) list() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.events)
}

// leaseReleases records, on the fake clientset, every Lease update that
// empties the holder: that is how the elector releases the lease.
func leaseReleases(client *kubefake.Clientset, log *eventLog) {
	client.PrependReactor("update", "leases", func(action clienttesting.Action) (bool, runtime.Object, error) {
		lease := action.(clienttesting.UpdateAction).GetObject().(*coordinationv1.Lease)
		if ptr.Deref(lease.Spec.HolderIdentity, "") == "" {
			log.add("lease released")
		}
		return false, nil, nil
	})
}

func fastLeaderElection() *options.Options {
	o := options.NewOptions()
	o.LeaderElection.LeaseDuration = metav1.Duration{Duration: 3 * time.Second}
	o.LeaderElection.RenewDeadline = metav1.Duration{Duration: 2 * time.Second}
	o.LeaderElection.RetryPeriod = metav1.Duration{Duration: 100 * time.Millisecond}
	return o
}

// Issue 12, item 4: on shutdown the controllers stop (their work in flight
// finishes) before the lease is released, and only then does the manager
// return. With ReleaseOnCancel alone the elector released the lease and
// returned while the controllers were still working.
func TestShutdownStopsControllersBeforeReleasingTheLease(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	client := kubefake.NewClientset()
	log := &eventLog{}
	leaseReleases(client, log)

	leading := make(chan struct{})
	run := func(ctx context.Context) {
		close(leading)
		<-ctx.Done()
		// A sync in flight takes a while to finish.
		time.Sleep(300 * time.Millisecond)
		log.add("controllers stopped")
	}
	returned := make(chan error, 1)
	go func() { returned <- runWithLeaderElection(ctx, client, fastLeaderElection(), newHealthChecks(), run) }()
	select {
	case <-leading:
	case <-time.After(10 * time.Second):
		t.Fatal("never became the leader")
	}
	cancel()
	select {
	case err := <-returned:
		if err != nil {
			t.Fatalf("runWithLeaderElection: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("runWithLeaderElection did not return")
	}
	log.add("manager returned")
	if got, want := log.list(), []string{"controllers stopped", "lease released", "manager returned"}; !slices.Equal(got, want) {
		t.Errorf("shutdown order = %q; want %q", got, want)
	}
}

// The wait for the controllers is bounded: controllers that do not stop do
// not keep the lease, or the process, forever.
func TestShutdownWaitIsBounded(t *testing.T) {
	saved := shutdownTimeout
	shutdownTimeout = 300 * time.Millisecond
	t.Cleanup(func() { shutdownTimeout = saved })

	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	client := kubefake.NewClientset()
	log := &eventLog{}
	leaseReleases(client, log)

	leading := make(chan struct{})
	stuck := make(chan struct{})
	defer close(stuck)
	run := func(context.Context) {
		close(leading)
		<-stuck
	}
	returned := make(chan error, 1)
	go func() { returned <- runWithLeaderElection(ctx, client, fastLeaderElection(), newHealthChecks(), run) }()
	<-leading
	cancel()
	start := time.Now()
	select {
	case <-returned:
	case <-time.After(10 * time.Second):
		t.Fatal("runWithLeaderElection waited for stuck controllers without bound")
	}
	if waited := time.Since(start); waited < shutdownTimeout {
		t.Errorf("returned after %v, before the shutdown timeout %v", waited, shutdownTimeout)
	}
	if got := log.list(); !slices.Equal(got, []string{"lease released"}) {
		t.Errorf("events = %q; want the lease released after the timeout", got)
	}
}

// Issue 9: a leader cut off from the API server loses its lease after the
// renew deadline; its controllers are stopped and runWithLeaderElection
// returns errLeaderElectionLost (the process then exits) before the lease
// expires for the others, so a standby that takes over never acts while the
// old leader still does.
func TestLostLeaseStopsControllersBeforeTakeover(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	client := kubefake.NewClientset()
	log := &eventLog{}

	// The first holder of the lease is the leader to cut off. While cut off
	// every update it makes fails, its renewals and its release on the way
	// out alike, as if the network between it and the API server was gone.
	var mu sync.Mutex
	var leaderID string
	var cutOff bool
	client.PrependReactor("create", "leases", func(action clienttesting.Action) (bool, runtime.Object, error) {
		lease := action.(clienttesting.CreateAction).GetObject().(*coordinationv1.Lease)
		mu.Lock()
		defer mu.Unlock()
		if leaderID == "" {
			leaderID = ptr.Deref(lease.Spec.HolderIdentity, "")
		}
		return false, nil, nil
	})
	client.PrependReactor("update", "leases", func(action clienttesting.Action) (bool, runtime.Object, error) {
		lease := action.(clienttesting.UpdateAction).GetObject().(*coordinationv1.Lease)
		holder := ptr.Deref(lease.Spec.HolderIdentity, "")
		mu.Lock()
		defer mu.Unlock()
		if cutOff && (holder == leaderID || holder == "") {
			return true, nil, errors.New("connection refused")
		}
		return false, nil, nil
	})

	started := make(chan string, 2)
	runFor := func(name string) func(context.Context) {
		return func(ctx context.Context) {
			log.add(name + " started")
			started <- name
			<-ctx.Done()
			log.add(name + " stopped")
		}
	}
	returned := map[string]chan error{"a": make(chan error, 1), "b": make(chan error, 1)}
	for name, ch := range returned {
		go func() {
			err := runWithLeaderElection(ctx, client, fastLeaderElection(), newHealthChecks(), runFor(name))
			log.add(name + " returned")
			ch <- err
		}()
	}

	var leader string
	select {
	case leader = <-started:
	case <-time.After(10 * time.Second):
		t.Fatal("nobody became the leader")
	}
	standby := map[string]string{"a": "b", "b": "a"}[leader]
	mu.Lock()
	cutOff = true
	mu.Unlock()

	select {
	case err := <-returned[leader]:
		if !errors.Is(err, errLeaderElectionLost) {
			t.Errorf("the cut-off leader's runWithLeaderElection = %v, want errLeaderElectionLost", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the cut-off leader did not give up")
	}
	select {
	case name := <-started:
		if name != standby {
			t.Fatalf("%s started again", name)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the standby did not take over")
	}
	cancel()
	<-returned[standby]

	events := log.list()
	at := func(e string) int {
		i := slices.Index(events, e)
		if i < 0 {
			t.Fatalf("no %q in %q", e, events)
		}
		return i
	}
	takeover := at(standby + " started")
	if at(leader+" stopped") > takeover || at(leader+" returned") > takeover {
		t.Errorf("events = %q: the old leader's controllers must stop, and the manager return, before the standby starts", events)
	}
}
