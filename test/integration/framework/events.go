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
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
)

// WaitForEvent waits up to timeout for an event with reason on the named
// object in ns whose message contains text (any message if text is empty),
// and fails the test with the events seen if none comes.
func (cp *ControlPlane) WaitForEvent(t testing.TB, ns, object, reason, text string, timeout time.Duration) {
	t.Helper()
	var seen []string
	err := wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		events, err := cp.KubeClient().CoreV1().Events(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		seen = seen[:0]
		for _, e := range events.Items {
			seen = append(seen, e.Reason+": "+e.Message)
			if e.InvolvedObject.Name == object && e.Reason == reason && strings.Contains(e.Message, text) {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("no %s event on %s mentioning %q; events:\n%s", reason, object, text, strings.Join(seen, "\n"))
	}
}
