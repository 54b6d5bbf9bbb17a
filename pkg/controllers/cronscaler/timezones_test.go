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
	"time"

	"k8s.io/utils/ptr"
)

func TestTimeZones(t *testing.T) {
	forEachSchema(t, func(t *testing.T, crd schemaVariant) {
		r1 := rule("shanghai", "30 8 * * *", 1000)
		r1.TimeZone = ptr.To("Asia/Shanghai")
		r2 := rule("la", "0 11 * * *", 1)
		r2.TimeZone = ptr.To("America/Los_Angeles")
		h := newHarnessOn(t, crd, utc("2024-05-01 00:00:00"), cron("c", r1, r2))
		h.scales.set("deployments", "web", 1)
		d := h.syncAt(utc("2024-05-01 00:00:00"), "c")
		if want := 30*time.Minute + requeueSlack; d != want {
			t.Errorf("requeue after %v; want %v (08:30 in Shanghai is 00:30 UTC)", d, want)
		}
		h.syncAt(utc("2024-05-01 00:30:00.100"), "c")
		if h.scales.get("deployments", "web") != 1000 {
			t.Errorf("Shanghai rule did not fire at 00:30 UTC")
		}
		if got := timeOf(h.history("c", "la").NextExecutionTime); !got.Equal(utc("2024-05-01 18:00:00")) {
			t.Errorf("LA next = %v; want 18:00 UTC (11:00 PDT)", got)
		}
		h.syncAt(utc("2024-05-01 18:00:00.100"), "c")
		if h.scales.get("deployments", "web") != 1 {
			t.Errorf("LA rule did not fire")
		}
	})
}

func TestDaylightSaving(t *testing.T) {
	forEachSchema(t, func(t *testing.T, crd schemaVariant) {
		t.Run("spring forward fires once after the gap", func(t *testing.T) {
			r := rule("r", "*/30 2 * * *", 7)
			r.TimeZone = ptr.To("America/Los_Angeles")
			// 2024-03-10 01:00 PST = 09:00 UTC; 02:00 PST never comes, 03:00 PDT = 10:00 UTC.
			h := newHarnessOn(t, crd, utc("2024-03-10 09:00:00"), cron("c", r))
			h.scales.set("deployments", "web", 1)
			d := h.syncAt(utc("2024-03-10 09:00:00"), "c")
			if want := time.Hour + requeueSlack; d != want {
				t.Errorf("requeue after %v; want %v", d, want)
			}
			h.syncAt(utc("2024-03-10 10:00:00.100"), "c")
			hist := h.history("c", "r")
			if len(hist.SuccessfulExecutions) != 1 || h.scales.get("deployments", "web") != 7 {
				t.Fatalf("skipped 02:00 and 02:30 did not fire once at 03:00 PDT: %+v", hist)
			}
			h.scales.set("deployments", "web", 1)
			h.syncAt(utc("2024-03-10 10:00:01"), "c")
			if h.scales.get("deployments", "web") != 1 {
				t.Errorf("the gap fired twice")
			}
			if got := timeOf(hist.NextExecutionTime); !got.Equal(utc("2024-03-11 09:00:00")) {
				t.Errorf("next = %v; want 02:00 PDT the next day", got)
			}
		})
		t.Run("fall back fires once at the first occurrence", func(t *testing.T) {
			r := rule("r", "30 1 * * *", 7)
			r.TimeZone = ptr.To("Europe/Berlin")
			// Berlin 2024-10-27: 02:30 occurs at 00:30 UTC (CEST) and 01:30 UTC (CET).
			r.Schedule = "30 2 * * *"
			h := newHarnessOn(t, crd, utc("2024-10-27 00:00:00"), cron("c", r))
			h.scales.set("deployments", "web", 1)
			h.syncAt(utc("2024-10-27 00:00:00"), "c")
			h.syncAt(utc("2024-10-27 00:30:00.100"), "c")
			if h.scales.get("deployments", "web") != 7 {
				t.Fatalf("did not fire at the first 02:30")
			}
			h.scales.set("deployments", "web", 1)
			h.syncAt(utc("2024-10-27 01:30:00.100"), "c")
			if h.scales.get("deployments", "web") != 1 {
				t.Errorf("fired again at the second 02:30")
			}
			if got := timeOf(h.history("c", "r").NextExecutionTime); !got.Equal(utc("2024-10-28 01:30:00")) {
				t.Errorf("next = %v", got)
			}
		})
	})
}
