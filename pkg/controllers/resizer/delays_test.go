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

func TestScaleUpDelay(t *testing.T) {
	h := newHarness(t, addonResizer("ar", withDelays(5*time.Minute, time.Hour)),
		deployment(addonName, resources("cpu=150m", "memory=150Mi", "limit:cpu=150m", "limit:memory=150Mi")))
	h.setNodes(10)
	if d := h.syncAt(t0, "ar"); d != 5*time.Minute {
		t.Errorf("requeue after %v; want the delay, 5m", d)
	}
	ar := h.get("ar")
	if p := ar.Status.PendingResize; p == nil || p.Direction != scaleplanev1alpha1.ResizeUp || !p.Since.Time.Equal(t0) {
		t.Errorf("pendingResize %+v; want Up since %v", p, t0)
	}
	c := h.condition("ar", scaleplanev1alpha1.ConditionUpToDate)
	if c == nil || c.Status != metav1.ConditionFalse || c.Reason != reasonPostponed || !strings.Contains(c.Message, "until 2024-05-01T09:05:00Z") {
		t.Errorf("UpToDate %+v; want Postponed until 09:05", c)
	}
	_, status := h.writes()
	if d := h.syncAt(t0.Add(4*time.Minute), "ar"); d != time.Minute {
		t.Errorf("requeue after %v; want the rest of the delay, 1m", d)
	}
	if target, s := h.writes(); target != 0 || s != status {
		t.Errorf("while postponed: %d target writes, %d more status writes", target, s-status)
	}
	h.syncAt(t0.Add(5*time.Minute), "ar")
	if target, _ := h.writes(); target != 1 {
		t.Fatalf("%d target writes after the delay; want 1", target)
	}
	mustQuantity(t, h.deploymentResources(addonName).Requests, corev1.ResourceCPU, "200m")
	if p := h.get("ar").Status.PendingResize; p != nil {
		t.Errorf("pendingResize %+v after the resize", p)
	}
	h.expectEvents("Normal Resized")
}

func TestScaleDownDelay(t *testing.T) {
	h := newHarness(t, addonResizer("ar", withDelays(0, 10*time.Minute)),
		deployment(addonName, resources("cpu=300m", "memory=300Mi", "limit:cpu=300m", "limit:memory=300Mi")))
	h.setNodes(10)
	if d := h.syncAt(t0, "ar"); d != 10*time.Minute {
		t.Errorf("requeue after %v; want 10m", d)
	}
	if p := h.get("ar").Status.PendingResize; p == nil || p.Direction != scaleplanev1alpha1.ResizeDown {
		t.Errorf("pendingResize %+v; want Down", p)
	}
	// Back within the band before the delay: the pending cut is dropped.
	h.setNodes(20)
	h.syncAt(t0.Add(3*time.Minute), "ar")
	if p := h.get("ar").Status.PendingResize; p != nil {
		t.Errorf("pendingResize %+v back within the band", p)
	}
	h.expectCondition("ar", scaleplanev1alpha1.ConditionUpToDate, metav1.ConditionTrue, reasonWithinThreshold)
	// Below again: the clock starts over.
	h.setNodes(10)
	if d := h.syncAt(t0.Add(4*time.Minute), "ar"); d != 10*time.Minute {
		t.Errorf("requeue after %v; want a fresh 10m", d)
	}
	h.syncAt(t0.Add(13*time.Minute), "ar")
	if target, _ := h.writes(); target != 0 {
		t.Errorf("cut applied before its delay")
	}
	h.syncAt(t0.Add(14*time.Minute), "ar")
	if target, _ := h.writes(); target != 1 {
		t.Errorf("cut not applied after its delay")
	}
	mustQuantity(t, h.deploymentResources(addonName).Limits, corev1.ResourceMemory, "200Mi")
}

// A raise that turns into a cut restarts the clock with the other delay.
func TestDirectionChangeResetsPending(t *testing.T) {
	h := newHarness(t, addonResizer("ar", withDelays(5*time.Minute, 5*time.Minute)),
		deployment(addonName, resources("cpu=200m", "memory=200Mi", "limit:cpu=200m", "limit:memory=200Mi")))
	h.setNodes(20)
	h.syncAt(t0, "ar")
	h.setNodes(5)
	h.syncAt(t0.Add(4*time.Minute), "ar")
	p := h.get("ar").Status.PendingResize
	if p == nil || p.Direction != scaleplanev1alpha1.ResizeDown || !p.Since.Time.Equal(t0.Add(4*time.Minute)) {
		t.Errorf("pendingResize %+v; want Down since 09:04", p)
	}
	h.syncAt(t0.Add(6*time.Minute), "ar")
	if target, _ := h.writes(); target != 0 {
		t.Errorf("applied on the old direction's clock")
	}
}

// pendingResize is in status: a new process applies the change at since +
// delay, not at its own start + delay.
func TestDelaySurvivesRestart(t *testing.T) {
	h := newHarness(t, addonResizer("ar", withDelays(5*time.Minute, 0)),
		deployment(addonName, resources("cpu=100m", "memory=100Mi", "limit:cpu=100m", "limit:memory=100Mi")))
	h.setNodes(10)
	h.syncAt(t0, "ar")
	h.expectCondition("ar", scaleplanev1alpha1.ConditionUpToDate, metav1.ConditionFalse, reasonPostponed)

	h.newController() // restart at 09:03
	if d := h.syncAt(t0.Add(3*time.Minute), "ar"); d != 2*time.Minute {
		t.Errorf("after a restart: requeue after %v; want 2m (since + delay)", d)
	}
	if p := h.get("ar").Status.PendingResize; p == nil || !p.Since.Time.Equal(t0) {
		t.Errorf("pendingResize %+v; want since kept at %v", p, t0)
	}
	h.syncAt(t0.Add(5*time.Minute), "ar")
	if target, _ := h.writes(); target != 1 {
		t.Errorf("%d target writes at since + delay; want 1", target)
	}
}

// A cluster that moves back and forth across a bucket edge, with a
// scale-up delay, does not flap the add-on.
func TestOscillationAcrossBucketEdge(t *testing.T) {
	// The estimate at bucket 1369: cpu 100m + 13690m, memory 100Mi + 13690Mi.
	h := newHarness(t, addonResizer("ar", withExponential(16), withDelays(10*time.Minute, 10*time.Minute)),
		deployment(addonName, resources("cpu=13790m", "memory=13790Mi", "limit:cpu=13790m", "limit:memory=13790Mi")))
	for i := range 30 {
		h.setNodes(1369 + i%2) // 1369 → bucket 1369; 1370 → bucket 2053
		h.syncAt(t0.Add(time.Duration(i)*time.Minute), "ar")
	}
	if target, _ := h.writes(); target != 0 {
		t.Errorf("%d target writes while oscillating; want 0", target)
	}
	h.expectEvents()
	// Staying above for the whole delay does resize, to bucket 2053.
	h.setNodes(1370)
	for i := 30; i <= 40; i++ {
		h.syncAt(t0.Add(time.Duration(i)*time.Minute), "ar")
	}
	if target, _ := h.writes(); target != 1 {
		t.Errorf("%d target writes after staying above; want 1", target)
	}
	mustQuantity(t, h.deploymentResources(addonName).Requests, corev1.ResourceCPU, "20630m")
}
