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

// Command hpagen benchmarks the hpa-generator against a real kube-apiserver
// and etcd, with kube-controller-manager's HPA controller and garbage
// collector (all started with the integration test framework), and the real
// scaleplane-controller-manager binary run as a separate process with only
// the hpa-generator.
//
// It creates N LeaderWorkerSets with a scalePolicy at once and measures the
// time until all N HPAs exist and are correct (as a watch sees them); then it
// keeps the HPA statuses changing for a steady window and counts the writes
// the generator makes there (the aim is none) beside the HPA watch events a
// reconciler that updates without comparing would turn into writes; and it
// reports the controller's RSS and CPU from /proc. See test/bench/README.md.
//
//	make tools build && go run ./test/bench/hpagen -n 1000
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"

	lwsv1 "github.com/scaleplane/scaleplane/pkg/apis/leaderworkerset/v1"
	"github.com/scaleplane/scaleplane/pkg/generated/clientset/versioned"
	"github.com/scaleplane/scaleplane/test/bench/internal/benchutil"
	"github.com/scaleplane/scaleplane/test/integration/framework"
)

type config struct {
	n          int
	bin        string
	managerArg []string
	creators   int
	steady     time.Duration
	quiet      time.Duration
	churn      time.Duration
	hpaSync    time.Duration
}

func main() {
	var cfg config
	var extra string
	flag.IntVar(&cfg.n, "n", 1000, "number of LeaderWorkerSets with a scalePolicy, created at once")
	flag.StringVar(&cfg.bin, "controller-manager", "_output/bin/scaleplane-controller-manager", "the scaleplane-controller-manager binary (make build)")
	flag.StringVar(&extra, "controller-manager-args", "", "extra flags for the controller manager, space separated")
	flag.IntVar(&cfg.creators, "creators", 16, "parallel creators of the LeaderWorkerSets")
	flag.DurationVar(&cfg.steady, "steady", 5*time.Minute, "length of the steady-state window, with the HPA statuses changing")
	flag.DurationVar(&cfg.quiet, "quiet", 30*time.Second, "length of a window before it with nothing changing (0: skip)")
	flag.DurationVar(&cfg.churn, "churn", 15*time.Second, "in the steady window, set every LeaderWorkerSet's replicas (1 <-> 2) once per this period, so that the HPA controller updates every HPA's status; 0: no churn")
	flag.DurationVar(&cfg.hpaSync, "hpa-sync-period", 5*time.Second, "kube-controller-manager's --horizontal-pod-autoscaler-sync-period")
	flag.Parse()
	cfg.managerArg = strings.Fields(extra)
	if err := run(cfg); err != nil {
		fmt.Fprintf(os.Stderr, "FAIL: %v\n", err)
		os.Exit(1)
	}
}

// results is everything the benchmark prints.
type results struct {
	cfg                       config
	loadStart, loadCreated    string
	loadEnd                   string
	created                   time.Duration // first create sent to last create answered
	allCorrectFromT0          time.Duration
	allCorrectFromLastCreated time.Duration
	latencies                 []time.Duration
	creation, quiet, steady   window
	rssCreated, rssEnd, hwm   int
	finalCorrect              int
	broken                    []string
	churnErr                  error
}

func run(cfg config) (err error) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	bin, err := filepath.Abs(cfg.bin)
	if err != nil {
		return err
	}
	if _, err := os.Stat(bin); err != nil {
		return fmt.Errorf("%s: %w (run make build)", bin, err)
	}
	res := results{cfg: cfg, loadStart: benchutil.LoadAvg()}

	benchutil.Logf("starting etcd, kube-apiserver and kube-controller-manager (HPA controller, garbage collector)")
	cp, err := framework.Start(ctx, controlPlaneOptions(cfg))
	if err != nil {
		return err
	}
	defer cp.Stop()
	restCfg := cp.Config()
	restCfg.QPS, restCfg.Burst = 5000, 10000
	kube := kubernetes.NewForConfigOrDie(restCfg)
	client := versioned.NewForConfigOrDie(restCfg)
	if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("creating the namespace: %w", err)
	}

	// Deferred after cp.Stop, so it runs before it: the watches end before
	// the apiserver does.
	watchCtx, stopWatches := context.WithCancel(ctx)
	defer stopWatches()
	tr := newTracker(cfg.n)
	if err := watchAll(watchCtx, kube, client, tr); err != nil {
		return err
	}
	manager, port, err := startManager(ctx, cp, bin, cfg.managerArg)
	if err != nil {
		return err
	}
	defer manager.Stop(10 * time.Second)
	defer func() {
		if err != nil {
			fmt.Fprintf(os.Stderr, "=== last lines of the controller manager's log (%s) ===\n%s\n", manager.LogPath(), manager.Tail(40))
		}
	}()
	pr := probes{kube: kube, managerPort: port, managerPid: manager.Pid(), tracker: tr}

	if err := measureCreation(ctx, cfg, client, pr, manager, &res); err != nil {
		return err
	}
	if err := setLWSStatuses(ctx, cfg, client); err != nil {
		return err
	}
	// Let the HPA controller take in the new statuses (selectors) and settle.
	settle := 3*cfg.hpaSync + 10*time.Second
	benchutil.Logf("letting the HPA statuses settle for %s", settle)
	time.Sleep(settle)
	if err := measureSteady(ctx, cfg, client, pr, &res); err != nil {
		return err
	}
	if manager.Exited() {
		return errors.New("the controller manager exited")
	}
	if res.finalCorrect, err = countCorrect(ctx, kube, client, cfg.n); err != nil {
		return err
	}
	res.broken = tr.broken()
	res.loadEnd = benchutil.LoadAvg()
	res.print()
	return nil
}

func controlPlaneOptions(cfg config) framework.Options {
	return framework.Options{
		KubeControllerManager:            true,
		KubeControllerManagerControllers: []string{"garbage-collector-controller", "horizontal-pod-autoscaler-controller"},
		ExtraKubeControllerManagerArgs: []string{
			"--horizontal-pod-autoscaler-sync-period=" + cfg.hpaSync.String(),
			// The default client limits (20 qps) would stretch one round
			// over 1,000 HPAs (a scale read each) to almost a minute.
			"--kube-api-qps=1000", "--kube-api-burst=2000",
			"--concurrent-horizontal-pod-autoscaler-syncs=10",
		},
		ExtraAPIServerArgs: []string{
			// Room for the benchmark's own bulk creation next to the rest.
			"--max-requests-inflight=1000", "--max-mutating-requests-inflight=500",
		},
	}
}

// watchAll starts the benchmark's watches on the HPAs and the
// LeaderWorkerSets of the namespace; they end with ctx.
func watchAll(ctx context.Context, kube kubernetes.Interface, client versioned.Interface, tr *tracker) error {
	hpas := kube.AutoscalingV2().HorizontalPodAutoscalers(namespace)
	if err := startWatch(ctx, func(ctx context.Context) (string, error) {
		l, err := hpas.List(ctx, metav1.ListOptions{})
		if err != nil {
			return "", fmt.Errorf("listing HPAs: %w", err)
		}
		return l.ResourceVersion, nil
	}, hpas.Watch, tr.observeHPA); err != nil {
		return err
	}
	lwss := client.LeaderworkersetV1().LeaderWorkerSets(namespace)
	seen := map[string]*lwsv1.LeaderWorkerSet{} // only the watch goroutine uses it
	return startWatch(ctx, func(ctx context.Context) (string, error) {
		l, err := lwss.List(ctx, metav1.ListOptions{})
		if err != nil {
			return "", fmt.Errorf("listing LeaderWorkerSets: %w", err)
		}
		return l.ResourceVersion, nil
	}, lwss.Watch, func(ev watch.Event, _ time.Time) { tr.observeLWS(ev, seen) })
}

// startManager runs the controller manager with only the hpa-generator and
// waits until it is ready (its informers synced).
func startManager(ctx context.Context, cp *framework.ControlPlane, bin string, extra []string) (*framework.Process, int, error) {
	port, err := framework.FreePort()
	if err != nil {
		return nil, 0, err
	}
	args := append([]string{"--kubeconfig=" + cp.KubeconfigPath(), "--controllers=hpa-generator", "--leader-elect=false",
		"--bind-address=127.0.0.1", "--port=" + strconv.Itoa(port)}, extra...)
	manager, err := framework.StartProcess(cp.Dir(), "controller-manager", bin, args)
	if err != nil {
		return nil, 0, fmt.Errorf("starting the controller manager: %w", err)
	}
	benchutil.Logf("controller manager pid %d, log %s, args %v", manager.Pid(), manager.LogPath(), args)
	if err := waitReady(ctx, manager, port, time.Minute); err != nil {
		manager.Stop(10 * time.Second)
		return nil, 0, err
	}
	return manager, port, nil
}

func waitReady(ctx context.Context, p *framework.Process, port int, timeout time.Duration) error {
	url := "http://127.0.0.1:" + strconv.Itoa(port) + "/readyz"
	deadline := time.Now().Add(timeout)
	for {
		if p.Exited() {
			return fmt.Errorf("the controller manager exited; log:\n%s", p.Tail(40))
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the controller manager was not ready after %s; log:\n%s", timeout, p.Tail(40))
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// measureCreation creates the LeaderWorkerSets at once and waits until every
// HPA is correct.
func measureCreation(ctx context.Context, cfg config, client versioned.Interface, pr probes, manager *framework.Process, res *results) error {
	before, err := pr.take(ctx)
	if err != nil {
		return err
	}
	benchutil.Logf("creating %d LeaderWorkerSets with %d creators", cfg.n, cfg.creators)
	t0 := time.Now()
	if err := benchutil.Parallel(ctx, cfg.n, cfg.creators, func(i int) error {
		sent := time.Now()
		lws, err := client.LeaderworkersetV1().LeaderWorkerSets(namespace).Create(ctx, leaderWorkerSet(i), metav1.CreateOptions{})
		if err != nil {
			return fmt.Errorf("creating LeaderWorkerSet %s: %w", lwsName(i), err)
		}
		pr.tracker.created(lws.Name, lwsRecord{want: expect(i, lws.UID), created: sent})
		return nil
	}); err != nil {
		return err
	}
	lastCreated := time.Now()
	res.created = lastCreated.Sub(t0)
	benchutil.Logf("created %d LeaderWorkerSets in %s", cfg.n, res.created.Round(time.Millisecond))

	if err := waitAllCorrect(pr.tracker, manager, 5*time.Minute+time.Duration(cfg.n)*50*time.Millisecond); err != nil {
		return err
	}
	var last time.Time
	res.latencies, last = pr.tracker.latencies()
	res.allCorrectFromT0 = last.Sub(t0)
	res.allCorrectFromLastCreated = last.Sub(lastCreated)
	benchutil.Logf("all %d HPAs correct %s after the first create", cfg.n, res.allCorrectFromT0.Round(time.Millisecond))
	// Let writes caused by the creation (events, the HPA controller's first
	// status writes) land before counting.
	time.Sleep(2 * time.Second)
	after, err := pr.take(ctx)
	if err != nil {
		return err
	}
	res.creation = between(before, after)
	res.loadCreated = benchutil.LoadAvg()
	res.rssCreated, err = benchutil.MemKiB(pr.managerPid, "VmRSS")
	return err
}

func waitAllCorrect(tr *tracker, manager *framework.Process, timeout time.Duration) error {
	deadline := time.After(timeout)
	progress := time.NewTicker(10 * time.Second)
	defer progress.Stop()
	for {
		select {
		case <-tr.allCorrect:
			return nil
		case <-progress.C:
			if manager.Exited() {
				return errors.New("the controller manager exited")
			}
			benchutil.Logf("%d of %d HPAs correct", tr.correctCount(), tr.n)
		case <-deadline:
			return fmt.Errorf("only %d of %d HPAs correct after %s: %s", tr.correctCount(), tr.n, timeout, tr.describe(10))
		}
	}
}

// setLWSStatuses stands in for the LeaderWorkerSet controller (not part of
// this project): one group, and the selector of its leader pods, which the
// HPA controller reads through the scale subresource. Without a selector the
// HPA controller stops at "selector is required"; with it, it goes on to ask
// for the pods' metrics (there are none: FailedGetResourceMetric).
func setLWSStatuses(ctx context.Context, cfg config, client versioned.Interface) error {
	benchutil.Logf("setting the LeaderWorkerSets' status (replicas, hpaPodSelector)")
	return benchutil.Parallel(ctx, cfg.n, cfg.creators, func(i int) error {
		body := fmt.Appendf(nil, `{"status":{"replicas":1,"hpaPodSelector":"app=%s,role=leader"}}`, lwsName(i))
		_, err := client.LeaderworkersetV1().LeaderWorkerSets(namespace).Patch(ctx, lwsName(i), types.MergePatchType, body, metav1.PatchOptions{}, "status")
		if err != nil {
			return fmt.Errorf("setting the status of %s: %w", lwsName(i), err)
		}
		return nil
	})
}

// measureSteady measures the quiet window (nothing changes) and then the
// steady window (the churn keeps the HPA statuses changing).
func measureSteady(ctx context.Context, cfg config, client versioned.Interface, pr probes, res *results) error {
	if cfg.quiet > 0 {
		benchutil.Logf("quiet window: %s", cfg.quiet)
		w, err := measureWindow(ctx, pr, cfg.quiet)
		if err != nil {
			return err
		}
		res.quiet = w
	}
	if cfg.churn > 0 {
		pr.churn = startChurn(ctx, client, cfg.n, cfg.churn, 8)
		benchutil.Logf("steady window: %s, every LeaderWorkerSet's replicas set once per %s", cfg.steady, cfg.churn)
	} else {
		benchutil.Logf("steady window: %s, no churn", cfg.steady)
	}
	w, err := measureWindow(ctx, pr, cfg.steady)
	if pr.churn != nil {
		pr.churn.stop()
		res.churnErr = pr.churn.err()
	}
	if err != nil {
		return err
	}
	res.steady = w
	if res.rssEnd, err = benchutil.MemKiB(pr.managerPid, "VmRSS"); err != nil {
		return err
	}
	res.hwm, err = benchutil.MemKiB(pr.managerPid, "VmHWM")
	return err
}

func measureWindow(ctx context.Context, pr probes, length time.Duration) (window, error) {
	a, err := pr.take(ctx)
	if err != nil {
		return window{}, err
	}
	select {
	case <-ctx.Done():
		return window{}, ctx.Err()
	case <-time.After(length):
	}
	b, err := pr.take(ctx)
	if err != nil {
		return window{}, err
	}
	return between(a, b), nil
}

// countCorrect lists the HPAs and LeaderWorkerSets afresh and counts the
// correct HPAs, independently of the watch.
func countCorrect(ctx context.Context, kube kubernetes.Interface, client versioned.Interface, n int) (int, error) {
	lwss, err := client.LeaderworkersetV1().LeaderWorkerSets(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return 0, fmt.Errorf("listing LeaderWorkerSets: %w", err)
	}
	hpas, err := kube.AutoscalingV2().HorizontalPodAutoscalers(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return 0, fmt.Errorf("listing HPAs: %w", err)
	}
	byName := map[string]*autoscalingv2.HorizontalPodAutoscaler{}
	for i := range hpas.Items {
		byName[hpas.Items[i].Name] = &hpas.Items[i]
	}
	uids := map[string]types.UID{}
	for i := range lwss.Items {
		uids[lwss.Items[i].Name] = lwss.Items[i].UID
	}
	correct := 0
	for i := range n {
		hpa, ok := byName[lwsName(i)]
		if ok && expect(i, uids[lwsName(i)]).problems(hpa) == "" {
			correct++
		}
	}
	return correct, nil
}
