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

// Package resizeestimate is the AddonResizer's arithmetic: the bucket of the
// Exponential estimator, base + extraPerUnit x units, and the threshold band.
// The resizer sizes containers with it and kubectl-scaleplane's `explain
// addonresizer` shows it, so the explanation is the controller's own
// computation.
package resizeestimate

import (
	"math"
	"math/big"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	scaleplanev1alpha1 "github.com/scaleplane/scaleplane/pkg/apis/scaleplane/v1alpha1"
)

// Bucket returns the first bucket at least size of the sequence that starts
// at minClusterSize and grows by half, truncated, as Addon Resizer computes
// it (next = int(float64(b) * 1.5)): from 16, that is 16, 24, 36, 54, 81,
// 121, ... Sizes up to minClusterSize, 0 included, get minClusterSize, as in
// Addon Resizer. Where truncation would not grow the bucket (1 × 1.5 is 1),
// the next bucket is one more, so the sequence always grows: from 1, that is
// 1, 2, 3, 4, 6, 9, 13, ...
func Bucket(size, minClusterSize int64) int64 {
	b := max(minClusterSize, 1)
	for b < size {
		if b > math.MaxInt64/3*2 {
			// Only a nonsensical size gets here; do not overflow.
			return size
		}
		// b + b/2 is floor(1.5 × b) in integers, the same as Addon Resizer's
		// float truncation for every size a cluster can have, without the
		// float.
		next := b + b/2
		if next <= b {
			next = b + 1
		}
		b = next
	}
	return b
}

// Linear computes base + extraPerUnit × units exactly in resource.Quantity
// arithmetic (which moves to arbitrary precision rather than overflow or
// round), then rounds up once, at the end: cpu to whole millicores, other
// resources to whole units (bytes). So 40m + 0.5m × 3 is 42m, where
// rounding extraPerUnit first, as Addon Resizer's MilliValue did, would give
// 43m. Zero stays zero: an estimate of 0 is valid.
func Linear(r scaleplanev1alpha1.ResourceScaling, units int64) resource.Quantity {
	e := Sum(r, units)
	e.RoundUp(ScaleOf(r.Name))
	return e
}

// Sum is base + extraPerUnit × units, exact: Linear before it rounds.
func Sum(r scaleplanev1alpha1.ResourceScaling, units int64) resource.Quantity {
	e := r.Base.DeepCopy()
	extra := r.ExtraPerUnit.DeepCopy()
	extra.Mul(units)
	e.Add(extra)
	return e
}

// ScaleOf is the precision a resource is estimated and compared at.
func ScaleOf(name corev1.ResourceName) resource.Scale {
	if name == corev1.ResourceCPU {
		return resource.Milli
	}
	return 0
}

// ScaledValue returns q in the units of ScaleOf(name), rounded up:
// millicores for cpu, bytes otherwise.
func ScaledValue(name corev1.ResourceName, q resource.Quantity) int64 {
	if name == corev1.ResourceCPU {
		return q.MilliValue()
	}
	return q.Value()
}

// WithinThreshold is Addon Resizer's band: q = actual / expected, truncated
// to two decimals, must satisfy (100 - T)% <= q <= (100 + T)%. In integers:
// floor(100 × actual / expected) within [100 - T, 100 + T], with actual and
// expected in millicores (cpu) or bytes. An expected 0, where Addon Resizer
// divided by zero, keeps only an actual 0.
func WithinThreshold(name corev1.ResourceName, actual, expected resource.Quantity, threshold int64) bool {
	a, e := ScaledValue(name, actual), ScaledValue(name, expected)
	if e == 0 {
		return a == 0
	}
	// big.Int: 100 × a overflows int64 above 92 PB.
	q := new(big.Int).Mul(big.NewInt(a), big.NewInt(100))
	q.Quo(q, big.NewInt(e))
	return q.Cmp(big.NewInt(100-threshold)) >= 0 && q.Cmp(big.NewInt(100+threshold)) <= 0
}

// DefaultMinClusterSize is the first bucket of the Exponential estimator when
// the spec does not say, as Addon Resizer's --minClusterSize.
const DefaultMinClusterSize = 16
