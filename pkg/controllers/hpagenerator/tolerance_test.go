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

package hpagenerator

import (
	"testing"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	"k8s.io/utils/ptr"
)

// An API server that drops behavior's tolerance (HPAConfigurableTolerance
// off) stores the HPA without it: the generator compares with what the
// server keeps, so it writes once, not on every sync, and says once that the
// field is not honoured — issue 18, item 5.
func TestToleranceDroppedByTheServer(t *testing.T) {
	p := policy(nil, 8, cpuMetric(70))
	p.Behavior = &autoscalingv2.HorizontalPodAutoscalerBehavior{
		ScaleUp: &autoscalingv2.HPAScalingRules{Tolerance: ptr.To(resourceQuantity("0.05"))},
	}
	for _, tc := range []struct {
		name  string
		setup func(h *harness)
	}{
		{name: "learned at create", setup: func(h *harness) {}},
		{name: "learned at the first update after a restart", setup: func(h *harness) {
			// An HPA stored by that server before this process started.
			hpa := stored(desiredHPA(h.getLWS("web")))
			hpa.Spec.Behavior.ScaleUp.Tolerance = nil
			hpa.UID, hpa.ResourceVersion = "uid-hpa", "5"
			recordManager(hpa, fieldManager)
			if err := h.kube.Tracker().Add(hpa); err != nil {
				t.Fatal(err)
			}
			h.refresh()
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, lws("web", p.DeepCopy()), lws("api", p.DeepCopy()))
			h.server.dropTolerance = true
			tc.setup(h)
			h.sync("web")
			h.kube.ClearActions()
			h.expectEvent("Warning HPAToleranceIgnored", "tolerance")
			for range 3 {
				h.sync("web")
			}
			h.expectWrites()
			h.expectNoEvents()

			// Another LeaderWorkerSet with a tolerance is told too, once.
			h.sync("api")
			h.kube.ClearActions()
			h.expectEvent("Warning HPAToleranceIgnored")
			h.sync("api")
			h.expectWrites()
			h.expectNoEvents()
		})
	}
}
