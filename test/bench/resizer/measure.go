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
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"time"

	"k8s.io/client-go/kubernetes"
)

// sample is one line of a Prometheus text exposition.
type sample struct {
	labels map[string]string
	value  float64
}

// parseSamples returns the samples of the metric name in text (for a
// histogram, ask for name_sum or name_count).
func parseSamples(text, name string) ([]sample, error) {
	var out []sample
	sc := bufio.NewScanner(strings.NewReader(text))
	sc.Buffer(make([]byte, 1024*1024), 16*1024*1024)
	for sc.Scan() {
		line := sc.Text()
		rest, ok := strings.CutPrefix(line, name)
		if !ok || (rest != "" && rest[0] != '{' && rest[0] != ' ') {
			continue
		}
		labels := map[string]string{}
		if strings.HasPrefix(rest, "{") {
			end := strings.LastIndex(rest, "}")
			if end < 0 {
				continue
			}
			labels = parseLabels(rest[1:end])
			rest = rest[end+1:]
		}
		fields := strings.Fields(rest)
		if len(fields) == 0 {
			continue
		}
		v, err := strconv.ParseFloat(fields[0], 64)
		if err != nil {
			return nil, fmt.Errorf("parsing %q: %w", line, err)
		}
		out = append(out, sample{labels: labels, value: v})
	}
	return out, sc.Err()
}

// parseLabels parses name="value" pairs; no value here contains `",`.
func parseLabels(s string) map[string]string {
	out := map[string]string{}
	for _, kv := range strings.Split(s, `",`) {
		k, v, ok := strings.Cut(kv, "=")
		if ok {
			out[strings.TrimSpace(k)] = strings.Trim(v, `"`)
		}
	}
	return out
}

// sumBy sums the samples by the value of key(labels); samples for which
// key returns "" are skipped.
func sumBy(samples []sample, key func(map[string]string) string) map[string]float64 {
	out := map[string]float64{}
	for _, s := range samples {
		if k := key(s.labels); k != "" {
			out[k] += s.value
		}
	}
	return out
}

// sumOf sums the samples of name in text by key.
func sumOf(text, name string, key func(map[string]string) string) (map[string]float64, error) {
	samples, err := parseSamples(text, name)
	if err != nil {
		return nil, err
	}
	return sumBy(samples, key), nil
}

func byLabel(name string) func(map[string]string) string {
	return func(l map[string]string) string { return l[name] }
}

// all puts every sample under one key, "all".
func all(map[string]string) string { return "all" }

// scrapeManager reads the controller manager's /metrics.
func scrapeManager(ctx context.Context, port int) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://127.0.0.1:"+strconv.Itoa(port)+"/metrics", nil)
	if err != nil {
		return "", err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", fmt.Errorf("reading the controller manager's metrics: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", fmt.Errorf("reading the controller manager's metrics: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("controller manager /metrics: %s", resp.Status)
	}
	return string(body), nil
}

// scrapeAPIServer reads kube-apiserver's /metrics (a GET of a non-resource
// path: it counts as no request in apiserver_request_total).
func scrapeAPIServer(ctx context.Context, kube kubernetes.Interface) (string, error) {
	raw, err := kube.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return "", fmt.Errorf("reading the apiserver's metrics: %w", err)
	}
	return string(raw), nil
}

// procStat is what /proc tells about a process's memory and CPU.
type procStat struct {
	rssKiB, hwmKiB int
	cpu            float64 // utime+stime, seconds
}

func readProc(pid int) (procStat, error) {
	var s procStat
	var err error
	if s.rssKiB, err = memKiB(pid, "VmRSS"); err != nil {
		return s, err
	}
	if s.hwmKiB, err = memKiB(pid, "VmHWM"); err != nil {
		return s, err
	}
	s.cpu, err = cpuSeconds(pid)
	return s, err
}

// cpuSeconds reads utime+stime of a process from /proc/<pid>/stat.
func cpuSeconds(pid int) (float64, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, fmt.Errorf("reading the CPU time of %d: %w", pid, err)
	}
	// The fields after the command name, which is in parentheses; utime
	// and stime are fields 14 and 15 of the whole line.
	s := string(data)
	fields := strings.Fields(s[strings.LastIndex(s, ")")+2:])
	if len(fields) < 13 {
		return 0, fmt.Errorf("short /proc/%d/stat: %q", pid, s)
	}
	utime, err1 := strconv.ParseFloat(fields[11], 64)
	stime, err2 := strconv.ParseFloat(fields[12], 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("parsing /proc/%d/stat: %q", pid, s)
	}
	const clockTicks = 100 // USER_HZ on Linux
	return (utime + stime) / clockTicks, nil
}

// memKiB returns a field of /proc/<pid>/status in KiB, e.g. VmRSS or VmHWM.
func memKiB(pid int, field string) (int, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, fmt.Errorf("reading /proc/%d/status: %w", pid, err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			if f := strings.Fields(v); len(f) > 0 {
				return strconv.Atoi(f[0])
			}
		}
	}
	return 0, fmt.Errorf("no %s in /proc/%d/status", field, pid)
}

// loadavg returns the first three fields of /proc/loadavg.
func loadavg() string {
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(data))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}

// machine describes the CPUs, the memory and the Go toolchain.
func machine() string {
	model := "unknown CPU"
	if data, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(data), "\n") {
			if v, ok := strings.CutPrefix(line, "model name"); ok {
				model = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(v), ":"))
				break
			}
		}
	}
	mem := "unknown"
	if data, err := os.ReadFile("/proc/meminfo"); err == nil {
		if line, _, ok := strings.Cut(string(data), "\n"); ok {
			mem = strings.Join(strings.Fields(line)[1:], " ")
		}
	}
	return fmt.Sprintf("%d CPUs (%s), %s memory, %s/%s, %s", runtime.NumCPU(), model, mem, runtime.GOOS, runtime.GOARCH, runtime.Version())
}

// delta returns b-a per key, without the keys that did not change.
func delta(a, b map[string]float64) map[string]float64 {
	out := map[string]float64{}
	for k, v := range b {
		if d := v - a[k]; d != 0 {
			out[k] = d
		}
	}
	return out
}

func total(m map[string]float64) float64 {
	var t float64
	for _, v := range m {
		t += v
	}
	return t
}

// format prints a map as "k1 v1, k2 v2" in key order, or "none".
func format(m map[string]float64) string {
	if len(m) == 0 {
		return "none"
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, 0, len(m))
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s %.0f", k, m[k]))
	}
	return strings.Join(parts, ", ")
}

func mib(kib int) string { return fmt.Sprintf("%.1f MiB", float64(kib)/1024) }

func mb(bytes float64) string { return fmt.Sprintf("%.1f MB", bytes/1e6) }

func secs(d time.Duration) string {
	if d >= 10*time.Second {
		return fmt.Sprintf("%.1f s", d.Seconds())
	}
	return fmt.Sprintf("%.3f s", d.Seconds())
}
