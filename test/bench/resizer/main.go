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

// Command resizer benchmarks the resizer controller against a real
// kube-apiserver and etcd (started with the integration test framework) and
// the real scaleplane-controller-manager binary, run as a separate process
// with only the resizer.
//
// It creates N Node objects and M Pod objects through the API (-pod-shape:
// realistic pods of four containers, with env, volumes and probes, or small
// ones of two; nothing runs them: the pods stay Pending), two target
// Deployments and two AddonResizers (one NodeProportional, one
// ContainerProportional, source APIServer), then starts the controller
// manager and measures: the time from its start to the first correct resize
// of each target; its RSS after sync, after a settling window and at peak;
// the time from 1,000 more pods to the resize; and the LIST requests after
// sync (apiserver_request_total). Beside it, in the same run and on the same
// apiserver, it runs Addon Resizer's way as a baseline: a process that lists
// every pod (and node) once per poll. See test/bench/README.md.
//
//	make tools build && go run ./test/bench/resizer
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/scaleplane/scaleplane/pkg/generated/clientset/versioned"
	"github.com/scaleplane/scaleplane/test/bench/internal/benchutil"
	"github.com/scaleplane/scaleplane/test/integration/framework"
)

type config struct {
	nodes, pods, more int
	creators          int
	settle            time.Duration
	poll              time.Duration
	baselinePolls     int
	bin               string
	keepLog           string
	podShape          string
}

func main() {
	var cfg config
	var child bool
	var kubeconfig, out string
	flag.IntVar(&cfg.nodes, "nodes", 5000, "Node objects to create")
	flag.IntVar(&cfg.pods, "pods", 150000, "Pod objects to create before the controller manager starts")
	flag.StringVar(&cfg.podShape, "pod-shape", shapeRealistic, "what the pods look like: realistic (an init container and three containers, env, volumes, probes, ten labels: about 7 kB) or small (two containers: about 1.7 kB)")
	flag.IntVar(&cfg.more, "more", 1000, "pods added at once after sync, to time the resize")
	flag.IntVar(&cfg.creators, "creators", 32, "parallel creators")
	flag.DurationVar(&cfg.settle, "settle", 30*time.Second, "how long the controller manager idles after the first correct resizes before the after-sync snapshot")
	flag.DurationVar(&cfg.poll, "poll", 10*time.Second, "the baseline's poll period (Addon Resizer's default)")
	flag.IntVar(&cfg.baselinePolls, "baseline-polls", 3, "polls of the baseline (0: no baseline)")
	flag.StringVar(&cfg.bin, "controller-manager", "_output/bin/scaleplane-controller-manager", "the scaleplane-controller-manager binary (make build)")
	flag.StringVar(&cfg.keepLog, "keep-log", "", "copy the controller manager's log here at the end (the control plane's directory is removed)")
	// The baseline child: this binary run again.
	flag.BoolVar(&child, "baseline-child", false, "internal: run as the baseline process")
	flag.StringVar(&kubeconfig, "kubeconfig", "", "internal: the baseline's kubeconfig")
	flag.StringVar(&out, "baseline-out", "", "internal: where the baseline writes its result")
	flag.Parse()

	if cfg.podShape != shapeRealistic && cfg.podShape != shapeSmall {
		fmt.Fprintf(os.Stderr, "-pod-shape %q: want %s or %s\n", cfg.podShape, shapeRealistic, shapeSmall)
		os.Exit(2)
	}
	if child {
		if err := runBaselineChild(kubeconfig, out, cfg.poll, cfg.baselinePolls); err != nil {
			fmt.Fprintf(os.Stderr, "baseline: %v\n", err)
			os.Exit(1)
		}
		return
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, cfg); err != nil {
		fmt.Fprintf(os.Stderr, "FAIL: %v\n", err)
		stop()
		os.Exit(1)
	}
}

// results is everything the benchmark prints.
type results struct {
	cfg                config
	loadStart, loadEnd string
	nodes, pods        creation

	// From the manager's start (t0).
	ready                     time.Duration
	firstNode, firstContainer time.Duration
	synced                    managerSnapshot // when both targets were first correct
	startupAPI                apiWindow       // t0 to after the settle
	settleAPI                 apiWindow       // the settle
	startupMgr                managerWindow
	settled                   managerSnapshot

	// The pods added after sync.
	more                        creation
	moreFromLast, moreFromFirst time.Duration
	moreFirstChange             time.Duration // first change of the target after the first create
	moreChanges                 int
	moreAPI                     apiWindow
	moreMgr                     managerWindow

	baseline    baselineResult
	baselineAPI apiWindow
	baselineMgr managerWindow // the manager, idle, while the baseline ran

	afterSyncAPI apiWindow // after the settle to the end
	afterSyncMgr managerWindow
	end          managerSnapshot
	statusSizes  map[string]string
	startupLog   []string // the manager's startup milestones, from its log
}

func run(ctx context.Context, cfg config) error {
	bin, err := filepath.Abs(cfg.bin)
	if err != nil {
		return err
	}
	if _, err := os.Stat(bin); err != nil {
		return fmt.Errorf("%s: %w (run make build)", bin, err)
	}
	res := &results{cfg: cfg, loadStart: benchutil.LoadAvg()}

	benchutil.Logf("starting etcd and kube-apiserver")
	cp, err := framework.Start(ctx, framework.Options{ExtraAPIServerArgs: []string{
		// Room for the benchmark's bulk creation.
		"--max-requests-inflight=1000", "--max-mutating-requests-inflight=500",
	}})
	if err != nil {
		return err
	}
	defer cp.Stop()
	kube, client, err := clients(cp)
	if err != nil {
		return err
	}
	if err := populate(ctx, cfg, kube, client, res); err != nil {
		return err
	}

	// Deferred after cp.Stop, so it runs before it.
	watchCtx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	tr := newTracker()
	if err := watchTargets(watchCtx, kube, tr); err != nil {
		return err
	}
	return measure(ctx, cfg, cp, kube, client, bin, tr, res)
}

// clients returns the benchmark's clients, with limits out of the way;
// the kube client speaks protobuf, for the bulk creation.
func clients(cp *framework.ControlPlane) (kubernetes.Interface, versioned.Interface, error) {
	cfg := cp.Config()
	cfg.QPS, cfg.Burst = 5000, 10000
	client, err := versioned.NewForConfig(cfg)
	if err != nil {
		return nil, nil, err
	}
	cfg.ContentType = "application/vnd.kubernetes.protobuf"
	cfg.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
	kube, err := kubernetes.NewForConfig(cfg)
	return kube, client, err
}

// populate creates the namespaces, nodes, pods, targets and AddonResizers.
func populate(ctx context.Context, cfg config, kube kubernetes.Interface, client versioned.Interface, res *results) error {
	if err := createNamespaces(ctx, kube); err != nil {
		return err
	}
	benchutil.Logf("creating %d nodes with %d creators", cfg.nodes, cfg.creators)
	var err error
	if res.nodes, err = createNodes(ctx, kube, cfg.nodes, cfg.creators); err != nil {
		return err
	}
	benchutil.Logf("created %d nodes in %s (%.0f/s)", cfg.nodes, secs(res.nodes.took()), res.nodes.rate())
	benchutil.Logf("creating %d pods with %d creators", cfg.pods, cfg.creators)
	if res.pods, err = createPods(ctx, kube, "p", cfg.podShape, cfg.pods, cfg.creators); err != nil {
		return err
	}
	benchutil.Logf("created %d pods in %s (%.0f/s)", cfg.pods, secs(res.pods.took()), res.pods.rate())
	return createTargets(ctx, kube, client)
}

// measure runs the controller manager and the baseline and fills res.
func measure(ctx context.Context, cfg config, cp *framework.ControlPlane, kube kubernetes.Interface, client versioned.Interface, bin string, tr *tracker, res *results) (err error) {
	before, err := takeAPI(ctx, kube)
	if err != nil {
		return err
	}
	m, err := startManager(cp, bin)
	if err != nil {
		return err
	}
	defer m.proc.Stop(15 * time.Second)
	defer func() {
		if err != nil {
			fmt.Fprintf(os.Stderr, "=== last lines of the controller manager's log (%s) ===\n%s\n", m.proc.LogPath(), m.proc.Tail(40))
		}
		if cfg.keepLog != "" {
			if cerr := copyFile(m.proc.LogPath(), cfg.keepLog); cerr != nil {
				benchutil.Logf("keeping the controller manager's log: %v", cerr)
			}
		}
	}()
	if err := measureStartup(ctx, cfg, kube, m, tr, before, res); err != nil {
		return err
	}
	afterSync, err := takeAPI(ctx, kube)
	if err != nil {
		return err
	}
	if err := measureMore(ctx, cfg, kube, m, tr, res); err != nil {
		return err
	}
	if cfg.baselinePolls > 0 {
		if err := measureBaseline(ctx, cfg, cp, kube, m, res); err != nil {
			return err
		}
	}
	end, err := takeAPI(ctx, kube)
	if err != nil {
		return err
	}
	if res.end, err = m.snapshot(ctx); err != nil {
		return err
	}
	if err := m.alive(); err != nil {
		return err
	}
	res.afterSyncAPI = apiBetween(afterSync, end)
	res.afterSyncMgr = managerBetween(res.settled, res.end)
	if res.statusSizes, err = statusSizes(ctx, client); err != nil {
		return err
	}
	if res.startupLog, err = startupLog(m.proc.LogPath(), m.t0); err != nil {
		return err
	}
	res.loadEnd = benchutil.LoadAvg()
	res.print()
	return nil
}

// manager is the running controller manager.
type manager struct {
	proc *framework.Process
	port int
	t0   time.Time // just before the process was started
}

func (m *manager) alive() error {
	if m.proc.Exited() {
		return errors.New("the controller manager exited")
	}
	return nil
}

func (m *manager) snapshot(ctx context.Context) (managerSnapshot, error) {
	return takeManager(ctx, m.port, m.proc.Pid())
}

// startManager runs the controller manager with only the resizer, at its
// default client limits.
func startManager(cp *framework.ControlPlane, bin string) (*manager, error) {
	port, err := framework.FreePort()
	if err != nil {
		return nil, err
	}
	args := []string{"--kubeconfig=" + cp.KubeconfigPath(), "--controllers=resizer", "--leader-elect=false",
		// -v=2 logs when each reflector's initial list is in.
		"--bind-address=127.0.0.1", "--port=" + strconv.Itoa(port), "-v=2"}
	t0 := time.Now()
	p, err := framework.StartProcess(cp.Dir(), "controller-manager", bin, args)
	if err != nil {
		return nil, fmt.Errorf("starting the controller manager: %w", err)
	}
	benchutil.Logf("controller manager pid %d, log %s, args %v", p.Pid(), p.LogPath(), args)
	return &manager{proc: p, port: port, t0: t0}, nil
}

// waitReady waits until the manager's /readyz answers 200.
func (m *manager) waitReady(ctx context.Context, timeout time.Duration) (time.Time, error) {
	url := "http://127.0.0.1:" + strconv.Itoa(m.port) + "/readyz"
	deadline := time.Now().Add(timeout)
	for {
		if err := m.alive(); err != nil {
			return time.Time{}, err
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return time.Time{}, err
		}
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return time.Now(), nil
			}
		}
		if time.Now().After(deadline) {
			return time.Time{}, fmt.Errorf("the controller manager was not ready after %s", timeout)
		}
		select {
		case <-ctx.Done():
			return time.Time{}, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// measureStartup times the first correct resizes from the manager's start,
// takes the manager's RSS then, and again after the settle.
func measureStartup(ctx context.Context, cfg config, kube kubernetes.Interface, m *manager, tr *tracker, before apiSnapshot, res *results) error {
	ready, err := m.waitReady(ctx, 2*time.Minute)
	if err != nil {
		return err
	}
	res.ready = ready.Sub(m.t0)
	benchutil.Logf("controller manager ready after %s; waiting for the first correct resizes", secs(res.ready))
	timeout := 5*time.Minute + time.Duration(cfg.pods)*time.Millisecond
	nodeAt, _, err := tr.wait(ctx, nodeTarget, nodeEstimate(cfg.nodes), m.t0, timeout, m.alive)
	if err != nil {
		return err
	}
	containerAt, _, err := tr.wait(ctx, containerTarget, containerEstimate(cfg.pods, cfg.podShape), m.t0, timeout, m.alive)
	if err != nil {
		return err
	}
	if res.synced, err = m.snapshot(ctx); err != nil {
		return err
	}
	synced, err := takeAPI(ctx, kube)
	if err != nil {
		return err
	}
	res.firstNode, res.firstContainer = nodeAt.Sub(m.t0), containerAt.Sub(m.t0)
	benchutil.Logf("first correct resize: %s (nodes), %s (containers) after the start; RSS %s",
		secs(res.firstNode), secs(res.firstContainer), benchutil.MiB(res.synced.proc.rssKiB))
	benchutil.Logf("settling for %s", cfg.settle)
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(cfg.settle):
	}
	if res.settled, err = m.snapshot(ctx); err != nil {
		return err
	}
	after, err := takeAPI(ctx, kube)
	if err != nil {
		return err
	}
	res.startupAPI, res.settleAPI = apiBetween(before, after), apiBetween(synced, after)
	res.startupMgr = managerBetween(managerSnapshot{at: m.t0}, res.settled)
	benchutil.Logf("after the settle: RSS %s, peak %s", benchutil.MiB(res.settled.proc.rssKiB), benchutil.MiB(res.settled.proc.hwmKiB))
	return nil
}

// measureMore adds cfg.more pods as fast as it can and times the resize of
// the container-sized target to the new estimate.
func measureMore(ctx context.Context, cfg config, kube kubernetes.Interface, m *manager, tr *tracker, res *results) error {
	api0, err := takeAPI(ctx, kube)
	if err != nil {
		return err
	}
	mgr0, err := m.snapshot(ctx)
	if err != nil {
		return err
	}
	benchutil.Logf("adding %d pods", cfg.more)
	if res.more, err = createPods(ctx, kube, "q", cfg.podShape, cfg.more, cfg.creators); err != nil {
		return err
	}
	want := containerEstimate(cfg.pods+cfg.more, cfg.podShape)
	at, changes, err := tr.wait(ctx, containerTarget, want, res.more.first, 2*time.Minute, m.alive)
	if err != nil {
		return err
	}
	res.moreFromLast, res.moreFromFirst, res.moreChanges = at.Sub(res.more.last), at.Sub(res.more.first), changes
	if o, ok := tr.firstAfter(containerTarget, res.more.first); ok {
		res.moreFirstChange = o.at.Sub(res.more.first)
	}
	benchutil.Logf("created %d pods in %s; target correct %s after the last create answered", cfg.more, secs(res.more.took()), secs(res.moreFromLast))
	// Let the status writes and events of the last resize land.
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(5 * time.Second):
	}
	api1, err := takeAPI(ctx, kube)
	if err != nil {
		return err
	}
	mgr1, err := m.snapshot(ctx)
	if err != nil {
		return err
	}
	res.moreAPI, res.moreMgr = apiBetween(api0, api1), managerBetween(mgr0, mgr1)
	return nil
}

// measureBaseline runs Addon Resizer's way while the manager idles.
func measureBaseline(ctx context.Context, cfg config, cp *framework.ControlPlane, kube kubernetes.Interface, m *manager, res *results) error {
	a, err := takeAPI(ctx, kube)
	if err != nil {
		return err
	}
	mgrBefore, err := m.snapshot(ctx)
	if err != nil {
		return err
	}
	if res.baseline, err = runBaseline(ctx, cp, cfg.poll, cfg.baselinePolls); err != nil {
		return err
	}
	b, err := takeAPI(ctx, kube)
	if err != nil {
		return err
	}
	mgrAfter, err := m.snapshot(ctx)
	if err != nil {
		return err
	}
	res.baselineAPI, res.baselineMgr = apiBetween(a, b), managerBetween(mgrBefore, mgrAfter)
	return nil
}

// statusSizes reads each AddonResizer (a GET each, no list) and returns its
// status.clusterSize.
func statusSizes(ctx context.Context, client versioned.Interface) (map[string]string, error) {
	out := map[string]string{}
	for _, name := range []string{nodeTarget, containerTarget} {
		ar, err := client.ScaleplaneV1alpha1().AddonResizers(addonNamespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return nil, fmt.Errorf("reading AddonResizer %s: %w", name, err)
		}
		out[name] = "unset"
		if ar.Status.ClusterSize != nil {
			out[name] = strconv.Itoa(int(*ar.Status.ClusterSize))
		}
	}
	return out, nil
}
