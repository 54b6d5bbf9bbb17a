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
	"os"
	"runtime/debug"
	"runtime/metrics"
	"strconv"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	compmetrics "k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
	"k8s.io/klog/v2"

	"github.com/scaleplane/scaleplane/pkg/gcpace"
)

// The container's memory limit, read from the cgroup the process runs in,
// so that a manager about to be OOM-killed (at the slot of a burst of
// firings, when it matters most) says so beforehand, and the Go runtime
// collects harder before it gets there.

// cgroupMemoryLimitFiles are where cgroup v2 and v1 keep the limit.
var cgroupMemoryLimitFiles = []string{"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"}

// memoryLimitShare is the share of the container's limit the Go runtime's
// soft memory limit is set to: the rest is for what the runtime does not
// count (stacks of cgo threads, the binary) and headroom.
const memoryLimitShare = 0.9

// memoryWarnShare is the share of the limit the Go memory in use may reach
// before a warning is logged.
const memoryWarnShare = 0.8

// gcPercent is the garbage collector's target (GOGC) unless GOGC is set: the
// heap may grow to 1.5 times the live heap between collections, not twice.
// The live heap is mostly the informers' caches, and the process's memory
// follows the collector's target, not the live heap: at the default (100)
// RSS was about 1.9 times the live heap. Measured at 10,000 CronFederatedHPAs
// firing at once (test/bench/README.md, issue 36): a quarter less memory
// above the process's base, idle and at the peak, for 15 % more CPU in the
// burst and the same time to the last target; idle, the CPU is unchanged.
const gcPercent = 50

var (
	memoryLimit = compmetrics.NewGauge(&compmetrics.GaugeOpts{
		Name:           "scaleplane_controller_manager_memory_limit_bytes",
		Help:           "The memory limit of the controller manager's container (its cgroup), 0 if it has none. Compare with go_memstats_heap_inuse_bytes or process_resident_memory_bytes: near the limit, the manager is OOM-killed.",
		StabilityLevel: compmetrics.ALPHA,
	})
	memoryUse = compmetrics.NewGauge(&compmetrics.GaugeOpts{
		Name:           "scaleplane_controller_manager_memory_limit_ratio",
		Help:           "Memory the Go runtime holds (runtime/metrics /memory/classes/total:bytes minus released) divided by the container's memory limit; 0 without a limit. Above 0.8 a warning is logged: raise the limit (see the chart's README for sizes by object count).",
		StabilityLevel: compmetrics.ALPHA,
	})
)

var registerMemoryMetrics sync.Once

// readCgroupMemoryLimit returns the memory limit in the first of files that
// holds one; 0 when none does ("max", or a v1 limit that means none).
func readCgroupMemoryLimit(files []string) int64 {
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		v := strings.TrimSpace(string(data))
		if v == "max" {
			return 0
		}
		n, err := strconv.ParseInt(v, 10, 64)
		// cgroup v1 writes a page-rounded huge number for "no limit".
		if err != nil || n <= 0 || n >= 1<<62 {
			return 0
		}
		return n
	}
	return 0
}

// goMemoryInUse is the memory the Go runtime holds from the OS.
func goMemoryInUse() uint64 {
	samples := []metrics.Sample{{Name: "/memory/classes/total:bytes"}, {Name: "/memory/classes/heap/released:bytes"}}
	metrics.Read(samples)
	return samples[0].Value.Uint64() - samples[1].Value.Uint64()
}

// watchMemory sets the garbage collector's target to gcPercent (unless GOGC
// says otherwise) and the Go runtime's soft memory limit from the
// container's (unless GOMEMLIMIT says otherwise), exports both, and logs a
// warning each time the memory in use crosses memoryWarnShare of the limit,
// until ctx ends.
func watchMemory(ctx context.Context, files []string, interval time.Duration) {
	registerMemoryMetrics.Do(func() { legacyregistry.MustRegister(memoryLimit, memoryUse) })
	logger := klog.FromContext(ctx)
	if os.Getenv("GOGC") == "" {
		gcpace.SetPercent(gcPercent)
		logger.Info("Set the Go garbage collector's target (GOGC is not set)", "gcPercent", gcPercent)
	}
	limit := readCgroupMemoryLimit(files)
	memoryLimit.Set(float64(limit))
	if limit == 0 {
		return
	}
	if os.Getenv("GOMEMLIMIT") == "" {
		soft := int64(float64(limit) * memoryLimitShare)
		debug.SetMemoryLimit(soft)
		logger.Info("Set the Go runtime's soft memory limit from the container's", "containerLimit", limit, "goMemoryLimit", soft)
	}
	warned := false
	wait.UntilWithContext(ctx, func(ctx context.Context) {
		ratio := float64(goMemoryInUse()) / float64(limit)
		memoryUse.Set(ratio)
		switch {
		case ratio >= memoryWarnShare && !warned:
			logger.Info("Warning: memory in use is near the container's limit; at the limit the process is OOM-killed. Raise the memory limit (the chart's README sizes it by object count)",
				"inUse", int64(ratio*float64(limit)), "limit", limit, "ratio", strconv.FormatFloat(ratio, 'f', 2, 64))
			warned = true
		case ratio < memoryWarnShare*0.9:
			warned = false
		}
	}, interval)
}
