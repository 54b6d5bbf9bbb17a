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

// Package benchutil holds the measurement helpers that the benchmark
// programs under test/bench share: reading the Prometheus text exposition
// of the controller manager's and the apiserver's /metrics, reading a
// process's CPU time and memory and the machine's load from /proc, and
// formatting what they measured.
package benchutil

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"

	"k8s.io/client-go/kubernetes"
)

// Sample is one line of a Prometheus text exposition.
type Sample struct {
	// Labels maps each label name of the line to its value; it is empty,
	// not nil, for a line without labels.
	Labels map[string]string
	// Value is the line's value.
	Value float64
}

// ParseSamples returns the samples of the metric name in text, the
// Prometheus text exposition format (for a histogram, ask for name_sum or
// name_count). Lines of other metrics, whose names merely start with name,
// are skipped, as are comments.
func ParseSamples(text, name string) ([]Sample, error) {
	var out []Sample
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
		out = append(out, Sample{Labels: labels, Value: v})
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

// SumBy sums the samples by the value of key(labels); samples for which
// key returns "" are skipped.
func SumBy(samples []Sample, key func(map[string]string) string) map[string]float64 {
	out := map[string]float64{}
	for _, s := range samples {
		if k := key(s.Labels); k != "" {
			out[k] += s.Value
		}
	}
	return out
}

// ByLabel returns a key for SumBy that groups the samples by the value of
// the label name (samples without it are skipped).
func ByLabel(name string) func(map[string]string) string {
	return func(l map[string]string) string { return l[name] }
}

// ScrapeManager reads the controller manager's /metrics on 127.0.0.1:port.
func ScrapeManager(ctx context.Context, port int) (string, error) {
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

// ScrapeAPIServer reads kube-apiserver's /metrics (a GET of a non-resource
// path: it counts as no request in apiserver_request_total).
func ScrapeAPIServer(ctx context.Context, kube kubernetes.Interface) (string, error) {
	raw, err := kube.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return "", fmt.Errorf("reading the apiserver's metrics: %w", err)
	}
	return string(raw), nil
}
