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
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/scaleplane/scaleplane/pkg/cronschedule"
)

// fuzzZones are the time zones the fuzzer picks from: the process's own, UTC,
// zones with daylight saving on either hemisphere, and odd offsets.
var fuzzZones = []string{
	"", "UTC", "Asia/Shanghai", "America/New_York", "Europe/London", "Australia/Lord_Howe",
	"Pacific/Chatham", "Asia/Kathmandu", "America/Santiago", "Pacific/Kiritimati",
}

// fuzzEpoch and fuzzSpan bound the instants the fuzzer validates at.
var fuzzEpoch = time.Date(2000, time.January, 1, 0, 0, 0, 0, time.UTC)

const fuzzSpanHours = 90 * 365 * 24

// FuzzScheduleAcceptedRuns checks the promise of the schedule rules: a
// schedule the webhook admits is one the cron-scaler schedules (it parses,
// in the rule's time zone, and has a next firing) and that fires within the
// next four years.
func FuzzScheduleAcceptedRuns(f *testing.F) {
	for _, seed := range []string{
		"* * * * *", "30 8 * * 1-5", "0 */2 * * *", "0 0 1 1 *", "0 0 29 2 *", "0 8 31 2 *", "0 0 30 2 *",
		"@yearly", "@annually", "@monthly", "@weekly", "@daily", "@midnight", "@hourly", "@5minutes",
		"@10minutes", "@15minutes", "@30minutes", "@everysecond", "@everyminute", "@reboot",
		"0 30 8 * * *", "*/10 * * * * *", "59 59 23 31 12 *", "0 0 0 29 2 1",
		"0 8 L * *", "0 8 L-3 * *", "0 8 15W * *", "0 8 LW * *", "0 8 * * 5L", "0 8 * * 1#2", "0 8 * * 7",
		"0 8 * * SUN", "0 8 * JAN-MAR MON-FRI", "0 2 * * *", "30 2 * * *", "0 1 * * 0", "0,30 1-3 * * *",
		"0 8 * * * 2030", "x", "", "* * * *", "61 * * * *", "0 24 * * *", "0 0 0 * *", "0 0 * 13 *",
		"0 0 * * 8", "1-60/5 * * * *", "5-1 * * * *", "*/0 * * * *", "0 0 31 4,6,9,11 *",
	} {
		f.Add(seed, uint8(0), uint32(26*365*24))
	}
	f.Add("30 2 * * *", uint8(3), uint32(26*365*24+1680)) // New York, spring forward in March
	f.Add("30 1 * * *", uint8(3), uint32(26*365*24+7400)) // New York, fall back in November
	f.Add("0 0 29 2 *", uint8(1), uint32(fuzzSpanHours-1))

	f.Fuzz(func(t *testing.T, expr string, zone uint8, offsetHours uint32) {
		tz := fuzzZones[int(zone)%len(fuzzZones)]
		now := fuzzEpoch.Add(time.Duration(offsetHours%fuzzSpanHours) * time.Hour)
		rule := replicasRule("r", expr, 1)
		if tz != "" {
			rule.TimeZone = ptr.To(tz)
		}
		v := NewValidator(clocktesting.NewFakePassiveClock(now))
		for _, err := range v.ValidateCronFederatedHPA(deploymentCron(rule)) {
			if err.Field == "spec.rules[0].schedule" || err.Field == "spec.rules[0].timeZone" {
				return // rejected: nothing promised
			}
		}

		loc, err := cronschedule.RuleLocation(rule.TimeZone)
		if err != nil {
			t.Fatalf("admitted time zone %q does not load: %v", tz, err)
		}
		sched, err := cronschedule.Parse(expr, loc)
		if err != nil {
			t.Fatalf("admitted schedule %q does not parse in %s: %v", expr, loc, err)
		}
		next := sched.Next(now)
		if next.IsZero() {
			t.Fatalf("admitted schedule %q in %s never fires after %s", expr, loc, now)
		}
		if !next.After(now) {
			t.Fatalf("admitted schedule %q in %s: next firing %s is not after %s", expr, loc, next, now)
		}
		if limit := now.In(loc).AddDate(4, 0, 0); next.After(limit) {
			t.Fatalf("admitted schedule %q in %s: next firing %s is after %s, more than four years after %s", expr, loc, next, limit, now)
		}
	})
}
