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
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	scaleplanev1alpha1 "github.com/scaleplane/scaleplane/pkg/apis/scaleplane/v1alpha1"
)

// The bucket sequence from 16 is Addon Resizer's: int(float64(b) * 1.5).
func TestBucketSequence(t *testing.T) {
	for _, tc := range []struct {
		min  int64
		want []int64
	}{
		{16, []int64{16, 24, 36, 54, 81, 121, 181, 271, 406, 609, 913, 1369, 2053, 3079}},
		// 1 × 1.5 truncates to 1: the next bucket is one more.
		{1, []int64{1, 2, 3, 4, 6, 9, 13, 19, 28}},
		{2, []int64{2, 3, 4, 6, 9}},
	} {
		var got []int64
		for b := bucket(0, tc.min); len(got) < len(tc.want); b = bucket(b+1, tc.min) {
			got = append(got, b)
		}
		for i := range tc.want {
			if got[i] != tc.want[i] {
				t.Errorf("minClusterSize %d: buckets %v; want %v", tc.min, got, tc.want)
				break
			}
		}
	}
}

func TestBucketEdges(t *testing.T) {
	for _, tc := range []struct {
		size, min, want int64
	}{
		{0, 16, 16}, // below minClusterSize: the first bucket, as Addon Resizer
		{1, 16, 16},
		{16, 16, 16},
		{17, 16, 24},
		{1368, 16, 1369},
		{1369, 16, 1369},
		{1370, 16, 2053},
		{0, 1, 1},
		{5, 1, 6},
		{7, 0, 9}, // a minClusterSize below 1 starts at 1
	} {
		if got := bucket(tc.size, tc.min); got != tc.want {
			t.Errorf("bucket(%d, %d) = %d; want %d", tc.size, tc.min, got, tc.want)
		}
	}
}

func TestEstimatedUnits(t *testing.T) {
	exp := resolve(&addonResizer("a", withExponential(16)).Spec)
	lin := resolve(&addonResizer("a").Spec)
	if got := estimatedUnits(exp, 1370); got != 2053 {
		t.Errorf("exponential units for 1370 = %d; want 2053", got)
	}
	if got := estimatedUnits(lin, 1370); got != 1370 {
		t.Errorf("linear units for 1370 = %d; want 1370", got)
	}
	// MinClusterSize defaults to 16 when unset.
	def := resolve(&addonResizer("a", withExponential(0)).Spec)
	if got := estimatedUnits(def, 3); got != 16 {
		t.Errorf("exponential units with the default minClusterSize = %d; want 16", got)
	}
}

func scaling(name corev1.ResourceName, base, extra string) scaleplanev1alpha1.ResourceScaling {
	return scaleplanev1alpha1.ResourceScaling{Name: name, Base: resource.MustParse(base), ExtraPerUnit: resource.MustParse(extra)}
}

func TestLinear(t *testing.T) {
	for _, tc := range []struct {
		name  string
		r     scaleplanev1alpha1.ResourceScaling
		units int64
		want  string
	}{
		{"Addon Resizer's metrics-server config, cpu", scaling(corev1.ResourceCPU, "40m", "0.5m"), 16, "48m"},
		{"Addon Resizer's metrics-server config, memory", scaling(corev1.ResourceMemory, "40Mi", "4Mi"), 16, "104Mi"},
		{"cpu rounds up once, at the end", scaling(corev1.ResourceCPU, "40m", "0.5m"), 3, "42m"},
		{"cpu below a millicore rounds up", scaling(corev1.ResourceCPU, "0", "0.1m"), 1, "1m"},
		{"memory rounds up to a byte", scaling(corev1.ResourceMemory, "0", "0.5"), 3, "2"},
		{"storage uses its own extraPerUnit", scaling(corev1.ResourceEphemeralStorage, "1Gi", "1Mi"), 100, "1124Mi"},
		{"zero estimate", scaling(corev1.ResourceMemory, "0", "0"), 5000, "0"},
		{"zero size", scaling(corev1.ResourceCPU, "100m", "10m"), 0, "100m"},
		{"whole cpus", scaling(corev1.ResourceCPU, "1", "250m"), 4, "2"},
	} {
		got := linear(tc.r, tc.units)
		if want := resource.MustParse(tc.want); got.Cmp(want) != 0 {
			t.Errorf("%s: %s + %s × %d = %s; want %s", tc.name, tc.r.Base.String(), tc.r.ExtraPerUnit.String(), tc.units, got.String(), tc.want)
		}
	}
	// Past int64 the arithmetic goes on exactly. (ParseQuantity caps at
	// int64, so compare strings.)
	if got := linear(scaling(corev1.ResourceMemory, "0", "4Ei"), 300000); got.String() != "1200000Ei" {
		t.Errorf("4Ei × 300000 = %s; want 1200000Ei", got.String())
	}
	// The base and extra of the spec are not changed by estimating.
	r := scaling(corev1.ResourceCPU, "40m", "0.5m")
	linear(r, 1000)
	if r.Base.String() != "40m" || r.ExtraPerUnit.String() != "500u" {
		t.Errorf("spec quantities changed: %s, %s", r.Base.String(), r.ExtraPerUnit.String())
	}
}

func TestEstimateEveryResource(t *testing.T) {
	got := estimate([]scaleplanev1alpha1.ResourceScaling{
		scaling(corev1.ResourceCPU, "40m", "0.5m"),
		scaling(corev1.ResourceMemory, "40Mi", "4Mi"),
		scaling(corev1.ResourceEphemeralStorage, "100Mi", "1Mi"),
	}, 24)
	mustQuantity(t, got, corev1.ResourceCPU, "52m")
	mustQuantity(t, got, corev1.ResourceMemory, "136Mi")
	mustQuantity(t, got, corev1.ResourceEphemeralStorage, "124Mi")
}
