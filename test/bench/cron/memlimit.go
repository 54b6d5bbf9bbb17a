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
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"k8s.io/client-go/kubernetes"

	"github.com/scaleplane/scaleplane/test/bench/internal/benchutil"
)

// memoryCgroup runs the controller manager the way a pod with a memory limit
// runs it: in a memory cgroup of its own with that limit, which the process
// sees as the root of its /sys/fs/cgroup (a bind mount in a mount namespace of
// its own, as container runtimes set it up). The manager then reads the limit
// where it reads it in a container, and sets its Go soft memory limit from it
// (cmd/controller-manager/app/memory.go): what is measured is the production
// path under the limit a user sets, not an environment variable of the
// benchmark's. It needs root and cgroup v1's memory controller or cgroup v2.
type memoryCgroup struct {
	// dir is the cgroup's directory; mount is where the process sees it.
	dir, mount string
	v2         bool
	limit      int64
}

// newMemoryCgroup makes a memory cgroup with the limit, in bytes.
func newMemoryCgroup(limit int64) (*memoryCgroup, error) {
	name := fmt.Sprintf("scaleplane-bench-%d", os.Getpid())
	m := &memoryCgroup{limit: limit}
	switch {
	case exists("/sys/fs/cgroup/memory/memory.limit_in_bytes"):
		m.mount = "/sys/fs/cgroup/memory"
	case exists("/sys/fs/cgroup/cgroup.controllers"):
		m.mount, m.v2 = "/sys/fs/cgroup", true
	default:
		return nil, errors.New("-memory-limit needs a cgroup v1 memory controller at /sys/fs/cgroup/memory or cgroup v2 at /sys/fs/cgroup")
	}
	m.dir = filepath.Join(m.mount, name)
	if err := os.Mkdir(m.dir, 0o755); err != nil {
		return nil, fmt.Errorf("making the cgroup for -memory-limit (run as root): %w", err)
	}
	limitFile := "memory.limit_in_bytes"
	if m.v2 {
		limitFile = "memory.max"
	}
	if err := os.WriteFile(filepath.Join(m.dir, limitFile), []byte(strconv.FormatInt(limit, 10)), 0o644); err != nil {
		m.remove()
		return nil, fmt.Errorf("setting the cgroup's memory limit: %w", err)
	}
	return m, nil
}

// wrap returns the command that runs binary with args inside the cgroup:
// unshare gives the shell a mount namespace of its own, the shell moves
// itself into the cgroup, bind-mounts the cgroup over the process's view of
// the hierarchy and execs the binary, which keeps the shell's pid.
func (m *memoryCgroup) wrap(binary string, args []string) (string, []string) {
	const script = `cg=$1; mnt=$2; shift 2; echo $$ > "$cg/cgroup.procs" && mount --bind "$cg" "$mnt" && exec "$@"`
	return "unshare", append([]string{"--mount", "--propagation", "private", "--", "/bin/sh", "-c", script, "sh", m.dir, m.mount, binary}, args...)
}

// report says what the kernel saw of the cgroup: its peak usage (which
// counts page cache too, such as the manager's log) and how often it hit
// the limit or killed a process for it.
func (m *memoryCgroup) report() string {
	if m.v2 {
		return fmt.Sprintf("cgroup v2 limit %s; peak %s; events: %s", mib(m.limit), m.readMiB("memory.peak"),
			strings.Join(strings.Fields(m.read("memory.events")), " "))
	}
	oom := "unknown"
	for _, line := range strings.Split(m.read("memory.oom_control"), "\n") {
		if v, ok := strings.CutPrefix(line, "oom_kill "); ok {
			oom = v
		}
	}
	return fmt.Sprintf("cgroup v1 limit %s; peak usage (with page cache) %s; times at the limit (failcnt) %s; OOM kills %s",
		mib(m.limit), m.readMiB("memory.max_usage_in_bytes"), m.read("memory.failcnt"), oom)
}

// remove removes the cgroup once its process has ended.
func (m *memoryCgroup) remove() {
	if err := os.Remove(m.dir); err != nil {
		fmt.Fprintf(os.Stderr, "removing the cgroup %s: %v\n", m.dir, err)
	}
}

// limitLogLines says whether the manager saw the limit (it logs the soft
// limit it set) and how often it warned of memory near it.
func limitLogLines(logPath string) string {
	data, err := os.ReadFile(logPath)
	if err != nil {
		return "unreadable: " + err.Error()
	}
	saw := "did not log a soft memory limit (it did not see the cgroup's)"
	for _, line := range strings.Split(string(data), "\n") {
		if strings.Contains(line, "Set the Go runtime's soft memory limit") {
			saw = line[strings.Index(line, "Set the Go"):]
		}
	}
	return fmt.Sprintf("%s; memory warnings: %d", saw, strings.Count(string(data), "memory in use is near the container's limit"))
}

// relists says how often each informer filled its cache (once at the start;
// again after a relist, which holds a second copy of the objects until it is
// stored) and the last watch that ended with an error, from the manager's
// log. A watch closed with 410 Gone, which a relist follows, is logged only
// at -v=4, which the benchmark does not run: the apiserver's side of it is in
// apiserverWatchEnds.
func relists(logPath string) string {
	data, err := os.ReadFile(logPath)
	if err != nil {
		return "log unreadable: " + err.Error()
	}
	log := string(data)
	fills := map[string]int{}
	var ended string
	for _, line := range strings.Split(log, "\n") {
		if strings.Contains(line, `"Caches populated"`) {
			if _, rest, ok := strings.Cut(line, `type="`); ok {
				typ, _, _ := strings.Cut(rest, `"`)
				fills[typ]++
			}
		}
		// A watch that ended with an error is logged at every verbosity;
		// "Watch closed" (410 Gone, say) only at -v=4, which the benchmark
		// no longer sets (see the manager's args): the cache fills still
		// count the relists.
		if strings.Contains(line, `"Watch closed"`) || strings.Contains(line, "ended with") {
			ended = line
		}
	}
	types := make([]string, 0, len(fills))
	for typ, n := range fills {
		types = append(types, fmt.Sprintf("%s %d", typ, n))
	}
	sort.Strings(types)
	out := "cache fills: " + strings.Join(types, ", ")
	if ended != "" {
		out += "; last watch end logged: " + ended
	}
	return out
}

// apiserverWatchEnds reports why watches ended on the apiserver's side: the
// watchers its watch cache closed because they read too slowly, by resource
// (apiserver_terminated_watchers_total), and, from its log, its watch
// cache's reinitialisations (after which an older resourceVersion is 410
// Gone), with the last line of each. The closed watchers come from the
// metric, not the log: the log has them only at --vmodule=cache_watcher=1,
// which made every klog verbosity check of kube-apiserver take klog's lock
// and read the caller's stack, in the burst and in the limit runs alike.
func apiserverWatchEnds(ctx context.Context, kube kubernetes.Interface, logPath string) string {
	closed, err := terminatedWatchers(ctx, kube)
	if err != nil {
		closed = err.Error()
	}
	data, err := os.ReadFile(logPath)
	if err != nil {
		return closed + "; apiserver log unreadable: " + err.Error()
	}
	kinds := []struct{ name, marker string }{
		{"watch cache reinitialised", "Terminating all watchers"},
		{"watch cache's own watch ended", "watch chan error"},
	}
	counts, last := make([]int, len(kinds)), make([]string, len(kinds))
	for _, line := range strings.Split(string(data), "\n") {
		for i, k := range kinds {
			if strings.Contains(line, k.marker) {
				counts[i]++
				last[i] = line
			}
		}
	}
	out := []string{closed}
	for i, k := range kinds {
		item := fmt.Sprintf("%s %d", k.name, counts[i])
		if last[i] != "" {
			item += fmt.Sprintf(" (last: %.300s)", last[i])
		}
		out = append(out, item)
	}
	return strings.Join(out, "; ")
}

func (m *memoryCgroup) read(file string) string {
	data, err := os.ReadFile(filepath.Join(m.dir, file))
	if err != nil {
		return "unknown"
	}
	return strings.TrimSpace(string(data))
}

func (m *memoryCgroup) readMiB(file string) string {
	n, err := strconv.ParseInt(m.read(file), 10, 64)
	if err != nil {
		return "unknown"
	}
	return mib(n)
}

func mib(bytes int64) string { return benchutil.MiB(int(bytes / 1024)) }

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}
