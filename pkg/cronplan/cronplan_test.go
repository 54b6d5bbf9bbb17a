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

package cronplan

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	autoscalingv1alpha1 "github.com/scaleplane/scaleplane/pkg/apis/autoscaling/v1alpha1"
	"github.com/scaleplane/scaleplane/pkg/cronschedule"
)

// Object after a downtime: what is missed, what runs at once, and what is
// planned next (the controller's tests in pkg/controllers/cronscaler cover
// the rest of the planning, through the controller).
func TestObjectAfterDowntime(t *testing.T) {
	now := time.Date(2026, 11, 27, 8, 30, 0, 0, time.UTC)
	at := func(h, m int) time.Time { return time.Date(2026, 11, 27, h, m, 0, 0, time.UTC) }
	utc := func(rule *autoscalingv1alpha1.CronFederatedHPARule) (*cronschedule.Schedule, error) {
		return cronschedule.Parse(rule.Schedule, time.UTC)
	}
	for _, c := range []struct {
		name, schedule string
		created        time.Time
		planned        *time.Time
		missed         int
		lastMissed     time.Time
		due, deadline  time.Time
		next           time.Time
	}{
		{name: "plan at 07:00, hourly", schedule: "0 * * * *", created: at(0, 0), planned: ptr.To(at(7, 0)),
			missed: 1, lastMissed: at(7, 0), due: at(8, 0), deadline: at(9, 0), next: at(9, 0)},
		{name: "created at 06:50, daily 07:00", schedule: "0 7 * * *", created: at(6, 50),
			due: at(7, 0), deadline: at(7, 0).AddDate(0, 0, 1), next: at(7, 0).AddDate(0, 0, 1)},
		{name: "created at 07:10, daily 07:00", schedule: "0 7 * * *", created: at(7, 10),
			next: at(7, 0).AddDate(0, 0, 1)},
	} {
		t.Run(c.name, func(t *testing.T) {
			obj := &autoscalingv1alpha1.CronFederatedHPA{
				ObjectMeta: metav1.ObjectMeta{Name: "api", CreationTimestamp: metav1.NewTime(c.created)},
				Spec: autoscalingv1alpha1.CronFederatedHPASpec{Rules: []autoscalingv1alpha1.CronFederatedHPARule{
					{Name: "r", Schedule: c.schedule, TargetReplicas: ptr.To[int32](3)},
				}},
			}
			if c.planned != nil {
				obj.Status.ExecutionHistories = []autoscalingv1alpha1.ExecutionHistory{{RuleName: "r", NextExecutionTime: ptr.To(metav1.NewTime(*c.planned))}}
			}
			var plans []Plan
			Object(obj, &obj.Status, utc, now, time.Time{}, nil, now, func(p Plan) { plans = append(plans, p) })
			if len(plans) != 1 {
				t.Fatalf("%d plans; want 1", len(plans))
			}
			p := plans[0]
			if p.Missed != c.missed || !p.LastMissed.Equal(c.lastMissed) || !p.Due.Equal(c.due) || !p.Deadline.Equal(c.deadline) {
				t.Errorf("missed %d (last %v), due %v until %v; want missed %d (last %v), due %v until %v",
					p.Missed, p.LastMissed, p.Due, p.Deadline, c.missed, c.lastMissed, c.due, c.deadline)
			}
			if n := p.History.NextExecutionTime; n == nil || !n.Time.Equal(c.next) {
				t.Errorf("nextExecutionTime %v; want %v", n, c.next)
			}
		})
	}
}
