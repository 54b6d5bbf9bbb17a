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

package reliability

import (
	"context"
	"regexp"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	autoscalingv1alpha1 "github.com/scaleplane/scaleplane/pkg/apis/autoscaling/v1alpha1"
	"github.com/scaleplane/scaleplane/test/integration/framework"
	"github.com/scaleplane/scaleplane/test/reliability/internal/recorder"
)

// waitForSlots waits until every slot of every rule up to lastSlot is in
// its status, or timeout, and returns the CronFederatedHPAs.
func waitForSlots(ctx context.Context, t *testing.T, cp *framework.ControlPlane, ns string, created, lastSlot time.Time, timeout time.Duration) []autoscalingv1alpha1.CronFederatedHPA {
	deadline := time.Now().Add(timeout)
	for {
		list, err := cp.Client().AutoscalingV1alpha1().CronFederatedHPAs(ns).List(ctx, metav1.ListOptions{})
		if err == nil {
			complete := true
			for _, c := range list.Items {
				for _, h := range c.Status.ExecutionHistories {
					for _, s := range slotsOf(h.RuleName, c.CreationTimestamp.Time, lastSlot) {
						if len(recordsCovering(h, s)) == 0 {
							complete = false
						}
					}
				}
				if len(c.Status.ExecutionHistories) < 2 {
					complete = false
				}
			}
			if complete || time.Now().After(deadline) {
				return list.Items
			}
		}
		time.Sleep(time.Second)
	}
}

// slotsOf are the scheduled times of rule "even" or "odd" after created, up
// to and including last.
func slotsOf(rule string, created, last time.Time) []time.Time {
	parity := 0
	if rule == "odd" {
		parity = 1
	}
	var slots []time.Time
	for s := created.Truncate(time.Minute).Add(time.Minute); !s.After(last); s = s.Add(time.Minute) {
		if s.Minute()%2 == parity {
			slots = append(slots, s)
		}
	}
	return slots
}

// slotOfWrite is the slot a write of replicas at t applied: the latest
// scheduled time of that value's rule at or before t.
func slotOfWrite(replicas int32, t time.Time) time.Time {
	s := t.Truncate(time.Minute)
	parity := 0
	if replicas == oddReplicas {
		parity = 1
	}
	if s.Minute()%2 != parity {
		s = s.Add(-time.Minute)
	}
	return s
}

var missedRange = regexp.MustCompile(`^missed (?:at least )?\d+ scheduled times from (\S+) to (\S+)`)

// historyRecord is one entry of a rule's status history.
type historyRecord struct {
	schedule, executed time.Time
	success            bool
	message            string
	// first is the first scheduled time a record of several missed ones
	// covers (the controller records a run of missed times once).
	first time.Time
}

func records(h autoscalingv1alpha1.ExecutionHistory) []historyRecord {
	var out []historyRecord
	for _, s := range h.SuccessfulExecutions {
		out = append(out, historyRecord{schedule: s.ScheduleTime.Time, first: s.ScheduleTime.Time, executed: s.ExecutionTime.Time, success: true})
	}
	for _, f := range h.FailedExecutions {
		r := historyRecord{schedule: f.ScheduleTime.Time, first: f.ScheduleTime.Time, executed: f.ExecutionTime.Time, message: f.Message}
		if m := missedRange.FindStringSubmatch(f.Message); m != nil {
			if first, err := time.Parse(time.RFC3339, m[1]); err == nil {
				r.first = first
			}
		}
		out = append(out, r)
	}
	return out
}

func recordsCovering(h autoscalingv1alpha1.ExecutionHistory, slot time.Time) []historyRecord {
	var out []historyRecord
	for _, r := range records(h) {
		if !slot.Before(r.first) && !slot.After(r.schedule) {
			out = append(out, r)
		}
	}
	return out
}

// waitWatchCaughtUp waits until the watch of writes has seen every
// Deployment of ns as the apiserver has it now.
func waitWatchCaughtUp(ctx context.Context, t *testing.T, kube kubernetes.Interface, ns string, writes *recorder.WriteLog) {
	t.Helper()
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		list, err := kube.AppsV1().Deployments(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, nil
		}
		return writes.CaughtUp(list.Items), nil
	})
	if err != nil {
		t.Errorf("the test's watch did not catch up with the targets: %v", err)
	}
}
