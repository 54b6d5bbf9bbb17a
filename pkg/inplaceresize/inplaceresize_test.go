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

package inplaceresize

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// Classify, KubeletAnswer and Size are tested where the resizer acts on them
// (pkg/controllers/resizer, podresize_test.go, inplace_sync_test.go and
// inplace_errors_test.go); these are the two pieces kubectl-scaleplane uses
// on their own.

func TestNodeNotReady(t *testing.T) {
	for _, c := range []struct {
		ready corev1.ConditionStatus
		want  bool
	}{{"", false}, {corev1.ConditionTrue, false}, {corev1.ConditionFalse, true}, {corev1.ConditionUnknown, true}} {
		if got := NodeNotReady(c.ready); got != c.want {
			t.Errorf("NodeNotReady(%q) = %v; want %v", c.ready, got, c.want)
		}
	}
}

// The held size replaces the template's managed values; with setLimits
// false the template's limit of a held request goes (each pod's own binds),
// and a resource not managed is left alone.
func TestHeldView(t *testing.T) {
	q := resource.MustParse
	template := func() corev1.ResourceRequirements {
		return corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: q("40m"), corev1.ResourceMemory: q("88Mi"), corev1.ResourceEphemeralStorage: q("1Gi")},
			Limits:   corev1.ResourceList{corev1.ResourceCPU: q("40m"), corev1.ResourceMemory: q("88Mi")},
		}
	}
	held := corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: q("52m"), corev1.ResourceMemory: q("90Mi")},
		Limits:   corev1.ResourceList{corev1.ResourceCPU: q("52m")},
	}
	managed := []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory}

	r := template()
	HeldView(&r, managed, held, true)
	want := "cpu=52m,ephemeral-storage=1Gi,memory=90Mi|cpu=52m,memory=88Mi"
	if got := ResourceListString(r.Requests) + "|" + ResourceListString(r.Limits); got != want {
		t.Errorf("setLimits true: %s; want %s", got, want)
	}
	r = template()
	HeldView(&r, managed, held, false)
	want = "cpu=52m,ephemeral-storage=1Gi,memory=90Mi|"
	if got := ResourceListString(r.Requests) + "|" + ResourceListString(r.Limits); got != want {
		t.Errorf("setLimits false: %s; want %s", got, want)
	}
}
