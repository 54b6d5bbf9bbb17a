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
	"fmt"
	"sort"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Firings of different rules that meet on one field of one target: at one
// instant (a conflict), or both due after a downtime (the later supersedes
// the earlier).

// supersede marks the due firings every field of which a later due firing
// on the same target sets, of the same object or another: the controller
// applies a field's latest scheduled value only, so that the target does
// not flap through stale ones, and records the others as superseded (the
// cron-scaler's fire and yieldToOtherObjects). A firing that keeps one of
// its fields stays due. Of objects not listed (next NAME) nothing is known.
func supersede(items []Firing) {
	type fieldOf struct {
		ns, group, kind, name, field string
	}
	keyOf := func(f *Firing, field string) fieldOf {
		gv, _ := schema.ParseGroupVersion(f.Target.APIVersion)
		return fieldOf{f.Namespace, gv.Group, f.Target.Kind, f.Target.Name, field}
	}
	latest := map[fieldOf]int{}
	for i := range items {
		if items[i].State != StateDue {
			continue
		}
		for field := range items[i].Sets.fields() {
			k := keyOf(&items[i], field)
			if j, ok := latest[k]; !ok || items[i].Time.After(*items[j].Time) {
				latest[k] = i
			}
		}
	}
	for i := range items {
		f := &items[i]
		if f.State != StateDue {
			continue
		}
		by, kept := -1, false
		for field := range f.Sets.fields() {
			if j := latest[keyOf(f, field)]; items[j].Time.After(*f.Time) {
				by = j
			} else {
				kept = true
			}
		}
		if by >= 0 && !kept {
			g := &items[by]
			f.State = StateSuperseded
			f.Message = fmt.Sprintf("not applied: rule %s of %s, scheduled later (%s), sets the same field of %s and is due too: the controller records this one as superseded",
				g.Rule, g.CronFederatedHPA, g.Time.UTC().Format(time.RFC3339), f.Target)
		}
	}
}

// findConflicts flags firings of different rules that set the same field of
// the same target at the same instant, and returns them.
func findConflicts(items []Firing) []Conflict {
	type key struct {
		ns, group, kind, name, field string
		at                           int64
	}
	byKey := map[key][]int{}
	var order []key
	for i := range items {
		f := &items[i]
		if f.Time == nil || (f.State != StateScheduled && f.State != StateDue) {
			continue
		}
		gv, _ := schema.ParseGroupVersion(f.Target.APIVersion)
		for field := range f.Sets.fields() {
			k := key{f.Namespace, gv.Group, strings.ToLower(f.Target.Kind), f.Target.Name, field, f.Time.UnixNano()}
			if _, ok := byKey[k]; !ok {
				order = append(order, k)
			}
			byKey[k] = append(byKey[k], i)
		}
	}
	var conflicts []Conflict
	for _, k := range order {
		idx := byKey[k]
		if len(idx) < 2 {
			continue
		}
		first := items[idx[0]]
		c := Conflict{Namespace: k.ns, Target: first.Target, Field: k.field, Time: *first.Time}
		for _, i := range idx {
			items[i].Conflict = true
			c.Firings = append(c.Firings, fmt.Sprintf("%s/%s=%d", items[i].CronFederatedHPA, items[i].Rule, items[i].Sets.fields()[k.field]))
		}
		sort.Strings(c.Firings)
		conflicts = append(conflicts, c)
	}
	sort.SliceStable(conflicts, func(i, j int) bool {
		a, b := conflicts[i], conflicts[j]
		if !a.Time.Equal(b.Time) {
			return a.Time.Before(b.Time)
		}
		if a.Namespace != b.Namespace {
			return a.Namespace < b.Namespace
		}
		if a.Target.String() != b.Target.String() {
			return a.Target.String() < b.Target.String()
		}
		return a.Field < b.Field
	})
	return conflicts
}
