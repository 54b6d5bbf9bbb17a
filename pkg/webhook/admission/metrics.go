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
	"sync"
	"time"

	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
)

const subsystem = "scaleplane_webhook"

var (
	requests = metrics.NewCounterVec(&metrics.CounterOpts{
		Subsystem:      subsystem,
		Name:           "admission_requests_total",
		Help:           "Admission requests, by kind and verdict (allowed, denied, error, bad_request).",
		StabilityLevel: metrics.ALPHA,
	}, []string{"kind", "verdict"})

	duration = metrics.NewHistogramVec(&metrics.HistogramOpts{
		Subsystem: subsystem,
		Name:      "admission_duration_seconds",
		Help:      "Time to answer an admission request, by kind and verdict.",
		// kube-apiserver gives the webhook 5 s at most; validation itself
		// takes microseconds, so the buckets start small.
		Buckets:        metrics.ExponentialBuckets(0.0001, 4, 9),
		StabilityLevel: metrics.ALPHA,
	}, []string{"kind", "verdict"})

	registerOnce sync.Once
)

// RegisterMetrics registers the webhook's metrics with the legacy registry,
// which /metrics serves. Calling it more than once is harmless.
func RegisterMetrics() {
	registerOnce.Do(func() {
		legacyregistry.MustRegister(requests, duration)
	})
}

// verdicts are the values of the verdict label.
var verdicts = []string{verdictAllowed, verdictDenied, verdictError, verdictBadRequest}

// exportKind registers the metrics and exports every verdict of kind from
// the start, at zero: an alert on rate() or increase() sees no increase in a
// series whose first sample is already 1, so the first error after a start
// would page no one, and a dashboard would show no line for a kind until its
// first request.
func exportKind(kind string) {
	RegisterMetrics()
	for _, v := range verdicts {
		requests.WithLabelValues(kind, v).Add(0)
		duration.WithLabelValues(kind, v)
	}
}

func observe(kind, verdict string, start time.Time) {
	requests.WithLabelValues(kind, verdict).Inc()
	duration.WithLabelValues(kind, verdict).Observe(time.Since(start).Seconds())
}
