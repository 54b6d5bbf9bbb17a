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

	"github.com/scaleplane/scaleplane/pkg/internal/testkit"
)

// The alerts on failed and missed firings use increase(), which sees no
// increase in a series whose first sample is already 1: every result must be
// exported before the first firing.
func TestEveryFiringResultExportedFromTheStart(t *testing.T) {
	registerMetrics()
	for _, r := range []string{resultSuccess, resultFailed, resultMissed, resultSuperseded} {
		if _, ok := testkit.MetricValue(t, "cron_scaler_firings_total", map[string]string{"result": r}); !ok {
			t.Errorf("cron_scaler_firings_total{result=%q} is not exported after registration", r)
		}
	}
}
