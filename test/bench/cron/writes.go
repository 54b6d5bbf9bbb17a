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
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"k8s.io/client-go/kubernetes"
)

// apiserverRequests reads apiserver_request_total and sums the requests of
// allVerbs by verb, resource, subresource and code (the key "VERB
// resource[/subresource] code").
func apiserverRequests(ctx context.Context, kube kubernetes.Interface) (map[string]float64, error) {
	raw, err := kube.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading apiserver metrics: %w", err)
	}
	out := map[string]float64{}
	sc := bufio.NewScanner(strings.NewReader(string(raw)))
	sc.Buffer(make([]byte, 1024*1024), 16*1024*1024)
	for sc.Scan() {
		line := sc.Text()
		if key, ok := patchTimeKey(line); ok {
			out[key] += metricValue(line)
			continue
		}
		if !strings.HasPrefix(line, "apiserver_request_total{") {
			continue
		}
		labels := parseLabels(line[len("apiserver_request_total{"):strings.LastIndex(line, "}")])
		if !slices.Contains(allVerbs, labels["verb"]) {
			continue
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(line[strings.LastIndex(line, "}")+1:]), 64)
		if err != nil {
			continue
		}
		key := labels["verb"] + " " + labels["resource"]
		if sub := labels["subresource"]; sub != "" {
			key += "/" + sub
		}
		key += " " + labels["code"]
		out[key] += v
	}
	return out, sc.Err()
}

// The keys of the time the apiserver took for the scale patches, and how
// many it timed (apiserver_request_duration_seconds, from a request's
// arrival to its answer, queueing included): apart from the requests, as
// their first word is no verb.
const (
	patchSecondsKey = "seconds PATCH deployments/scale"
	patchCountKey   = "count PATCH deployments/scale"
)

// patchTimeKey returns which of the two keys a line of /metrics adds to.
func patchTimeKey(line string) (string, bool) {
	name, rest, ok := strings.Cut(line, "{")
	if !ok || !strings.Contains(rest, `verb="PATCH"`) || !strings.Contains(rest, `resource="deployments"`) || !strings.Contains(rest, `subresource="scale"`) {
		return "", false
	}
	switch name {
	case "apiserver_request_duration_seconds_sum":
		return patchSecondsKey, true
	case "apiserver_request_duration_seconds_count":
		return patchCountKey, true
	}
	return "", false
}

// metricValue is a line's value, 0 if it has none.
func metricValue(line string) float64 {
	v, _ := strconv.ParseFloat(strings.TrimSpace(line[strings.LastIndex(line, "}")+1:]), 64)
	return v
}

// meanPatchTime is the mean time the apiserver took for the scale patches
// counted in after but not in before.
func meanPatchTime(before, after map[string]float64) time.Duration {
	n := after[patchCountKey] - before[patchCountKey]
	if n <= 0 {
		return 0
	}
	return time.Duration((after[patchSecondsKey] - before[patchSecondsKey]) / n * float64(time.Second)).Round(100 * time.Microsecond)
}

// parseLabels reads a metric line's labels (`a="x",b="y"`).
func parseLabels(s string) map[string]string {
	out := map[string]string{}
	for _, kv := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(kv, "=")
		if ok {
			out[k] = strings.Trim(v, `"`)
		}
	}
	return out
}

// allVerbs are the verbs of reads and writes apiserver_request_total counts:
// not WATCH (watches opened, not events), CONNECT, PROXY or its "other"
// bucket, which a burst does not send.
var allVerbs = []string{"GET", "LIST", "POST", "PUT", "PATCH", "DELETE", "DELETECOLLECTION", "APPLY"}

// writeVerbs are the mutating ones among them.
var writeVerbs = []string{"POST", "PUT", "PATCH", "DELETE", "DELETECOLLECTION", "APPLY"}

// printRequests prints the requests of those verbs counted in after but not
// in before, by key, per firing of n, and their total.
func printRequests(before, after map[string]float64, n int, verbs []string) {
	total := 0.0
	for _, k := range slices.Sorted(maps.Keys(after)) {
		verb, _, _ := strings.Cut(k, " ")
		d := after[k] - before[k]
		if d <= 0 || !slices.Contains(verbs, verb) {
			continue
		}
		total += d
		fmt.Printf("  %-45s %8.0f  %.2f/firing\n", k, d, d/float64(n))
	}
	fmt.Printf("  %-45s %8.0f  %.2f/firing\n", "total", total, total/float64(n))
}

// terminatedWatchers reads apiserver_terminated_watchers_total: the
// watchers the watch cache closed for reading too slowly, in all and by
// resource.
func terminatedWatchers(ctx context.Context, kube kubernetes.Interface) (string, error) {
	raw, err := kube.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return "", fmt.Errorf("reading apiserver metrics: %w", err)
	}
	const name = "apiserver_terminated_watchers_total{"
	total, byResource := 0.0, map[string]float64{}
	for _, line := range strings.Split(string(raw), "\n") {
		if !strings.HasPrefix(line, name) {
			continue
		}
		v := metricValue(line)
		total += v
		if v > 0 {
			byResource[parseLabels(line[len(name):strings.LastIndex(line, "}")])["resource"]] += v
		}
	}
	out := fmt.Sprintf("slow watchers closed %.0f", total)
	if len(byResource) > 0 {
		var items []string
		for _, r := range slices.Sorted(maps.Keys(byResource)) {
			items = append(items, fmt.Sprintf("%s %.0f", r, byResource[r]))
		}
		out += " (" + strings.Join(items, ", ") + ")"
	}
	return out, nil
}
