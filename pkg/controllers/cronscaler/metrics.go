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

package cronscaler

import (
	"sync"

	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
)

const metricsSubsystem = "cron_scaler"

// Results of a firing, the values of the result label.
const (
	resultSuccess    = "success"
	resultFailed     = "failed"
	resultMissed     = "missed"
	resultSuperseded = "superseded"
)

var (
	// firingSkew is how late a firing was executed: execution time minus the
	// scheduled time. The requeue-after delay aims at +10 ms.
	firingSkew = metrics.NewHistogram(&metrics.HistogramOpts{
		Subsystem:      metricsSubsystem,
		Name:           "firing_skew_seconds",
		Help:           "Time between a rule's scheduled time and its execution (applied or failed).",
		Buckets:        []float64{0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60, 300, 900, 3600},
		StabilityLevel: metrics.ALPHA,
	})
	firings = metrics.NewCounterVec(&metrics.CounterOpts{
		Subsystem:      metricsSubsystem,
		Name:           "firings_total",
		Help:           "Firings of CronFederatedHPA rules by result: success, failed, missed (too late to run) or superseded (a later firing set the same target field).",
		StabilityLevel: metrics.ALPHA,
	}, []string{"result"})
	missedFirings = metrics.NewCounter(&metrics.CounterOpts{
		Subsystem:      metricsSubsystem,
		Name:           "missed_firings_total",
		Help:           "Scheduled times that were not run because they were found too late (controller down, or beyond maxDelaySeconds). One firing found late may count many missed scheduled times.",
		StabilityLevel: metrics.ALPHA,
	})
	watchedObjects = metrics.NewGauge(&metrics.GaugeOpts{
		Subsystem:      metricsSubsystem,
		Name:           "watched_objects",
		Help:           "CronFederatedHPAs the cron-scaler watches.",
		StabilityLevel: metrics.ALPHA,
	})
	watchedRules = metrics.NewGauge(&metrics.GaugeOpts{
		Subsystem:      metricsSubsystem,
		Name:           "watched_rules",
		Help:           "Rules of the CronFederatedHPAs the cron-scaler watches.",
		StabilityLevel: metrics.ALPHA,
	})
	droppedEvents = metrics.NewCounter(&metrics.CounterOpts{
		Subsystem:      metricsSubsystem,
		Name:           "dropped_normal_events_total",
		Help:           "Normal events (Scaled) not emitted because more came than the cron-scaler's event rate allows, so that events do not crowd out target writes in a burst. Warning events are never dropped by the cron-scaler; status records every firing.",
		StabilityLevel: metrics.ALPHA,
	})
	unrecordedStatuses = metrics.NewCounter(&metrics.CounterOpts{
		Subsystem:      metricsSubsystem,
		Name:           "unrecorded_statuses_total",
		Help:           "Status writes of CronFederatedHPAs whose firings were applied to their targets but could not be recorded before the controller stopped (the drain timeout passed). The next leader finds these firings unrecorded; see the log line naming the object and rules.",
		StabilityLevel: metrics.ALPHA,
	})
	foreignStatusWrites = metrics.NewCounterVec(&metrics.CounterOpts{
		Subsystem:      metricsSubsystem,
		Name:           "foreign_status_writes_total",
		Help:           "Changes of CronFederatedHPA status that this cron-scaler did not make, by the field manager that made them (karmada-controller-manager: Karmada's own cron controller is on again). Two cron controllers apply every slot twice.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"manager"})
	autoscalerConflicts = metrics.NewGauge(&metrics.GaugeOpts{
		Subsystem:      metricsSubsystem,
		Name:           "autoscaler_conflicts",
		Help:           "CronFederatedHPAs whose last firing set the replicas of a workload that an HPA or FederatedHPA also scales: the autoscaler undoes it at its next sync. Target the autoscaler's bounds instead.",
		StabilityLevel: metrics.ALPHA,
	})
	schemaFieldStored = metrics.NewGaugeVec(&metrics.GaugeOpts{
		Subsystem:      metricsSubsystem,
		Name:           "crd_schema_field_stored",
		Help:           "1 if the installed CronFederatedHPA CRD stores the field that scaleplane adds to Karmada's API (maxDelaySeconds, lastScheduleTime), 0 if the apiserver prunes it (Karmada's own CRD) or the CRD could not be read.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"field"})
)

var registerOnce sync.Once

// registerMetrics registers the cron-scaler's metrics with the legacy
// registry served on /metrics. Calling it again is harmless.
func registerMetrics() {
	registerOnce.Do(func() {
		legacyregistry.MustRegister(firingSkew, firings, missedFirings, watchedObjects, watchedRules, schemaFieldStored, droppedEvents, unrecordedStatuses, foreignStatusWrites, autoscalerConflicts)
		// Every result is exported from the start, at zero: an alert on
		// increase() sees no increase in a series whose first sample is
		// already 1, so the first failed or missed firing would page no one.
		for _, r := range []string{resultSuccess, resultFailed, resultMissed, resultSuperseded} {
			firings.WithLabelValues(r).Add(0)
		}
	})
}
