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
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	scaleplanev1alpha1 "github.com/scaleplane/scaleplane/pkg/apis/scaleplane/v1alpha1"
)

func TestWithinThreshold(t *testing.T) {
	for _, tc := range []struct {
		name             corev1.ResourceName
		actual, expected string
		threshold        int64
		want             bool
	}{
		// T = 5: q in [0.95, 1.05].
		{corev1.ResourceCPU, "950m", "1", 5, true},   // exactly -T%
		{corev1.ResourceCPU, "949m", "1", 5, false},  // q 0.949 truncates to 0.94
		{corev1.ResourceCPU, "1050m", "1", 5, true},  // exactly +T%
		{corev1.ResourceCPU, "1059m", "1", 5, true},  // q 1.059 truncates to 1.05
		{corev1.ResourceCPU, "1060m", "1", 5, false}, // just outside
		// T = 0: only q = 1.00 after truncation.
		{corev1.ResourceCPU, "1", "1", 0, true},
		{corev1.ResourceCPU, "1001m", "1", 0, true}, // 1.001 truncates to 1.00
		{corev1.ResourceCPU, "999m", "1", 0, false}, // 0.999 truncates to 0.99
		{corev1.ResourceMemory, "100Mi", "104Mi", 5, true},
		{corev1.ResourceMemory, "98Mi", "104Mi", 5, false}, // 0.942
		// Expected 0: only 0 is kept (no division by zero).
		{corev1.ResourceMemory, "0", "0", 10, true},
		{corev1.ResourceMemory, "1", "0", 100, false},
		// Actual 0, expected not: q = 0, kept only by T = 100.
		{corev1.ResourceCPU, "0", "10m", 99, false},
		{corev1.ResourceCPU, "0", "10m", 100, true},
		// Values where 100 × actual overflows int64.
		{corev1.ResourceMemory, "100Pi", "100Pi", 0, true},
	} {
		got := withinThreshold(tc.name, resource.MustParse(tc.actual), resource.MustParse(tc.expected), tc.threshold)
		if got != tc.want {
			t.Errorf("%s %s vs %s, T=%d%%: within = %v; want %v", tc.name, tc.actual, tc.expected, tc.threshold, got, tc.want)
		}
	}
}

func expected(pairs ...string) corev1.ResourceList { return resources(pairs...).Requests }

func TestDecide(t *testing.T) {
	base := resolve(&addonResizer("a", withThreshold(5)).Spec)
	noLimits := resolve(&addonResizer("a", withThreshold(5), withSetLimits(false)).Spec)
	want := expected("cpu=200m", "memory=200Mi")
	for _, tc := range []struct {
		name    string
		s       settings
		current corev1.ResourceRequirements
		changed []corev1.ResourceName
		dir     scaleplanev1alpha1.ResizeDirection
	}{
		{"within the band", base, resources("cpu=195m", "memory=205Mi", "limit:cpu=200m", "limit:memory=200Mi"), nil, ""},
		{"nothing set", base, resources(), []corev1.ResourceName{"cpu", "memory"}, scaleplanev1alpha1.ResizeUp},
		{"limit missing", base, resources("cpu=200m", "memory=200Mi", "limit:cpu=200m"), []corev1.ResourceName{"memory"}, scaleplanev1alpha1.ResizeUp},
		{"limit out of the band", base, resources("cpu=200m", "memory=200Mi", "limit:cpu=200m", "limit:memory=1Gi"), []corev1.ResourceName{"memory"}, scaleplanev1alpha1.ResizeDown},
		{"cut only", base, resources("cpu=400m", "memory=200Mi", "limit:cpu=400m", "limit:memory=200Mi"), []corev1.ResourceName{"cpu"}, scaleplanev1alpha1.ResizeDown},
		{"one raise makes it Up", base, resources("cpu=400m", "memory=100Mi", "limit:cpu=400m", "limit:memory=100Mi"), []corev1.ResourceName{"cpu", "memory"}, scaleplanev1alpha1.ResizeUp},
		{"setLimits false ignores limits", noLimits, resources("cpu=200m", "memory=200Mi", "limit:memory=1Gi"), nil, ""},
		{"setLimits false, request missing", noLimits, resources("cpu=200m"), []corev1.ResourceName{"memory"}, scaleplanev1alpha1.ResizeUp},
		{"unmanaged resources are not looked at", base, resources("cpu=200m", "memory=200Mi", "limit:cpu=200m", "limit:memory=200Mi", "nvidia.com/gpu=1", "limit:nvidia.com/gpu=1", "ephemeral-storage=1Gi"), nil, ""},
	} {
		got := decide(tc.current, want, tc.s)
		var names []corev1.ResourceName
		for _, c := range got.changes {
			names = append(names, c.name)
			if c.to.Cmp(want[c.name]) != 0 {
				w := want[c.name]
				t.Errorf("%s: %s set to %s; want the estimate %s", tc.name, c.name, c.to.String(), w.String())
			}
		}
		if len(names) != len(tc.changed) {
			t.Errorf("%s: changes %v; want %v", tc.name, names, tc.changed)
			continue
		}
		for i := range names {
			if names[i] != tc.changed[i] {
				t.Errorf("%s: changes %v; want %v", tc.name, names, tc.changed)
			}
		}
		if len(names) > 0 && got.direction != tc.dir {
			t.Errorf("%s: direction %s; want %s", tc.name, got.direction, tc.dir)
		}
	}
}

func TestHold(t *testing.T) {
	now := t0.Add(500 * time.Millisecond)
	up, down := scaleplanev1alpha1.ResizeUp, scaleplanev1alpha1.ResizeDown

	// First seen: since is now, to the second.
	p, due, ok := hold(nil, up, now, time.Minute)
	if ok || !p.Since.Time.Equal(t0) || p.Direction != up || !due.Equal(t0.Add(time.Minute)) {
		t.Errorf("first seen: %+v due %v apply %v", p, due, ok)
	}
	// Same direction: since is kept; applied once the delay has passed.
	p2, _, ok := hold(p, up, t0.Add(59*time.Second), time.Minute)
	if ok || p2 != p {
		t.Errorf("same direction before the delay: %+v apply %v", p2, ok)
	}
	if _, _, ok := hold(p, up, t0.Add(time.Minute), time.Minute); !ok {
		t.Errorf("same direction at since+delay: not applied")
	}
	// Direction changed: the clock restarts.
	p3, due, ok := hold(p, down, t0.Add(2*time.Minute), time.Minute)
	if ok || p3.Direction != down || !p3.Since.Time.Equal(t0.Add(2*time.Minute)) || !due.Equal(t0.Add(3*time.Minute)) {
		t.Errorf("direction changed: %+v due %v apply %v", p3, due, ok)
	}
	// No delay: applied at once.
	if _, _, ok := hold(nil, down, now, 0); !ok {
		t.Errorf("no delay: not applied")
	}
}
