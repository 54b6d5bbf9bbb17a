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
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	scaleplanev1alpha1 "github.com/scaleplane/scaleplane/pkg/apis/scaleplane/v1alpha1"
)

// Two AddonResizers that size the same resource of one container would undo
// each other's patch forever, each a rollout of the add-on: neither writes,
// both say so in UpToDate (AmbiguousTarget) and a Warning naming the other,
// as the HPA controller does with AmbiguousSelector. Once one goes, the
// other resizes — issue 18, item 7.
func TestTwoAddonResizersOnOneContainer(t *testing.T) {
	h := newHarness(t,
		addonResizer("a"),
		addonResizer("b", withResources(scaling(corev1.ResourceMemory, "50Mi", "20Mi"))),
		deployment(addonName, resources("cpu=100m", "memory=100Mi", "limit:cpu=100m", "limit:memory=100Mi")))
	h.setNodes(10)
	for range 2 {
		h.syncAt(t0, "a")
		h.syncAt(t0, "b")
	}
	if target, _ := h.writes(); target != 0 {
		t.Errorf("%d target writes; want none while two AddonResizers size the container", target)
	}
	for name, other := range map[string]string{"a": "b", "b": "a"} {
		h.expectCondition(name, scaleplanev1alpha1.ConditionUpToDate, metav1.ConditionFalse, reasonAmbiguousTarget)
		if c := h.condition(name, scaleplanev1alpha1.ConditionUpToDate); c == nil || !strings.Contains(c.Message, "AddonResizer "+other+" (memory)") {
			t.Errorf("%s: UpToDate %+v; want it to name %s and the shared resource", name, c, other)
		}
	}
	events := h.expectEvents("Warning AmbiguousTarget", "Warning AmbiguousTarget")
	if len(events) == 2 && (!strings.Contains(events[0], "AddonResizer b") || !strings.Contains(events[1], "AddonResizer a")) {
		t.Errorf("events %q; want each to name the other", events)
	}

	// b is deleted: its delete event enqueues a, which resizes.
	b := h.get("b")
	h.check(h.client.ScaleplaneV1alpha1().AddonResizers(ns).Delete(h.ctx, "b", metav1.DeleteOptions{}))
	h.refresh()
	h.c.onDelete(b)
	h.expectQueued("the other deleted", "a", "b")
	h.syncAt(t0.Add(time.Minute), "a")
	if target, _ := h.writes(); target != 1 {
		t.Errorf("%d target writes after the other was deleted; want 1", target)
	}
	mustQuantity(t, h.deploymentResources(addonName).Requests, corev1.ResourceCPU, "200m")
}

// AddonResizers on different resources, or different containers, of one
// workload do not meet.
func TestAddonResizersOnDifferentResourcesOfOneWorkload(t *testing.T) {
	h := newHarness(t,
		addonResizer("cpu", withResources(scaling(corev1.ResourceCPU, "100m", "10m"))),
		addonResizer("memory", withResources(scaling(corev1.ResourceMemory, "100Mi", "10Mi"))),
		addonResizer("sidecar", withContainer("sidecar")),
		deployment(addonName, resources("cpu=100m", "memory=100Mi", "limit:cpu=100m", "limit:memory=100Mi")))
	h.setNodes(10)
	for _, name := range []string{"cpu", "memory", "sidecar"} {
		h.syncAt(t0, name)
		h.expectCondition(name, scaleplanev1alpha1.ConditionUpToDate, metav1.ConditionTrue, reasonResized)
	}
	got := h.deploymentResources(addonName)
	mustQuantity(t, got.Requests, corev1.ResourceCPU, "200m")
	mustQuantity(t, got.Requests, corev1.ResourceMemory, "200Mi")
}
