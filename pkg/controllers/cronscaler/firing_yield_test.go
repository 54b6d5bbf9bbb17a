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
	"context"
	"testing"

	testingclock "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	autoscalingv1alpha1 "github.com/scaleplane/scaleplane/pkg/apis/autoscaling/v1alpha1"
	"github.com/scaleplane/scaleplane/pkg/cronplan"
)

// A late firing yields a field that another rule of the same object already
// applied at a later slot, as it yields to another object's: a rule added
// while the watch delivered nothing is found due late, after another rule
// of the object set the same field at a later slot (issue 36, seed 9100732
// of -sim.edges -sim.model: r16's 08:00 applied at 08:07 over r5's 08:05).
// A firing on time, and a field the later slot did not set, are kept.
func TestLateFiringYieldsToALaterSlotOfTheSameObject(t *testing.T) {
	late := rulePlan{Plan: cronplan.Plan{Rule: &autoscalingv1alpha1.CronFederatedHPARule{Name: "r16"}, Due: utc("2024-03-31 08:00:00")}}
	applied := rulePlan{Plan: cronplan.Plan{Rule: &autoscalingv1alpha1.CronFederatedHPARule{Name: "r5"},
		History: autoscalingv1alpha1.ExecutionHistory{RuleName: "r5", SuccessfulExecutions: []autoscalingv1alpha1.SuccessfulExecution{{
			ScheduleTime: metaTime(utc("2024-03-31 08:05:00")), ExecutionTime: metaTime(utc("2024-03-31 08:05:00")), AppliedMaxReplicas: ptr.To[int32](14),
		}}}}}
	plans := []rulePlan{late, applied}
	f := &firing{plan: &plans[0], vals: values{min: ptr.To[int32](2), max: ptr.To[int32](11)}}

	yieldToOwnAppliedSlots(plans, []*firing{f}, utc("2024-03-31 08:07:06"))
	if f.vals.max != nil || f.vals.min == nil || !f.yielded.at.Equal(utc("2024-03-31 08:05:00")) {
		t.Errorf("late firing after yielding: max %v, min %v, yielded to %v; want max yielded to r5's 08:05, min kept", f.vals.max, f.vals.min, f.yielded.at)
	}

	onTime := &firing{plan: &plans[0], vals: values{max: ptr.To[int32](11)}}
	yieldToOwnAppliedSlots(plans, []*firing{onTime}, utc("2024-03-31 08:00:00.010"))
	if onTime.vals.max == nil {
		t.Error("a firing on time yielded (no later slot can have been applied)")
	}
}

// A target write is not sent once its firings' deadline has passed on the
// controller's clock, however the sync got there (a request before it that
// hung): the attempt counts as not answered, so the slot is given up as not
// reached rather than applied late (issue 36, seeds 9100648, 9101178 and
// 9101473 of -sim.edges -sim.model: an HPA's GET hung past
// maxDelaySeconds, then the update was sent).
func TestTargetWriteNotSentPastTheFiringsDeadline(t *testing.T) {
	clock := testingclock.NewFakeClock(utc("2024-11-02 22:42:59"))
	c := &Controller{clock: clock}
	ctx := withFiringDeadline(context.Background(), utc("2024-11-02 22:43:00"))
	if err := c.inTime(ctx); err != nil {
		t.Fatalf("before the deadline: %v", err)
	}
	if err := c.inTime(context.Background()); err != nil {
		t.Fatalf("a write with no deadline: %v", err)
	}
	clock.SetTime(utc("2024-11-02 22:43:04.689"))
	err := c.inTime(ctx)
	if err == nil || !isUnreachable(err) || mayHaveCommitted(err) || isPermanent(err) {
		t.Errorf("after the deadline: %v (unreachable %v, may have committed %v); want a write not sent, counted as not answered", err, isUnreachable(err), mayHaveCommitted(err))
	}
}
