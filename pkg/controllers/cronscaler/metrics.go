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
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"

	autoscalingv1alpha1 "github.com/scaleplane/scaleplane/pkg/apis/autoscaling/v1alpha1"
)

const metricsSubsystem = "cron_scaler"

// Results of a firing, the values of the result label.
const (
	resultSuccess    = "success"
	resultFailed     = "failed"
	resultMissed     = "missed"
	resultSuperseded = "superseded"
)

// Outcomes of a firing at its target, the values of the outcome label of
// target_firings_total: whether the firing reached its target, and if not,
// why. applied and already_applied reached it; the others did not.
const (
	// outcomeApplied: this process wrote the target and the write was
	// answered with success.
	outcomeApplied = "applied"
	// outcomeAlreadyApplied: a firing inherited from the manager before
	// (it died between the target write and the status write) that the
	// target's managedFields show applied; recorded, not written again.
	outcomeAlreadyApplied = "already_applied"
	// outcomeNotReapplied: another manager changed the firing's field since
	// its slot (kubectl edit, a GitOps tool) after an attempt whose answer
	// was lost, or before this process inherited the firing; applying it
	// could undo that change, so it is kept and the firing is not applied.
	outcomeNotReapplied = "not_reapplied"
	// outcomeFailed: refused for good (missing, forbidden, a rule that does
	// not fit the kind) or retried until its deadline.
	outcomeFailed = "failed"
	// outcomeSuperseded: a later firing set the same field instead.
	outcomeSuperseded = "superseded"
	// outcomeMissed: found too late to run.
	outcomeMissed = "missed"
)

var targetOutcomes = []string{outcomeApplied, outcomeAlreadyApplied, outcomeNotReapplied, outcomeFailed, outcomeSuperseded, outcomeMissed}

// Target kinds, the values of the kind label: the kinds the cron-scaler is
// used with by name, and kindOther for any other resource with a scale
// subresource (or a scaleTargetRef that does not parse). Neither objects nor
// a cluster's custom resources add series: 100,000 CronFederatedHPAs are
// still 7 kinds.
const kindOther = "Other"

var targetKinds = []schema.GroupKind{
	{Group: "apps", Kind: "Deployment"},
	{Group: "apps", Kind: "StatefulSet"},
	{Group: "apps", Kind: "ReplicaSet"},
	{Group: leaderWorkerSetGroup, Kind: leaderWorkerSetKind},
	{Group: autoscalingv1alpha1.GroupName, Kind: "FederatedHPA"},
	{Group: "autoscaling", Kind: "HorizontalPodAutoscaler"},
}

// kindLabel is the kind label of a scaleTargetRef.
func kindLabel(ref autoscalingv2.CrossVersionObjectReference) string {
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	if err != nil {
		return kindOther
	}
	for _, gk := range targetKinds {
		if gk.Group == gv.Group && gk.Kind == ref.Kind {
			return gk.Kind
		}
	}
	return kindOther
}

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
	targetFirings = metrics.NewCounterVec(&metrics.CounterOpts{
		Subsystem:      metricsSubsystem,
		Name:           "target_firings_total",
		Help:           "Firings of CronFederatedHPA rules by the kind of their target (Deployment, StatefulSet, ReplicaSet, LeaderWorkerSet, FederatedHPA, HorizontalPodAutoscaler, Other) and whether they reached it: applied, already_applied (inherited, found applied), not_reapplied (another manager changed the field since; kept), failed, superseded or missed.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"kind", "outcome"})
	// targetWriteLag is firingSkew plus the write itself: the time from the
	// slot to the apiserver's answer to the target write, which includes
	// the client's rate limiter and flow control in a burst.
	targetWriteLag = metrics.NewHistogramVec(&metrics.HistogramOpts{
		Subsystem:      metricsSubsystem,
		Name:           "target_write_lag_seconds",
		Help:           "Time from a rule's scheduled time to the successful answer of the write that applied it to its target, by the target's kind. Firings found applied by a previous manager are not observed.",
		Buckets:        []float64{0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60, 300, 900, 3600},
		StabilityLevel: metrics.ALPHA,
	}, []string{"kind"})
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
		legacyregistry.MustRegister(firingSkew, firings, missedFirings, watchedObjects, watchedRules, schemaFieldStored, droppedEvents, unrecordedStatuses, foreignStatusWrites, autoscalerConflicts, targetFirings, targetWriteLag)
		// Every result is exported from the start, at zero: an alert on
		// increase() sees no increase in a series whose first sample is
		// already 1, so the first failed or missed firing would page no one.
		for _, r := range []string{resultSuccess, resultFailed, resultMissed, resultSuperseded} {
			firings.WithLabelValues(r).Add(0)
		}
		for _, k := range append(kindLabels(), kindOther) {
			for _, o := range targetOutcomes {
				targetFirings.WithLabelValues(k, o).Add(0)
			}
			targetWriteLag.WithLabelValues(k)
		}
	})
}

func kindLabels() []string {
	var out []string
	for _, gk := range targetKinds {
		out = append(out, gk.Kind)
	}
	return out
}

// countFiring counts a firing of obj's rule by result and by its target's
// kind and outcome.
func countFiring(obj *autoscalingv1alpha1.CronFederatedHPA, result, outcome string) {
	firings.WithLabelValues(result).Inc()
	targetFirings.WithLabelValues(kindLabel(obj.Spec.ScaleTargetRef), outcome).Inc()
}

// countFailure counts a firing recorded as failed or superseded with the
// event reason it got: NotReapplied is a failure that another manager's
// change caused, and says so in the outcome.
func countFailure(obj *autoscalingv1alpha1.CronFederatedHPA, result, reason string) {
	outcome := outcomeFailed
	switch {
	case reason == reasonNotReapplied:
		outcome = outcomeNotReapplied
	case result == resultSuperseded:
		outcome = outcomeSuperseded
	}
	countFiring(obj, result, outcome)
}

// observeTargetWrite records the lag of a confirmed target write: answered
// at written, for the slot scheduled.
func observeTargetWrite(obj *autoscalingv1alpha1.CronFederatedHPA, scheduled, written time.Time) {
	targetWriteLag.WithLabelValues(kindLabel(obj.Spec.ScaleTargetRef)).Observe(written.Sub(scheduled).Seconds())
}
