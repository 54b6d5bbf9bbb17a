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

	"github.com/scaleplane/scaleplane/test/integration/framework"
)

// waitIdle waits until the generator has finished every sync it was asked
// for (see framework.Manager.WaitQueueIdle).
func waitIdle(t *testing.T, m *framework.Manager) {
	t.Helper()
	m.WaitQueueIdle(t, waitTimeout, "hpa_generator")
}

// queueAdds is how many keys the generator's queue has taken in.
func queueAdds(t *testing.T, m *framework.Manager) float64 {
	t.Helper()
	v, ok, err := m.Metric("workqueue_adds_total", `name="hpa_generator"`)
	if err != nil || !ok {
		t.Fatalf("reading the generator's queue adds: found %v, %v", ok, err)
	}
	return v
}

// waitLog waits for a line of the manager's log that holds every one of
// want.
func waitLog(t *testing.T, m *framework.Manager, want ...string) {
	t.Helper()
	m.WaitLog(t, waitTimeout, want...)
}

func writes(t *testing.T, m *framework.Manager) float64 {
	t.Helper()
	v, _, err := m.Metric("hpa_generator_writes_total")
	if err != nil {
		t.Fatalf("reading the manager's metrics: %v", err)
	}
	return v
}
