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

package cronschedule

import (
	"fmt"
	"strconv"
	"strings"
)

// The syntax is checked here rather than left to gronx, which accepts forms
// that mean something else than they say: a month name in the day-of-week
// field ("JAN" read as Monday), "8L" read as the last Monday, "0/5" in the
// month field (no month 0). Each element of each field is checked against the
// field's range and names, and rewritten in the numeric form gronx matches.

// macros are the shorthands accepted for a whole expression: robfig/cron's
// (which Kubernetes CronJobs and Karmada run), and gronx's minute ones.
// "@every <duration>" and "@reboot" are not schedules and are rejected.
var macros = map[string]string{
	"@yearly":    "0 0 1 1 *",
	"@annually":  "0 0 1 1 *",
	"@monthly":   "0 0 1 * *",
	"@weekly":    "0 0 * * 0",
	"@daily":     "0 0 * * *",
	"@midnight":  "0 0 * * *",
	"@hourly":    "0 * * * *",
	"@always":    "* * * * *",
	"@5minutes":  "*/5 * * * *",
	"@10minutes": "*/10 * * * *",
	"@15minutes": "*/15 * * * *",
	"@30minutes": "0,30 * * * *",
	// Rejected later as firing more often than once a minute, with that
	// reason rather than an unknown-macro one.
	"@everysecond": "* * * * * *",
}

// fieldSpec describes one field of an expression; pos is gronx's position.
type fieldSpec struct {
	name     string
	pos      int
	min, max int
	names    map[string]int
	// dayField allows "?" (any day), and the field's special forms.
	dayField bool
}

var (
	monthNames = map[string]int{"JAN": 1, "FEB": 2, "MAR": 3, "APR": 4, "MAY": 5, "JUN": 6, "JUL": 7, "AUG": 8, "SEP": 9, "OCT": 10, "NOV": 11, "DEC": 12}
	dayNames   = map[string]int{"SUN": 0, "MON": 1, "TUE": 2, "WED": 3, "THU": 4, "FRI": 5, "SAT": 6}

	fieldSpecs = [6]fieldSpec{
		{name: "seconds", pos: 0, min: 0, max: 59},
		{name: "minute", pos: 1, min: 0, max: 59},
		{name: "hour", pos: 2, min: 0, max: 23},
		{name: "day-of-month", pos: 3, min: 1, max: 31, dayField: true},
		{name: "month", pos: 4, min: 1, max: 12, names: monthNames},
		// 7 is Sunday too, as in most crons (robfig/cron refuses it).
		{name: "day-of-week", pos: 5, min: 0, max: 7, names: dayNames, dayField: true},
	}
)

// segment is one checked field.
type segment struct {
	// text is the field as written; numeric is what gronx matches.
	text, numeric string
	// all is robfig/cron's "star" flag for the day fields: an element is "*"
	// or "?" with no step or a step of 1.
	all bool
}

// segments checks the expression and returns its six fields: second, minute,
// hour, day of month, month, day of week. Every error wraps ErrInvalidFormat
// and says which field and element is wrong, and why.
func segments(expr string) ([6]segment, error) {
	var out [6]segment
	text := strings.TrimSpace(expr)
	if strings.HasPrefix(text, "@") {
		m, ok := macros[strings.ToLower(text)]
		if !ok {
			return out, fmt.Errorf("%w: unknown macro %q (known: @yearly, @annually, @monthly, @weekly, @daily, @midnight, @hourly, @always, @5minutes, @10minutes, @15minutes, @30minutes)", ErrInvalidFormat, text)
		}
		text = m
	}
	fields := strings.Fields(text)
	switch len(fields) {
	case 5:
		fields = append([]string{"0"}, fields...)
	case 6:
	case 7:
		// A year field would make a schedule stop firing one day, so whether
		// it is valid would depend on when it is checked.
		return out, fmt.Errorf("%w: a year field is not supported", ErrInvalidFormat)
	default:
		return out, fmt.Errorf("%w: want 5 fields (minute, hour, day of month, month, day of week), or 6 with a leading seconds field; got %d", ErrInvalidFormat, len(fields))
	}
	for i, f := range fields {
		seg, err := checkField(fieldSpecs[i], f)
		if err != nil {
			return out, err
		}
		out[i] = seg
	}
	return out, nil
}

func checkField(spec fieldSpec, text string) (segment, error) {
	seg := segment{text: text}
	var numeric []string
	for _, element := range strings.Split(strings.ToUpper(text), ",") {
		n, all, err := checkElement(spec, element)
		if err != nil {
			return segment{}, fmt.Errorf("%w: %s field %q: %s", ErrInvalidFormat, spec.name, text, err.Error())
		}
		numeric = append(numeric, n)
		seg.all = seg.all || all
	}
	seg.numeric = strings.Join(numeric, ",")
	return seg, nil
}

// checkElement checks one element of a list and returns its numeric form and
// whether it is unrestricted.
func checkElement(spec fieldSpec, e string) (string, bool, error) {
	if e == "" {
		return "", false, fmt.Errorf("empty element in the list")
	}
	if spec.dayField {
		if n, ok, err := checkDayElement(spec, e); ok || err != nil {
			return n, false, err
		}
	}
	base, step, hasStep := strings.Cut(e, "/")
	if hasStep {
		if strings.Contains(step, "/") {
			return "", false, fmt.Errorf("%q has more than one step", e)
		}
		n, err := strconv.Atoi(step)
		if err != nil || !isDigits(step) {
			return "", false, fmt.Errorf("step %q of %q is not a number", step, e)
		}
		if n < 1 {
			return "", false, fmt.Errorf("step of %q must be at least 1", e)
		}
		step = strconv.Itoa(n)
	}
	switch {
	case base == "*":
		return e, !hasStep || step == "1", nil
	case base == "?" && spec.dayField:
		if hasStep {
			return "", false, fmt.Errorf("%q: ? means any day and takes no step", e)
		}
		return "?", true, nil
	}
	lo, hi, isRange := strings.Cut(base, "-")
	from, err := value(spec, lo)
	if err != nil {
		return "", false, err
	}
	n := strconv.Itoa(from)
	if isRange {
		to, err := value(spec, hi)
		if err != nil {
			return "", false, err
		}
		if to < from {
			return "", false, fmt.Errorf("range %q runs backwards", base)
		}
		n += "-" + strconv.Itoa(to)
	}
	if hasStep {
		n += "/" + step
	}
	return n, false, nil
}

// checkDayElement checks the day fields' special forms: L (last day of the
// month) and NW (the weekday nearest day N) in the day-of-month field, NL
// (the last day N of the month) and N#K (the K-th day N) in the day-of-week
// field. ok is false when e is none of them.
func checkDayElement(spec fieldSpec, e string) (string, bool, error) {
	if spec.pos == 3 {
		switch {
		case e == "L":
			return "L", true, nil
		case strings.HasSuffix(e, "W") && isDigits(strings.TrimSuffix(e, "W")):
			day, err := value(spec, strings.TrimSuffix(e, "W"))
			if err != nil {
				return "", true, err
			}
			return strconv.Itoa(day) + "W", true, nil
		case strings.ContainsAny(e, "LW"):
			return "", true, fmt.Errorf("%q: the day-of-month field takes L (last day) or NW (weekday nearest day N), with N from 1 to 31", e)
		}
		return "", false, nil
	}
	if day, nth, ok := strings.Cut(e, "#"); ok {
		d, err := value(spec, day)
		if err != nil {
			return "", true, err
		}
		k, err := strconv.Atoi(nth)
		if err != nil || !isDigits(nth) || k < 1 || k > 5 {
			return "", true, fmt.Errorf("%q: the week number after # must be 1 to 5", e)
		}
		return strconv.Itoa(d) + "#" + strconv.Itoa(k), true, nil
	}
	if strings.HasSuffix(e, "L") && len(e) > 1 {
		d, err := value(spec, strings.TrimSuffix(e, "L"))
		if err != nil {
			return "", true, fmt.Errorf("%q (the last given day of the week of the month): %w", e, err)
		}
		return strconv.Itoa(d) + "L", true, nil
	}
	return "", false, nil
}

// value reads a number, or a name of this field, within the field's range.
func value(spec fieldSpec, s string) (int, error) {
	if isDigits(s) {
		n, err := strconv.Atoi(s)
		if err != nil || n < spec.min || n > spec.max {
			return 0, fmt.Errorf("%s is out of range %d to %d", s, spec.min, spec.max)
		}
		return n, nil
	}
	if n, ok := spec.names[s]; ok {
		return n, nil
	}
	if _, ok := monthNames[s]; ok {
		return 0, fmt.Errorf("%s is a month name; it only belongs in the month field", s)
	}
	if _, ok := dayNames[s]; ok {
		return 0, fmt.Errorf("%s is a day name; it only belongs in the day-of-week field", s)
	}
	if s == "" {
		return 0, fmt.Errorf("a number is missing")
	}
	return 0, fmt.Errorf("%q is not a number between %d and %d", s, spec.min, spec.max)
}
