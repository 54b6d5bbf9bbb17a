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
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	scaleplanev1alpha1 "github.com/scaleplane/scaleplane/pkg/apis/scaleplane/v1alpha1"
	"github.com/scaleplane/scaleplane/pkg/resizeestimate"
)

// estimatedUnits returns the cluster size the estimate is computed for: the
// size itself (Linear), or the size rounded up to its bucket (Exponential).
func estimatedUnits(s settings, size int64) int64 {
	if s.estimator == scaleplanev1alpha1.ExponentialEstimator {
		return bucket(size, s.minClusterSize)
	}
	return size
}

// estimate returns base + extraPerUnit × units for every managed resource,
// each with its own extraPerUnit (Addon Resizer used memory's for storage),
// within its minAllowed and maxAllowed.
func estimate(resources []scaleplanev1alpha1.ResourceScaling, units int64) corev1.ResourceList {
	out, _ := boundedEstimate(resources, units)
	return out
}

// boundedEstimate is estimate, and the resources a bound holds, in spec
// order: the bounds apply after the estimate (and the Exponential
// estimator's bucket, already in units) and before the threshold decides.
func boundedEstimate(resources []scaleplanev1alpha1.ResourceScaling, units int64) (corev1.ResourceList, []boundHit) {
	out := make(corev1.ResourceList, len(resources))
	var hits []boundHit
	for _, r := range resources {
		b := resizeestimate.Estimate(r, units)
		out[r.Name] = b.Value
		if b.Bound != resizeestimate.Unbounded {
			hits = append(hits, boundHit{name: r.Name, Bounded: b})
		}
	}
	return out, hits
}

// boundHit is a resource whose estimate a bound holds.
type boundHit struct {
	name corev1.ResourceName
	resizeestimate.Bounded
}

// hasBounds tells whether any resource has minAllowed or maxAllowed.
func hasBounds(resources []scaleplanev1alpha1.ResourceScaling) bool {
	for _, r := range resources {
		if r.MinAllowed != nil || r.MaxAllowed != nil {
			return true
		}
	}
	return false
}

// The arithmetic lives in pkg/resizeestimate, which kubectl-scaleplane's
// explain shares; these names keep the resizer's code as it reads.
func bucket(size, minClusterSize int64) int64 { return resizeestimate.Bucket(size, minClusterSize) }

func linear(r scaleplanev1alpha1.ResourceScaling, units int64) resource.Quantity {
	return resizeestimate.Linear(r, units)
}
