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

// Command cron benchmarks the cron-scaler against a real kube-apiserver and
// etcd (started with the integration test framework) and the real
// scaleplane-controller-manager binary, run as a separate process: N
// CronFederatedHPAs, each on its own Deployment, all due in the same minute.
//
// It reports the firing skew (when a watcher sees the Deployment's new
// replicas, minus the scheduled time), the time until the last one is
// applied, the API writes per firing (from the apiserver's request metrics),
// the controller's RSS and CPU while idle and during the burst (from /proc),
// and the physical limit: the time a minimal client, with no rate limit and
// -limit-concurrency requests in flight, takes to send the same N scale
// patches to the same apiserver after the burst (with -limit-idle, each
// run after the apiserver idled as it had before the slot), and the ratio
// of the time to the last target to it. The limit run has the same watch on the
// Deployments as the burst (the instrument costs the apiserver the same in
// both), and is timed both to its last response and to the last patch the
// watch sees, the way the burst is timed. Last, the bare client sends them
// at a slot of its own, measured the way the controller's burst is: from a
// minute boundary after the apiserver idled, with the watch opened as
// before the controller's slot (-limit-at-slot). See test/bench/README.md.
//
//	make tools build && go run ./test/bench/cron -n 1000
package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	autoscalingv1alpha1 "github.com/scaleplane/scaleplane/pkg/apis/autoscaling/v1alpha1"
	"github.com/scaleplane/scaleplane/pkg/generated/clientset/versioned"
	"github.com/scaleplane/scaleplane/test/bench/internal/benchutil"
	"github.com/scaleplane/scaleplane/test/integration/framework"
)

const namespace = "bench"

func run(cfg config) error {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	bin, err := filepath.Abs(cfg.bin)
	if err != nil {
		return err
	}
	if _, err := os.Stat(bin); err != nil {
		return fmt.Errorf("%s: %w (run make build)", bin, err)
	}
	load0 := benchutil.LoadAvg()
	benchutil.Logf("starting etcd and kube-apiserver")
	cp, err := framework.Start(ctx, framework.Options{
		ExtraAPIServerArgs: []string{
			// Room for the benchmark's own bulk creation next to the burst.
			"--max-requests-inflight=1000", "--max-mutating-requests-inflight=500",
			// /debug/pprof/ for a trace of the apiserver (-apiserver-profiling).
			"--profiling=" + strconv.FormatBool(cfg.apiserverProfiling),
		},
	})
	if err != nil {
		return err
	}
	defer cp.Stop()

	restCfg := cp.Config()
	restCfg.QPS, restCfg.Burst = 5000, 10000
	kube := kubernetes.NewForConfigOrDie(restCfg)
	client := versioned.NewForConfigOrDie(restCfg)
	// The instrument: a watch on the Deployments, in protobuf and on a
	// connection of its own, so that decoding thousands of events a second
	// lags as little as possible behind the apiserver.
	watchCfg := cp.Config()
	watchCfg.ContentType = "application/vnd.kubernetes.protobuf"
	watchCfg.Dial = (&net.Dialer{}).DialContext
	watchKube := kubernetes.NewForConfigOrDie(watchCfg)
	// The CronFederatedHPAs' watch: JSON (custom resources have no
	// protobuf), on a connection of its own too.
	statusWatchCfg := cp.Config()
	statusWatchCfg.Dial = (&net.Dialer{}).DialContext
	watchClient := versioned.NewForConfigOrDie(statusWatchCfg)
	if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}, metav1.CreateOptions{}); err != nil {
		return err
	}

	start := time.Now()
	if err := benchutil.Parallel(ctx, cfg.n, cfg.creators, func(i int) error {
		_, err := kube.AppsV1().Deployments(namespace).Create(ctx, deployment(i), metav1.CreateOptions{})
		return err
	}); err != nil {
		return fmt.Errorf("creating Deployments: %w", err)
	}
	benchutil.Logf("created %d Deployments in %s", cfg.n, time.Since(start).Round(time.Millisecond))

	metricsPort, err := framework.FreePort()
	if err != nil {
		return err
	}
	args := append([]string{"--kubeconfig=" + cp.KubeconfigPath(), "--controllers=cron-scaler", "--leader-elect=false",
		"--bind-address=127.0.0.1", "--port=" + strconv.Itoa(metricsPort),
		// The chart's verbosity: the reflectors' cache fills are logged
		// (see relists). Not --vmodule, which the benchmark set until
		// session 17 of issue 36: with it every klog V check that the
		// global level does not settle (client-go makes several a request)
		// takes klog's lock and reads the caller's stack, on 64 workers.
		"--v=2"}, cfg.managerArg...)
	if cfg.profileDir != "" {
		args = append(args, "--profiling")
	}
	command, commandArgs := bin, args
	var cgroup *memoryCgroup
	if !cfg.memoryLimit.IsZero() {
		if cgroup, err = newMemoryCgroup(cfg.memoryLimit.Value()); err != nil {
			return err
		}
		defer cgroup.remove()
		command, commandArgs = cgroup.wrap(bin, args)
	}
	manager, err := framework.StartProcess(cp.Dir(), "controller-manager", command, commandArgs)
	if err != nil {
		return err
	}
	defer manager.Stop(10 * time.Second)
	benchutil.Logf("controller manager pid %d, log %s, args %v", manager.Pid(), manager.LogPath(), args)
	prof, err := newProfiler(cfg.profileDir, metricsPort)
	if err != nil {
		return err
	}

	// The slot: a minute boundary far enough ahead for creating the
	// CronFederatedHPAs and the controller's first sight of each (one status
	// write each at the controller's QPS).
	setup := time.Duration(cfg.n)*time.Second/time.Duration(cfg.setupRate) + cfg.idle + 30*time.Second
	slot := time.Now().Add(setup).Truncate(time.Minute).Add(time.Minute)
	schedule := fmt.Sprintf("%d %d * * *", slot.UTC().Minute(), slot.UTC().Hour())
	benchutil.Logf("all rules fire at %s (schedule %q, UTC)", slot.UTC().Format(time.RFC3339), schedule)

	// The baseline: the controller up, its caches synced, no
	// CronFederatedHPA yet.
	time.Sleep(5 * time.Second)
	baseKiB, _ := benchutil.MemKiB(manager.Pid(), "VmRSS")

	start = time.Now()
	if err := benchutil.Parallel(ctx, cfg.n, cfg.creators, func(i int) error {
		_, err := client.AutoscalingV1alpha1().CronFederatedHPAs(namespace).Create(ctx, cron(i, schedule), metav1.CreateOptions{})
		return err
	}); err != nil {
		return fmt.Errorf("creating CronFederatedHPAs: %w", err)
	}
	benchutil.Logf("created %d CronFederatedHPAs in %s", cfg.n, time.Since(start).Round(time.Millisecond))

	if err := waitPlanned(ctx, watchClient, cfg.n, slot); err != nil {
		return err
	}
	benchutil.Logf("all %d planned for the slot after %s", cfg.n, time.Since(start).Round(time.Millisecond))

	// Idle: the controller holds every object and waits for the slot.
	time.Sleep(5 * time.Second)
	idleWindow := min(cfg.idle, time.Until(slot)-5*time.Second)
	if idleWindow < 5*time.Second {
		return fmt.Errorf("only %s left before the slot for the idle measurement; raise the setup margin", time.Until(slot))
	}
	cpu0, _ := benchutil.CPUSeconds(manager.Pid())
	time.Sleep(idleWindow)
	cpu1, _ := benchutil.CPUSeconds(manager.Pid())
	idleRSS, _ := procStatus(manager.Pid(), "VmRSS")
	idleKiB, _ := benchutil.MemKiB(manager.Pid(), "VmRSS")
	idleCPU := (cpu1 - cpu0) / idleWindow.Seconds()
	prof.heap(ctx, "idle")

	limitClient := kubernetes.NewForConfigOrDie(bareConfig(cp))
	// With -limit-before the limit is measured once before the slot too, on
	// the same idle apiserver and as the first scale write of each
	// Deployment, as the controller's burst otherwise is (to 7 replicas:
	// then the controller's 2 is a real write).
	var before *scaleLimitRun
	if cfg.limitBefore {
		if time.Until(slot.Add(-watchLead(cfg.n))) < time.Duration(cfg.n)*time.Second/200 {
			return fmt.Errorf("only %s left before the watch on the slot starts for -limit-before, which needs about %s; raise the setup margin (-setup-rate)",
				time.Until(slot.Add(-watchLead(cfg.n))).Round(time.Second), time.Duration(cfg.n)*time.Second/200)
		}
		run, err := measureScaleLimit(ctx, watchKube, limitClient, cfg, manager.Pid(), 7, limitStart{})
		if err != nil {
			return fmt.Errorf("the limit run before the slot: %w", err)
		}
		before = &run
		benchutil.Logf("the scale limit before the slot: %s", run.watched.Round(time.Millisecond))
	}

	// The watch starts shortly before the slot, not right after the idle
	// window: with a long setup margin (100,000 objects, a low -setup-rate)
	// a watch opened ten minutes ahead was closed before the slot, and the
	// run measured nothing.
	time.Sleep(time.Until(slot.Add(-watchLead(cfg.n))))
	applied, err := watchApplied(ctx, watchKube, cfg.n, 2)
	if err != nil {
		return err
	}
	requests0, err := apiserverRequests(ctx, kube)
	if err != nil {
		return err
	}
	time.Sleep(time.Until(slot))
	cpuProfile := time.Duration(cfg.n)*time.Second/200 + 5*time.Second
	if cfg.cpuSeconds > 0 {
		cpuProfile = time.Duration(cfg.cpuSeconds) * time.Second
	}
	prof.startCPU(ctx, cpuProfile)
	loadAtSlot := benchutil.LoadAvg()
	burstCPU0, _ := benchutil.CPUSeconds(manager.Pid())
	targetsCPU0 := markCPU(manager.Pid())
	seen := <-applied
	allApplied := time.Now()
	targetsCPU := markCPU(manager.Pid()).since(targetsCPU0)
	targetRequests, err := apiserverRequests(ctx, kube)
	if err != nil {
		return err
	}
	if len(seen) < cfg.n {
		return fmt.Errorf("the benchmark's watch on the Deployments ended after seeing %d of %d targets applied; nothing was measured", len(seen), cfg.n)
	}
	prof.heap(ctx, "last-target")
	allRecorded, err := waitRecorded(ctx, watchClient, cfg.n, slot)
	if err != nil {
		return err
	}
	burstCPU1, _ := benchutil.CPUSeconds(manager.Pid())
	prof.heap(ctx, "all-statuses")
	watchReport := func() string {
		return relists(manager.LogPath()) + "; apiserver: " + apiserverWatchEnds(ctx, kube, filepath.Join(cp.Dir(), "kube-apiserver.log"))
	}
	burstRelists := watchReport()
	benchutil.Logf("all statuses recorded; %s", burstRelists)
	prof.wait()
	// Events are written asynchronously; let them land before counting.
	time.Sleep(5 * time.Second)
	requests1, err := apiserverRequests(ctx, kube)
	if err != nil {
		return err
	}
	peakRSS, _ := procStatus(manager.Pid(), "VmHWM")
	burstRSS, _ := procStatus(manager.Pid(), "VmRSS")

	// The physical limit: the same N scale patches (to 3 replicas, so each
	// is a real write), sent by a minimal client as fast as it can.
	limitLoad := benchutil.LoadAvg()
	// Each run sets one replica more, from 3: each patch is a real write.
	first, err := measureScaleLimit(ctx, watchKube, limitClient, cfg, manager.Pid(), 3, limitStart{idle: cfg.limitIdle})
	if err != nil {
		return err
	}
	limit, limitWatched, limitCurve, limitCPU := first.response, first.watched, first.curve, first.cpu
	apiserverTimes := []string{first.apiserverTime.String()}
	var moreLimits []string
	limitRuns := []time.Duration{limitWatched}
	if before != nil {
		limitRuns = append(limitRuns, before.watched)
	}
	for run := 2; run <= cfg.limitRuns; run++ {
		again, err := measureScaleLimit(ctx, watchKube, limitClient, cfg, manager.Pid(), int32(run+2), limitStart{idle: cfg.limitIdle})
		if err != nil {
			return err
		}
		limitRuns = append(limitRuns, again.watched)
		apiserverTimes = append(apiserverTimes, again.apiserverTime.String())
		moreLimits = append(moreLimits, fmt.Sprintf("%s (%.2f of the first; CPU-seconds %s)", again.watched.Round(time.Millisecond), again.watched.Seconds()/limitWatched.Seconds(), again.cpu))
	}
	// The limit for the status writes, measured the same way: a bare
	// client writes the same N statuses as the controller does (a PUT of
	// the status subresource of each object as listed, the planned time
	// moved by a day, so each is a real write), 64 in flight.
	statusLimit, err := measureStatusLimit(ctx, cp, cfg, watchClient)
	if err != nil {
		return err
	}
	// The bare client at a slot of its own, after the limit runs (whose
	// last set limitRuns+2 replicas), so that those are taken as before.
	var atSlot *scaleLimitRun
	var bareSlot time.Time
	if cfg.limitAtSlot {
		run, at, err := measureScaleAtSlot(ctx, watchKube, cp, cfg, manager.Pid(), int32(cfg.limitRuns+3))
		if err != nil {
			return err
		}
		atSlot, bareSlot = &run, at
	}
	skews := make([]time.Duration, 0, len(seen))
	for _, at := range seen {
		skews = append(skews, at.Sub(slot))
	}
	sort.Slice(skews, func(i, j int) bool { return skews[i] < skews[j] })
	fmt.Println()
	fmt.Printf("machine: %s\n", benchutil.Machine())
	fmt.Printf("load average (1, 5, 15 min): at start %s; at the slot %s; before the limit run %s\n", load0, loadAtSlot, limitLoad)
	fmt.Printf("controller manager args: %v\n", cfg.managerArg)
	if cgroup != nil {
		fmt.Printf("controller manager memory limit: %s\n", cgroup.report())
		fmt.Printf("controller manager log: %s\n", limitLogLines(manager.LogPath()))
	}
	fmt.Printf("controller manager informers, until all statuses were recorded: %s; at the end: %s\n", burstRelists, watchReport())
	fmt.Printf("CronFederatedHPAs (each on its own Deployment): %d, all due at %s\n", cfg.n, slot.UTC().Format(time.RFC3339))
	fmt.Printf("applied: %d of %d\n", len(skews), cfg.n)
	if len(skews) > 0 {
		fmt.Printf("firing skew (watch sees new replicas - scheduled time): p50 %s, p99 %s, max %s\n",
			pct(skews, 50), pct(skews, 99), skews[len(skews)-1].Round(time.Millisecond))
		// Where the time is lost: a late start shows in the first
		// target, a slower rate in the spread of the rest.
		fmt.Printf("targets seen by the watch, first/10/25/50/75/90%%/last: controller (from the slot) %s; limit (from its first request) %s\n",
			curve(skews), curve(limitCurve))
	}
	fmt.Printf("last target applied: %s after the slot; all statuses recorded: %s after the slot\n",
		allApplied.Sub(slot).Round(time.Millisecond), allRecorded.Sub(slot).Round(time.Millisecond))
	fmt.Printf("physical limit (a client with no rate limit, %d in flight, sends the same %d scale patches, each run after %s of idle): last response %s (%.0f/s), last seen by the watch %s\n",
		cfg.limitConc, cfg.n, cfg.limitIdle, limit.Round(time.Millisecond), float64(cfg.n)/limit.Seconds(), limitWatched.Round(time.Millisecond))
	fmt.Printf("ratio of the time to the last target (seen by the watch) to the limit: %.2f to the limit's last response, %.2f to the last of its patches the watch saw\n",
		allApplied.Sub(slot).Seconds()/limit.Seconds(), allApplied.Sub(slot).Seconds()/limitWatched.Seconds())
	if len(moreLimits) > 0 {
		fmt.Printf("the scale limit measured again, last seen by the watch: %s\n", strings.Join(moreLimits, "; "))
	}
	if before != nil {
		fmt.Printf("the scale limit measured before the slot (-limit-before: after the idle window, on an apiserver idle until then, the first scale write of each Deployment), last seen by the watch: %s (%.2f of the first after; CPU-seconds %s; seen by the watch, first/10/25/50/75/90%%/last: %s; the apiserver's mean time per patch %s); ratio of the controller's time to it: %.2f\n",
			before.watched.Round(time.Millisecond), before.watched.Seconds()/limitWatched.Seconds(), before.cpu, curve(before.curve), before.apiserverTime, allApplied.Sub(slot).Seconds()/before.watched.Seconds())
	}
	if atSlot != nil {
		fmt.Printf("the bare client at a slot of its own (%s, after %s of idle at least, timed as the controller is: from the slot, with the watch opened %s before it, its connection idle since it was opened), last seen by the watch: %s (CPU-seconds %s; seen by the watch, first/10/25/50/75/90%%/last: %s; the apiserver's mean time per patch %s); ratio of the controller's time to it: %.2f\n",
			bareSlot.UTC().Format(time.TimeOnly), slotLimitIdle, watchLead(cfg.n), atSlot.watched.Round(time.Millisecond), atSlot.cpu, curve(atSlot.curve), atSlot.apiserverTime, allApplied.Sub(slot).Seconds()/atSlot.watched.Seconds())
	}
	if len(limitRuns) > 1 {
		median := medianOf(limitRuns)
		fmt.Printf("ratio of the time to the last target (seen by the watch) to the median of %d limit runs (%s): %.2f\n",
			len(limitRuns), median.Round(time.Millisecond), allApplied.Sub(slot).Seconds()/median.Seconds())
	}
	fmt.Printf("CPU-seconds while the targets were written: controller's burst %s; the limit run %s (the benchmark process holds the bare client and, in both, the watch)\n",
		targetsCPU, limitCPU)
	fmt.Printf("the apiserver's mean time per scale patch (apiserver_request_duration_seconds, queueing included; in brackets etcd's for the update it makes, etcd_request_duration_seconds): controller's burst %s; limit runs %s\n",
		meanPatchTime(requests0, targetRequests), strings.Join(apiserverTimes, ", "))
	statusPhase := allRecorded.Sub(allApplied)
	fmt.Printf("status writes: the last %s after the last target; a bare client writes the same %d statuses (%d in flight) in %s (%.0f/s); ratio %.2f\n",
		statusPhase.Round(time.Millisecond), cfg.n, cfg.limitConc, statusLimit.Round(time.Millisecond), float64(cfg.n)/statusLimit.Seconds(),
		statusPhase.Seconds()/statusLimit.Seconds())
	fmt.Printf("writes during the burst, per firing:\n")
	printRequests(requests0, requests1, cfg.n, writeVerbs)
	fmt.Printf("requests while the targets were written (from just before the slot to the last target), per firing:\n")
	printRequests(requests0, targetRequests, cfg.n, allVerbs)
	wholeRunHWM, _ := procStatus(manager.Pid(), "VmHWM")
	fmt.Printf("controller RSS: idle %s, after the burst %s, peak %s (%s at the end, after the limit runs, whose status writes the controller sees as another writer's); before the first CronFederatedHPA %s, so %.0f bytes per object idle\n",
		idleRSS, burstRSS, peakRSS, wholeRunHWM, benchutil.MiB(baseKiB), float64(idleKiB-baseKiB)*1024/float64(cfg.n))
	fmt.Printf("controller CPU: idle %.2f%% of one core (over %s); burst %.2f CPU-seconds over %s (%.0f%% of one core)\n",
		idleCPU*100, idleWindow.Round(time.Second), burstCPU1-burstCPU0, allRecorded.Sub(slot).Round(time.Millisecond),
		(burstCPU1-burstCPU0)/allRecorded.Sub(slot).Seconds()*100)
	return nil
}

// watchLead is how long before the slot the watch on the Deployments starts:
// time for it to list them first.
func watchLead(n int) time.Duration {
	return 10*time.Second + time.Duration(n)*time.Second/5000
}

func deployment(i int) *appsv1.Deployment {
	name := fmt.Sprintf("web-%05d", i)
	labels := map[string]string{"app": name}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](1),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "registry.k8s.io/pause:3.10"}}},
			},
		},
	}
}

func cron(i int, schedule string) *autoscalingv1alpha1.CronFederatedHPA {
	return &autoscalingv1alpha1.CronFederatedHPA{
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cron-%05d", i)},
		Spec: autoscalingv1alpha1.CronFederatedHPASpec{
			ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: fmt.Sprintf("web-%05d", i)},
			Rules: []autoscalingv1alpha1.CronFederatedHPARule{{
				Name: "burst", Schedule: schedule, TimeZone: ptr.To("UTC"), TargetReplicas: ptr.To[int32](2),
			}},
		},
	}
}

// watchApplied watches the Deployments and sends, once all n have replicas
// replicas (or after 10 minutes), when the watcher first saw each.
func watchApplied(ctx context.Context, kube kubernetes.Interface, n int, replicas int32) (<-chan map[string]time.Time, error) {
	list, err := kube.AppsV1().Deployments(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	w, err := kube.AppsV1().Deployments(namespace).Watch(ctx, metav1.ListOptions{ResourceVersion: list.ResourceVersion})
	if err != nil {
		return nil, err
	}
	out := make(chan map[string]time.Time, 1)
	go func() {
		defer w.Stop()
		seen := map[string]time.Time{}
		timeout := time.After(10 * time.Minute)
		for len(seen) < n {
			select {
			case ev, ok := <-w.ResultChan():
				if !ok {
					out <- seen
					return
				}
				d, isDeploy := ev.Object.(*appsv1.Deployment)
				if ev.Type != watch.Modified || !isDeploy || ptr.Deref(d.Spec.Replicas, 0) != replicas {
					continue
				}
				if _, dup := seen[d.Name]; !dup {
					seen[d.Name] = time.Now()
				}
			case <-timeout:
				out <- seen
				return
			}
		}
		out <- seen
	}()
	return out, nil
}

// medianOf returns the median of ds (the upper one of an even count).
func medianOf(ds []time.Duration) time.Duration {
	sorted := slices.Clone(ds)
	slices.Sort(sorted)
	return sorted[len(sorted)/2]
}

// curve is the first, the 10th to 90th percentiles and the last of sorted.
func curve(sorted []time.Duration) string {
	if len(sorted) == 0 {
		return "none"
	}
	parts := []string{sorted[0].Round(time.Millisecond).String()}
	for _, p := range []int{10, 25, 50, 75, 90} {
		parts = append(parts, pct(sorted, p).String())
	}
	parts = append(parts, sorted[len(sorted)-1].Round(time.Millisecond).String())
	return strings.Join(parts, " ")
}

func pct(sorted []time.Duration, p int) time.Duration {
	i := (len(sorted)*p + 99) / 100
	if i > 0 {
		i--
	}
	return sorted[i].Round(time.Millisecond)
}

// procStatus returns a memory field of /proc/<pid>/status (VmRSS, VmHWM)
// in MiB.
func procStatus(pid int, field string) (string, error) {
	kib, err := benchutil.MemKiB(pid, field)
	if err != nil {
		return "", err
	}
	return benchutil.MiB(kib), nil
}
