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

package cronscaler

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	autoscalingv1alpha1 "github.com/scaleplane/scaleplane/pkg/apis/autoscaling/v1alpha1"
)

// Issue 36, seed 10109815 of -sim.edges -sim.model: an object created and
// then retargeted while the leader's watch delivered nothing is first seen
// at the relist, which hands over only its newest version (an add; or, when
// an older object of its name was in the cache, an update whose objects
// have different UIDs). Its rule used to be planned from the object's
// creation (10:45:56): the 10:50 slot, which belonged to the old target
// (web), was applied at the relist to the new one (api). The change made
// after the creation was not watched: the rule is planned from it, as one
// made before the process started is, and the new target gets the next slot.
func TestObjectEditedBeforeItsFirstSightIsPlannedFromTheEdit(t *testing.T) {
	for _, delivery := range []string{"added", "re-created"} {
		t.Run(delivery, func(t *testing.T) {
			var objects []runtime.Object
			if delivery == "re-created" {
				// The object of that name the cache held (deleted while
				// the watch delivered nothing).
				gone := cron("c", rule("old", "0 0 * * *", 3))
				gone.UID = "uid-gone"
				objects = append(objects, gone)
			}
			h := newHarness(t, utc("2024-03-31 10:30:00"), objects...)
			h.scales.set("deployments", "web", 1)
			h.scales.set("deployments", "api", 1)
			var old *autoscalingv1alpha1.CronFederatedHPA
			if delivery == "re-created" {
				old = h.get("c")
				h.c.onAdd(h.ctx, old)
				h.syncAt(utc("2024-03-31 10:30:00"), "c")
				old = h.get("c")
				if err := h.client.AutoscalingV1alpha1().CronFederatedHPAs(ns).Delete(h.ctx, "c", metav1.DeleteOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			created := cron("c", rule("r13", "*/10 * * * *", 6))
			created.UID, created.ResourceVersion = "uid-new", "10"
			created.CreationTimestamp = metav1.NewTime(utc("2024-03-31 10:45:56"))
			touchManagedFields(&created.ObjectMeta, "kubectl-client-side-apply", "", utc("2024-03-31 10:45:56"))
			h.clock.SetTime(utc("2024-03-31 10:45:56"))
			if _, err := h.client.AutoscalingV1alpha1().CronFederatedHPAs(ns).Create(h.ctx, created, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			h.clock.SetTime(utc("2024-03-31 10:54:06"))
			stored := h.edit("c", func(c *autoscalingv1alpha1.CronFederatedHPA) { c.Spec.ScaleTargetRef.Name = "api" })
			// The relist delivers it.
			h.clock.SetTime(utc("2024-03-31 10:54:59.532"))
			if delivery == "added" {
				h.c.onAdd(h.ctx, stored)
			} else {
				h.c.onUpdate(h.ctx, old, stored)
			}
			h.syncAt(utc("2024-03-31 10:54:59.532"), "c")
			if web, api := h.scales.get("deployments", "web"), h.scales.get("deployments", "api"); web != 1 || api != 1 {
				t.Errorf("web %d, api %d; want 1 and 1: the 10:50 slot, before the retarget, ran", web, api)
			}
			hist := h.history("c", "r13")
			if len(hist.SuccessfulExecutions)+len(hist.FailedExecutions) != 0 {
				t.Errorf("history %+v; want none: 10:50 is not the plan of the retargeted object", hist)
			}
			if got := timeOf(hist.NextExecutionTime); !got.Equal(utc("2024-03-31 11:00:00")) {
				t.Errorf("next = %v; want 11:00, the first slot after the retarget", got)
			}
			h.syncAt(utc("2024-03-31 11:00:00.010"), "c")
			if got := h.scales.get("deployments", "api"); got != 6 {
				t.Errorf("api replicas = %d; want 6 from the 11:00 slot", got)
			}
		})
	}
}
