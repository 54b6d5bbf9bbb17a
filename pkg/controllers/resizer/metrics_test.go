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

package resizer

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/scaleplane/scaleplane/pkg/internal/testkit"
)

// metricValue reads a series from the registry /metrics serves; ok is
// false when there is no such series.
func metricValue(t *testing.T, name string, labels map[string]string) (value float64, ok bool) {
	t.Helper()
	return testkit.MetricValue(t, name, labels)
}

func TestMetrics(t *testing.T) {
	h := newHarness(t, addonResizer("metrics-ar"), deployment(addonName, resources()))
	h.setNodes(7)
	counters := []struct {
		name   string
		labels map[string]string
		before float64
	}{
		{"resizer_decisions_total", map[string]string{"outcome": outcomeResized}, 0},
		{"resizer_decisions_total", map[string]string{"outcome": outcomeWithinThreshold}, 0},
		{"resizer_writes_total", map[string]string{"kind": writeTarget}, 0},
		{"resizer_writes_total", map[string]string{"kind": writeStatus}, 0},
	}
	for i := range counters {
		counters[i].before, _ = metricValue(t, counters[i].name, counters[i].labels)
	}

	h.syncAt(t0, "metrics-ar")        // resized: a target and a status write
	h.syncAt(t0.Add(1), "metrics-ar") // within the threshold: no write

	if v, ok := metricValue(t, "resizer_cluster_size", map[string]string{"namespace": ns, "name": "metrics-ar"}); !ok || v != 7 {
		t.Errorf("resizer_cluster_size = %v, %v; want 7", v, ok)
	}
	for _, c := range counters {
		if v, _ := metricValue(t, c.name, c.labels); v-c.before != 1 {
			t.Errorf("%s%v went up by %v; want 1", c.name, c.labels, v-c.before)
		}
	}

	// A deleted AddonResizer's series goes.
	h.check(h.client.ScaleplaneV1alpha1().AddonResizers(ns).Delete(h.ctx, "metrics-ar", metav1.DeleteOptions{}))
	h.refresh()
	h.syncAt(t0.Add(2), "metrics-ar")
	if _, ok := metricValue(t, "resizer_cluster_size", map[string]string{"name": "metrics-ar"}); ok {
		t.Errorf("resizer_cluster_size still has a series for the deleted AddonResizer")
	}
}

// The alert on resizer errors uses increase(), which sees no increase in a
// series whose first sample is already 1: every outcome must be exported
// before the first sync.
func TestEveryDecisionOutcomeExportedFromTheStart(t *testing.T) {
	registerMetrics()
	for _, o := range []string{outcomeResized, outcomeWithinThreshold, outcomePostponed, outcomeError} {
		if _, ok := testkit.MetricValue(t, "resizer_decisions_total", map[string]string{"outcome": o}); !ok {
			t.Errorf("resizer_decisions_total{outcome=%q} is not exported after registration", o)
		}
	}
}
