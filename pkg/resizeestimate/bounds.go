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

package resizeestimate

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	scaleplanev1alpha1 "github.com/scaleplane/scaleplane/pkg/apis/scaleplane/v1alpha1"
)

// BoundKind names the bound that holds an estimate.
type BoundKind string

// The bounds of a resource, named as its fields.
const (
	// Unbounded: the estimate is within minAllowed and maxAllowed (or the
	// resource has neither).
	Unbounded BoundKind = ""
	// MinAllowed raised the estimate.
	MinAllowed BoundKind = "minAllowed"
	// MaxAllowed capped the estimate.
	MaxAllowed BoundKind = "maxAllowed"
)

// Bounded is a resource's estimate within its bounds.
type Bounded struct {
	// Value is what the resource is set to: the estimate, raised to
	// minAllowed or capped at maxAllowed.
	Value resource.Quantity
	// Estimate is the estimate before the bounds (Linear's, rounded).
	Estimate resource.Quantity
	// Bound says which bound holds it, if one does; Limit is its value.
	Bound BoundKind
	Limit resource.Quantity
}

// Estimate is Linear within r's bounds: base + extraPerUnit × units,
// rounded up, then raised to minAllowed or capped at maxAllowed, as the
// Vertical Pod Autoscaler's recommender bounds its recommendation with a
// container policy's minAllowed and maxAllowed. units is already the
// Exponential estimator's bucket, so the bounds come after it; the
// threshold decides after the bounds, against the bounded value.
func Estimate(r scaleplanev1alpha1.ResourceScaling, units int64) Bounded {
	return Bound(r, Linear(r, units))
}

// Bound applies r's minAllowed and maxAllowed to estimate. A bound finer
// than the estimate's precision (ScaleOf: whole millicores for cpu, whole
// units otherwise; the webhook refuses such bounds) is taken at that
// precision, inward: minAllowed rounded up, maxAllowed down, so the value
// is always within both.
func Bound(r scaleplanev1alpha1.ResourceScaling, estimate resource.Quantity) Bounded {
	b := Bounded{Value: estimate.DeepCopy(), Estimate: estimate.DeepCopy()}
	if r.MinAllowed != nil {
		lo := r.MinAllowed.DeepCopy()
		lo.RoundUp(ScaleOf(r.Name))
		if b.Value.Cmp(lo) < 0 {
			b.Value, b.Bound, b.Limit = lo.DeepCopy(), MinAllowed, r.MinAllowed.DeepCopy()
		}
	}
	if r.MaxAllowed != nil {
		hi := roundDown(r.Name, *r.MaxAllowed)
		// A maxAllowed below minAllowed (refused at admission) wins, as it
		// does in the VPA: the ceiling is never exceeded.
		if b.Value.Cmp(hi) > 0 {
			b.Value, b.Bound, b.Limit = hi, MaxAllowed, r.MaxAllowed.DeepCopy()
		}
	}
	return b
}

// roundDown returns q at the precision of name's estimates, rounded down.
func roundDown(name corev1.ResourceName, q resource.Quantity) resource.Quantity {
	up := q.DeepCopy()
	up.RoundUp(ScaleOf(name))
	if up.Cmp(q) == 0 {
		return up
	}
	v := ScaledValue(name, q) - 1
	return *resource.NewScaledQuantity(v, ScaleOf(name))
}

// Describe says how a bound holds an estimate, for conditions and
// messages: "cpu estimate 2500m capped at maxAllowed 2"; empty when none
// does.
func (b Bounded) Describe(name string) string {
	if how := b.How(); how != "" {
		return fmt.Sprintf("%s estimate %s %s", name, b.Estimate.String(), how)
	}
	return ""
}

// How says what the bound that holds the estimate did: "capped at
// maxAllowed 2", "raised to minAllowed 300m"; empty when none does.
func (b Bounded) How() string {
	switch b.Bound {
	case MinAllowed:
		return "raised to minAllowed " + b.Limit.String()
	case MaxAllowed:
		return "capped at maxAllowed " + b.Limit.String()
	}
	return ""
}

// Precise reports whether q is a whole number of name's estimate units
// (millicores for cpu, units otherwise): a bound must be, as estimates are
// rounded to them.
func Precise(name corev1.ResourceName, q resource.Quantity) bool {
	up := q.DeepCopy()
	up.RoundUp(ScaleOf(name))
	return up.Cmp(q) == 0
}
