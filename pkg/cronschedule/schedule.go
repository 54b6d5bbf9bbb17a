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

// Package cronschedule parses cron schedules and computes their firing times
// in a time zone. The webhook validates with it and the cron-scaler runs with
// it, so a schedule that is admitted is a schedule that runs.
//
// Syntax is checked here, field by field (syntax.go): every element of a field
// must be in the field's range, names are only accepted in their own field
// (month names in the month field, day names in the day-of-week field), and
// what is not understood is rejected with the reason. Matching a single field
// is gronx's (github.com/adhocore/gronx), including L, W, # and day-of-week 7.
// How the two day fields combine is robfig/cron's, the parser Kubernetes
// CronJobs and Karmada run schedules with, so objects that migrate from Karmada
// fire on the same days: when either day field is unrestricted (`*` or `?`,
// alone or in a list, with no step or a step of 1), a day must match both;
// otherwise (`*/2` included) a day matching either fires.
//
// The search for firings is this package's: it walks the local wall clock and
// maps each matching wall time to an instant with a defined daylight-saving
// behaviour, which gronx alone does not have:
//
//   - a wall time that does not exist (spring forward) fires at the first
//     instant after the gap, once, even when several matching wall times fall
//     into the same gap;
//   - a wall time that occurs twice (fall back) fires once, at its first
//     occurrence.
//
// With these rules the mapping from wall time to instant never goes backwards,
// which is what makes Next and Prev simple searches.
package cronschedule

import (
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/adhocore/gronx"

	// Embed the time zone database so that rules' IANA zones load on images
	// without /usr/share/zoneinfo.
	_ "time/tzdata"
)

// ErrInvalidFormat is wrapped by every error Parse returns for an expression
// that is not valid cron syntax.
var ErrInvalidFormat = errors.New("invalid cron format")

const (
	secondsPerDay = 24 * 60 * 60

	// searchDays bounds every search over days. Within 1901..2099 the
	// Gregorian calendar repeats every 28 years, so a day pattern (day of
	// month, month, day of week, leap day) that matches at all matches
	// within this many days of any day.
	searchDays = 28*365 + 7

	// maxDSTShift is more than any daylight-saving shift in the tz database
	// (at most 2 hours); it bounds the look-ahead that Prev needs when a time
	// falls into the second occurrence of a repeated hour.
	maxDSTShift = 3 * time.Hour
)

// referenceDay is where MinInterval and Parse look for firings: a Saturday
// in a leap year, at the start of a 28-year calendar cycle.
var referenceDay = time.Date(2000, time.January, 1, 0, 0, 0, 0, time.UTC)

// Schedule is a parsed cron expression in a time zone. It is safe for
// concurrent use.
type Schedule struct {
	expr string
	loc  *time.Location

	// dom, month and dow are the day fields in gronx's numeric form; domAll
	// and dowAll tell whether a day field is unrestricted in robfig/cron's
	// sense, which decides whether the two day fields are ANDed or ORed.
	dom, month, dow string
	domAll, dowAll  bool
	// times are the seconds after local midnight at which the schedule fires
	// on a matching day, ascending.
	times []int

	minIntervalOnce sync.Once
	minInterval     time.Duration
}

// LoadLocation returns the time zone with the given IANA name the way
// Karmada loads a rule's timeZone, with time.LoadLocation: "" is UTC and
// "Local" is the process's zone. Its errors are time.LoadLocation's, e.g.
// "unknown time zone A/B".
func LoadLocation(name string) (*time.Location, error) {
	return time.LoadLocation(name)
}

// RuleLocation returns the time zone a rule's schedule is read in: the
// process's own when the timeZone field is absent (nil), otherwise
// LoadLocation of its value, so that an empty string is UTC as in Karmada.
func RuleLocation(timeZone *string) (*time.Location, error) {
	if timeZone == nil {
		return time.Local, nil
	}
	return LoadLocation(*timeZone)
}

// Parse parses a cron expression (five fields, six with a leading seconds
// field, or a macro such as @daily) to be read in loc (nil means UTC). It
// rejects what the controller cannot run: syntax errors (wrapping
// ErrInvalidFormat, with the reason), a year field, a schedule that fires
// more often than once a minute, and one that never fires.
func Parse(expr string, loc *time.Location) (*Schedule, error) {
	if loc == nil {
		loc = time.UTC
	}
	segs, err := segments(expr)
	if err != nil {
		return nil, err
	}
	s := &Schedule{
		expr: expr, loc: loc,
		dom: segs[3].numeric, month: segs[4].numeric, dow: segs[5].numeric,
		domAll: segs[3].all, dowAll: segs[5].all,
	}

	second, err := strconv.Atoi(segs[0].numeric)
	if err != nil || !isDigits(segs[0].numeric) || second < 0 || second > 59 {
		return nil, fmt.Errorf("schedule %q fires more often than once a minute: its seconds field %q is not a single value between 0 and 59", expr, segs[0].text)
	}
	minutes := matchingValues(segs[1].numeric, 1, 59)
	hours := matchingValues(segs[2].numeric, 2, 23)
	for _, h := range hours {
		for _, m := range minutes {
			s.times = append(s.times, h*3600+m*60+second)
		}
	}
	if len(s.times) == 0 {
		return nil, fmt.Errorf("schedule %q never fires: no minute or hour matches", expr)
	}
	if _, ok := s.nextDay(referenceDay, searchDays); !ok {
		return nil, fmt.Errorf("schedule %q never fires: no day matches its day-of-month, month and day-of-week fields", expr)
	}
	return s, nil
}

func isDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}

// matchingValues returns the values 0..max that gronx's checker finds due
// for the minute (pos 1) or hour (pos 2) field seg.
func matchingValues(seg string, pos, max int) []int {
	checker := &gronx.SegmentChecker{}
	var values []int
	for v := 0; v <= max; v++ {
		ref := referenceDay
		if pos == 1 {
			ref = ref.Add(time.Duration(v) * time.Minute)
		} else {
			ref = ref.Add(time.Duration(v) * time.Hour)
		}
		checker.SetRef(ref)
		if due, err := checker.CheckDue(seg, pos); err == nil && due {
			values = append(values, v)
		}
	}
	return values
}

// String returns the expression the schedule was parsed from.
func (s *Schedule) String() string { return s.expr }

// Location returns the time zone the schedule is read in.
func (s *Schedule) Location() *time.Location { return s.loc }

// Next returns the first firing strictly after after, or the zero time if
// there is none.
func (s *Schedule) Next(after time.Time) time.Time {
	t, _ := s.next(after)
	return t
}

// Firing is one firing of a schedule: the instant it runs at and the local
// wall time the expression matched, which differ across a daylight-saving
// change.
type Firing struct {
	// At is the instant of the firing (zero when there is none).
	At time.Time
	// Wall is the matched local wall time, as a time in UTC whose fields are
	// the local fields.
	Wall time.Time
	// Skipped: Wall does not exist in the zone (spring forward); the firing
	// runs at the first instant after the gap.
	Skipped bool
	// Repeated: Wall occurs twice in the zone (fall back); the firing runs
	// once, at its first occurrence.
	Repeated bool
}

// NextFiring is Next, with what the firing's wall time was and how a
// daylight-saving change moved it. kubectl-scaleplane shows it, so the
// preview is the controller's own computation.
func (s *Schedule) NextFiring(after time.Time) Firing {
	t, w := s.next(after)
	if t.IsZero() {
		return Firing{}
	}
	return Firing{At: t, Wall: w, Skipped: !wallClock(t, s.loc).Equal(w), Repeated: s.repeated(w, t)}
}

// next returns the first firing strictly after after and the wall time it
// matched, or zero times if there is none.
func (s *Schedule) next(after time.Time) (time.Time, time.Time) {
	// Every wall time up to after's own wall time maps to an instant at or
	// before after (first occurrences come first, and a gap's wall times map
	// to the gap's end), so the search starts there. Wall times just after
	// it can still map before after when after is the second occurrence of
	// a repeated hour; the loop skips those.
	w := wallClock(after, s.loc)
	for i := 0; i < 2*secondsPerDay; i++ {
		var ok bool
		if w, ok = s.nextWall(w); !ok {
			return time.Time{}, time.Time{}
		}
		if t := s.instant(w); t.After(after) {
			return t, w
		}
	}
	return time.Time{}, time.Time{}
}

// repeated tells whether the wall time w, first occurring at first, occurs
// again later (a fall-back change within maxDSTShift).
func (s *Schedule) repeated(w, first time.Time) bool {
	_, offset := first.Add(maxDSTShift).In(s.loc).Zone()
	again := time.Unix(w.Unix()-int64(offset), 0)
	return again.After(first) && wallClock(again, s.loc).Equal(w)
}

// Prev returns the latest firing at or before t, or the zero time if there is
// none.
func (s *Schedule) Prev(t time.Time) time.Time {
	w := wallClock(t, s.loc)
	if s.instant(w).Before(t.Truncate(time.Second)) {
		// t is the second occurrence of a repeated wall time: wall times a
		// little later than t's (their first occurrences) are before t too.
		w = w.Add(maxDSTShift)
	}
	for i := 0; i < 2*secondsPerDay; i++ {
		var ok bool
		if w, ok = s.prevWall(w); !ok {
			return time.Time{}
		}
		if inst := s.instant(w); !inst.After(t) {
			return inst
		}
		w = w.Add(-time.Second)
	}
	return time.Time{}
}

// MinInterval returns the shortest interval between two consecutive firings
// on the wall clock, looking at one 28-year calendar cycle (so leap days and
// weekdays are all seen). A daylight-saving change can make one real interval
// shorter by the size of the shift. The result is computed once.
func (s *Schedule) MinInterval() time.Duration {
	s.minIntervalOnce.Do(func() {
		min := -1
		for i := 1; i < len(s.times); i++ {
			if d := s.times[i] - s.times[i-1]; min < 0 || d < min {
				min = d
			}
		}
		// Between days: the last firing of one matching day to the first of
		// the next.
		prev, ok := s.nextDay(referenceDay, searchDays)
		end := referenceDay.AddDate(0, 0, searchDays)
		for ok && prev.Before(end) {
			var day time.Time
			if day, ok = s.nextDay(prev.AddDate(0, 0, 1), searchDays); !ok {
				break
			}
			days := int(day.Sub(prev) / (24 * time.Hour))
			d := days*secondsPerDay + s.times[0] - s.times[len(s.times)-1]
			if min < 0 || d < min {
				min = d
			}
			prev = day
		}
		if min > 0 {
			s.minInterval = time.Duration(min) * time.Second
		}
	})
	return s.minInterval
}

// nextWall returns the first matching wall time strictly after w. Wall times
// are represented as times in UTC whose fields are the local fields.
func (s *Schedule) nextWall(w time.Time) (time.Time, bool) {
	day := w.Truncate(24 * time.Hour)
	secs := int(w.Sub(day) / time.Second)
	if s.dayMatches(day) {
		for _, t := range s.times {
			if t > secs {
				return day.Add(time.Duration(t) * time.Second), true
			}
		}
	}
	day, ok := s.nextDay(day.AddDate(0, 0, 1), searchDays)
	if !ok {
		return time.Time{}, false
	}
	return day.Add(time.Duration(s.times[0]) * time.Second), true
}

// prevWall returns the latest matching wall time at or before w.
func (s *Schedule) prevWall(w time.Time) (time.Time, bool) {
	day := w.Truncate(24 * time.Hour)
	secs := int(w.Sub(day) / time.Second)
	if s.dayMatches(day) {
		for i := len(s.times) - 1; i >= 0; i-- {
			if s.times[i] <= secs {
				return day.Add(time.Duration(s.times[i]) * time.Second), true
			}
		}
	}
	for i := 1; i <= searchDays; i++ {
		d := day.AddDate(0, 0, -i)
		if s.dayMatches(d) {
			return d.Add(time.Duration(s.times[len(s.times)-1]) * time.Second), true
		}
	}
	return time.Time{}, false
}

// nextDay returns the first matching day at or after day, looking at most
// limit days ahead.
func (s *Schedule) nextDay(day time.Time, limit int) (time.Time, bool) {
	for i := 0; i < limit; i++ {
		d := day.AddDate(0, 0, i)
		if s.dayMatches(d) {
			return d, true
		}
	}
	return time.Time{}, false
}

// dayMatches tells whether the day (a UTC midnight carrying the local date)
// matches the day-of-month, month and day-of-week fields. Each field is
// matched by gronx on its own; the two day fields combine as in robfig/cron:
// ANDed when either is unrestricted, ORed otherwise.
func (s *Schedule) dayMatches(day time.Time) bool {
	checker := &gronx.SegmentChecker{}
	checker.SetRef(day)
	if !fieldDue(checker, s.month, 4) {
		return false
	}
	dom, dow := fieldDue(checker, s.dom, 3), fieldDue(checker, s.dow, 5)
	if s.domAll || s.dowAll {
		return dom && dow
	}
	return dom || dow
}

func fieldDue(checker *gronx.SegmentChecker, seg string, pos int) bool {
	due, err := checker.CheckDue(seg, pos)
	return err == nil && due
}

// wallClock returns t's local wall time in loc, truncated to the second, as
// a UTC time with the same fields.
func wallClock(t time.Time, loc *time.Location) time.Time {
	l := t.In(loc)
	return time.Date(l.Year(), l.Month(), l.Day(), l.Hour(), l.Minute(), l.Second(), 0, time.UTC)
}

// instant maps a wall time in s.loc to the instant it fires at: the first
// occurrence of a wall time that occurs twice, the end of the gap for one
// that does not occur at all.
func (s *Schedule) instant(w time.Time) time.Time {
	naive := w.Unix()
	var first, afterGap time.Time
	// The offsets in force around the wall time; a zone changes its offset
	// at most once or twice within two days.
	for _, probe := range []int64{-secondsPerDay, -secondsPerDay / 2, 0, secondsPerDay / 2, secondsPerDay} {
		_, offset := time.Unix(naive+probe, 0).In(s.loc).Zone()
		cand := time.Unix(naive-int64(offset), 0).In(s.loc)
		switch cw := wallClock(cand, s.loc); {
		case cw.Equal(w):
			if first.IsZero() || cand.Before(first) {
				first = cand
			}
		case cw.After(w):
			if afterGap.IsZero() || cand.Before(afterGap) {
				afterGap = cand
			}
		}
	}
	if !first.IsZero() {
		return first
	}
	if !afterGap.IsZero() {
		// The wall time was skipped: fire when the new offset starts.
		start, _ := afterGap.ZoneBounds()
		if !start.IsZero() && !start.After(afterGap) {
			return start
		}
		return afterGap
	}
	return time.Date(w.Year(), w.Month(), w.Day(), w.Hour(), w.Minute(), w.Second(), 0, s.loc)
}
