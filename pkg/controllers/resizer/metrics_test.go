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

	"github.com/scaleplane/scaleplane/pkg/internal/testkit"
)

// The alert on resizer errors uses increase(), which sees no increase in a
// series whose first sample is already 1: every outcome must be exported
// before the first sync.
func TestEveryDecisionOutcomeExportedFromTheStart(t *testing.T) {
	registerMetrics()
	for _, o := range []string{outcomeResized, outcomeWithinThreshold, outcomePostponed, outcomeError} {
		if _, ok := testkit.MetricValue(t, "resizer_decisions_total", map[string]string{"outcome": o}); !ok {
			t.Errorf("resizer_decisions_total{outcome=%q} is not exported after registration", o)
		}
	}
}
