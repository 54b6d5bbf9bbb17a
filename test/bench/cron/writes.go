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
// resource[/subresource] code"), and the times of timedKeys.
func apiserverRequests(ctx context.Context, kube kubernetes.Interface) (map[string]float64, error) {
	samples, err := apiserverMetrics(ctx, kube)
	if err != nil {
		return nil, err
	}
	out := map[string]float64{}
	for _, m := range samples {
		if key, ok := timeKey(m); ok {
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

// The keys of the times read apart from the requests (their first word is
// no verb), and of how many were timed: the apiserver's for the scale
// patches (apiserver_request_duration_seconds, from a request's arrival to
// its answer, queueing included), and etcd's for the Deployment updates the
// patches make (etcd_request_duration_seconds, the apiserver's storage call,
// its wait for a core included), which tells etcd's part of the first.
const (
	patchSecondsKey = "seconds PATCH deployments/scale"
	patchCountKey   = "count PATCH deployments/scale"
	etcdSecondsKey  = "seconds etcd update deployments"
	etcdCountKey    = "count etcd update deployments"
)

// timedKeys are the metrics read for those keys, by the labels that pick
// the samples; _sum adds to the first key, _count to the second.
var timedKeys = []struct {
	metric         string
	labels         map[string]string
	seconds, count string
}{
	{"apiserver_request_duration_seconds", map[string]string{"verb": "PATCH", "resource": "deployments", "subresource": "scale"}, patchSecondsKey, patchCountKey},
	{"etcd_request_duration_seconds", map[string]string{"group": "apps", "operation": "update", "resource": "deployments"}, etcdSecondsKey, etcdCountKey},
}

// timeKey returns which of the keys a sample adds to.
func timeKey(m metricSample) (string, bool) {
	for _, k := range timedKeys {
		key := k.seconds
		if m.name == k.metric+"_count" {
			key = k.count
		} else if m.name != k.metric+"_sum" {
			continue
		}
		labels := parseLabels(m.labels)
		for name, want := range k.labels {
			if labels[name] != want {
				return "", false
			}
		}
		return key, true
	}
	return "", false
}

// patchTime is the mean time of a scale patch in the apiserver, and of the
// Deployment update it makes in etcd.
type patchTime struct {
	apiserver, etcd time.Duration
}

func (p patchTime) String() string {
	return fmt.Sprintf("%s (etcd %s)", p.apiserver, p.etcd)
}

// meanPatchTime is the mean time the apiserver took for the scale patches
// counted in after but not in before, and etcd for their updates.
func meanPatchTime(before, after map[string]float64) patchTime {
	mean := func(seconds, count string) time.Duration {
		n := after[count] - before[count]
		if n <= 0 {
			return 0
		}
		return time.Duration((after[seconds] - before[seconds]) / n * float64(time.Second)).Round(100 * time.Microsecond)
	}
	return patchTime{apiserver: mean(patchSecondsKey, patchCountKey), etcd: mean(etcdSecondsKey, etcdCountKey)}
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
