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
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	scaleplanev1alpha1 "github.com/scaleplane/scaleplane/pkg/apis/scaleplane/v1alpha1"
	"github.com/scaleplane/scaleplane/pkg/resizeestimate"
)

// defaultMinClusterSize is the first bucket of the Exponential estimator
// when the spec does not say, as Addon Resizer's --minClusterSize.
const defaultMinClusterSize = resizeestimate.DefaultMinClusterSize

// settings is an AddonResizer's spec with its defaults applied. The CRD
// defaults these fields on admission; applying them again here keeps the
// controller right for objects written by clients that skipped the schema
// (and for the tests).
type settings struct {
	target    scaleplanev1alpha1.TargetReference
	container string
	resources []scaleplanev1alpha1.ResourceScaling
	mode      scaleplanev1alpha1.ScalingMode
	// source is where the size is counted from (countSource), which is
	// not always the spec's.
	source         scaleplanev1alpha1.SizeSource
	estimator      scaleplanev1alpha1.EstimatorType
	minClusterSize int64
	threshold      int64
	upDelay        time.Duration
	downDelay      time.Duration
	setLimits      bool
}

func resolve(spec *scaleplanev1alpha1.AddonResizerSpec) settings {
	s := settings{
		target:         spec.TargetRef,
		container:      spec.ContainerName,
		resources:      spec.Resources,
		mode:           modeOf(spec),
		source:         countSource(spec),
		estimator:      spec.Estimator.Type,
		minClusterSize: int64(spec.Estimator.MinClusterSize),
		threshold:      int64(min(max(spec.Threshold, 0), 100)),
		setLimits:      ptr.Deref(spec.SetLimits, true),
	}
	if s.estimator == "" {
		s.estimator = scaleplanev1alpha1.LinearEstimator
	}
	if s.minClusterSize < 1 {
		s.minClusterSize = defaultMinClusterSize
	}
	if spec.ScaleUpDelay != nil {
		s.upDelay = max(spec.ScaleUpDelay.Duration, 0)
	}
	if spec.ScaleDownDelay != nil {
		s.downDelay = max(spec.ScaleDownDelay.Duration, 0)
	}
	return s
}

func modeOf(spec *scaleplanev1alpha1.AddonResizerSpec) scaleplanev1alpha1.ScalingMode {
	if spec.ScalingMode == "" {
		return scaleplanev1alpha1.NodeProportional
	}
	return spec.ScalingMode
}

func sourceOf(spec *scaleplanev1alpha1.AddonResizerSpec) scaleplanev1alpha1.SizeSource {
	if spec.Source == "" {
		return scaleplanev1alpha1.SourceAPIServer
	}
	return spec.Source
}

// countSource is where the cluster size of an AddonResizer really comes
// from. Nodes are always counted from the API server's Node objects, also
// with source Metrics: metrics-server lists a node only once it has scraped
// it twice, so one missed kubelet scrape drops the node from NodeMetrics
// and, near a bucket edge, cuts the add-on by a third until the next scrape
// raises it again (two rollouts of metrics-server itself, for nothing).
// Addon Resizer 1.8's --use-metrics did not count NodeMetrics either: it
// read the API server's own count of Node objects (etcd_object_counts on
// kube-apiserver's /metrics). Containers do come from PodMetrics with source
// Metrics (KEP-5546), held across a scrape gap (metricsSource).
func countSource(spec *scaleplanev1alpha1.AddonResizerSpec) scaleplanev1alpha1.SizeSource {
	if modeOf(spec) == scaleplanev1alpha1.NodeProportional {
		return scaleplanev1alpha1.SourceAPIServer
	}
	return sourceOf(spec)
}

// delay returns how long a change in direction dir must wait.
func (s settings) delay(dir scaleplanev1alpha1.ResizeDirection) time.Duration {
	if dir == scaleplanev1alpha1.ResizeUp {
		return s.upDelay
	}
	return s.downDelay
}

// managed returns the names of the managed resources, in spec order.
func (s settings) managed() []corev1.ResourceName {
	names := make([]corev1.ResourceName, 0, len(s.resources))
	for _, r := range s.resources {
		names = append(names, r.Name)
	}
	return names
}

// unit names one unit of cluster size, for messages.
func (s settings) unit() string {
	if s.mode == scaleplanev1alpha1.ContainerProportional {
		return "containers"
	}
	return "nodes"
}
