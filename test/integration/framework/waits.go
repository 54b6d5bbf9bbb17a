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

package framework

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

// WaitObject reads an object with get until check, given what get
// returned, says nothing is wrong (""), and returns it; after timeout it
// fails the test with what check said last, which is what a failed run
// needs, not a bare "timed out". what names the object in that message.
func WaitObject[T any](t testing.TB, timeout time.Duration, what string, get func(context.Context) (T, error), check func(T, error) string) T {
	t.Helper()
	var obj T
	last := "not read yet"
	err := wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		var err error
		obj, err = get(ctx)
		last = check(obj, err)
		return last == "", nil
	})
	if err != nil {
		t.Fatalf("%s: %s", what, last)
	}
	return obj
}

// WaitLog waits until a line the process logged holds every one of want.
// A log is shared by the starts in its directory: only what follows the
// last start line counts, so p must be the last process started there. It
// fails at once, with the log's tail, if the process exited.
func (p *Process) WaitLog(t testing.TB, timeout time.Duration, want ...string) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		if p.Exited() {
			return false, fmt.Errorf("the process exited:\n%s", p.Tail(50))
		}
		data, err := os.ReadFile(p.LogPath())
		if err != nil {
			return false, err
		}
		own := string(data)
		if i := strings.LastIndex(own, startLine); i >= 0 {
			own = own[i:]
		}
		for _, line := range strings.Split(own, "\n") {
			if containsAll(line, want) {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("no line with %q in the log of %s: %v", want, p.LogPath(), err)
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

// WaitQueueIdle waits until the workqueue named queue has finished every
// key added to it: each was taken and done. A test that shows a controller
// did NOT act checks after this, once the syncs that would have acted have
// run, not after a fixed time. The count of finished keys is read before the
// count of adds: equal, nothing was queued or in flight when the first was
// read, and nothing was added since.
func (m *Manager) WaitQueueIdle(t testing.TB, timeout time.Duration, queue string) {
	t.Helper()
	var done, adds float64
	label := `name="` + queue + `"`
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		var doneOK, addsOK bool
		var err error
		if done, doneOK, err = m.Metric("workqueue_work_duration_seconds_count", label); err != nil {
			return false, err
		}
		if adds, addsOK, err = m.Metric("workqueue_adds_total", label); err != nil {
			return false, err
		}
		return doneOK && addsOK && done == adds, nil
	})
	if err != nil {
		t.Fatalf("the queue %s did not finish its keys: %v (%v keys added, %v done)", queue, err, adds, done)
	}
}
