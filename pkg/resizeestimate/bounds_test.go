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
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	scaleplanev1alpha1 "github.com/scaleplane/scaleplane/pkg/apis/scaleplane/v1alpha1"
)

// TestBound: the estimate is raised to minAllowed or capped at maxAllowed;
// a bound finer than the estimate's precision is taken inward, so the
// value is within both; a max below the min wins, as in the VPA.
func TestBound(t *testing.T) {
	q := func(s string) *resource.Quantity {
		if s == "" {
			return nil
		}
		v := resource.MustParse(s)
		return &v
	}
	for _, tc := range []struct {
		name             corev1.ResourceName
		estimate, lo, hi string
		want             string
		bound            BoundKind
		describe         string
	}{
		{corev1.ResourceCPU, "110m", "300m", "500m", "300m", MinAllowed, "cpu estimate 110m raised to minAllowed 300m"},
		{corev1.ResourceCPU, "2500m", "", "2", "2", MaxAllowed, "cpu estimate 2500m capped at maxAllowed 2"},
		{corev1.ResourceCPU, "400m", "300m", "500m", "400m", Unbounded, ""},
		{corev1.ResourceCPU, "500m", "300m", "500m", "500m", Unbounded, ""},
		{corev1.ResourceCPU, "0", "500u", "", "1m", MinAllowed, "cpu estimate 0 raised to minAllowed 500u"},
		{corev1.ResourceCPU, "10m", "", "2500u", "2m", MaxAllowed, "cpu estimate 10m capped at maxAllowed 2500u"},
		{corev1.ResourceMemory, "3Gi", "1Gi", "2Gi", "2Gi", MaxAllowed, "memory estimate 3Gi capped at maxAllowed 2Gi"},
		{corev1.ResourceMemory, "100", "", "1.5", "1", MaxAllowed, "memory estimate 100 capped at maxAllowed 1500m"},
		{corev1.ResourceMemory, "1Mi", "2Gi", "1Gi", "1Gi", MaxAllowed, "memory estimate 1Mi capped at maxAllowed 1Gi"},
	} {
		r := scaleplanev1alpha1.ResourceScaling{Name: tc.name, MinAllowed: q(tc.lo), MaxAllowed: q(tc.hi)}
		b := Bound(r, resource.MustParse(tc.estimate))
		if b.Value.Cmp(resource.MustParse(tc.want)) != 0 || b.Bound != tc.bound || b.Describe(string(tc.name)) != tc.describe {
			t.Errorf("%s %s within %q..%q = %s %q %q; want %s %q %q", tc.name, tc.estimate, tc.lo, tc.hi, b.Value.String(), b.Bound, b.Describe(string(tc.name)), tc.want, tc.bound, tc.describe)
		}
	}
	if !Precise(corev1.ResourceCPU, resource.MustParse("1m")) || Precise(corev1.ResourceCPU, resource.MustParse("0.5m")) || Precise(corev1.ResourceMemory, resource.MustParse("0.5")) {
		t.Error("Precise")
	}
}
