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
	"maps"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"

	scaleplanev1alpha1 "github.com/scaleplane/scaleplane/pkg/apis/scaleplane/v1alpha1"
)

const metricsSubsystem = "resizer"

// Outcomes of a sync, the values of the outcome label, as Addon Resizer's
// addon_resizer_execution_outcome.
const (
	outcomeResized         = "resized"
	outcomeWithinThreshold = "within_threshold"
	outcomePostponed       = "postponed"
	outcomeError           = "error"
	// outcomeRecommended is a sync of an AddonResizer with updateMode Off:
	// the size was computed and shown, nothing written.
	outcomeRecommended = "recommended"
)

// Kinds of writes, the values of the kind label.
const (
	writeTarget = "target"
	writeStatus = "status"
	// writePodResize is a patch of a pod's resize subresource (updateMode
	// InPlace).
	writePodResize = "pod_resize"
)

var (
	// clusterSizeGauge has one series per AddonResizer: the size it was
	// sized by, which differs between AddonResizers of the same mode because
	// each excludes its own target's pods.
	clusterSizeGauge = metrics.NewGaugeVec(&metrics.GaugeOpts{
		Subsystem:      metricsSubsystem,
		Name:           "cluster_size",
		Help:           "Cluster size an AddonResizer last observed, in nodes (NodeProportional) or containers (ContainerProportional).",
		StabilityLevel: metrics.ALPHA,
	}, []string{"namespace", "name"})
	decisions = metrics.NewCounterVec(&metrics.CounterOpts{
		Subsystem:      metricsSubsystem,
		Name:           "decisions_total",
		Help:           "Syncs of AddonResizers by outcome: resized, within_threshold, postponed (a delay holds a change back), recommended (updateMode Off: computed and shown, nothing written) or error (target, container or metrics missing, or a failed write).",
		StabilityLevel: metrics.ALPHA,
	}, []string{"outcome"})
	writes = metrics.NewCounterVec(&metrics.CounterOpts{
		Subsystem:      metricsSubsystem,
		Name:           "writes_total",
		Help:           "Writes the resizer sent to the API server, by kind: target (a patch of a workload's container), pod_resize (a pods/resize patch, updateMode InPlace) or status (of an AddonResizer), successful or not.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"kind"})
	// inPlacePods has one series per InPlace AddonResizer and state, so that
	// a kubelet's Deferred or Infeasible answer shows on a dashboard as long
	// as it lasts, not only as an event.
	inPlacePods = metrics.NewGaugeVec(&metrics.GaugeOpts{
		Subsystem:      metricsSubsystem,
		Name:           "in_place_pods",
		Help:           "Running pods of an InPlace AddonResizer's target by state: at_size, outdated (to be resized), resizing (kubelet not done), deferred and infeasible (the kubelet's PodResizePending reasons), error (PodResizeInProgress reason Error), rejected (the API server refused the resize), unreported (its kubelet reports no resources yet, so it cannot be resized), conflicted (its resizes conflicted 5 times in a row; retried with backoff), forbidden (the API server answered 403 for RBAC or a quota; retried with backoff) or node_not_ready (on a node that is not Ready; not resized until it is).",
		StabilityLevel: metrics.ALPHA,
	}, []string{"namespace", "name", "state"})
	// recommendationGauge has at most 6 series per AddonResizer on a plain
	// cluster (3 resources, request and limit), and as many per member
	// cluster in Karmada mode: the size the resizer would set, whatever the
	// update mode, so that updateMode Off can be watched beside what runs.
	recommendationGauge = metrics.NewGaugeVec(&metrics.GaugeOpts{
		Subsystem:      metricsSubsystem,
		Name:           "recommendation",
		Help:           "Request or limit (kind) an AddonResizer recommends for a resource of its container, within minAllowed and maxAllowed, in cores (cpu) or bytes (memory, ephemeral-storage): status.recommendation, or per member cluster (cluster, empty on a plain cluster) status.clusters[].recommendation. Also with updateMode Off, which writes nothing.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"namespace", "name", "cluster", "resource", "kind"})
)

var registerOnce sync.Once

// registerMetrics registers the resizer's metrics with the legacy registry
// served on /metrics. Calling it again is harmless.
func registerMetrics() {
	registerOnce.Do(func() {
		legacyregistry.MustRegister(clusterSizeGauge, decisions, writes, inPlacePods, recommendationGauge)
		// Every outcome is exported from the start, at zero: an alert on
		// increase() sees no increase in a series whose first sample is
		// already 1, so the first error would page no one.
		for _, o := range []string{outcomeResized, outcomeWithinThreshold, outcomePostponed, outcomeRecommended, outcomeError} {
			decisions.WithLabelValues(o).Add(0)
		}
	})
}

// recommendationSeries keeps the series of resizer_recommendation each
// AddonResizer has, and their values, so that a resource dropped from its
// spec, limits no longer set, or a member cluster gone lose theirs, and a
// sync that leaves the recommendation as it was touches no series.
type recommendationSeries struct {
	mu     sync.Mutex
	series map[cache.ObjectName]map[recommendationKey]float64
}

// recommendationKey is a series' labels besides namespace and name.
type recommendationKey struct{ cluster, resource, kind string }

func newRecommendationSeries() *recommendationSeries {
	return &recommendationSeries{series: map[cache.ObjectName]map[recommendationKey]float64{}}
}

// observe exports the recommendation status holds: status.recommendation
// (cluster "") and each member cluster's. Only the series that changed are
// set or deleted.
func (r *recommendationSeries) observe(key cache.ObjectName, status *scaleplanev1alpha1.AddonResizerStatus) {
	values := map[recommendationKey]float64{}
	add := func(cluster string, rec *corev1.ResourceRequirements) {
		if rec == nil {
			return
		}
		for name, q := range rec.Requests {
			values[recommendationKey{cluster, string(name), "request"}] = q.AsApproximateFloat64()
		}
		for name, q := range rec.Limits {
			values[recommendationKey{cluster, string(name), "limit"}] = q.AsApproximateFloat64()
		}
	}
	add("", status.Recommendation)
	for i := range status.Clusters {
		add(status.Clusters[i].Name, status.Clusters[i].Recommendation)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	old := r.series[key]
	if maps.Equal(old, values) {
		return
	}
	for k := range old {
		if _, ok := values[k]; !ok {
			recommendationGauge.DeleteLabelValues(key.Namespace, key.Name, k.cluster, k.resource, k.kind)
		}
	}
	for k, v := range values {
		if was, ok := old[k]; !ok || was != v {
			recommendationGauge.WithLabelValues(key.Namespace, key.Name, k.cluster, k.resource, k.kind).Set(v)
		}
	}
	if len(values) == 0 {
		delete(r.series, key)
		return
	}
	r.series[key] = values
}

// forget drops the series of a deleted AddonResizer.
func (r *recommendationSeries) forget(key cache.ObjectName) {
	r.observe(key, &scaleplanev1alpha1.AddonResizerStatus{})
}
