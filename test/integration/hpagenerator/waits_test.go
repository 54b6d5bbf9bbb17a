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
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/scaleplane/scaleplane/test/integration/framework"
)

// waitIdle waits until the generator has finished every sync it was asked
// for: each key added to its queue has been taken and done. A test that
// shows the generator did NOT act checks after this, once the syncs that
// would have acted have run, not after a fixed time. The count of finished
// syncs is read before the count of adds: equal, nothing was queued or in
// flight when the first was read, and nothing was added since.
func waitIdle(t *testing.T, m *framework.Manager) {
	t.Helper()
	var done, adds float64
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, waitTimeout, true, func(ctx context.Context) (bool, error) {
		var doneOK, addsOK bool
		var err error
		if done, doneOK, err = m.Metric("workqueue_work_duration_seconds_count", `name="hpa_generator"`); err != nil {
			return false, err
		}
		if adds, addsOK, err = m.Metric("workqueue_adds_total", `name="hpa_generator"`); err != nil {
			return false, err
		}
		return doneOK && addsOK && done == adds, nil
	})
	if err != nil {
		t.Fatalf("the hpa-generator did not finish its syncs: %v (%v keys added, %v synced)", err, adds, done)
	}
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
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, waitTimeout, true, func(ctx context.Context) (bool, error) {
		data, err := os.ReadFile(m.LogPath())
		if err != nil {
			return false, err
		}
		for _, line := range strings.Split(string(data), "\n") {
			if containsAll(line, want) {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("no line with %q in the manager's log: %v", want, err)
	}
}

func containsAll(s string, parts []string) bool {
	for _, p := range parts {
		if !strings.Contains(s, p) {
			return false
		}
	}
	return true
}

func writes(t *testing.T, m *framework.Manager) float64 {
	t.Helper()
	v, _, err := m.Metric("hpa_generator_writes_total")
	if err != nil {
		t.Fatalf("reading the manager's metrics: %v", err)
	}
	return v
}
