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

package cronfederatedhpa

import (
	"strings"
	"testing"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	autoscalingv1alpha1 "github.com/scaleplane/scaleplane/pkg/apis/autoscaling/v1alpha1"
	"github.com/scaleplane/scaleplane/pkg/cronschedule"
)

// now is the fake time the tests validate at.
var now = time.Date(2026, time.March, 1, 12, 0, 0, 0, time.UTC)

func newTestValidator() *Validator {
	return NewValidator(clocktesting.NewFakePassiveClock(now))
}

func deploymentCron(rules ...autoscalingv1alpha1.CronFederatedHPARule) *autoscalingv1alpha1.CronFederatedHPA {
	return &autoscalingv1alpha1.CronFederatedHPA{
		ObjectMeta: metav1.ObjectMeta{Name: "scale-web", Namespace: "default"},
		Spec: autoscalingv1alpha1.CronFederatedHPASpec{
			ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"},
			Rules:          rules,
		},
	}
}

func boundsCron(apiVersion, kind string, rules ...autoscalingv1alpha1.CronFederatedHPARule) *autoscalingv1alpha1.CronFederatedHPA {
	c := deploymentCron(rules...)
	c.Spec.ScaleTargetRef = autoscalingv2.CrossVersionObjectReference{APIVersion: apiVersion, Kind: kind, Name: "web"}
	return c
}

func replicasRule(name, schedule string, replicas int32) autoscalingv1alpha1.CronFederatedHPARule {
	return autoscalingv1alpha1.CronFederatedHPARule{Name: name, Schedule: schedule, TargetReplicas: ptr.To(replicas)}
}

func boundsRule(name string, minRep, maxRep *int32) autoscalingv1alpha1.CronFederatedHPARule {
	return autoscalingv1alpha1.CronFederatedHPARule{Name: name, Schedule: "0 8 * * *", TargetMinReplicas: minRep, TargetMaxReplicas: maxRep}
}

func with(rule autoscalingv1alpha1.CronFederatedHPARule, mutate func(*autoscalingv1alpha1.CronFederatedHPARule)) autoscalingv1alpha1.CronFederatedHPARule {
	mutate(&rule)
	return rule
}

// TestValidateCronFederatedHPA checks each rule, valid and invalid, with the
// whole message of every error. Karmada's messages are kept word for word.
func TestValidateCronFederatedHPA(t *testing.T) {
	tests := []struct {
		name string
		cron *autoscalingv1alpha1.CronFederatedHPA
		want []string
	}{
		{
			name: "valid workload target, scale to zero allowed",
			cron: deploymentCron(replicasRule("up", "30 8 * * 1-5", 10), replicasRule("down", "@daily", 0)),
		},
		{
			name: "valid FederatedHPA target, one bound is enough",
			cron: boundsCron("autoscaling.karmada.io/v1alpha1", "FederatedHPA",
				boundsRule("both", ptr.To[int32](2), ptr.To[int32](10)),
				boundsRule("min-only", ptr.To[int32](20), nil),
				boundsRule("max-only", nil, ptr.To[int32](1)),
				// targetReplicas means nothing to a FederatedHPA and is ignored.
				with(boundsRule("ignored", ptr.To[int32](1), ptr.To[int32](1)), func(r *autoscalingv1alpha1.CronFederatedHPARule) {
					r.TargetReplicas = ptr.To[int32](-3)
				})),
		},
		{
			name: "valid HorizontalPodAutoscaler target",
			cron: boundsCron("autoscaling/v2", "HorizontalPodAutoscaler", boundsRule("night", ptr.To[int32](1), ptr.To[int32](2))),
		},
		{
			name: "valid custom resource target",
			cron: boundsCron("leaderworkerset.x-k8s.io/v1", "LeaderWorkerSet", replicasRule("up", "0 * * * *", 3)),
		},
		{
			name: "name not a DNS subdomain",
			cron: func() *autoscalingv1alpha1.CronFederatedHPA {
				c := deploymentCron(replicasRule("up", "0 8 * * *", 1))
				c.Name = "Scale_Web"
				return c
			}(),
			want: []string{`metadata.name: Invalid value: "Scale_Web": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')`},
		},
		{
			name: "Karmada group but not FederatedHPA: only that is reported",
			cron: boundsCron("autoscaling.karmada.io/v1alpha1", "CronFederatedHPA",
				replicasRule("a", "not a schedule", -1), replicasRule("a", "x", 1)),
			want: []string{`spec.scaleTargetRef.kind: Invalid value: "CronFederatedHPA": invalid scaleTargetRef kind: CronFederatedHPA, only support FederatedHPA`},
		},
		{
			name: "kind and name required",
			cron: boundsCron("apps/v1", "", replicasRule("up", "0 8 * * *", 1)),
			want: []string{"spec.scaleTargetRef.kind: Required value"},
		},
		{
			name: "kind and name not path segments",
			cron: func() *autoscalingv1alpha1.CronFederatedHPA {
				c := boundsCron("apps/v1", "..", replicasRule("up", "0 8 * * *", 1))
				c.Spec.ScaleTargetRef.Name = "web/1%"
				return c
			}(),
			want: []string{
				`spec.scaleTargetRef.kind: Invalid value: "..": may not be '..'`,
				`spec.scaleTargetRef.name: Invalid value: "web/1%": may not contain '/'`,
				`spec.scaleTargetRef.name: Invalid value: "web/1%": may not contain '%'`,
			},
		},
		{
			name: "name missing",
			cron: func() *autoscalingv1alpha1.CronFederatedHPA {
				c := deploymentCron(replicasRule("up", "0 8 * * *", 1))
				c.Spec.ScaleTargetRef.Name = ""
				return c
			}(),
			want: []string{"spec.scaleTargetRef.name: Required value"},
		},
		{
			name: "apiVersion missing",
			cron: boundsCron("", "Deployment", replicasRule("up", "0 8 * * *", 1)),
			want: []string{"spec.scaleTargetRef.apiVersion: Required value: must name the target's API group and version, such as apps/v1"},
		},
		{
			name: "apiVersion does not parse",
			cron: boundsCron("apps/v1/beta", "Deployment", replicasRule("up", "0 8 * * *", 1)),
			want: []string{`spec.scaleTargetRef.apiVersion: Invalid value: "apps/v1/beta": unexpected GroupVersion string: apps/v1/beta`},
		},
		{
			name: "HorizontalPodAutoscaler through autoscaling/v1",
			cron: boundsCron("autoscaling/v1", "HorizontalPodAutoscaler", replicasRule("up", "0 8 * * *", 1)),
			want: []string{`spec.scaleTargetRef.apiVersion: Invalid value: "autoscaling/v1": a HorizontalPodAutoscaler target must use apiVersion autoscaling/v2`},
		},
		{
			name: "duplicate rule names, reported on the later ones",
			cron: deploymentCron(replicasRule("up", "0 8 * * *", 1), replicasRule("down", "0 20 * * *", 1),
				replicasRule("up", "0 9 * * *", 1), replicasRule("up", "0 10 * * *", 1)),
			want: []string{
				`spec.rules[2].name: Duplicate value: "up"`,
				`spec.rules[3].name: Duplicate value: "up"`,
			},
		},
		{
			name: "invalid cron format",
			cron: deploymentCron(replicasRule("up", "x", 1)),
			want: []string{`spec.rules[0].schedule: Invalid value: "x": invalid cron format: want 5 fields (minute, hour, day of month, month, day of week), or 6 with a leading seconds field; got 1`},
		},
		{
			name: "time zone that does not load",
			cron: deploymentCron(with(replicasRule("up", "0 8 * * *", 1), func(r *autoscalingv1alpha1.CronFederatedHPARule) {
				r.TimeZone = ptr.To("A/B")
			})),
			want: []string{`spec.rules[0].timeZone: Invalid value: "A/B": unknown time zone A/B`},
		},
		{
			name: "IANA time zone",
			cron: deploymentCron(with(replicasRule("up", "0 8 * * *", 1), func(r *autoscalingv1alpha1.CronFederatedHPARule) {
				r.TimeZone = ptr.To("Asia/Shanghai")
			})),
		},
		{
			name: "maxDelaySeconds below 1",
			cron: deploymentCron(with(replicasRule("up", "0 * * * *", 1), func(r *autoscalingv1alpha1.CronFederatedHPARule) {
				r.MaxDelaySeconds = ptr.To[int32](0)
			})),
			want: []string{"spec.rules[0].maxDelaySeconds: Invalid value: 0: must be at least 1"},
		},
		{
			name: "maxDelaySeconds just below the interval",
			cron: deploymentCron(with(replicasRule("up", "0 * * * *", 1), func(r *autoscalingv1alpha1.CronFederatedHPARule) {
				r.MaxDelaySeconds = ptr.To[int32](3599)
			})),
		},
		{
			name: "maxDelaySeconds as long as the interval",
			cron: deploymentCron(with(replicasRule("up", "0 * * * *", 1), func(r *autoscalingv1alpha1.CronFederatedHPARule) {
				r.MaxDelaySeconds = ptr.To[int32](3600)
			})),
			want: []string{"spec.rules[0].maxDelaySeconds: Invalid value: 3600: must be smaller than the shortest interval between two firings of the schedule (1h0m0s)"},
		},
		{
			name: "maxDelaySeconds against the shortest of uneven intervals",
			cron: deploymentCron(with(replicasRule("up", "0,10 * * * *", 1), func(r *autoscalingv1alpha1.CronFederatedHPARule) {
				r.MaxDelaySeconds = ptr.To[int32](900)
			})),
			want: []string{"spec.rules[0].maxDelaySeconds: Invalid value: 900: must be smaller than the shortest interval between two firings of the schedule (10m0s)"},
		},
		{
			name: "FederatedHPA: both bounds nil",
			cron: boundsCron("autoscaling.karmada.io/v1alpha1", "FederatedHPA", boundsRule("r", nil, nil)),
			want: []string{"spec.rules[0].targetMinReplicas: Required value: targetMinReplicas and targetMaxReplicas cannot be nil at the same time if you want to scale FederatedHPA"},
		},
		{
			name: "FederatedHPA: bounds not positive",
			cron: boundsCron("autoscaling.karmada.io/v1alpha1", "FederatedHPA", boundsRule("r", ptr.To[int32](0), ptr.To[int32](-1))),
			want: []string{
				"spec.rules[0].targetMinReplicas: Invalid value: 0: targetMinReplicas should be larger than 0",
				"spec.rules[0].targetMaxReplicas: Invalid value: -1: targetMaxReplicas should be larger than 0",
				"spec.rules[0].targetMaxReplicas: Invalid value: -1: targetMaxReplicas should be larger than or equal to targetMinReplicas",
			},
		},
		{
			name: "FederatedHPA: max below min",
			cron: boundsCron("autoscaling.karmada.io/v1alpha1", "FederatedHPA", boundsRule("r", ptr.To[int32](5), ptr.To[int32](4))),
			want: []string{"spec.rules[0].targetMaxReplicas: Invalid value: 4: targetMaxReplicas should be larger than or equal to targetMinReplicas"},
		},
		{
			name: "HorizontalPodAutoscaler: the same bounds rules",
			cron: boundsCron("autoscaling/v2", "HorizontalPodAutoscaler", boundsRule("r", nil, nil), boundsRule("s", ptr.To[int32](3), ptr.To[int32](2))),
			want: []string{
				"spec.rules[0].targetMinReplicas: Required value: targetMinReplicas and targetMaxReplicas cannot be nil at the same time if you want to scale HorizontalPodAutoscaler",
				"spec.rules[1].targetMaxReplicas: Invalid value: 2: targetMaxReplicas should be larger than or equal to targetMinReplicas",
			},
		},
		{
			name: "workload: targetReplicas nil, bounds ignored",
			cron: deploymentCron(boundsRule("r", ptr.To[int32](1), ptr.To[int32](2))),
			want: []string{"spec.rules[0].targetReplicas: Required value: targetReplicas cannot be nil if you want to scale Deployment"},
		},
		{
			name: "LeaderWorkerSet: replicas, its scalePolicy's bounds, or both",
			cron: boundsCron("leaderworkerset.x-k8s.io/v1", "LeaderWorkerSet", boundsRule("r", ptr.To[int32](1), ptr.To[int32](2)),
				replicasRule("s", "0 8 * * *", 3), with(boundsRule("t", nil, ptr.To[int32](4)), func(r *autoscalingv1alpha1.CronFederatedHPARule) { r.TargetReplicas = ptr.To[int32](2) })),
		},
		{
			name: "LeaderWorkerSet: nothing to set, and bad bounds",
			cron: boundsCron("leaderworkerset.x-k8s.io/v1", "LeaderWorkerSet", boundsRule("r", nil, nil), boundsRule("s", ptr.To[int32](3), ptr.To[int32](2))),
			want: []string{
				"spec.rules[0].targetReplicas: Required value: set targetReplicas (the replicas of the LeaderWorkerSet) or targetMinReplicas/targetMaxReplicas (the bounds of its spec.scalePolicy)",
				"spec.rules[1].targetMaxReplicas: Invalid value: 2: targetMaxReplicas should be larger than or equal to targetMinReplicas",
			},
		},
		{
			name: "workload: targetReplicas negative",
			cron: deploymentCron(replicasRule("r", "0 8 * * *", -1)),
			want: []string{"spec.rules[0].targetReplicas: Invalid value: -1: targetReplicas should be larger than or equal to 0"},
		},
		{
			name: "all errors together",
			cron: deploymentCron(replicasRule("r", "x", -1), with(replicasRule("r", "0 8 * * *", 1), func(r *autoscalingv1alpha1.CronFederatedHPARule) {
				r.TimeZone = ptr.To("Mars/Olympus")
				r.MaxDelaySeconds = ptr.To[int32](-5)
			})),
			want: []string{
				`spec.rules[0].schedule: Invalid value: "x": invalid cron format: want 5 fields (minute, hour, day of month, month, day of week), or 6 with a leading seconds field; got 1`,
				"spec.rules[0].targetReplicas: Invalid value: -1: targetReplicas should be larger than or equal to 0",
				`spec.rules[1].name: Duplicate value: "r"`,
				`spec.rules[1].timeZone: Invalid value: "Mars/Olympus": unknown time zone Mars/Olympus`,
				"spec.rules[1].maxDelaySeconds: Invalid value: -5: must be at least 1",
			},
		},
	}
	v := newTestValidator()
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, err := range v.ValidateCronFederatedHPA(tc.cron) {
				got = append(got, err.Error())
			}
			if strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
				t.Errorf("errors:\n got: %q\nwant: %q", got, tc.want)
			}
		})
	}
}

// TestScheduleRejections covers what the cron-scaler's parser refuses beyond
// syntax. Their wording is the parser's; the test checks that the error is on
// the schedule, is not the syntax message, and says why.
func TestScheduleRejections(t *testing.T) {
	tests := []struct {
		schedule string
		wantWhy  string
	}{
		{schedule: "0 8 31 2 *", wantWhy: "never fires"},
		{schedule: "0 0 30 2 *", wantWhy: "never fires"},
		{schedule: "@everysecond", wantWhy: "more often than once a minute"},
		{schedule: "* * * * * *", wantWhy: "more often than once a minute"},
		{schedule: "*/30 * * * * *", wantWhy: "more often than once a minute"},
	}
	v := newTestValidator()
	for _, tc := range tests {
		t.Run(tc.schedule, func(t *testing.T) {
			errs := v.ValidateCronFederatedHPA(deploymentCron(replicasRule("r", tc.schedule, 1)))
			if len(errs) != 1 {
				t.Fatalf("got %d errors %v, want 1", len(errs), errs)
			}
			msg := errs[0].Error()
			prefix := `spec.rules[0].schedule: Invalid value: "` + tc.schedule + `": `
			if !strings.HasPrefix(msg, prefix) || strings.HasSuffix(msg, "invalid cron format") ||
				!strings.Contains(msg, tc.wantWhy) {
				t.Errorf("error %q: want it on the schedule, saying %q", msg, tc.wantWhy)
			}
		})
	}
}

// TestScheduleAccepted lists forms the cron-scaler runs, which Karmada's
// webhook and scheduler disagreed on.
func TestScheduleAccepted(t *testing.T) {
	v := newTestValidator()
	for _, schedule := range []string{
		"0 30 8 * * *", // six fields, a single second
		"@5minutes",
		"@hourly",
		"0 8 L * *",
		"0 8 * * 7",
		"0 8 * * 1#2",
		"0 8 15W * *",
		"0 0 29 2 *", // next on 2028-02-29, within four years
	} {
		t.Run(schedule, func(t *testing.T) {
			if errs := v.ValidateCronFederatedHPA(deploymentCron(replicasRule("r", schedule, 1))); len(errs) != 0 {
				t.Errorf("rejected: %v", errs)
			}
		})
	}
}

// TestScheduleBeyondHorizon: the first Monday that is the 5th Monday of a
// February falls in 2044, and from 2097 the next 29 February is in 2104, as
// 2100 is not a leap year.
func TestScheduleBeyondHorizon(t *testing.T) {
	tests := []struct {
		schedule string
		now      time.Time
		want     string
	}{
		{
			schedule: "0 8 31 2 1#5",
			now:      now,
			want:     `spec.rules[0].schedule: Invalid value: "0 8 31 2 1#5": the schedule does not fire within the next 4 years (next firing 2044-02-29T08:00:00Z)`,
		},
		{
			schedule: "0 0 29 2 *",
			now:      time.Date(2097, time.March, 1, 0, 0, 0, 0, time.UTC),
			want:     `spec.rules[0].schedule: Invalid value: "0 0 29 2 *": the schedule does not fire within the next 4 years (next firing 2104-02-29T00:00:00Z)`,
		},
	}
	for _, tc := range tests {
		t.Run(tc.schedule, func(t *testing.T) {
			v := NewValidator(clocktesting.NewFakePassiveClock(tc.now))
			errs := v.ValidateCronFederatedHPA(deploymentCron(replicasRule("r", tc.schedule, 1)))
			if len(errs) != 1 || errs[0].Error() != tc.want {
				t.Errorf("errors %q, want %q", errs, tc.want)
			}
		})
	}
}

// TestScheduleJunkRejectedWithAReason: forms the parser used to accept with
// another meaning than they say are rejected, with Karmada's words first and
// the reason after, and the cron-scaler's parser rejects them too.
func TestScheduleJunkRejectedWithAReason(t *testing.T) {
	tests := []struct{ schedule, reason string }{
		{"0 8 * * 8L", `day-of-week field "8L": "8L" (the last given day of the week of the month): 8 is out of range 0 to 7`},
		{"0 8 * * JAN", `day-of-week field "JAN": JAN is a month name; it only belongs in the month field`},
		{"0 8 * 0/5 *", `month field "0/5": 0 is out of range 1 to 12`},
	}
	v := newTestValidator()
	for _, tc := range tests {
		t.Run(tc.schedule, func(t *testing.T) {
			errs := v.ValidateCronFederatedHPA(deploymentCron(replicasRule("r", tc.schedule, 1)))
			want := `spec.rules[0].schedule: Invalid value: "` + tc.schedule + `": invalid cron format: ` + tc.reason
			if len(errs) != 1 || errs[0].Error() != want {
				t.Errorf("errors %q; want %q", errs, want)
			}
			if _, err := cronschedule.Parse(tc.schedule, time.UTC); err == nil {
				t.Errorf("the cron-scaler's parser accepts %q, which the webhook rejects", tc.schedule)
			}
		})
	}
}

// TestWebhookAndControllerAgree: for every schedule and time zone, the
// webhook admits the rule exactly when the cron-scaler can schedule it.
func TestWebhookAndControllerAgree(t *testing.T) {
	schedules := []string{
		"0 8 */2 * 1", "0 8 * * */2", "0 8 1-31 * 1", "0 8 ? * 1", "0 8 1,* * 1", "@midnight", "@daily",
		"0 8 * * 8L", "0 8 * * 7L", "0 8 * * JAN", "0 8 * 0/5 *", "0 8 * */5 *", "0 8 L * *", "0 8 LW * *",
		"0 8 15W * *", "0 8 * * 5#5", "0 8 * * 5#6", "0 8 * JAN-MAR MON-FRI", "0 8 * MON *", "x", "@reboot",
	}
	zones := []*string{nil, ptr.To(""), ptr.To("Asia/Shanghai"), ptr.To("Local"), ptr.To("A/B")}
	v := newTestValidator()
	for _, schedule := range schedules {
		for _, zone := range zones {
			rule := replicasRule("r", schedule, 1)
			rule.TimeZone = zone
			admitted := len(v.ValidateCronFederatedHPA(deploymentCron(rule))) == 0
			loc, err := cronschedule.RuleLocation(zone)
			runs := err == nil
			if runs {
				_, err = cronschedule.Parse(schedule, loc)
				runs = err == nil
			}
			if admitted != runs {
				t.Errorf("schedule %q, time zone %v: webhook admits %v, cron-scaler schedules %v (%v)", schedule, ptr.Deref(zone, "<absent>"), admitted, runs, err)
			}
		}
	}
}
