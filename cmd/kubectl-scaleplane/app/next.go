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
	"context"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/duration"

	autoscalingv1alpha1 "github.com/scaleplane/scaleplane/pkg/apis/autoscaling/v1alpha1"
	"github.com/scaleplane/scaleplane/pkg/cronplan"
	"github.com/scaleplane/scaleplane/pkg/cronschedule"
)

// States of a previewed firing.
const (
	// StateScheduled: the firing will run at its time.
	StateScheduled = "Scheduled"
	// StateDue: a scheduled time that has passed but whose deadline has
	// not, and that status does not record: the controller runs it at its
	// next sync.
	StateDue = "Due"
	// StatePastDeadline: scheduled times whose deadline has passed and
	// that status does not record: the controller will record them as
	// missed (one entry, at the latest), not run them.
	StatePastDeadline = "PastDeadline"
	// StateSuperseded: a scheduled time that is due, but every field it
	// sets is set by a later due one on the same target: the controller
	// applies the latest and records this one as superseded, not applied.
	StateSuperseded = "Superseded"
	// StateSuspended: the rule is suspended and does not fire.
	StateSuspended = "Suspended"
	// StateInvalid: the controller cannot run the rule (schedule, zone or
	// values); Message says why.
	StateInvalid = "Invalid"
)

// FiringList is what `next -o json` prints.
type FiringList struct {
	APIVersion string    `json:"apiVersion"`
	Kind       string    `json:"kind"`
	Now        time.Time `json:"now"`
	Items      []Firing  `json:"items"`
	// Conflicts are firings of different rules that set the same field of
	// the same target at the same instant.
	Conflicts []Conflict `json:"conflicts,omitempty"`
}

// Firing is one upcoming (or overdue) firing of a rule, or a rule that does
// not fire (suspended, invalid) with no time.
type Firing struct {
	Namespace        string    `json:"namespace"`
	CronFederatedHPA string    `json:"cronFederatedHPA"`
	Rule             string    `json:"rule"`
	Target           TargetRef `json:"target"`
	Schedule         string    `json:"schedule"`
	// TimeZone is the zone the schedule is read in: the rule's timeZone,
	// UTC for "", or the controller's zone (ControllerTimeZone) when unset.
	TimeZone           string `json:"timeZone"`
	ControllerTimeZone bool   `json:"controllerTimeZone,omitempty"`
	// Time is the instant in UTC; LocalTime the same instant in TimeZone.
	Time      *time.Time `json:"time,omitempty"`
	LocalTime string     `json:"localTime,omitempty"`
	Sets      Values     `json:"sets"`
	State     string     `json:"state"`
	// DaylightSaving is "Skipped" when the wall time the schedule names does
	// not exist (the firing runs at the end of the gap) and "Repeated" when
	// it occurs twice (the firing runs once, at the first); ScheduledWallTime
	// is then that wall time.
	DaylightSaving    string `json:"daylightSaving,omitempty"`
	ScheduledWallTime string `json:"scheduledWallTime,omitempty"`
	// Deadline is when an overdue firing stops being run.
	Deadline *time.Time `json:"deadline,omitempty"`
	Message  string     `json:"message,omitempty"`
	Conflict bool       `json:"conflict,omitempty"`
}

// TargetRef is a rule's scaleTargetRef.
type TargetRef struct {
	APIVersion string `json:"apiVersion,omitempty"`
	Kind       string `json:"kind"`
	Name       string `json:"name"`
}

func (t TargetRef) String() string { return t.Kind + "/" + t.Name }

// Values are the fields a firing sets; nil leaves a field alone.
type Values struct {
	Replicas    *int32 `json:"replicas,omitempty"`
	MinReplicas *int32 `json:"minReplicas,omitempty"`
	MaxReplicas *int32 `json:"maxReplicas,omitempty"`
}

func (v Values) fields() map[string]int32 {
	m := map[string]int32{}
	if v.Replicas != nil {
		m["replicas"] = *v.Replicas
	}
	if v.MinReplicas != nil {
		m["minReplicas"] = *v.MinReplicas
	}
	if v.MaxReplicas != nil {
		m["maxReplicas"] = *v.MaxReplicas
	}
	return m
}

func (v Values) String() string {
	var parts []string
	for _, f := range []struct {
		name string
		v    *int32
	}{{"replicas", v.Replicas}, {"min", v.MinReplicas}, {"max", v.MaxReplicas}} {
		if f.v != nil {
			parts = append(parts, f.name+"="+strconv.Itoa(int(*f.v)))
		}
	}
	return strings.Join(parts, ",")
}

// Conflict is two or more firings that set one field of one target at one
// instant: which value stays depends on the order of the writes.
type Conflict struct {
	Namespace string    `json:"namespace"`
	Target    TargetRef `json:"target"`
	Field     string    `json:"field"`
	Time      time.Time `json:"time"`
	// Firings name each firing as CRONFEDERATEDHPA/RULE=VALUE.
	Firings []string `json:"firings"`
}

type nextOptions struct {
	*options
	count              int
	controllerTimeZone string
}

func newNextCommand(o *options) *cobra.Command {
	n := &nextOptions{options: o}
	cmd := &cobra.Command{
		Use:   "next [NAME]",
		Short: "Show the next firings of every CronFederatedHPA rule, in its zone and in UTC",
		Long: `Show the next firings of every CronFederatedHPA rule (or of the one named), computed with the
cron-scaler's own schedule and planning code: in the rule's time zone and in UTC, the value each sets, suspended rules,
scheduled times that passed without running (Due: still runs; PastDeadline: will be recorded as missed;
Superseded: a later due one takes its fields), and daylight-saving changes as the
controller treats them (a wall time that does not exist fires at the end of the gap; one that occurs twice fires once,
at the first). Firings of different rules that set the same field of the same target at the same instant are
flagged as conflicts.`,
		Example: `  kubectl scaleplane next -A
  kubectl scaleplane next web-global-cronfhpa -n prod --count 5 -o wide`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return n.run(cmd.Context(), args)
		},
	}
	cmd.Flags().IntVar(&n.count, "count", 3, "How many firings of each rule to show.")
	cmd.Flags().StringVar(&n.controllerTimeZone, "controller-time-zone", "UTC", "The controller's time zone, in which rules without timeZone are read (the chart's image runs in UTC).")
	return cmd
}

func (n *nextOptions) run(ctx context.Context, args []string) error {
	if n.count < 1 {
		return fmt.Errorf("--count must be at least 1")
	}
	controllerLoc, err := cronschedule.LoadLocation(n.controllerTimeZone)
	if err != nil {
		return fmt.Errorf("--controller-time-zone: %w", err)
	}
	c, ns, err := n.complete()
	if err != nil {
		return err
	}
	var objs []autoscalingv1alpha1.CronFederatedHPA
	if len(args) == 1 {
		if ns == "" {
			return fmt.Errorf("a NAME needs a namespace, not --all-namespaces")
		}
		obj, err := c.Scaleplane.AutoscalingV1alpha1().CronFederatedHPAs(ns).Get(ctx, args[0], metav1.GetOptions{})
		if err != nil {
			return err
		}
		objs = append(objs, *obj)
	} else {
		list, err := c.Scaleplane.AutoscalingV1alpha1().CronFederatedHPAs(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		objs = list.Items
	}
	list := planFirings(objs, c.Clock.Now(), n.count, controllerLoc)
	if n.output == "json" || n.output == "yaml" {
		return printObject(n.streams.Out, n.output, list)
	}
	return printFirings(n.streams.Out, list, ns == "", n.output == "wide")
}

// planFirings previews the next count firings of every rule of objs at now.
func planFirings(objs []autoscalingv1alpha1.CronFederatedHPA, now time.Time, count int, controllerLoc *time.Location) FiringList {
	list := FiringList{APIVersion: apiVersion, Kind: "FiringList", Now: now.UTC(), Items: []Firing{}}
	schedule := func(rule *autoscalingv1alpha1.CronFederatedHPARule) (*cronschedule.Schedule, error) {
		_, sched, err := cronplan.ParseSchedule(rule, controllerLoc)
		return sched, err
	}
	for i := range objs {
		obj := &objs[i]
		// The controller's own planning, as a controller that takes the
		// object up now (started now; no change it watched is pending in
		// its memory): what its next sync runs, records as missed, and
		// plans next. A running controller plans the same, but for a change
		// it watched moments ago and has not synced yet.
		cronplan.Object(obj, &obj.Status, schedule, now, time.Time{}, nil, now, func(p cronplan.Plan) {
			list.Items = append(list.Items, ruleFirings(obj, &p, now, count, controllerLoc)...)
		})
	}
	sort.SliceStable(list.Items, func(i, j int) bool {
		a, b := list.Items[i], list.Items[j]
		switch {
		case (a.Time == nil) != (b.Time == nil):
			return a.Time != nil
		case a.Time != nil && !a.Time.Equal(*b.Time):
			return a.Time.Before(*b.Time)
		case a.Namespace != b.Namespace:
			return a.Namespace < b.Namespace
		case a.CronFederatedHPA != b.CronFederatedHPA:
			return a.CronFederatedHPA < b.CronFederatedHPA
		}
		return a.Rule < b.Rule
	})
	supersede(list.Items)
	list.Conflicts = findConflicts(list.Items)
	return list
}

// ruleFirings previews one rule from the controller's plan of it: a row for
// a rule that does not fire, or the missed scheduled times the controller
// records at its next sync (one row, at the latest, as its history keeps
// them), the one it runs then (if any), and the next count firings.
func ruleFirings(obj *autoscalingv1alpha1.CronFederatedHPA, p *cronplan.Plan, now time.Time, count int, controllerLoc *time.Location) []Firing {
	rule := p.Rule
	ref := obj.Spec.ScaleTargetRef
	// The controller reads a rule without timeZone in its own zone, which
	// this process cannot see: --controller-time-zone says it.
	base := Firing{
		Namespace:          obj.Namespace,
		CronFederatedHPA:   obj.Name,
		Rule:               rule.Name,
		Target:             TargetRef{APIVersion: ref.APIVersion, Kind: ref.Kind, Name: ref.Name},
		Schedule:           rule.Schedule,
		State:              StateScheduled,
		ControllerTimeZone: rule.TimeZone == nil,
	}
	loc, sched, err := cronplan.ParseSchedule(rule, controllerLoc)
	if loc != nil {
		base.TimeZone = loc.String()
	} else {
		base.TimeZone = *rule.TimeZone
	}
	if err == nil {
		base.Sets, err = ruleValues(ref, rule)
	} else {
		base.Sets, _ = ruleValues(ref, rule)
	}
	switch {
	case rule.Suspend != nil && *rule.Suspend:
		base.State, base.Message = StateSuspended, "suspended: does not fire until resumed, and then from the time it is resumed"
		return []Firing{base}
	case err != nil:
		base.State, base.Message = StateInvalid, err.Error()
		return []Firing{base}
	}
	var out []Firing
	if p.Missed > 0 {
		f := base
		deadline := cronplan.DeadlineOf(rule, sched, p.LastMissed)
		f.setTime(p.LastMissed, loc)
		f.Deadline = utcPtr(deadline)
		f.State = StatePastDeadline
		f.Message = fmt.Sprintf("%s, not run by its deadline %s: the controller records it as missed at its next sync (is it running?)",
			cronplan.MissedTimes(p.Missed, p.FirstMissed, p.LastMissed), deadline.UTC().Format(time.RFC3339))
		out = append(out, f)
	}
	if !p.Due.IsZero() {
		f := base
		f.setTime(p.Due, loc)
		f.Deadline = utcPtr(p.Deadline)
		f.State = StateDue
		f.Message = fmt.Sprintf("overdue since %s: still runs if the controller acts by %s", p.Due.UTC().Format(time.RFC3339), p.Deadline.UTC().Format(time.RFC3339))
		out = append(out, f)
	}
	after := now
	for i := 0; i < count; i++ {
		next := sched.NextFiring(after)
		if next.At.IsZero() {
			break
		}
		f := base
		f.setTime(next.At, loc)
		switch {
		case next.Skipped:
			f.DaylightSaving = "Skipped"
			f.ScheduledWallTime = next.Wall.Format("2006-01-02 15:04:05")
			f.Message = fmt.Sprintf("%s does not exist in %s (clocks go forward): fires at the end of the gap", next.Wall.Format("15:04:05"), loc)
		case next.Repeated:
			f.DaylightSaving = "Repeated"
			f.ScheduledWallTime = next.Wall.Format("2006-01-02 15:04:05")
			f.Message = fmt.Sprintf("%s occurs twice in %s (clocks go back): fires once, at the first", next.Wall.Format("15:04:05"), loc)
		}
		out = append(out, f)
		after = next.At
	}
	return out
}

func (f *Firing) setTime(t time.Time, loc *time.Location) {
	f.Time = utcPtr(t)
	f.LocalTime = t.In(loc).Format(time.RFC3339)
}

func utcPtr(t time.Time) *time.Time {
	u := t.UTC()
	return &u
}

// ruleValues returns what a rule sets on its target, as the cron-scaler
// reads it (pkg/controllers/cronscaler's ruleValues): a FederatedHPA or HPA
// gets its bounds, a LeaderWorkerSet its replicas and/or its scalePolicy's
// bounds, any other kind its replicas through the scale subresource.
func ruleValues(ref autoscalingv2.CrossVersionObjectReference, rule *autoscalingv1alpha1.CronFederatedHPARule) (Values, error) {
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	if err != nil {
		return Values{}, fmt.Errorf("scaleTargetRef.apiVersion %q: %w", ref.APIVersion, err)
	}
	all := Values{Replicas: rule.TargetReplicas, MinReplicas: rule.TargetMinReplicas, MaxReplicas: rule.TargetMaxReplicas}
	switch {
	case gv.Group == "leaderworkerset.x-k8s.io" && ref.Kind == "LeaderWorkerSet":
		if all == (Values{}) {
			return Values{}, fmt.Errorf("set targetReplicas or targetMinReplicas/targetMaxReplicas")
		}
		return all, nil
	case gv.Group == autoscalingv1alpha1.SchemeGroupVersion.Group && ref.Kind == "FederatedHPA",
		gv.Group == autoscalingv2.SchemeGroupVersion.Group && ref.Kind == "HorizontalPodAutoscaler":
		if rule.TargetMinReplicas == nil && rule.TargetMaxReplicas == nil {
			return Values{}, fmt.Errorf("targetMinReplicas and targetMaxReplicas are both unset; set at least one to adjust %s", ref.Kind)
		}
		return Values{MinReplicas: rule.TargetMinReplicas, MaxReplicas: rule.TargetMaxReplicas}, nil
	}
	if rule.TargetReplicas == nil {
		return Values{}, fmt.Errorf("targetReplicas is not set; it is required to scale %s", ref.Kind)
	}
	return Values{Replicas: rule.TargetReplicas}, nil
}

// printFirings prints the preview as a table, then one line per conflict.
func printFirings(w io.Writer, list FiringList, allNamespaces, wide bool) error {
	if len(list.Items) == 0 {
		_, err := fmt.Fprintln(w, "No CronFederatedHPA rules found.")
		return err
	}
	headers := []string{"NAME", "RULE", "TARGET", "SETS", "LOCAL TIME", "UTC", "STATE", "NOTES"}
	if wide {
		headers = []string{"NAME", "RULE", "TARGET", "SCHEDULE", "TIME ZONE", "SETS", "LOCAL TIME", "UTC", "IN", "STATE", "NOTES"}
	}
	if allNamespaces {
		headers = append([]string{"NAMESPACE"}, headers...)
	}
	t := newTable(w, headers...)
	for _, f := range list.Items {
		var local, utc, in string
		if f.Time != nil {
			loc, err := time.LoadLocation(f.TimeZone)
			if err != nil {
				loc = time.UTC
			}
			local = f.Time.In(loc).Format("2006-01-02 15:04:05 MST")
			utc = f.Time.Format("2006-01-02 15:04:05Z")
			in = duration.HumanDuration(f.Time.Sub(list.Now))
			if f.Time.Before(list.Now) {
				in = "-" + duration.HumanDuration(list.Now.Sub(*f.Time))
			}
		}
		notes := f.Message
		if f.Conflict {
			notes = strings.TrimPrefix(notes+"; CONFLICT (see below)", "; ")
		}
		zone := f.TimeZone
		if f.ControllerTimeZone {
			zone += " (controller's)"
		}
		cells := []string{f.CronFederatedHPA, f.Rule, f.Target.String(), f.Sets.String(), local, utc, f.State, notes}
		if wide {
			cells = []string{f.CronFederatedHPA, f.Rule, f.Target.String(), f.Schedule, zone, f.Sets.String(), local, utc, in, f.State, notes}
		}
		if allNamespaces {
			cells = append([]string{f.Namespace}, cells...)
		}
		t.row(cells...)
	}
	if err := t.flush(); err != nil {
		return err
	}
	for _, c := range list.Conflicts {
		target := c.Target.String()
		if allNamespaces {
			target = c.Namespace + "/" + target
		}
		if _, err := fmt.Fprintf(w, "CONFLICT: %s %s at %s is set by %s; which value stays depends on the order of the writes\n",
			target, c.Field, c.Time.Format("2006-01-02 15:04:05Z"), strings.Join(c.Firings, " and ")); err != nil {
			return err
		}
	}
	return nil
}
