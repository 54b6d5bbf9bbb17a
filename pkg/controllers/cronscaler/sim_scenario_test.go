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
	"fmt"
	"sort"
	"strings"
	"time"

	autoscalingv1alpha1 "github.com/scaleplane/scaleplane/pkg/apis/autoscaling/v1alpha1"
	"k8s.io/utils/ptr"
)

// The scenario of a seed: when leader terms start and how they end,
// outages and flaky periods of the apiserver, and the events of the users
// and other writers (spec edits of every kind, objects deleted and
// re-created, other writers of the targets, a second cron controller). The
// times are drawn up front; what an event does is drawn when it runs (from
// the same generator, so a seed replays exactly).

type interval struct{ from, to time.Time }

func (i interval) holds(t time.Time) bool { return !t.Before(i.from) && t.Before(i.to) }

type flakyPeriod struct {
	interval
	// fail is the share of requests answered 500 (nothing committed),
	// lost the share of writes committed whose answer is lost.
	fail, lost float64
}

type scenarioEvent struct {
	at   time.Time
	name string
	do   func()
}

type scenario struct {
	s          *sim
	begin, end time.Time
	events     []scenarioEvent
	next       int
	outages    []interval
	flakies    []flakyPeriod
	// staleList is the share of first lists served from behind the last
	// write.
	staleList float64
	// secondController says whether a second cron controller writes status.
	secondController bool
	objects          int
	uniq             int
	// sharedTarget and sharedSchedule are those of two objects sharing an
	// autoscaler (see shareAutoscaler).
	sharedTarget    simTarget
	sharedSchedule  string
	sharedHalfHours bool
	// relists and requestFaults are the model's (-sim.model, see
	// sim_model_test.go).
	relists       []relistAt
	requestFaults []requestFaults
}

// Days with a daylight-saving change at about 12 hours in (and one
// without), so that a simulated day crosses it.
var simBegins = []time.Time{
	time.Date(2024, 3, 9, 19, 0, 0, 0, time.UTC),   // US spring forward, 2024-03-10 07:00 UTC
	time.Date(2024, 3, 30, 13, 0, 0, 0, time.UTC),  // EU spring forward, 2024-03-31 01:00 UTC
	time.Date(2024, 10, 26, 13, 0, 0, 0, time.UTC), // EU fall back, 2024-10-27 01:00 UTC
	time.Date(2024, 11, 2, 18, 0, 0, 0, time.UTC),  // US fall back, 2024-11-03 06:00 UTC
	time.Date(2024, 6, 12, 5, 0, 0, 0, time.UTC),   // none
}

var simSchedules = []string{
	"*/5 * * * *", "*/5 * * * *", "*/3 * * * *", "*/10 * * * *", "*/15 * * * 1-5", "*/20 * * * 0,6",
	"0 * * * *", "30 * * * *", "15,45 * * * *", "0 */2 * * *", "30 8 * * *", "0 2 * * *", "30 2 * * *",
	"*/7 * * * *", "0 8 * * *", "*/5 * * * 1-5",
}

var simZones = []string{"UTC", "America/New_York", "Europe/Berlin", "Asia/Kolkata", ""}

func (sc *scenario) dur(from, to time.Duration) time.Duration {
	return from + time.Duration(sc.s.rng.Int64N(int64(to-from)+1))
}

func (sc *scenario) at(days float64) time.Time {
	return sc.begin.Add(time.Duration(sc.s.rng.Int64N(int64(days * 24 * float64(time.Hour)))))
}

// nearSlot moves t to just before a five-minute boundary, where most
// schedules have a slot, sometimes: edits and writes made just before a
// slot are where the watch's lag matters.
func (sc *scenario) nearSlot(t time.Time) time.Time {
	if sc.s.rng.Float64() < 0.3 {
		b := t.Truncate(5 * time.Minute).Add(5 * time.Minute)
		return b.Add(-sc.dur(time.Millisecond, 3*time.Second))
	}
	return t
}

func (sc *scenario) add(at time.Time, name string, do func()) {
	sc.events = append(sc.events, scenarioEvent{at: at, name: name, do: do})
}

func generateScenario(s *sim, days float64) *scenario {
	rng := s.rng
	sc := &scenario{s: s}
	s.scenario = sc
	sc.begin = simBegins[rng.IntN(len(simBegins))].Add(time.Duration(rng.IntN(3600)) * time.Second).Add(time.Duration(rng.IntN(1000)) * time.Millisecond)
	sc.end = sc.begin.Add(time.Duration(days * 24 * float64(time.Hour)))
	sc.staleList = rng.Float64() * 0.6
	sc.secondController = rng.Float64() < 0.25
	sc.objects = 2 + rng.IntN(4)

	// Objects, all there at the start; more come as some are re-created.
	// Sometimes the first two share an autoscaler on one schedule, one
	// setting its minReplicas, the other its maxReplicas.
	shared := rng.Float64() < 0.3
	for i := range sc.objects {
		name := fmt.Sprintf("cron-%d", i)
		sc.add(sc.begin, "create "+name, func() {
			obj := sc.newCron(name)
			if shared && i < 2 {
				sc.shareAutoscaler(obj, i)
			}
			s.srv.createCron(obj)
		})
	}

	// Leader terms.
	t := sc.begin.Add(sc.dur(0, 2*time.Minute))
	for t.Before(sc.end) {
		var up time.Duration
		switch r := rng.Float64(); {
		case r < 0.4:
			up = sc.dur(2*time.Minute, 30*time.Minute)
		case r < 0.8:
			up = sc.dur(30*time.Minute, 4*time.Hour)
		default:
			up = sc.dur(4*time.Hour, 12*time.Hour)
		}
		kind := []string{endCrash, endCrash, endCrashRecorded, endCrashRecorded, endCrashRequest, endStop, endStop}[rng.IntN(7)]
		start, endAt := t, t.Add(up)
		var nextStart time.Time
		if s.edges != nil {
			kind, endAt, nextStart = sc.edgeTerm(kind, endAt)
		}
		sc.add(start, "start", func() {
			if s.leader != nil {
				s.crash(s.leader)
			}
			s.startProc(kind, endAt)
		})
		var gap time.Duration
		switch r := rng.Float64(); {
		case r < 0.3:
			gap = sc.dur(0, 5*time.Second)
		case r < 0.7:
			gap = sc.dur(10*time.Second, 10*time.Minute)
		case r < 0.9:
			gap = sc.dur(10*time.Minute, time.Hour)
		default:
			gap = sc.dur(time.Hour, 3*time.Hour)
		}
		if t = endAt.Add(gap); !nextStart.IsZero() {
			t = nextStart
		}
	}

	// Outages of every length, and flaky periods.
	for range int(days*6) + rng.IntN(3) {
		var d time.Duration
		switch r := rng.Float64(); {
		case r < 0.35:
			d = sc.dur(time.Second, 10*time.Second)
		case r < 0.65:
			d = sc.dur(10*time.Second, 2*time.Minute)
		case r < 0.9:
			d = sc.dur(2*time.Minute, 20*time.Minute)
		default:
			d = sc.dur(20*time.Minute, 2*time.Hour)
		}
		from := sc.nearSlot(sc.at(days))
		sc.outages = append(sc.outages, interval{from, from.Add(d)})
	}
	for range int(days*5) + rng.IntN(3) {
		from := sc.at(days)
		sc.flakies = append(sc.flakies, flakyPeriod{
			interval: interval{from, from.Add(sc.dur(10*time.Second, 10*time.Minute))},
			fail:     0.05 + 0.45*rng.Float64(), lost: 0.05 + 0.25*rng.Float64(),
		})
	}

	// Spec edits.
	for range int(days*float64(sc.objects)*6) + 1 {
		sc.add(sc.nearSlot(sc.at(days)), "edit", sc.edit)
	}
	// Other writers of the targets.
	for range int(days*8) + 1 {
		sc.add(sc.nearSlot(sc.at(days)), "other writer", sc.otherWriter)
	}
	if sc.secondController {
		for range int(days*4) + 1 {
			sc.add(sc.at(days), "second controller", sc.secondControllerWrite)
		}
	}
	if s.model != nil {
		sc.generateModel(days)
	}
	sort.SliceStable(sc.events, func(i, j int) bool { return sc.events[i].at.Before(sc.events[j].at) })
	return sc
}

// nextAt is when the next event is due; zero if none.
func (sc *scenario) nextAt() time.Time {
	if sc.next >= len(sc.events) {
		return time.Time{}
	}
	return sc.events[sc.next].at
}

// due returns the events due by now, in order.
func (sc *scenario) due(now time.Time) []scenarioEvent {
	var out []scenarioEvent
	for sc.next < len(sc.events) && !sc.events[sc.next].at.After(now) {
		out = append(out, sc.events[sc.next])
		sc.next++
	}
	return out
}

// insert adds an event during the run (a re-creation).
func (sc *scenario) insert(at time.Time, name string, do func()) {
	i := sort.Search(len(sc.events)-sc.next, func(i int) bool { return sc.events[sc.next+i].at.After(at) }) + sc.next
	sc.events = append(sc.events, scenarioEvent{})
	copy(sc.events[i+1:], sc.events[i:])
	sc.events[i] = scenarioEvent{at: at, name: name, do: do}
}

func (sc *scenario) outage(t time.Time) bool {
	for _, o := range sc.outages {
		if o.holds(t) {
			return true
		}
	}
	return false
}

func (sc *scenario) flaky(t time.Time) *flakyPeriod {
	for i := range sc.flakies {
		if sc.flakies[i].holds(t) {
			return &sc.flakies[i]
		}
	}
	return nil
}

// watchLag is how late the watch delivers an event.
func (sc *scenario) watchLag() time.Duration {
	switch r := sc.s.rng.Float64(); {
	case r < 0.85:
		return sc.dur(0, 1500*time.Millisecond)
	case r < 0.98:
		return sc.dur(1500*time.Millisecond, 15*time.Second)
	default:
		return sc.dur(15*time.Second, time.Minute)
	}
}

// An object's mode: what its rules set, which decides the targets it fits.
const (
	modeReplicas = "replicas"
	modeMin      = "min"
	modeMax      = "max"
	modeBounds   = "min+max"
)

func modeOf(obj *autoscalingv1alpha1.CronFederatedHPA) string {
	return obj.Annotations["sim/mode"]
}

func (sc *scenario) targetsFor(mode string) []simTarget {
	if mode == modeReplicas {
		return []simTarget{simWeb0, simWeb1, simLWS}
	}
	return []simTarget{simHPA, simFHPA, simLWS}
}

func (sc *scenario) newCron(name string) *autoscalingv1alpha1.CronFederatedHPA {
	rng := sc.s.rng
	mode := []string{modeReplicas, modeReplicas, modeMin, modeMax, modeBounds}[rng.IntN(5)]
	targets := sc.targetsFor(mode)
	obj := &autoscalingv1alpha1.CronFederatedHPA{}
	obj.Name = name
	obj.Annotations = map[string]string{"sim/mode": mode}
	obj.Spec.ScaleTargetRef = targets[rng.IntN(len(targets))].ref()
	for range 1 + rng.IntN(3) {
		obj.Spec.Rules = append(obj.Spec.Rules, sc.newRule(mode))
	}
	return obj
}

func (sc *scenario) newRule(mode string) autoscalingv1alpha1.CronFederatedHPARule {
	rng := sc.s.rng
	sc.uniq++
	r := autoscalingv1alpha1.CronFederatedHPARule{
		Name:     fmt.Sprintf("r%d", sc.uniq),
		Schedule: simSchedules[rng.IntN(len(simSchedules))],
		TimeZone: ptr.To(simZones[rng.IntN(len(simZones))]),
	}
	sc.setValues(&r, mode)
	if rng.Float64() < 0.25 {
		r.MaxDelaySeconds = ptr.To([]int32{30, 60, 120, 600}[rng.IntN(4)])
	}
	return r
}

func (sc *scenario) setValues(r *autoscalingv1alpha1.CronFederatedHPARule, mode string) {
	rng := sc.s.rng
	r.TargetReplicas, r.TargetMinReplicas, r.TargetMaxReplicas = nil, nil, nil
	switch mode {
	case modeReplicas:
		r.TargetReplicas = ptr.To(int32(1 + rng.IntN(30)))
	case modeMin:
		r.TargetMinReplicas = ptr.To(int32(1 + rng.IntN(5)))
	case modeMax:
		r.TargetMaxReplicas = ptr.To(int32(10 + rng.IntN(20)))
	default:
		r.TargetMinReplicas = ptr.To(int32(1 + rng.IntN(5)))
		r.TargetMaxReplicas = ptr.To(int32(10 + rng.IntN(20)))
	}
}

// edit makes one spec edit of a random kind to a random object.
func (sc *scenario) edit() {
	s, rng := sc.s, sc.s.rng
	names := s.srv.cronNames()
	if len(names) == 0 {
		return
	}
	name := names[rng.IntN(len(names))]
	manager := []string{simEditor, simGitOps}[rng.IntN(2)]
	pickRule := func(obj *autoscalingv1alpha1.CronFederatedHPA) *autoscalingv1alpha1.CronFederatedHPARule {
		if len(obj.Spec.Rules) == 0 {
			return nil
		}
		return &obj.Spec.Rules[rng.IntN(len(obj.Spec.Rules))]
	}
	switch r := rng.IntN(100); {
	case r < 16: // reschedule; a weekday schedule is often widened to every day
		s.srv.editCron(name, manager, func(obj *autoscalingv1alpha1.CronFederatedHPA) {
			if rule := pickRule(obj); rule != nil {
				if strings.HasSuffix(rule.Schedule, " 1-5") && rng.IntN(2) == 0 {
					rule.Schedule = strings.TrimSuffix(rule.Schedule, "1-5") + "*"
				} else {
					rule.Schedule = simSchedules[rng.IntN(len(simSchedules))]
				}
			}
		})
	case r < 24: // time zone
		s.srv.editCron(name, manager, func(obj *autoscalingv1alpha1.CronFederatedHPA) {
			if rule := pickRule(obj); rule != nil {
				rule.TimeZone = ptr.To(simZones[rng.IntN(len(simZones))])
			}
		})
	case r < 32: // target
		s.srv.editCron(name, manager, func(obj *autoscalingv1alpha1.CronFederatedHPA) {
			targets := sc.targetsFor(modeOf(obj))
			obj.Spec.ScaleTargetRef = targets[rng.IntN(len(targets))].ref()
		})
	case r < 47: // values
		s.srv.editCron(name, manager, func(obj *autoscalingv1alpha1.CronFederatedHPA) {
			if rule := pickRule(obj); rule != nil {
				sc.setValues(rule, modeOf(obj))
			}
		})
	case r < 57: // suspend or resume
		s.srv.editCron(name, manager, func(obj *autoscalingv1alpha1.CronFederatedHPA) {
			if rule := pickRule(obj); rule != nil {
				rule.Suspend = ptr.To(!ptr.Deref(rule.Suspend, false))
			}
		})
	case r < 66: // add a rule
		s.srv.editCron(name, manager, func(obj *autoscalingv1alpha1.CronFederatedHPA) {
			if len(obj.Spec.Rules) < 4 {
				obj.Spec.Rules = append(obj.Spec.Rules, sc.newRule(modeOf(obj)))
			}
		})
	case r < 72: // remove a rule
		s.srv.editCron(name, manager, func(obj *autoscalingv1alpha1.CronFederatedHPA) {
			if n := len(obj.Spec.Rules); n > 0 {
				i := rng.IntN(n)
				obj.Spec.Rules = append(obj.Spec.Rules[:i], obj.Spec.Rules[i+1:]...)
			}
		})
	case r < 78: // rename a rule
		s.srv.editCron(name, manager, func(obj *autoscalingv1alpha1.CronFederatedHPA) {
			if rule := pickRule(obj); rule != nil {
				sc.uniq++
				rule.Name = fmt.Sprintf("r%d", sc.uniq)
			}
		})
	case r < 81: // empty the rules
		s.srv.editCron(name, manager, func(obj *autoscalingv1alpha1.CronFederatedHPA) { obj.Spec.Rules = nil })
	case r < 93: // an unrelated change: a label
		s.srv.editCron(name, manager, func(obj *autoscalingv1alpha1.CronFederatedHPA) {
			if obj.Labels == nil {
				obj.Labels = map[string]string{}
			}
			obj.Labels["sim/touched"] = fmt.Sprint(rng.IntN(1000))
		})
	default: // delete, and re-create later under the same name
		if s.srv.deleteCron(name) {
			at := s.clock.Now().Add(sc.dur(0, 30*time.Minute))
			sc.insert(at, "re-create "+name, func() {
				if !s.srv.exists(name) {
					s.srv.createCron(sc.newCron(name))
				}
			})
		}
	}
}

// otherWriter changes a target field as a user, a GitOps tool or an
// autoscaler would: through the object, or through the scale subresource.
func (sc *scenario) otherWriter() {
	rng := sc.s.rng
	t := simTargets[rng.IntN(len(simTargets))]
	fields := simFieldsOf(t)
	field := fields[rng.IntN(len(fields))]
	var v int32
	switch field {
	case fieldReplicas:
		v = int32(1 + rng.IntN(30))
	case fieldMin:
		v = int32(1 + rng.IntN(5))
	default:
		v = int32(10 + rng.IntN(20))
	}
	if field == fieldReplicas && rng.IntN(5) < 2 {
		sc.s.srv.otherWrite(t, field, v, simScaler, "scale")
		return
	}
	sc.s.srv.otherWrite(t, field, v, []string{simEditor, simGitOps}[rng.IntN(2)], "")
}

// secondControllerWrite writes an object's status as a second cron
// controller would (Karmada's, switched back on): a failed execution of a
// scheduled time the history already handled, which changes no plan.
func (sc *scenario) secondControllerWrite() {
	s, rng := sc.s, sc.s.rng
	names := s.srv.cronNames()
	if len(names) == 0 {
		return
	}
	name := names[rng.IntN(len(names))]
	s.srv.writeStatusAs(name, simOtherCron, func(status *autoscalingv1alpha1.CronFederatedHPAStatus) bool {
		for i := range status.ExecutionHistories {
			h := &status.ExecutionHistories[i]
			if last := lastScheduleOf(h); !last.IsZero() {
				h.FailedExecutions = append([]autoscalingv1alpha1.FailedExecution{{
					ScheduleTime: metaTime(last), ExecutionTime: metaTime(s.clock.Now().Truncate(time.Second)),
					Message: simForeignPrefix + "also ran by a second controller",
				}}, h.FailedExecutions...)
				return true
			}
		}
		return false
	})
}

// lastScheduleOf is the newest scheduled time a history records (the
// oracle's own reading of the status fields, not cronplan.LastHandled).
func lastScheduleOf(h *autoscalingv1alpha1.ExecutionHistory) time.Time {
	var last time.Time
	for _, e := range h.SuccessfulExecutions {
		if e.ScheduleTime != nil && e.ScheduleTime.Time.After(last) {
			last = e.ScheduleTime.Time
		}
	}
	for _, e := range h.FailedExecutions {
		if e.ScheduleTime != nil && e.ScheduleTime.Time.After(last) {
			last = e.ScheduleTime.Time
		}
	}
	return last
}

// shareAutoscaler makes obj the i-th of two objects on one autoscaler and
// schedule: the first sets minReplicas, the second maxReplicas.
func (sc *scenario) shareAutoscaler(obj *autoscalingv1alpha1.CronFederatedHPA, i int) {
	if sc.sharedTarget == "" {
		sc.sharedTarget = []simTarget{simHPA, simFHPA, simLWS}[sc.s.rng.IntN(3)]
		sc.sharedSchedule = []string{"*/5 * * * *", "*/10 * * * *", "0 * * * *", "*/15 * * * 1-5"}[sc.s.rng.IntN(4)]
		sc.sharedHalfHours = sc.s.rng.IntN(2) == 0
	}
	mode := []string{modeMin, modeMax}[i]
	obj.Annotations["sim/mode"] = mode
	obj.Spec.ScaleTargetRef = sc.sharedTarget.ref()
	for j := range obj.Spec.Rules {
		obj.Spec.Rules[j].Schedule = sc.sharedSchedule
		obj.Spec.Rules[j].TimeZone = ptr.To("UTC")
		obj.Spec.Rules[j].MaxDelaySeconds = nil
		sc.setValues(&obj.Spec.Rules[j], mode)
	}
	// Half the time, each has a rule on the hour and one at the half hour
	// setting another value, so the field changes at every slot: a firing
	// taken as applied that was not shows in the target.
	if sc.sharedHalfHours {
		first := &obj.Spec.Rules[0]
		first.Schedule, first.MaxDelaySeconds = "0 * * * *", nil
		second := sc.newRule(mode)
		second.Schedule, second.TimeZone, second.MaxDelaySeconds = "30 * * * *", ptr.To("UTC"), nil
		obj.Spec.Rules = append(obj.Spec.Rules[:1], second)
		for _, r := range []*autoscalingv1alpha1.CronFederatedHPARule{first, &obj.Spec.Rules[1]} {
			if r.TargetMinReplicas != nil {
				r.TargetMinReplicas = ptr.To(int32(1 + len(obj.Spec.Rules[0].Name)%2 + 2*boolInt(r == first)))
			}
			if r.TargetMaxReplicas != nil {
				r.TargetMaxReplicas = ptr.To(int32(12 + 8*boolInt(r == first)))
			}
		}
	}
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}
