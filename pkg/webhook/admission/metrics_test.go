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

package admission

import (
	"testing"

	"k8s.io/component-base/metrics/legacyregistry"
	"k8s.io/component-base/metrics/testutil"

	"github.com/scaleplane/scaleplane/pkg/internal/testkit"
)

// The webhook alerts use rate() over the requests by verdict, which sees no
// increase in a series whose first sample is already 1: a handler exports
// every verdict of its kind, at zero, before its first request, and
// another kind's handler adds that kind's. A kind with no handler has none.
func TestEveryVerdictExportedFromTheStart(t *testing.T) {
	NewHandler("Gadget", widgetValidator())
	for _, v := range []string{"allowed", "denied", "error", "bad_request"} {
		got, ok := testkit.MetricValue(t, "scaleplane_webhook_admission_requests_total", map[string]string{"kind": "Gadget", "verdict": v})
		if !ok || got != 0 {
			t.Errorf("scaleplane_webhook_admission_requests_total{kind=Gadget,verdict=%q} = %v (exported: %v); want 0 before any request", v, got, ok)
		}
		h, err := testutil.GetHistogramVecFromGatherer(legacyregistry.DefaultGatherer, "scaleplane_webhook_admission_duration_seconds", map[string]string{"kind": "Gadget", "verdict": v})
		if err != nil || h.GetAggregatedSampleCount() != 0 {
			t.Errorf("scaleplane_webhook_admission_duration_seconds{kind=Gadget,verdict=%q}: %v, %d samples; want exported, 0 samples", v, err, h.GetAggregatedSampleCount())
		}
	}
	if _, ok := testkit.MetricValue(t, "scaleplane_webhook_admission_requests_total", map[string]string{"kind": "NoHandler"}); ok {
		t.Error("a kind without a handler has series")
	}
}
