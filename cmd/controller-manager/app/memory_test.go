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
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"
	"time"

	"k8s.io/component-base/metrics/testutil"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"
)

// The limit is read as cgroup v2 and v1 write it; "max" and v1's huge
// number mean none.
func TestReadCgroupMemoryLimit(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	cases := []struct {
		name  string
		files []string
		want  int64
	}{
		{"v2 limit", []string{write("v2", "268435456\n")}, 256 << 20},
		{"v2 no limit", []string{write("v2max", "max\n")}, 0},
		{"v1 limit, v2 missing", []string{filepath.Join(dir, "missing"), write("v1", "536870912\n")}, 512 << 20},
		{"v1 no limit", []string{write("v1max", "9223372036854771712\n")}, 0},
		{"nothing", []string{filepath.Join(dir, "missing")}, 0},
	}
	for _, tc := range cases {
		if got := readCgroupMemoryLimit(tc.files); got != tc.want {
			t.Errorf("%s: %d; want %d", tc.name, got, tc.want)
		}
	}
	if goMemoryInUse() == 0 {
		t.Error("the Go runtime reports no memory in use")
	}
}

// watchMemory: the collector's target becomes gcPercent; with a container
// limit, the Go runtime's soft limit becomes 90 % of it, both are exported,
// and crossing 80 % in use logs a warning.
func TestWatchMemory(t *testing.T) {
	t.Setenv("GOMEMLIMIT", "")
	t.Setenv("GOGC", "")
	previous := debug.SetMemoryLimit(-1)
	defer debug.SetMemoryLimit(previous)
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	limitFile := filepath.Join(t.TempDir(), "memory.max")
	// 1 MiB: less than the Go runtime already holds, so the warning fires.
	if err := os.WriteFile(limitFile, []byte("1048576\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	logger := ktesting.NewLogger(t, ktesting.NewConfig(ktesting.BufferLogs(true)))
	ctx, cancel := context.WithCancel(klog.NewContext(context.Background(), logger))
	done := make(chan struct{})
	go func() {
		defer close(done)
		watchMemory(ctx, []string{limitFile}, time.Hour)
	}()
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(logger.GetSink().(ktesting.Underlier).GetBuffer().String(), "memory in use is near the container's limit") {
		if time.Now().After(deadline) {
			t.Fatal("no warning logged above 80 % of the limit")
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	<-done
	if got := debug.SetGCPercent(100); got != gcPercent {
		t.Errorf("GOGC = %d; want %d when GOGC is not set", got, gcPercent)
	}
	if got := debug.SetMemoryLimit(-1); got != 943718 {
		t.Errorf("Go soft memory limit = %d; want 90 %% of 1 MiB", got)
	}
	if v, _ := testutil.GetGaugeMetricValue(memoryLimit); v != 1048576 {
		t.Errorf("scaleplane_controller_manager_memory_limit_bytes = %v", v)
	}
	if v, _ := testutil.GetGaugeMetricValue(memoryUse); v < 0.8 {
		t.Errorf("scaleplane_controller_manager_memory_limit_ratio = %v; want above 0.8", v)
	}
}

// A GOGC the user set stays: the runtime read it at the start, and
// watchMemory leaves the collector's target alone.
func TestWatchMemoryKeepsTheUsersGOGC(t *testing.T) {
	t.Setenv("GOGC", "80")
	defer debug.SetGCPercent(debug.SetGCPercent(80))
	// No limit file: watchMemory returns once it has set what it sets.
	watchMemory(context.Background(), []string{filepath.Join(t.TempDir(), "none")}, time.Hour)
	if got := debug.SetGCPercent(80); got != 80 {
		t.Errorf("GOGC = %d; want the user's 80", got)
	}
}
