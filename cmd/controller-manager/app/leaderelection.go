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
	"fmt"
	"os"
	"sync/atomic"

	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/klog/v2"

	"github.com/scaleplane/scaleplane/cmd/controller-manager/app/options"
)

// runWithLeaderElection runs the controllers while this process holds the
// Lease. It returns nil when ctx ends and errLeaderElectionLost when the
// lease was lost while ctx was still live.
//
// Shutdown keeps this order: when ctx ends the controllers stop taking work
// and finish what is in flight (bounded by shutdownTimeout), then the lease is
// released, then this returns and the process exits. Releasing first would
// let the next leader start while a sync is between its target write and its
// status write here.
func runWithLeaderElection(ctx context.Context, client kubernetes.Interface, o *options.Options, checks *healthChecks, run func(context.Context)) error {
	logger := klog.FromContext(ctx)
	hostname, err := os.Hostname()
	if err != nil {
		return fmt.Errorf("getting the hostname for the leader-election identity: %w", err)
	}
	// A unique suffix keeps two processes on one host (tests, local-up)
	// from sharing an identity.
	id := hostname + "_" + string(uuid.NewUUID())
	le := o.LeaderElection
	lock, err := resourcelock.New(le.ResourceLock, le.ResourceNamespace, le.ResourceName,
		client.CoreV1(), client.CoordinationV1(), resourcelock.ResourceLockConfig{Identity: id})
	if err != nil {
		return fmt.Errorf("creating the leader-election lock %s/%s: %w", le.ResourceNamespace, le.ResourceName, err)
	}
	watchdog := leaderelection.NewLeaderHealthzAdaptor(0)
	checks.add("leader-election", watchdog.Check)

	// The elector's context outlives ctx: it ends, and the lease is
	// released, only once the controllers stopped (or before this process
	// ever led).
	leCtx, cancelLE := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelLE()
	var leading, lost atomic.Bool
	stopTrying := context.AfterFunc(ctx, func() {
		if !leading.Load() {
			cancelLE()
		}
	})
	defer stopTrying()
	elector, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock:            lock,
		LeaseDuration:   le.LeaseDuration.Duration,
		RenewDeadline:   le.RenewDeadline.Duration,
		RetryPeriod:     le.RetryPeriod.Duration,
		ReleaseOnCancel: true,
		WatchDog:        watchdog,
		Name:            options.ControllerManagerName,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(leaderCtx context.Context) {
				leading.Store(true)
				// Release the lease once the controllers stopped.
				defer cancelLE()
				logger.Info("Became the leader, starting controllers", "identity", id)
				// The controllers stop when the process is told to stop
				// (ctx) or leadership is lost (leaderCtx).
				runCtx, cancelRun := context.WithCancel(leaderCtx)
				defer cancelRun()
				stop := context.AfterFunc(ctx, cancelRun)
				defer stop()
				runUntilStopped(runCtx, run)
			},
			OnStoppedLeading: func() {
				if ctx.Err() == nil {
					lost.Store(true)
					logger.Error(nil, "Lost the leader-election lease, stopping", "identity", id)
				} else {
					logger.Info("Left leader election", "identity", id)
				}
				cancelLE()
			},
			OnNewLeader: func(identity string) {
				if identity != id {
					logger.Info("Another process is the leader", "leader", identity)
				}
			},
		},
	})
	if err != nil {
		return fmt.Errorf("configuring leader election: %w", err)
	}
	elector.Run(leCtx)
	if lost.Load() {
		return errLeaderElectionLost
	}
	return nil
}
