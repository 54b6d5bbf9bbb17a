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
	"errors"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/util/validation/field"

	autoscalingv1alpha1 "github.com/scaleplane/scaleplane/pkg/apis/autoscaling/v1alpha1"
	"github.com/scaleplane/scaleplane/pkg/cronschedule"
)

// horizonYears is how far ahead a schedule must fire at least once. A leap
// day comes every four years; a schedule that fires less often than that is
// a mistake, and one that never fires (0 8 31 2 *) is surely one.
const horizonYears = 4

// validateRuleSchedule checks the rule's time zone, schedule and
// maxDelaySeconds, with the parser the cron-scaler runs the rule with, so
// that an admitted schedule always runs.
func (v *Validator) validateRuleSchedule(rule *autoscalingv1alpha1.CronFederatedHPARule, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	// The zone the cron-scaler reads the rule in: an absent timeZone is the
	// process's zone, "" is UTC (as Karmada loads it). A zone that does not
	// load leaves UTC to check the schedule with.
	loc, err := cronschedule.RuleLocation(rule.TimeZone)
	if err != nil {
		errs = append(errs, field.Invalid(fldPath.Child("timeZone"), *rule.TimeZone, err.Error()))
		loc = time.UTC
	}

	schedPath := fldPath.Child("schedule")
	sched, err := cronschedule.Parse(rule.Schedule, loc)
	switch {
	case errors.Is(err, cronschedule.ErrInvalidFormat):
		// Karmada's words first ("invalid cron format"), then the parser's
		// reason: which field is wrong and why.
		errs = append(errs, field.Invalid(schedPath, rule.Schedule, err.Error()))
	case err != nil:
		errs = append(errs, field.Invalid(schedPath, rule.Schedule, err.Error()))
	default:
		errs = append(errs, v.validateFires(sched, loc, rule.Schedule, schedPath)...)
	}
	return append(errs, validateMaxDelay(rule.MaxDelaySeconds, sched, fldPath.Child("maxDelaySeconds"))...)
}

// validateFires checks that the schedule fires within the horizon from now.
// The parser already rejects schedules that can never fire; this also catches
// those that fire too rarely to be meant.
func (v *Validator) validateFires(sched *cronschedule.Schedule, loc *time.Location, expr string, fldPath *field.Path) field.ErrorList {
	now := v.clock.Now().In(loc)
	next := sched.Next(now)
	switch {
	case next.IsZero():
		return field.ErrorList{field.Invalid(fldPath, expr, "the schedule never fires")}
	case next.After(now.AddDate(horizonYears, 0, 0)):
		return field.ErrorList{field.Invalid(fldPath, expr, fmt.Sprintf(
			"the schedule does not fire within the next %d years (next firing %s)", horizonYears, next.Format(time.RFC3339)))}
	}
	return nil
}

// validateMaxDelay checks that maxDelaySeconds is at least a second and ends
// before the next firing: a firing that may still run when the next one is
// due would let two slots compete. sched is nil when the schedule is invalid,
// and then only the lower bound is checked.
func validateMaxDelay(maxDelay *int32, sched *cronschedule.Schedule, fldPath *field.Path) field.ErrorList {
	if maxDelay == nil {
		return nil
	}
	if *maxDelay < 1 {
		return field.ErrorList{field.Invalid(fldPath, *maxDelay, "must be at least 1")}
	}
	if sched == nil {
		return nil
	}
	if interval := sched.MinInterval(); interval > 0 && time.Duration(*maxDelay)*time.Second >= interval {
		return field.ErrorList{field.Invalid(fldPath, *maxDelay, fmt.Sprintf(
			"must be smaller than the shortest interval between two firings of the schedule (%s)", interval))}
	}
	return nil
}
