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
	"errors"
	"strings"
	"testing"
	"time"
)

func mustLoad(t *testing.T, name string) *time.Location {
	t.Helper()
	loc, err := LoadLocation(name)
	if err != nil {
		t.Fatalf("LoadLocation(%q): %v", name, err)
	}
	return loc
}

// at parses "2006-01-02 15:04:05 -0700"; the offset picks the occurrence of
// a repeated wall time.
func at(t *testing.T, s string) time.Time {
	t.Helper()
	v, err := time.Parse("2006-01-02 15:04:05 -0700", s)
	if err != nil {
		t.Fatalf("parse %q: %v", s, err)
	}
	return v
}

// An empty time zone is UTC, as in Karmada (time.LoadLocation("")); only an
// absent one is the process's own zone.
func TestLoadLocation(t *testing.T) {
	if loc, err := LoadLocation(""); err != nil || loc != time.UTC {
		t.Errorf(`LoadLocation("") = %v, %v; want UTC`, loc, err)
	}
	if loc, err := RuleLocation(nil); err != nil || loc != time.Local {
		t.Errorf("RuleLocation(nil) = %v, %v; want time.Local", loc, err)
	}
	if loc, err := RuleLocation(new(string)); err != nil || loc != time.UTC {
		t.Errorf(`RuleLocation("") = %v, %v; want UTC`, loc, err)
	}
	if loc, err := LoadLocation("Asia/Shanghai"); err != nil || loc.String() != "Asia/Shanghai" {
		t.Errorf("LoadLocation(Asia/Shanghai) = %v, %v", loc, err)
	}
	if _, err := LoadLocation("A/B"); err == nil || err.Error() != "unknown time zone A/B" {
		t.Errorf("LoadLocation(A/B) error = %v; want unknown time zone A/B", err)
	}
}

func TestParse(t *testing.T) {
	tests := []struct {
		expr string
		// wantErr: "" accepted; "format" wraps ErrInvalidFormat; otherwise a
		// substring of the descriptive error.
		wantErr string
	}{
		{expr: "3 * * * *"},
		{expr: "30 8 * * 1-5"},
		{expr: "*/5 * * * *"},
		{expr: "0 0,12 1 */2 *"},
		{expr: "0 9 * JAN-MAR MON-FRI"},
		{expr: "0 0 * * 7"},   // gronx runs 7 as Sunday
		{expr: "0 0 * * 1-7"}, // and in ranges
		{expr: "0 0 L * *"},   // last day of the month
		{expr: "0 0 15W * *"}, // weekday nearest the 15th
		{expr: "0 0 * * 5L"},  // last Friday
		{expr: "0 0 * * 1#2"}, // second Monday
		{expr: "0 0 ? * 1"},
		{expr: "0 0 29 2 *"},   // fires only in leap years
		{expr: "30 0 8 * * *"}, // six fields with a single seconds value
		{expr: "@yearly"},
		{expr: "@annually"},
		{expr: "@monthly"},
		{expr: "@weekly"},
		{expr: "@daily"},
		{expr: "@hourly"},
		{expr: "@always"},
		{expr: "@5minutes"},
		{expr: "@10minutes"},
		{expr: "@15minutes"},
		{expr: "@30minutes"},
		{expr: "  0  8 * *   * "},

		{expr: "", wantErr: "format"},
		{expr: "* * * *", wantErr: "format"},
		{expr: "a * * * *", wantErr: "format"},
		{expr: "60 * * * *", wantErr: "format"},
		{expr: "0 24 * * *", wantErr: "format"},
		{expr: "0 0 0 * *", wantErr: "format"},
		{expr: "0 0 * 13 *", wantErr: "format"},
		{expr: "0 0 * * 8", wantErr: "format"},
		{expr: "5-3 * * * *", wantErr: "format"},
		{expr: "*/0 * * * *", wantErr: "format"},
		{expr: "*/ * * * *", wantErr: "format"},
		{expr: "0,99 * * * *", wantErr: "format"}, // invalid whatever the time
		{expr: "*,99 * * * *", wantErr: "format"},
		{expr: "0, * * * *", wantErr: "format"},
		{expr: "L * * * *", wantErr: "format"},
		{expr: "0 0 * L *", wantErr: "format"},
		{expr: "0 0 5L * *", wantErr: "format"},
		{expr: "0 0 * * 1W", wantErr: "format"},
		{expr: "@reboot", wantErr: "format"},
		{expr: "@every 5m", wantErr: "format"},
		{expr: "0 0 1 1 * 2030", wantErr: "format"}, // year field
		{expr: "0 0 0 1 1 * 2030", wantErr: "format"},

		{expr: "0 8 31 2 *", wantErr: "never fires"},
		{expr: "0 0 30 2 *", wantErr: "never fires"},
		{expr: "0 0 31 4,6,9,11 *", wantErr: "never fires"},
		{expr: "0 0 * * 1#6", wantErr: "format"},
		{expr: "@everysecond", wantErr: "more often than once a minute"},
		{expr: "* * * * * *", wantErr: "more often than once a minute"},
		{expr: "*/5 * * * * *", wantErr: "more often than once a minute"},
		{expr: "0-10 * * * * *", wantErr: "more often than once a minute"},
		{expr: "0,30 * * * * *", wantErr: "more often than once a minute"},
	}
	for _, tt := range tests {
		t.Run(tt.expr, func(t *testing.T) {
			s, err := Parse(tt.expr, time.UTC)
			switch {
			case tt.wantErr == "":
				if err != nil {
					t.Fatalf("Parse: %v", err)
				}
				// What Parse accepts must run.
				from := time.Date(2025, 6, 1, 0, 0, 0, 0, time.UTC)
				if n := s.Next(from); n.IsZero() || !n.After(from) {
					t.Errorf("Next(%v) = %v; an accepted schedule must fire", from, n)
				}
				if p := s.Prev(from); p.IsZero() || p.After(from) {
					t.Errorf("Prev(%v) = %v", from, p)
				}
				if s.MinInterval() < time.Minute {
					t.Errorf("MinInterval = %v; want at least a minute", s.MinInterval())
				}
			case tt.wantErr == "format":
				if !errors.Is(err, ErrInvalidFormat) {
					t.Errorf("Parse error = %v; want ErrInvalidFormat", err)
				}
			default:
				if err == nil || errors.Is(err, ErrInvalidFormat) || !strings.Contains(err.Error(), tt.wantErr) {
					t.Errorf("Parse error = %v; want one saying %q", err, tt.wantErr)
				}
			}
		})
	}
}

func TestNextPrev(t *testing.T) {
	tests := []struct {
		name     string
		expr     string
		zone     string
		from     string
		wantNext []string // successive firings after from
		wantPrev string   // latest firing at or before from
	}{
		{
			name: "proposal: applied at 09:04, next 10:03", expr: "3 * * * *", zone: "UTC",
			from: "2024-05-01 09:04:00 +0000", wantNext: []string{"2024-05-01 10:03:00 +0000"},
			wantPrev: "2024-05-01 09:03:00 +0000",
		},
		{
			name: "proposal: applied at 09:01, next 09:03 then 10:03", expr: "3 * * * *", zone: "UTC",
			from:     "2024-05-01 09:01:00 +0000",
			wantNext: []string{"2024-05-01 09:03:00 +0000", "2024-05-01 10:03:00 +0000"},
			wantPrev: "2024-05-01 08:03:00 +0000",
		},
		{
			name: "next is strictly after, prev is at or before", expr: "3 * * * *", zone: "UTC",
			from: "2024-05-01 09:03:00 +0000", wantNext: []string{"2024-05-01 10:03:00 +0000"},
			wantPrev: "2024-05-01 09:03:00 +0000",
		},
		{
			name: "sub-second times", expr: "* * * * *", zone: "UTC",
			from: "2024-05-01 09:02:59 +0000", wantNext: []string{"2024-05-01 09:03:00 +0000"},
			wantPrev: "2024-05-01 09:02:00 +0000",
		},
		{
			name: "time zone: Asia/Shanghai 08:30", expr: "30 8 * * *", zone: "Asia/Shanghai",
			from:     "2024-05-01 00:00:00 +0000",
			wantNext: []string{"2024-05-01 08:30:00 +0800", "2024-05-02 08:30:00 +0800"},
			wantPrev: "2024-04-30 08:30:00 +0800",
		},
		{
			name: "seconds field", expr: "30 0 8 * * *", zone: "UTC",
			from: "2024-05-01 08:00:00 +0000", wantNext: []string{"2024-05-01 08:00:30 +0000"},
			wantPrev: "2024-04-30 08:00:30 +0000",
		},
		{
			name: "leap day", expr: "0 0 29 2 *", zone: "UTC",
			from: "2024-06-01 00:00:00 +0000", wantNext: []string{"2028-02-29 00:00:00 +0000", "2032-02-29 00:00:00 +0000"},
			wantPrev: "2024-02-29 00:00:00 +0000",
		},
		{
			name: "last day of month", expr: "0 0 L * *", zone: "UTC",
			from: "2025-02-01 00:00:00 +0000", wantNext: []string{"2025-02-28 00:00:00 +0000", "2025-03-31 00:00:00 +0000"},
			wantPrev: "2025-01-31 00:00:00 +0000",
		},
		{
			name: "second monday", expr: "0 0 * * 1#2", zone: "UTC",
			from: "2024-02-01 00:00:00 +0000", wantNext: []string{"2024-02-12 00:00:00 +0000", "2024-03-11 00:00:00 +0000"},
			wantPrev: "2024-01-08 00:00:00 +0000",
		},
		{
			name: "day of month or day of week", expr: "0 0 13 * 5", zone: "UTC",
			from: "2024-09-01 00:00:00 +0000", wantNext: []string{"2024-09-06 00:00:00 +0000", "2024-09-13 00:00:00 +0000", "2024-09-20 00:00:00 +0000"},
			wantPrev: "2024-08-30 00:00:00 +0000",
		},

		// Los Angeles springs forward on 2024-03-10 at 02:00 PST to 03:00 PDT.
		{
			name: "LA spring forward: skipped 02:30 fires at 03:00 PDT", expr: "30 2 * * *", zone: "America/Los_Angeles",
			from:     "2024-03-10 00:00:00 -0800",
			wantNext: []string{"2024-03-10 03:00:00 -0700", "2024-03-11 02:30:00 -0700"},
			wantPrev: "2024-03-09 02:30:00 -0800",
		},
		{
			name: "LA spring forward: the gap fires once", expr: "*/15 2 * * *", zone: "America/Los_Angeles",
			from:     "2024-03-10 01:50:00 -0800",
			wantNext: []string{"2024-03-10 03:00:00 -0700", "2024-03-11 02:00:00 -0700"},
			wantPrev: "2024-03-09 02:45:00 -0800",
		},
		{
			name: "LA spring forward: gap and 03:00 are one firing", expr: "0 2,3 * * *", zone: "America/Los_Angeles",
			from:     "2024-03-10 01:00:00 -0800",
			wantNext: []string{"2024-03-10 03:00:00 -0700", "2024-03-11 02:00:00 -0700"},
			wantPrev: "2024-03-09 03:00:00 -0800",
		},
		{
			name: "LA spring forward: prev after the gap", expr: "30 2 * * *", zone: "America/Los_Angeles",
			from:     "2024-03-10 04:00:00 -0700",
			wantNext: []string{"2024-03-11 02:30:00 -0700"},
			wantPrev: "2024-03-10 03:00:00 -0700",
		},
		{
			name: "LA spring forward: hourly", expr: "0 * * * *", zone: "America/Los_Angeles",
			from:     "2024-03-10 00:30:00 -0800",
			wantNext: []string{"2024-03-10 01:00:00 -0800", "2024-03-10 03:00:00 -0700", "2024-03-10 04:00:00 -0700"},
			wantPrev: "2024-03-10 00:00:00 -0800",
		},
		// Los Angeles falls back on 2024-11-03 at 02:00 PDT to 01:00 PST.
		{
			name: "LA fall back: repeated 01:30 fires at its first occurrence", expr: "30 1 * * *", zone: "America/Los_Angeles",
			from:     "2024-11-03 00:00:00 -0700",
			wantNext: []string{"2024-11-03 01:30:00 -0700", "2024-11-04 01:30:00 -0800"},
			wantPrev: "2024-11-02 01:30:00 -0700",
		},
		{
			name: "LA fall back: not again in the second occurrence", expr: "*/30 1 * * *", zone: "America/Los_Angeles",
			from:     "2024-11-03 00:59:00 -0700",
			wantNext: []string{"2024-11-03 01:00:00 -0700", "2024-11-03 01:30:00 -0700", "2024-11-04 01:00:00 -0800"},
			wantPrev: "2024-11-02 01:30:00 -0700",
		},
		{
			name: "LA fall back: from inside the second occurrence", expr: "*/30 1 * * *", zone: "America/Los_Angeles",
			from:     "2024-11-03 01:15:00 -0800",
			wantNext: []string{"2024-11-04 01:00:00 -0800"},
			wantPrev: "2024-11-03 01:30:00 -0700",
		},
		{
			name: "LA fall back: hourly", expr: "0 * * * *", zone: "America/Los_Angeles",
			from:     "2024-11-03 00:30:00 -0700",
			wantNext: []string{"2024-11-03 01:00:00 -0700", "2024-11-03 02:00:00 -0800", "2024-11-03 03:00:00 -0800"},
			wantPrev: "2024-11-03 00:00:00 -0700",
		},
		// Berlin springs forward on 2024-03-31 at 02:00 CET to 03:00 CEST and
		// falls back on 2024-10-27 at 03:00 CEST to 02:00 CET.
		{
			name: "Berlin spring forward", expr: "30 2 * * *", zone: "Europe/Berlin",
			from:     "2024-03-31 01:00:00 +0100",
			wantNext: []string{"2024-03-31 03:00:00 +0200", "2024-04-01 02:30:00 +0200"},
			wantPrev: "2024-03-30 02:30:00 +0100",
		},
		{
			name: "Berlin fall back", expr: "30 2 * * *", zone: "Europe/Berlin",
			from:     "2024-10-27 01:00:00 +0200",
			wantNext: []string{"2024-10-27 02:30:00 +0200", "2024-10-28 02:30:00 +0100"},
			wantPrev: "2024-10-26 02:30:00 +0200",
		},
		{
			name: "Berlin fall back: from the second 02:45", expr: "30 2 * * *", zone: "Europe/Berlin",
			from:     "2024-10-27 02:45:00 +0100",
			wantNext: []string{"2024-10-28 02:30:00 +0100"},
			wantPrev: "2024-10-27 02:30:00 +0200",
		},
		{
			name: "Berlin fall back: from between the occurrences", expr: "30 2 * * *", zone: "Europe/Berlin",
			from:     "2024-10-27 02:15:00 +0100",
			wantNext: []string{"2024-10-28 02:30:00 +0100"},
			wantPrev: "2024-10-27 02:30:00 +0200",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := Parse(tt.expr, mustLoad(t, tt.zone))
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			from := at(t, tt.from)
			cur := from
			for i, want := range tt.wantNext {
				got := s.Next(cur)
				if !got.Equal(at(t, want)) {
					t.Fatalf("Next #%d after %v = %v; want %s", i, cur, got, want)
				}
				cur = got
			}
			if got := s.Prev(from); !got.Equal(at(t, tt.wantPrev)) {
				t.Errorf("Prev(%v) = %v; want %s", from, got, tt.wantPrev)
			}
		})
	}
}

// TestNextPrevConsistent checks, minute by minute across both transitions,
// that Prev and Next agree: Prev(Next(t)) == Next(t) and Next(Prev(t)) > t.
func TestNextPrevConsistent(t *testing.T) {
	for _, zone := range []string{"America/Los_Angeles", "Europe/Berlin", "Australia/Lord_Howe"} {
		for _, expr := range []string{"* * * * *", "*/7 * * * *", "30 2 * * *", "0 1-3 * * *"} {
			s, err := Parse(expr, mustLoad(t, zone))
			if err != nil {
				t.Fatal(err)
			}
			for _, start := range []time.Time{
				time.Date(2024, 3, 9, 20, 0, 0, 0, time.UTC),
				time.Date(2024, 10, 26, 20, 0, 0, 0, time.UTC),
				time.Date(2024, 11, 2, 20, 0, 0, 0, time.UTC),
				time.Date(2024, 4, 6, 10, 0, 0, 0, time.UTC),
			} {
				for m := 0; m < 24*60; m += 7 {
					now := start.Add(time.Duration(m) * time.Minute)
					next := s.Next(now)
					if !next.After(now) {
						t.Fatalf("%s %q: Next(%v) = %v, not after", zone, expr, now, next)
					}
					if p := s.Prev(next); !p.Equal(next) {
						t.Fatalf("%s %q: Prev(Next(%v)=%v) = %v", zone, expr, now, next, p)
					}
					prev := s.Prev(now)
					if prev.After(now) || !s.Next(prev).Equal(next) {
						t.Fatalf("%s %q at %v: prev %v, Next(prev) %v, next %v", zone, expr, now, prev, s.Next(prev), next)
					}
				}
			}
		}
	}
}

func TestMinInterval(t *testing.T) {
	tests := []struct {
		expr string
		want time.Duration
	}{
		{"* * * * *", time.Minute},
		{"3 * * * *", time.Hour},
		{"*/5 * * * *", 5 * time.Minute},
		{"0,50 * * * *", 10 * time.Minute},
		{"0 8,11 * * *", 3 * time.Hour},
		{"30 23 * * *", 24 * time.Hour},
		{"0 0 * * 1,3", 48 * time.Hour},
		{"0 0 1,31 * *", 24 * time.Hour},
		{"0 0 L * *", 28 * 24 * time.Hour},
		{"0 0 29 2 *", (4*365 + 1) * 24 * time.Hour},
		{"@yearly", 365 * 24 * time.Hour},
		{"0 23 * * 1-5", 24 * time.Hour},
		{"0 0,23 * * 0,1", time.Hour},
	}
	for _, tt := range tests {
		s, err := Parse(tt.expr, time.UTC)
		if err != nil {
			t.Fatalf("Parse(%q): %v", tt.expr, err)
		}
		if got := s.MinInterval(); got != tt.want {
			t.Errorf("MinInterval(%q) = %v; want %v", tt.expr, got, tt.want)
		}
	}
}

// TestParseRejectsJunkWithAReason: forms gronx alone accepts with another
// meaning than they say are rejected, and the error says which field is wrong
// and why.
func TestParseRejectsJunkWithAReason(t *testing.T) {
	tests := []struct {
		expr, want string
	}{
		{"0 0 * * 8L", `day-of-week field "8L": "8L" (the last given day of the week of the month): 8 is out of range 0 to 7`},
		{"0 0 * * JAN", `day-of-week field "JAN": JAN is a month name; it only belongs in the month field`},
		{"0 0 * MON *", `month field "MON": MON is a day name; it only belongs in the day-of-week field`},
		{"0 0 * 0/5 *", `month field "0/5": 0 is out of range 1 to 12`},
		{"0 0 0/5 * *", `day-of-month field "0/5": 0 is out of range 1 to 31`},
		{"0 0 * * 1#6", `day-of-week field "1#6": "1#6": the week number after # must be 1 to 5`},
		{"0 0 LW * *", `day-of-month field "LW": "LW": the day-of-month field takes L (last day) or NW (weekday nearest day N), with N from 1 to 31`},
		{"0 0 ? * ?/2", `day-of-week field "?/2": "?/2": ? means any day and takes no step`},
		{"? * * * *", `minute field "?": "?" is not a number between 0 and 59`},
		{"5-3 * * * *", `minute field "5-3": range "5-3" runs backwards`},
		{"*/0 * * * *", `minute field "*/0": step of "*/0" must be at least 1`},
		{"0 0 * * 1/2/3", `day-of-week field "1/2/3": "1/2/3" has more than one step`},
		{"@reboot", `unknown macro "@reboot"`},
		{"* * * *", "want 5 fields (minute, hour, day of month, month, day of week), or 6 with a leading seconds field; got 4"},
	}
	for _, tt := range tests {
		t.Run(tt.expr, func(t *testing.T) {
			_, err := Parse(tt.expr, time.UTC)
			if !errors.Is(err, ErrInvalidFormat) || !strings.HasPrefix(err.Error(), "invalid cron format: ") || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Parse(%q) error = %v; want invalid cron format saying %q", tt.expr, err, tt.want)
			}
		})
	}
}

// robfigFacts are what robfig/cron v3.0.1's standard parser (the one
// Kubernetes CronJobs and Karmada's cron-scaler use) returns for edge
// expressions of the day fields: the first eight firings after 2024-01-01
// 00:00 UTC, and the number of firings in February 2024. They were observed by
// running robfig/cron; they are facts to agree with, not code. The rule they
// show: a day field that is "*" or "?" (alone or in a list, with no step or
// step 1) makes the day fields ANDed; otherwise they are ORed, "*/2" included.
var robfigFacts = []struct {
	expr  string
	feb   int
	first []string
}{
	{"0 8 */2 * 1", 17, []string{"2024-01-01 08:00", "2024-01-03 08:00", "2024-01-05 08:00", "2024-01-07 08:00", "2024-01-08 08:00", "2024-01-09 08:00", "2024-01-11 08:00", "2024-01-13 08:00"}},
	{"0 8 * * */2", 17, []string{"2024-01-02 08:00", "2024-01-04 08:00", "2024-01-06 08:00", "2024-01-07 08:00", "2024-01-09 08:00", "2024-01-11 08:00", "2024-01-13 08:00", "2024-01-14 08:00"}},
	{"0 8 1-31 * 1", 29, []string{"2024-01-01 08:00", "2024-01-02 08:00", "2024-01-03 08:00", "2024-01-04 08:00", "2024-01-05 08:00", "2024-01-06 08:00", "2024-01-07 08:00", "2024-01-08 08:00"}},
	{"0 8 */1 * 1", 4, []string{"2024-01-01 08:00", "2024-01-08 08:00", "2024-01-15 08:00", "2024-01-22 08:00", "2024-01-29 08:00", "2024-02-05 08:00", "2024-02-12 08:00", "2024-02-19 08:00"}},
	{"0 8 ? * 1", 4, []string{"2024-01-01 08:00", "2024-01-08 08:00", "2024-01-15 08:00", "2024-01-22 08:00", "2024-01-29 08:00", "2024-02-05 08:00", "2024-02-12 08:00", "2024-02-19 08:00"}},
	{"0 8 1,* * 1", 4, []string{"2024-01-01 08:00", "2024-01-08 08:00", "2024-01-15 08:00", "2024-01-22 08:00", "2024-01-29 08:00", "2024-02-05 08:00", "2024-02-12 08:00", "2024-02-19 08:00"}},
	{"0 8 */2 * */2", 23, []string{"2024-01-01 08:00", "2024-01-02 08:00", "2024-01-03 08:00", "2024-01-04 08:00", "2024-01-05 08:00", "2024-01-06 08:00", "2024-01-07 08:00", "2024-01-09 08:00"}},
	{"0 8 1/2 * 1", 17, []string{"2024-01-01 08:00", "2024-01-03 08:00", "2024-01-05 08:00", "2024-01-07 08:00", "2024-01-08 08:00", "2024-01-09 08:00", "2024-01-11 08:00", "2024-01-13 08:00"}},
	{"0 8 13 * 5", 5, []string{"2024-01-05 08:00", "2024-01-12 08:00", "2024-01-13 08:00", "2024-01-19 08:00", "2024-01-26 08:00", "2024-02-02 08:00", "2024-02-09 08:00", "2024-02-13 08:00"}},
	{"0 8 * * 1-5", 21, []string{"2024-01-01 08:00", "2024-01-02 08:00", "2024-01-03 08:00", "2024-01-04 08:00", "2024-01-05 08:00", "2024-01-08 08:00", "2024-01-09 08:00", "2024-01-10 08:00"}},
	{"0 8 */3 * MON", 13, []string{"2024-01-01 08:00", "2024-01-04 08:00", "2024-01-07 08:00", "2024-01-08 08:00", "2024-01-10 08:00", "2024-01-13 08:00", "2024-01-15 08:00", "2024-01-16 08:00"}},
	{"0 8 1-7 * 1", 10, []string{"2024-01-01 08:00", "2024-01-02 08:00", "2024-01-03 08:00", "2024-01-04 08:00", "2024-01-05 08:00", "2024-01-06 08:00", "2024-01-07 08:00", "2024-01-08 08:00"}},
	{"0 0 */10 * 6,0", 10, []string{"2024-01-06 00:00", "2024-01-07 00:00", "2024-01-11 00:00", "2024-01-13 00:00", "2024-01-14 00:00", "2024-01-20 00:00", "2024-01-21 00:00", "2024-01-27 00:00"}},
	{"0 8 1 * *", 1, []string{"2024-01-01 08:00", "2024-02-01 08:00", "2024-03-01 08:00", "2024-04-01 08:00", "2024-05-01 08:00", "2024-06-01 08:00", "2024-07-01 08:00", "2024-08-01 08:00"}},
	{"0 8 * * 0", 4, []string{"2024-01-07 08:00", "2024-01-14 08:00", "2024-01-21 08:00", "2024-01-28 08:00", "2024-02-04 08:00", "2024-02-11 08:00", "2024-02-18 08:00", "2024-02-25 08:00"}},
	{"0 8 15 * ?", 1, []string{"2024-01-15 08:00", "2024-02-15 08:00", "2024-03-15 08:00", "2024-04-15 08:00", "2024-05-15 08:00", "2024-06-15 08:00", "2024-07-15 08:00", "2024-08-15 08:00"}},
	{"0 8 2/3 * 5", 12, []string{"2024-01-02 08:00", "2024-01-05 08:00", "2024-01-08 08:00", "2024-01-11 08:00", "2024-01-12 08:00", "2024-01-14 08:00", "2024-01-17 08:00", "2024-01-19 08:00"}},
	{"0 8 */2 * 1-5", 25, []string{"2024-01-01 08:00", "2024-01-02 08:00", "2024-01-03 08:00", "2024-01-04 08:00", "2024-01-05 08:00", "2024-01-07 08:00", "2024-01-08 08:00", "2024-01-09 08:00"}},
	{"0 8 1,15 * */3", 14, []string{"2024-01-01 08:00", "2024-01-03 08:00", "2024-01-06 08:00", "2024-01-07 08:00", "2024-01-10 08:00", "2024-01-13 08:00", "2024-01-14 08:00", "2024-01-15 08:00"}},
	{"0 8 10-20/5 * SUN", 7, []string{"2024-01-07 08:00", "2024-01-10 08:00", "2024-01-14 08:00", "2024-01-15 08:00", "2024-01-20 08:00", "2024-01-21 08:00", "2024-01-28 08:00", "2024-02-04 08:00"}},
	{"0 0 * */2 1", 0, []string{"2024-01-08 00:00", "2024-01-15 00:00", "2024-01-22 00:00", "2024-01-29 00:00", "2024-03-04 00:00", "2024-03-11 00:00", "2024-03-18 00:00", "2024-03-25 00:00"}},
	{"0 0 31 */2 *", 0, []string{"2024-01-31 00:00", "2024-03-31 00:00", "2024-05-31 00:00", "2024-07-31 00:00", "2025-01-31 00:00", "2025-03-31 00:00", "2025-05-31 00:00", "2025-07-31 00:00"}},
	{"0 8 * * 1/1", 25, []string{"2024-01-01 08:00", "2024-01-02 08:00", "2024-01-03 08:00", "2024-01-04 08:00", "2024-01-05 08:00", "2024-01-06 08:00", "2024-01-08 08:00", "2024-01-09 08:00"}},
	{"0 8 1 * */1", 1, []string{"2024-01-01 08:00", "2024-02-01 08:00", "2024-03-01 08:00", "2024-04-01 08:00", "2024-05-01 08:00", "2024-06-01 08:00", "2024-07-01 08:00", "2024-08-01 08:00"}},
	{"@midnight", 29, []string{"2024-01-02 00:00", "2024-01-03 00:00", "2024-01-04 00:00", "2024-01-05 00:00", "2024-01-06 00:00", "2024-01-07 00:00", "2024-01-08 00:00", "2024-01-09 00:00"}},
}

// TestDayFieldsAgreeWithRobfigCron is a differential test against robfig/cron's
// observed results: objects that migrate from Karmada must fire on the same
// days here.
func TestDayFieldsAgreeWithRobfigCron(t *testing.T) {
	from := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, f := range robfigFacts {
		t.Run(f.expr, func(t *testing.T) {
			s, err := Parse(f.expr, time.UTC)
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			var got []string
			for cur, i := from, 0; i < len(f.first); i++ {
				cur = s.Next(cur)
				got = append(got, cur.Format("2006-01-02 15:04"))
			}
			if strings.Join(got, ", ") != strings.Join(f.first, ", ") {
				t.Errorf("first firings:\n got %v\nwant %v (robfig/cron)", got, f.first)
			}
			feb := 0
			for cur := time.Date(2024, 2, 1, 0, 0, 0, 0, time.UTC); ; {
				if cur = s.Next(cur.Add(-time.Second)); cur.Month() != time.February {
					break
				}
				feb++
				cur = cur.Add(time.Second)
			}
			if feb != f.feb {
				t.Errorf("firings in February 2024 = %d; robfig/cron fires %d", feb, f.feb)
			}
		})
	}
}

func TestNextFiringDaylightSaving(t *testing.T) {
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name, expr        string
		after             time.Time
		wantAt            time.Time
		wantWall          string
		skipped, repeated bool
	}{
		{
			// 2026-03-29 02:30 does not exist in Berlin: clocks go 02:00 -> 03:00.
			name: "gap", expr: "30 2 * * *",
			after:  time.Date(2026, 3, 29, 0, 0, 0, 0, time.UTC),
			wantAt: time.Date(2026, 3, 29, 1, 0, 0, 0, time.UTC), wantWall: "2026-03-29 02:30", skipped: true,
		},
		{
			// 2026-10-25 02:30 occurs twice: first at 00:30 UTC (CEST), again at 01:30 UTC.
			name: "repeat", expr: "30 2 * * *",
			after:  time.Date(2026, 10, 24, 12, 0, 0, 0, time.UTC),
			wantAt: time.Date(2026, 10, 25, 0, 30, 0, 0, time.UTC), wantWall: "2026-10-25 02:30", repeated: true,
		},
		{
			name: "ordinary", expr: "30 2 * * *",
			after:  time.Date(2026, 10, 26, 0, 0, 0, 0, time.UTC),
			wantAt: time.Date(2026, 10, 26, 1, 30, 0, 0, time.UTC), wantWall: "2026-10-26 02:30",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s, err := Parse(tc.expr, berlin)
			if err != nil {
				t.Fatal(err)
			}
			f := s.NextFiring(tc.after)
			if !f.At.Equal(tc.wantAt) || f.Wall.Format("2006-01-02 15:04") != tc.wantWall || f.Skipped != tc.skipped || f.Repeated != tc.repeated {
				t.Errorf("NextFiring(%v) = %+v; want at %v, wall %s, skipped %v, repeated %v", tc.after, f, tc.wantAt, tc.wantWall, tc.skipped, tc.repeated)
			}
			if next := s.Next(tc.after); !next.Equal(f.At) {
				t.Errorf("Next(%v) = %v; NextFiring says %v", tc.after, next, f.At)
			}
		})
	}
}
