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
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"k8s.io/client-go/kubernetes"
)

// apiserverMetrics reads the apiserver's /metrics and returns each sample
// line as its metric's name, its labels and its value; comments are left out.
func apiserverMetrics(ctx context.Context, kube kubernetes.Interface) ([]metricSample, error) {
	raw, err := kube.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading apiserver metrics: %w", err)
	}
	var out []metricSample
	for _, line := range strings.Split(string(raw), "\n") {
		name, rest, ok := strings.Cut(line, "{")
		end := strings.LastIndex(rest, "}")
		if !ok || end < 0 || strings.HasPrefix(line, "#") {
			continue
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(rest[end+1:]), 64)
		if err != nil {
			continue
		}
		out = append(out, metricSample{name: name, labels: rest[:end], value: v})
	}
	return out, nil
}

// metricSample is one line of /metrics; labels are parsed on demand
// (parseLabels), for the few metrics read.
type metricSample struct {
	name, labels string
	value        float64
}

// apiserverRequests reads apiserver_request_total and sums the requests of
// allVerbs by verb, resource, subresource and code (the key "VERB
// resource[/subresource] code"), and the apiserver's time for the scale
// patches (patchSecondsKey, patchCountKey).
func apiserverRequests(ctx context.Context, kube kubernetes.Interface) (map[string]float64, error) {
	samples, err := apiserverMetrics(ctx, kube)
	if err != nil {
		return nil, err
	}
	out := map[string]float64{}
	for _, m := range samples {
		if key, ok := patchTimeKey(m); ok {
			out[key] += m.value
			continue
		}
		if m.name != "apiserver_request_total" {
			continue
		}
		labels := parseLabels(m.labels)
		if !slices.Contains(allVerbs, labels["verb"]) {
			continue
		}
		key := labels["verb"] + " " + labels["resource"]
		if sub := labels["subresource"]; sub != "" {
			key += "/" + sub
		}
		key += " " + labels["code"]
		out[key] += m.value
	}
	return out, nil
}

// The keys of the time the apiserver took for the scale patches, and how
// many it timed (apiserver_request_duration_seconds, from a request's
// arrival to its answer, queueing included): apart from the requests, as
// their first word is no verb.
const (
	patchSecondsKey = "seconds PATCH deployments/scale"
	patchCountKey   = "count PATCH deployments/scale"
)

// patchTimeKey returns which of the two keys a sample adds to.
func patchTimeKey(m metricSample) (string, bool) {
	var key string
	switch m.name {
	case "apiserver_request_duration_seconds_sum":
		key = patchSecondsKey
	case "apiserver_request_duration_seconds_count":
		key = patchCountKey
	default:
		return "", false
	}
	labels := parseLabels(m.labels)
	return key, labels["verb"] == "PATCH" && labels["resource"] == "deployments" && labels["subresource"] == "scale"
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
	samples, err := apiserverMetrics(ctx, kube)
	if err != nil {
		return "", err
	}
	total, byResource := 0.0, map[string]float64{}
	for _, m := range samples {
		if m.name != "apiserver_terminated_watchers_total" {
			continue
		}
		total += m.value
		if m.value > 0 {
			byResource[parseLabels(m.labels)["resource"]] += m.value
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
