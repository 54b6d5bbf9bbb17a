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
	writes = metrics.NewCounterVec(&metrics.CounterOpts{
		Subsystem:      metricsSubsystem,
		Name:           "writes_total",
		Help:           "Successful writes of HorizontalPodAutoscalers by verb: create, update (a policy change or a repaired drift) or delete. A steady state makes none.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"verb"})
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
		legacyregistry.MustRegister(managedHPAs, writes, conflicts)
	})
}
