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

package main

import (
	"context"
	"fmt"
	"net"
	"slices"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/scaleplane/scaleplane/pkg/generated/clientset/versioned"
	"github.com/scaleplane/scaleplane/test/bench/internal/benchutil"
	"github.com/scaleplane/scaleplane/test/integration/framework"
)

// scaleLimitRun is one run of the scale limit: when its last patch was
// answered, when the watch saw each (sorted) and the last, the CPU used
// until then, and the apiserver's mean time for a patch.
type scaleLimitRun struct {
	response, watched time.Duration
	curve             []time.Duration
	cpu               cpuPhase
	apiserverTime     patchTime
}

// bareConfig is the bare client's config: no client-side rate limit, and a
// connection of its own, as the controller manager has for its writes.
func bareConfig(cp *framework.ControlPlane) *rest.Config {
	cfg := cp.Config()
	cfg.QPS, cfg.Burst = -1, 0
	cfg.Dial = (&net.Dialer{}).DialContext
	return cfg
}

// limitStart is when a limit run starts: after idle, or at slot, with the
// watch opened watchLead before it, as for the controller's burst.
type limitStart struct {
	idle time.Duration
	slot time.Time
}

// measureScaleLimit waits for its start, then sends the N scale patches
// setting replicas, as fast as the bare client can, and returns once the
// watch saw every one. With an idle, a run after the burst starts as the
// burst did, on an apiserver with nothing to do for a while.
func measureScaleLimit(ctx context.Context, watchKube, client kubernetes.Interface, cfg config, controllerPid int, replicas int32, at limitStart) (scaleLimitRun, error) {
	atSlot := !at.slot.IsZero()
	if atSlot {
		time.Sleep(time.Until(at.slot.Add(-watchLead(cfg.n))))
	} else {
		time.Sleep(at.idle)
	}
	seen, err := watchApplied(ctx, watchKube, cfg.n, replicas)
	if err != nil {
		return scaleLimitRun{}, err
	}
	requests0, err := apiserverRequests(ctx, watchKube)
	if err != nil {
		return scaleLimitRun{}, err
	}
	if atSlot {
		time.Sleep(time.Until(at.slot))
	}
	cpu0 := markCPU(controllerPid)
	start := time.Now()
	patch := fmt.Appendf(nil, `{"spec":{"replicas":%d}}`, replicas)
	if err := benchutil.Parallel(ctx, cfg.n, cfg.limitConc, func(i int) error {
		_, err := client.AppsV1().Deployments(namespace).Patch(ctx, fmt.Sprintf("web-%05d", i), types.MergePatchType, patch, metav1.PatchOptions{}, "scale")
		return err
	}); err != nil {
		return scaleLimitRun{}, fmt.Errorf("measuring the physical limit: %w", err)
	}
	run := scaleLimitRun{response: time.Since(start)}
	times := <-seen
	// Marked once the watch saw every patch, as in the burst.
	run.cpu = markCPU(controllerPid).since(cpu0)
	if len(times) < cfg.n {
		return scaleLimitRun{}, fmt.Errorf("the benchmark's watch on the Deployments ended after seeing %d of %d patches of a limit run", len(times), cfg.n)
	}
	requests1, err := apiserverRequests(ctx, watchKube)
	if err != nil {
		return scaleLimitRun{}, err
	}
	run.apiserverTime = meanPatchTime(requests0, requests1)
	run.curve = make([]time.Duration, 0, len(times))
	for _, at := range times {
		run.curve = append(run.curve, at.Sub(start))
	}
	slices.Sort(run.curve)
	run.watched = run.curve[len(run.curve)-1]
	return run, nil
}

// slotLimitIdle is the least the apiserver idles before the bare client's
// slot: the slot is the first minute boundary after it, so the idle is 30 to
// 90 s plus the watch's lead, as the controller's slot comes 30 to 90 s after
// the benchmark's setup.
const slotLimitIdle = 30 * time.Second

// measureScaleAtSlot is the bare client's burst at a slot of its own, taken
// the way the controller's is: at a minute boundary, after the apiserver
// idled, with the watch opened watchLead before it, timed from the slot,
// and on a connection opened now and idle until then, as the controller's
// is idle from its last status write before its slot. It sets replicas
// (one value the runs before it did not leave).
func measureScaleAtSlot(ctx context.Context, watchKube kubernetes.Interface, cp *framework.ControlPlane, cfg config, controllerPid int, replicas int32) (scaleLimitRun, time.Time, error) {
	client := kubernetes.NewForConfigOrDie(bareConfig(cp))
	if _, err := client.AppsV1().Deployments(namespace).Get(ctx, fmt.Sprintf("web-%05d", 0), metav1.GetOptions{}); err != nil {
		return scaleLimitRun{}, time.Time{}, fmt.Errorf("opening the connection of the bare client at a slot: %w", err)
	}
	slot := time.Now().Add(slotLimitIdle + watchLead(cfg.n)).Truncate(time.Minute).Add(time.Minute)
	run, err := measureScaleLimit(ctx, watchKube, client, cfg, controllerPid, replicas, limitStart{slot: slot})
	if err != nil {
		return scaleLimitRun{}, time.Time{}, fmt.Errorf("the bare client at the slot %s: %w", slot.UTC().Format(time.TimeOnly), err)
	}
	return run, slot, nil
}

// measureStatusLimit is the time a bare client (no rate limit, a connection
// of its own, cfg.limitConc in flight) takes to write the statuses of every
// CronFederatedHPA once, as the controller writes them: a PUT of the status
// subresource of the object as listed.
func measureStatusLimit(ctx context.Context, cp *framework.ControlPlane, cfg config, watchClient versioned.Interface) (time.Duration, error) {
	watchCtx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	if err := watchStatuses(watchCtx, watchClient); err != nil {
		return 0, err
	}
	client := versioned.NewForConfigOrDie(bareConfig(cp))
	list, err := client.AutoscalingV1alpha1().CronFederatedHPAs(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return 0, fmt.Errorf("listing the CronFederatedHPAs for the status limit: %w", err)
	}
	start := time.Now()
	if err := benchutil.Parallel(ctx, len(list.Items), cfg.limitConc, func(i int) error {
		obj := list.Items[i].DeepCopy()
		for j := range obj.Status.ExecutionHistories {
			if next := obj.Status.ExecutionHistories[j].NextExecutionTime; next != nil {
				next.Time = next.Time.Add(24 * time.Hour)
			}
		}
		_, err := client.AutoscalingV1alpha1().CronFederatedHPAs(namespace).UpdateStatus(ctx, obj, metav1.UpdateOptions{})
		return err
	}); err != nil {
		return 0, fmt.Errorf("measuring the status limit: %w", err)
	}
	return time.Since(start), nil
}
