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

// Command inplace measures one resize of a 3-replica add-on in both update
// modes of the resizer: Rollout (the pod template is written and the
// Deployment rolls out) and InPlace (the running pods are resized through
// pods/resize). For each run it reports the pods recreated and the time
// from the node that crosses a bucket to every pod running at the new size.
//
// It runs a real kube-apiserver and etcd, kube-controller-manager (whose
// deployment and replicaset controllers do the rollout), kwok (whose pod
// stages run the pods bound to its node, and whose hack/kwok/pod-resize.yaml
// stage reports each container's resources and applies every resize at
// once) and the real scaleplane-controller-manager binary with only the
// resizer, all with the integration test framework. See
// test/bench/README.md.
//
//	make tools build && go run ./test/bench/inplace
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/scaleplane/scaleplane/test/bench/internal/benchutil"
	"github.com/scaleplane/scaleplane/test/integration/framework"
)

type config struct {
	runs     int
	minReady int
	bin      string
	timeout  time.Duration
	keepLog  string
}

func main() {
	var cfg config
	flag.IntVar(&cfg.runs, "runs", 3, "resizes measured per mode; the modes alternate, each run in a namespace of its own")
	flag.IntVar(&cfg.minReady, "min-ready-seconds", 0, "the add-on Deployment's minReadySeconds: kwok's pods are Ready at once, this stands in for an add-on's start-up and readiness probe (metrics-server's manifest probes readiness after 20 s)")
	flag.StringVar(&cfg.bin, "controller-manager", "_output/bin/scaleplane-controller-manager", "the scaleplane-controller-manager binary (make build)")
	flag.DurationVar(&cfg.timeout, "timeout", 3*time.Minute, "how long one resize may take before the benchmark fails")
	flag.StringVar(&cfg.keepLog, "keep-log", "", "copy the controller manager's log here at the end (the control plane's directory is removed)")
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, cfg); err != nil {
		fmt.Fprintf(os.Stderr, "FAIL: %v\n", err)
		stop()
		os.Exit(1)
	}
}

func run(ctx context.Context, cfg config) (err error) {
	bin, err := filepath.Abs(cfg.bin)
	if err != nil {
		return err
	}
	if _, err := os.Stat(bin); err != nil {
		return fmt.Errorf("%s: %w (run make build)", bin, err)
	}
	loadStart := benchutil.LoadAvg()
	benchutil.Logf("starting etcd, kube-apiserver, kube-controller-manager, kwok (and metrics-server, which the framework starts with kwok)")
	cp, err := framework.Start(ctx, framework.Options{KubeControllerManager: true, Metrics: true})
	if err != nil {
		return err
	}
	defer cp.Stop()
	b, err := newBench(ctx, cp, int32(cfg.minReady))
	if err != nil {
		return err
	}

	port, err := framework.FreePort()
	if err != nil {
		return err
	}
	args := []string{"--kubeconfig=" + cp.KubeconfigPath(), "--controllers=resizer", "--leader-elect=false",
		"--bind-address=127.0.0.1", "--port=" + strconv.Itoa(port), "-v=2"}
	mgr, err := framework.StartProcess(cp.Dir(), "controller-manager", bin, args)
	if err != nil {
		return fmt.Errorf("starting the controller manager: %w", err)
	}
	defer mgr.Stop(15 * time.Second)
	defer func() {
		if err != nil {
			fmt.Fprintf(os.Stderr, "=== last lines of the controller manager's log (%s) ===\n%s\n", mgr.LogPath(), mgr.Tail(40))
		}
		if cfg.keepLog != "" {
			if data, rerr := os.ReadFile(mgr.LogPath()); rerr == nil {
				_ = os.WriteFile(cfg.keepLog, data, 0o644)
			}
		}
	}()
	benchutil.Logf("controller manager pid %d, log %s", mgr.Pid(), mgr.LogPath())

	var results []result
	for i := range cfg.runs {
		modes := []string{modeRollout, modeInPlace}
		if i%2 == 1 {
			modes = []string{modeInPlace, modeRollout}
		}
		for _, mode := range modes {
			r, err := b.measure(ctx, mode, i, cfg.timeout)
			if err != nil {
				return fmt.Errorf("%s run %d: %w", mode, i+1, err)
			}
			benchutil.Logf("%s run %d: %d pods recreated, at the new size after %s", mode, i+1, r.created, secs(r.atSize))
			results = append(results, r)
		}
	}
	report(os.Stdout, cfg, loadStart, benchutil.LoadAvg(), results)
	return nil
}
