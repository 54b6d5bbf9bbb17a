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

package hpagenerator

import (
	"sync"

	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
)

const metricsSubsystem = "hpa_generator"

// Verbs of the writes counter.
const (
	verbCreate = "create"
	verbUpdate = "update"
	verbDelete = "delete"
)

// Kinds of the conflicts counter.
const (
	// conflictName: an HPA of the LeaderWorkerSet's name that it does not
	// control.
	conflictName = "name"
	// conflictTarget: another HPA already scales the LeaderWorkerSet.
	conflictTarget = "target"
)

var (
	managedHPAs = metrics.NewGauge(&metrics.GaugeOpts{
		Subsystem:      metricsSubsystem,
		Name:           "managed_hpas",
		Help:           "HorizontalPodAutoscalers controlled by a LeaderWorkerSet, as seen in the informer cache.",
		StabilityLevel: metrics.ALPHA,
	})
	managedFederatedHPAs = metrics.NewGauge(&metrics.GaugeOpts{
		Subsystem:      metricsSubsystem,
		Name:           "managed_federatedhpas",
		Help:           "FederatedHPAs controlled by a LeaderWorkerSet, as seen in the informer cache (0 where FederatedHPAs are not served).",
		StabilityLevel: metrics.ALPHA,
	})
	writes = metrics.NewCounterVec(&metrics.CounterOpts{
		Subsystem:      metricsSubsystem,
		Name:           "writes_total",
		Help:           "Successful writes of autoscalers by verb: create, update (a policy change or a repaired drift) or delete, and kind: HorizontalPodAutoscaler or FederatedHPA. A steady state makes none.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"verb", "kind"})
	refusals = metrics.NewCounterVec(&metrics.CounterOpts{
		Subsystem:      metricsSubsystem,
		Name:           "refusals_total",
		Help:           "Scale policies the output kind cannot carry, by kind: refused before writing (what Karmada's FederatedHPA refuses or cannot serve) or by the API server (invalid, or denied by an admission webhook). Each waits for a policy change.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"kind"})
	output = metrics.NewGaugeVec(&metrics.GaugeOpts{
		Subsystem:      metricsSubsystem,
		Name:           "output",
		Help:           "The kind of autoscaler the hpa-generator keeps: 1 for the kind chosen at start-up (--hpa-generator-output), 0 for the other.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"kind"})
	conflicts = metrics.NewCounterVec(&metrics.CounterOpts{
		Subsystem:      metricsSubsystem,
		Name:           "conflicts_total",
		Help:           "Syncs that left a LeaderWorkerSet's HorizontalPodAutoscaler alone because of another one, by kind: name (an HPA of its name it does not control) or target (another HPA already scales it).",
		StabilityLevel: metrics.ALPHA,
	}, []string{"kind"})
)

var registerOnce sync.Once

// registerMetrics registers the hpa-generator's metrics with the legacy
// registry served on /metrics. Calling it again is harmless.
func registerMetrics() {
	registerOnce.Do(func() {
		legacyregistry.MustRegister(managedHPAs, managedFederatedHPAs, writes, refusals, conflicts, output)
		// Both kinds are exported from the start, at zero, so that an alert
		// on increase() sees the first conflict (a series that first appears
		// at 1 shows no increase).
		for _, k := range []string{conflictName, conflictTarget} {
			conflicts.WithLabelValues(k).Add(0)
		}
	})
}

// setOutputMetric exposes the output kind.
func setOutputMetric(kind Output) {
	for _, k := range []Output{OutputHorizontalPodAutoscaler, OutputFederatedHPA} {
		v := 0.0
		if k == kind {
			v = 1
		}
		output.WithLabelValues(string(k)).Set(v)
	}
}
