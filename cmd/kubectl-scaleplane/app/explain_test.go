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

package app

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/scaleplane/scaleplane/pkg/resizeestimate"
)

// TestBandAgreesWithTheResizer: the band explain prints is exactly the set
// of values the resizer keeps (resizeestimate.WithinThreshold): its edges are
// in, one unit beyond each edge is out.
func TestBandAgreesWithTheResizer(t *testing.T) {
	for _, c := range []struct {
		name      corev1.ResourceName
		estimate  string
		threshold int64
	}{
		{corev1.ResourceCPU, "52m", 10}, {corev1.ResourceCPU, "1", 0}, {corev1.ResourceCPU, "7m", 33},
		{corev1.ResourceMemory, "88Mi", 10}, {corev1.ResourceMemory, "1001", 5}, {corev1.ResourceMemory, "3Gi", 100},
	} {
		e := resource.MustParse(c.estimate)
		lo, hi := band(c.name, e, c.threshold)
		unit := resource.MustParse("1")
		if c.name == corev1.ResourceCPU {
			unit = resource.MustParse("1m")
		}
		loQ, hiQ := resource.MustParse(lo), resource.MustParse(hi)
		below, above := loQ.DeepCopy(), hiQ.DeepCopy()
		below.Sub(unit)
		above.Add(unit)
		for _, v := range []struct {
			q    resource.Quantity
			want bool
		}{{loQ, true}, {hiQ, true}, {below, false}, {above, false}} {
			if v.q.Sign() < 0 {
				continue // no resource is negative
			}
			if got := resizeestimate.WithinThreshold(c.name, v.q, e, c.threshold); got != v.want {
				t.Errorf("%s %s ±%d%%: band %s..%s, but WithinThreshold(%s) = %v", c.name, c.estimate, c.threshold, lo, hi, v.q.String(), got)
			}
		}
	}
}
