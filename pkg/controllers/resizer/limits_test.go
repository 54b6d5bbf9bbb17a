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
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	scaleplanev1alpha1 "github.com/scaleplane/scaleplane/pkg/apis/scaleplane/v1alpha1"
)

func TestSetLimitsFalseLeavesLimits(t *testing.T) {
	h := newHarness(t, addonResizer("ar", withSetLimits(false)),
		deployment(addonName, resources("cpu=100m", "memory=100Mi", "limit:memory=1Gi")))
	h.setNodes(10)
	h.syncAt(t0, "ar")
	p := decodePatch(t, h.patches()[0])
	if l := p.Spec.Template.Spec.Containers[0].Resources.Limits; l != nil {
		t.Errorf("patch sets limits %v", l)
	}
	got := h.deploymentResources(addonName)
	mustQuantity(t, got.Requests, corev1.ResourceCPU, "200m")
	mustQuantity(t, got.Requests, corev1.ResourceMemory, "200Mi")
	mustQuantity(t, got.Limits, corev1.ResourceMemory, "1Gi")
	if _, ok := got.Limits[corev1.ResourceCPU]; ok || len(got.Limits) != 1 {
		t.Errorf("limits %v; want memory 1Gi only", got.Limits)
	}
	if r := h.get("ar").Status.Recommendation; r == nil || r.Limits != nil {
		t.Errorf("recommendation %+v; want requests only", r)
	}
}

func TestUnmanagedResourcesKept(t *testing.T) {
	h := newHarness(t, addonResizer("ar"),
		deployment(addonName, resources("cpu=100m", "ephemeral-storage=1Gi", "nvidia.com/gpu=1", "limit:nvidia.com/gpu=1", "limit:ephemeral-storage=2Gi")))
	h.setNodes(10)
	h.syncAt(t0, "ar")
	p := decodePatch(t, h.patches()[0])
	res := p.Spec.Template.Spec.Containers[0].Resources
	if len(res.Requests) != 2 || len(res.Limits) != 2 {
		t.Errorf("patch %+v; want cpu and memory only", res)
	}
	got := h.deploymentResources(addonName)
	mustQuantity(t, got.Requests, corev1.ResourceCPU, "200m")
	mustQuantity(t, got.Requests, corev1.ResourceEphemeralStorage, "1Gi")
	mustQuantity(t, got.Requests, "nvidia.com/gpu", "1")
	mustQuantity(t, got.Limits, "nvidia.com/gpu", "1")
	mustQuantity(t, got.Limits, corev1.ResourceEphemeralStorage, "2Gi")
	mustQuantity(t, got.Limits, corev1.ResourceMemory, "200Mi")
	d, _ := h.kube.AppsV1().Deployments(ns).Get(h.ctx, addonName, metav1.GetOptions{})
	if sidecar := d.Spec.Template.Spec.Containers[0]; sidecar.Name != "sidecar" || len(sidecar.Resources.Requests) != 1 || len(sidecar.Resources.Limits) != 0 {
		t.Errorf("sidecar changed: %+v", sidecar)
	}
}

// A container with limits but no requests runs with requests equal to its
// limits (Kubernetes defaults them so): an estimate below them is a cut,
// held back by scaleDownDelay, not a raise applied at once — issue 18,
// item 9.
func TestLimitWithoutRequestIsTheRequest(t *testing.T) {
	for _, setLimits := range []bool{true, false} {
		t.Run(fmt.Sprintf("setLimits %v", setLimits), func(t *testing.T) {
			h := newHarness(t, addonResizer("ar", withDelays(0, 10*time.Minute), withSetLimits(setLimits)),
				deployment(addonName, resources("limit:cpu=300m", "limit:memory=300Mi")))
			h.setNodes(10) // The estimate: cpu 200m, memory 200Mi.
			if d := h.syncAt(t0, "ar"); d != 10*time.Minute {
				t.Errorf("requeue after %v; want scaleDownDelay, 10m", d)
			}
			if target, _ := h.writes(); target != 0 {
				t.Fatalf("%d target writes; want the cut held back", target)
			}
			if p := h.get("ar").Status.PendingResize; p == nil || p.Direction != scaleplanev1alpha1.ResizeDown {
				t.Errorf("pendingResize %+v; want Down", p)
			}
			h.syncAt(t0.Add(10*time.Minute), "ar")
			if target, _ := h.writes(); target != 1 {
				t.Fatalf("%d target writes after scaleDownDelay; want 1", target)
			}
			mustQuantity(t, h.deploymentResources(addonName).Requests, corev1.ResourceCPU, "200m")
		})
	}
}

// With setLimits false the limits are the user's, and the API server
// rejects a request above its limit: an estimate above the limit sizes the
// request to the limit, and the AddonResizer says so in UpToDate
// (CappedAtLimit) and a Warning event, once — issue 18, item 6.
func TestSetLimitsFalseCapsAtTheLimit(t *testing.T) {
	h := newHarness(t, addonResizer("ar", withSetLimits(false)),
		deployment(addonName, resources("cpu=100m", "memory=100Mi", "limit:cpu=150m")))
	h.setNodes(10) // The estimate: cpu 200m, memory 200Mi.
	h.syncAt(t0, "ar")
	got := h.deploymentResources(addonName)
	mustQuantity(t, got.Requests, corev1.ResourceCPU, "150m")
	mustQuantity(t, got.Requests, corev1.ResourceMemory, "200Mi")
	mustQuantity(t, got.Limits, corev1.ResourceCPU, "150m")
	h.expectCondition("ar", scaleplanev1alpha1.ConditionUpToDate, metav1.ConditionFalse, reasonCappedAtLimit)
	if c := h.condition("ar", scaleplanev1alpha1.ConditionUpToDate); c == nil || !strings.Contains(c.Message, "cpu estimate 200m, limit 150m") {
		t.Errorf("UpToDate %+v; want it to name the estimate and the limit", c)
	}
	h.expectEvents("Normal Resized", "Warning CappedAtLimit")
	if r := h.get("ar").Status.Recommendation; r == nil {
		t.Error("no recommendation")
	} else {
		mustQuantity(t, r.Requests, corev1.ResourceCPU, "200m")
	}

	// Steady: no write, no more events.
	h.kube.ClearActions()
	h.syncAt(t0.Add(time.Minute), "ar")
	if target, _ := h.writes(); target != 0 {
		t.Errorf("%d target writes while capped", target)
	}
	h.expectEvents()

	// The user raises the limit: the request follows the estimate.
	d, err := h.kube.AppsV1().Deployments(ns).Get(h.ctx, addonName, metav1.GetOptions{})
	h.check(err)
	containerOf(t, &d.Spec.Template).Resources.Limits[corev1.ResourceCPU] = resource.MustParse("1")
	d.Generation++
	_, err = h.kube.AppsV1().Deployments(ns).Update(h.ctx, d, metav1.UpdateOptions{})
	h.check(err)
	h.refresh()
	h.syncAt(t0.Add(2*time.Minute), "ar")
	mustQuantity(t, h.deploymentResources(addonName).Requests, corev1.ResourceCPU, "200m")
	h.expectCondition("ar", scaleplanev1alpha1.ConditionUpToDate, metav1.ConditionTrue, reasonResized)
}
