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

	"github.com/scaleplane/scaleplane/pkg/internal/testkit"
)

// The alert on conflicts uses increase(), which sees no increase in a series
// whose first sample is already 1: both kinds must be exported before the
// first conflict.
func TestConflictKindsExportedFromTheStart(t *testing.T) {
	registerMetrics()
	for _, k := range []string{conflictName, conflictTarget} {
		if _, ok := testkit.MetricValue(t, "hpa_generator_conflicts_total", map[string]string{"kind": k}); !ok {
			t.Errorf("hpa_generator_conflicts_total{kind=%q} is not exported after registration", k)
		}
	}
}
