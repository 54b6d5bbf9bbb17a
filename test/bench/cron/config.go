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
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
)

type config struct {
	n          int
	bin        string
	managerArg []string
	idle       time.Duration
	limitIdle  time.Duration
	creators   int
	limitConc  int
	// apiserverProfiling serves kube-apiserver's /debug/pprof/.
	apiserverProfiling bool
	// limitBefore measures the scale limit once before the slot too.
	limitBefore bool
	// limitAtSlot measures the bare client at a slot of its own.
	limitAtSlot bool
	// limitRuns is how many times the scale limit is measured, one run
	// after the other: on a busy machine one run moves by 5 % from the
	// next, as much as the aim's margin.
	limitRuns  int
	profileDir string
	// cpuSeconds is the CPU profile's length; 0: the burst's.
	cpuSeconds int
	setupRate  int
	// memoryLimit, when set, runs the controller manager under that memory
	// limit, as in a pod (see memoryCgroup).
	memoryLimit resource.Quantity
}

func main() {
	var cfg config
	var extra string
	flag.IntVar(&cfg.n, "n", 1000, "number of CronFederatedHPAs (each with its own Deployment), all due in the same minute")
	flag.StringVar(&cfg.bin, "controller-manager", "_output/bin/scaleplane-controller-manager", "the scaleplane-controller-manager binary (make build)")
	flag.StringVar(&extra, "controller-manager-args", "", "extra flags for the controller manager, space separated (e.g. \"--kube-api-qps=2000 --kube-api-burst=4000\")")
	flag.DurationVar(&cfg.idle, "idle", 20*time.Second, "how long to measure the idle controller")
	flag.IntVar(&cfg.creators, "creators", 16, "parallel object creators")
	flag.DurationVar(&cfg.limitIdle, "limit-idle", 0, "how long the apiserver is left idle before each limit run after the burst, as it was before the slot (0: each run right after the one before)")
	flag.IntVar(&cfg.limitRuns, "limit-runs", 3, "how many times to measure the scale limit, one run after the other (each sets one more replica); the ratio is reported to the first run and to the median of the runs")
	flag.BoolVar(&cfg.limitBefore, "limit-before", false, "measure the scale limit once before the slot too, after the idle window (the first scale write of each Deployment, on an apiserver idle until then, as the controller's burst otherwise is); the median includes it")
	flag.BoolVar(&cfg.limitAtSlot, "limit-at-slot", true, "measure the bare client at a slot of its own after the limit runs, as the controller's burst is measured (a minute boundary after 30 to 90 s of idle, timed from the slot); costs up to 90 s more")
	flag.BoolVar(&cfg.apiserverProfiling, "apiserver-profiling", false, "serve kube-apiserver's /debug/pprof/ (to trace it around the slot)")
	flag.IntVar(&cfg.limitConc, "limit-concurrency", 64, "requests in flight of the minimal client that measures the physical limit")
	flag.IntVar(&cfg.cpuSeconds, "profile-cpu-seconds", 0, "the CPU profile's length from the slot (with -profile); 0 covers the burst and its status writes (n/200 + 5 s); about n/1000 covers only the target writes")
	flag.StringVar(&cfg.profileDir, "profile", "", "a directory to save the controller manager's heap profiles (idle, last target, all statuses) and a CPU profile of the burst in; passes --profiling")
	flag.IntVar(&cfg.setupRate, "setup-rate", 150, "CronFederatedHPAs per second the slot allows for their creation and first status writes (lower it on a loaded machine: at 100,000 the setup took 11 minutes with other builds running)")
	var memoryLimit string
	flag.StringVar(&memoryLimit, "memory-limit", "", "run the controller manager in a memory cgroup with this limit (e.g. 512Mi), seen by it as a container's limit, as the chart's resources.limits.memory sets it (needs root)")
	flag.Parse()
	if memoryLimit != "" {
		q, err := resource.ParseQuantity(memoryLimit)
		if err != nil {
			fmt.Fprintf(os.Stderr, "-memory-limit: %v\n", err)
			os.Exit(2)
		}
		cfg.memoryLimit = q
	}
	cfg.managerArg = strings.Fields(extra)
	if err := run(cfg); err != nil {
		fmt.Fprintf(os.Stderr, "FAIL: %v\n", err)
		os.Exit(1)
	}
}
