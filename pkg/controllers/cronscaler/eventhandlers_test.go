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

	"k8s.io/client-go/tools/cache"

	"github.com/scaleplane/scaleplane/pkg/internal/testkit"
)

// TestWatchedGauges: the watched objects and rules gauges follow adds,
// updates that add or remove rules, and deletes seen only as tombstones,
// from the handlers alone.
func TestWatchedGauges(t *testing.T) {
	h := newHarness(t, utc("2026-11-25 07:00:00"))
	// The gauges are the process's, set from the counts of the controller
	// that changed them last: each test's controller counts from zero, and
	// one whose first event was an update or a delete (the harness's
	// initial objects are not handed to onAdd) leaves them below zero.
	// They are read after this test's controller set them, as values, not
	// as changes from whatever an earlier test left (which failed under
	// -test.shuffle on).
	gauges := func() (float64, float64) {
		objects, _ := testkit.MetricValue(t, "cron_scaler_watched_objects", nil)
		rules, _ := testkit.MetricValue(t, "cron_scaler_watched_rules", nil)
		return objects, rules
	}

	a := cron("a", rule("up", "0 8 * * *", 5), rule("down", "0 20 * * *", 1))
	a.ResourceVersion = "1"
	b := cron("b", rule("up", "0 8 * * *", 5))
	b.ResourceVersion = "1"
	h.c.onAdd(h.ctx, a)
	h.c.onAdd(h.ctx, b)
	bigger := b.DeepCopy()
	bigger.ResourceVersion = "2"
	bigger.Spec.Rules = append(bigger.Spec.Rules, rule("noon", "0 12 * * *", 3), rule("night", "0 0 * * *", 1))
	h.c.onUpdate(h.ctx, b, bigger)
	// A periodic resync hands the same object twice: nothing changes.
	h.c.onUpdate(h.ctx, bigger, bigger)
	h.c.onDelete(h.ctx, cache.DeletedFinalStateUnknown{Key: "default/a", Obj: a})

	if objects, rules := gauges(); objects != 1 || rules != 3 {
		t.Errorf("gauges at %v objects and %v rules, want 1 and 3", objects, rules)
	}
	h.c.onDelete(h.ctx, bigger)
	if objects, rules := gauges(); objects != 0 || rules != 0 {
		t.Errorf("after every delete: %v objects and %v rules, want 0 and 0", objects, rules)
	}
}
