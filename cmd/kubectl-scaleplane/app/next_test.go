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

package app

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	kubefake "k8s.io/client-go/kubernetes/fake"
	testingclock "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	autoscalingv1alpha1 "github.com/scaleplane/scaleplane/pkg/apis/autoscaling/v1alpha1"
	"github.com/scaleplane/scaleplane/pkg/generated/clientset/versioned/fake"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// run runs `kubectl scaleplane args...` against fake clientsets holding
// objs, at now, in namespace "default", and returns what it printed.
func run(t *testing.T, now time.Time, kubeObjs, objs []runtime.Object, args ...string) string {
	t.Helper()
	var out, errOut bytes.Buffer
	clients := &Clients{
		Kube:       kubefake.NewClientset(kubeObjs...),
		Scaleplane: fake.NewSimpleClientset(objs...),
		Clock:      testingclock.NewFakePassiveClock(now),
		Namespace:  "default",
	}
	cmd := NewCommand(genericiooptions.IOStreams{Out: &out, ErrOut: &errOut}, clients)
	cmd.SetArgs(args)
	cmd.SetOut(&out)
	cmd.SetErr(&errOut)
	if err := cmd.Execute(); err != nil {
		t.Fatalf("kubectl scaleplane %v: %v\n%s", args, err, errOut.String())
	}
	return out.String()
}

// golden compares got with testdata/name, or rewrites it with -update.
func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to write it)", err)
	}
	if got != string(want) {
		t.Errorf("output differs from %s (go test -update rewrites it):\n--- got\n%s--- want\n%s", path, got, want)
	}
}

func cronFHPA(ns, name, kind, target string, rules ...autoscalingv1alpha1.CronFederatedHPARule) *autoscalingv1alpha1.CronFederatedHPA {
	apiVersion := "apps/v1"
	switch kind {
	case "FederatedHPA":
		apiVersion = "autoscaling.karmada.io/v1alpha1"
	case "HorizontalPodAutoscaler":
		apiVersion = "autoscaling/v2"
	}
	return &autoscalingv1alpha1.CronFederatedHPA{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: autoscalingv1alpha1.CronFederatedHPASpec{
			ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: apiVersion, Kind: kind, Name: target},
			Rules:          rules,
		},
	}
}

func rule(name, schedule string, zone *string, replicas int32) autoscalingv1alpha1.CronFederatedHPARule {
	return autoscalingv1alpha1.CronFederatedHPARule{Name: name, Schedule: schedule, TimeZone: zone, TargetReplicas: ptr.To(replicas)}
}

// Spring forward in Berlin, 2026-03-29: 02:00 CET becomes 03:00 CEST. A rule
// at 02:30 fires at 03:00 CEST (01:00 UTC), the very instant of a rule at
// 03:00 on the same Deployment: the preview flags the conflict the gap makes.
func TestNextSpringForward(t *testing.T) {
	now := time.Date(2026, 3, 28, 12, 0, 0, 0, time.UTC)
	objs := []runtime.Object{
		cronFHPA("default", "night", "Deployment", "web", rule("down", "30 2 * * *", ptr.To("Europe/Berlin"), 2)),
		cronFHPA("default", "morning", "Deployment", "web", rule("up", "0 3 * * *", ptr.To("Europe/Berlin"), 10)),
	}
	golden(t, "next-spring-forward.txt", run(t, now, nil, objs, "next", "--count", "2"))
}

// Fall back in New York, 2026-11-01: 01:30 occurs twice (EDT, then EST); the
// rule fires once, at the first. A UTC rule and one in the controller's zone
// (no timeZone) are shown next to it, -o wide.
func TestNextFallBackWide(t *testing.T) {
	now := time.Date(2026, 10, 31, 12, 0, 0, 0, time.UTC)
	objs := []runtime.Object{
		cronFHPA("default", "batch", "Deployment", "worker",
			rule("ny", "30 1 * * *", ptr.To("America/New_York"), 4),
			rule("utc", "0 6 * * *", ptr.To(""), 1),
			rule("local", "0 7 * * *", nil, 3)),
	}
	golden(t, "next-fall-back-wide.txt", run(t, now, nil, objs, "next", "batch", "--count", "2", "-o", "wide", "--controller-time-zone", "Asia/Kolkata"))
}

// artifacts/examples/cronfederatedhpa/timezones.yaml's rules on a Friday in
// two namespaces (-A): Shanghai's workday ends before Los Angeles' starts.
func TestNextTimeZonesAllNamespaces(t *testing.T) {
	now := time.Date(2026, 11, 27, 8, 0, 0, 0, time.UTC) // a Friday
	var objs []runtime.Object
	for _, ns := range []string{"prod", "staging"} {
		objs = append(objs, cronFHPA(ns, "web-global-cronfhpa", "Deployment", "web-global",
			rule("shanghai-up", "30 8 * * 1-5", ptr.To("Asia/Shanghai"), 10),
			rule("shanghai-down", "0 19 * * 1-5", ptr.To("Asia/Shanghai"), 2),
			rule("los-angeles-up", "30 8 * * 1-5", ptr.To("America/Los_Angeles"), 10),
			rule("los-angeles-down", "0 19 * * 1-5", ptr.To("America/Los_Angeles"), 2)))
	}
	golden(t, "next-timezones-all-namespaces.txt", run(t, now, nil, objs, "next", "-A", "--count", "1"))
}

// The states a rule can be in, in -o json (stable for scripts): suspended,
// invalid, a planned firing still within its deadline (Due) and one past it
// (PastDeadline), bounds on a FederatedHPA, and a conflict between two rules
// of one object.
func TestNextStatesJSON(t *testing.T) {
	now := time.Date(2026, 11, 27, 8, 5, 0, 0, time.UTC)
	late := cronFHPA("default", "late", "Deployment", "api",
		autoscalingv1alpha1.CronFederatedHPARule{Name: "due", Schedule: "0 8 * * *", TimeZone: ptr.To(""), TargetReplicas: ptr.To[int32](5)},
		autoscalingv1alpha1.CronFederatedHPARule{Name: "gone", Schedule: "0 7 * * *", TimeZone: ptr.To(""), TargetReplicas: ptr.To[int32](6), MaxDelaySeconds: ptr.To[int32](600)},
		autoscalingv1alpha1.CronFederatedHPARule{Name: "paused", Schedule: "0 9 * * *", TimeZone: ptr.To(""), TargetReplicas: ptr.To[int32](7), Suspend: ptr.To(true)},
		autoscalingv1alpha1.CronFederatedHPARule{Name: "bad-zone", Schedule: "0 9 * * *", TimeZone: ptr.To("Mars/Olympus"), TargetReplicas: ptr.To[int32](1)},
		autoscalingv1alpha1.CronFederatedHPARule{Name: "no-value", Schedule: "0 9 * * *", TimeZone: ptr.To("")},
		autoscalingv1alpha1.CronFederatedHPARule{Name: "clash-a", Schedule: "0 12 * * *", TimeZone: ptr.To(""), TargetReplicas: ptr.To[int32](3)},
		autoscalingv1alpha1.CronFederatedHPARule{Name: "clash-b", Schedule: "0 13 * * *", TimeZone: ptr.To("Europe/Berlin"), TargetReplicas: ptr.To[int32](4)},
	)
	late.Status.ExecutionHistories = []autoscalingv1alpha1.ExecutionHistory{
		{RuleName: "due", NextExecutionTime: ptr.To(metav1.NewTime(time.Date(2026, 11, 27, 8, 0, 0, 0, time.UTC)))},
		{RuleName: "gone", NextExecutionTime: ptr.To(metav1.NewTime(time.Date(2026, 11, 27, 7, 0, 0, 0, time.UTC)))},
	}
	bounds := cronFHPA("default", "bounds", "FederatedHPA", "api-fhpa",
		autoscalingv1alpha1.CronFederatedHPARule{Name: "peak", Schedule: "30 8 * * *", TimeZone: ptr.To(""), TargetMinReplicas: ptr.To[int32](10), TargetMaxReplicas: ptr.To[int32](50)})
	out := run(t, now, nil, []runtime.Object{late, bounds}, "next", "--count", "1", "-o", "json")
	golden(t, "next-states.json", out)
	golden(t, "next-states.txt", run(t, now, nil, []runtime.Object{late, bounds}, "next", "--count", "1"))
}

// After a downtime the preview shows what the controller does at its next
// sync, which plans with the same code (pkg/cronplan): the missed
// scheduled times it records as missed (one row, at the latest of them,
// the time its history keeps), the one it still runs (Due), and nothing
// else before the next scheduled time.
func TestNextAfterDowntime(t *testing.T) {
	now := time.Date(2026, 11, 27, 8, 30, 0, 0, time.UTC)
	at := func(h, m int) time.Time { return time.Date(2026, 11, 27, h, m, 0, 0, time.UTC) }
	row := func(at time.Time, state string) string { return at.UTC().Format(time.RFC3339) + " " + state }
	for _, c := range []struct {
		name     string
		schedule string
		maxDelay *int32
		created  time.Time
		planned  *time.Time // status nextExecutionTime
		want     []string
		message  string // of the first row
	}{{
		name: "plan at 07:00, hourly: 07:00 missed, 08:00 runs at once", schedule: "0 * * * *", planned: ptr.To(at(7, 0)),
		want:    []string{row(at(7, 0), StatePastDeadline), row(at(8, 0), StateDue), row(at(9, 0), StateScheduled), row(at(10, 0), StateScheduled)},
		message: "missed the scheduled time 2026-11-27T07:00:00Z",
	}, {
		name: "plan at 05:00, hourly: 05:00 to 07:00 missed as one, 08:00 runs", schedule: "0 * * * *", planned: ptr.To(at(5, 0)),
		want:    []string{row(at(7, 0), StatePastDeadline), row(at(8, 0), StateDue), row(at(9, 0), StateScheduled), row(at(10, 0), StateScheduled)},
		message: "missed 3 scheduled times from 2026-11-27T05:00:00Z to 2026-11-27T07:00:00Z",
	}, {
		name: "plan at 07:00, hourly, maxDelaySeconds 600: 08:00 too late as well", schedule: "0 * * * *", maxDelay: ptr.To[int32](600), planned: ptr.To(at(7, 0)),
		want:    []string{row(at(8, 0), StatePastDeadline), row(at(9, 0), StateScheduled), row(at(10, 0), StateScheduled)},
		message: "missed 2 scheduled times from 2026-11-27T07:00:00Z to 2026-11-27T08:00:00Z",
	}, {
		name: "created at 06:50 while down, daily 07:00: runs at the first sync", schedule: "0 7 * * *", created: at(6, 50),
		want: []string{row(at(7, 0), StateDue), row(at(7, 0).AddDate(0, 0, 1), StateScheduled), row(at(7, 0).AddDate(0, 0, 2), StateScheduled)},
	}, {
		name: "created at 06:50, daily 07:00, maxDelaySeconds 600: missed", schedule: "0 7 * * *", maxDelay: ptr.To[int32](600), created: at(6, 50),
		want:    []string{row(at(7, 0), StatePastDeadline), row(at(7, 0).AddDate(0, 0, 1), StateScheduled), row(at(7, 0).AddDate(0, 0, 2), StateScheduled)},
		message: "missed the scheduled time 2026-11-27T07:00:00Z",
	}} {
		t.Run(c.name, func(t *testing.T) {
			obj := cronFHPA("default", "api", "Deployment", "api",
				autoscalingv1alpha1.CronFederatedHPARule{Name: "r", Schedule: c.schedule, TimeZone: ptr.To(""), TargetReplicas: ptr.To[int32](3), MaxDelaySeconds: c.maxDelay})
			obj.CreationTimestamp = metav1.NewTime(c.created)
			if c.planned != nil {
				obj.CreationTimestamp = metav1.NewTime(at(0, 0))
				obj.Status.ExecutionHistories = []autoscalingv1alpha1.ExecutionHistory{{RuleName: "r", NextExecutionTime: ptr.To(metav1.NewTime(*c.planned))}}
			}
			var list FiringList
			if err := json.Unmarshal([]byte(run(t, now, nil, []runtime.Object{obj}, "next", "--count", "2", "-o", "json")), &list); err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, f := range list.Items {
				got = append(got, row(*f.Time, f.State))
			}
			if !reflect.DeepEqual(got, c.want) {
				t.Errorf("firings %v; want %v", got, c.want)
			}
			if c.message != "" && len(list.Items) > 0 && !strings.Contains(list.Items[0].Message, c.message) {
				t.Errorf("first firing says %q; want it to say %q", list.Items[0].Message, c.message)
			}
		})
	}
}

// After a downtime two rules setting the replicas of one target are both
// due: the controller applies the later scheduled one and records the
// other as superseded (within one object, and across objects on the same
// target); the preview says so.
func TestNextAfterDowntimeLatestWins(t *testing.T) {
	now := time.Date(2026, 11, 27, 8, 30, 0, 0, time.UTC)
	created := metav1.NewTime(time.Date(2026, 11, 27, 6, 0, 0, 0, time.UTC))
	oneObject := cronFHPA("default", "api", "Deployment", "api",
		rule("up", "0 7 * * *", ptr.To(""), 10), rule("down", "0 8 * * *", ptr.To(""), 2))
	oneObject.CreationTimestamp = created
	up := cronFHPA("default", "api-up", "Deployment", "api", rule("up", "0 7 * * *", ptr.To(""), 10))
	down := cronFHPA("default", "api-down", "Deployment", "api", rule("down", "0 8 * * *", ptr.To(""), 2))
	up.CreationTimestamp, down.CreationTimestamp = created, created
	for _, c := range []struct {
		name string
		objs []runtime.Object
		want map[string]string // CRONFEDERATEDHPA/RULE -> state of its overdue firing
	}{
		{"one object", []runtime.Object{oneObject}, map[string]string{"api/up": StateSuperseded, "api/down": StateDue}},
		{"two objects", []runtime.Object{up, down}, map[string]string{"api-up/up": StateSuperseded, "api-down/down": StateDue}},
	} {
		t.Run(c.name, func(t *testing.T) {
			var list FiringList
			if err := json.Unmarshal([]byte(run(t, now, nil, c.objs, "next", "--count", "1", "-o", "json")), &list); err != nil {
				t.Fatal(err)
			}
			got := map[string]string{}
			for _, f := range list.Items {
				if f.Time.Before(now) {
					got[f.CronFederatedHPA+"/"+f.Rule] = f.State
				}
			}
			if !reflect.DeepEqual(got, c.want) {
				t.Errorf("overdue firings %v; want %v", got, c.want)
			}
		})
	}
}
