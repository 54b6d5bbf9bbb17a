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

// Package testkit holds what the controllers' unit test harnesses share:
// reading the events a fake recorder got, and the metrics /metrics serves.
package testkit

import (
	"strings"
	"testing"

	"k8s.io/client-go/tools/record"
	"k8s.io/component-base/metrics/legacyregistry"
)

// DrainEvents returns the events the recorder got since the last drain.
func DrainEvents(r *record.FakeRecorder) []string {
	var out []string
	for {
		select {
		case e := <-r.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

// FindEvent returns the first event that starts with prefix and contains
// every one of parts.
func FindEvent(events []string, prefix string, parts ...string) (string, bool) {
	for _, e := range events {
		if !strings.HasPrefix(e, prefix) {
			continue
		}
		ok := true
		for _, p := range parts {
			ok = ok && strings.Contains(e, p)
		}
		if ok {
			return e, true
		}
	}
	return "", false
}

// MetricValue reads the series of the counter or gauge name whose labels
// include labels, from the registry /metrics serves; ok is false when there
// is none.
func MetricValue(t testing.TB, name string, labels map[string]string) (value float64, ok bool) {
	t.Helper()
	families, err := legacyregistry.DefaultGatherer.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
	series:
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if want, ok := labels[l.GetName()]; ok && want != l.GetValue() {
					continue series
				}
			}
			if m.GetGauge() != nil {
				return m.GetGauge().GetValue(), true
			}
			return m.GetCounter().GetValue(), true
		}
	}
	return 0, false
}
