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

package testkit

import (
	"testing"

	"k8s.io/client-go/tools/record"
	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
)

func TestEvents(t *testing.T) {
	r := record.NewFakeRecorder(10)
	r.Event(nil, "Warning", "Refused", "no scale policy on vllm")
	r.Event(nil, "Normal", "Scaled", "replicas to 4")
	events := DrainEvents(r)
	if len(events) != 2 || len(DrainEvents(r)) != 0 {
		t.Fatalf("drained %q, then more; want 2, then none", events)
	}
	if e, ok := FindEvent(events, "Normal Scaled", "4"); !ok || e != "Normal Scaled replicas to 4" {
		t.Errorf("FindEvent = %q, %v", e, ok)
	}
	if _, ok := FindEvent(events, "Warning", "missing"); ok {
		t.Error("found an event without the part")
	}
}

func TestMetricValue(t *testing.T) {
	counter := metrics.NewCounterVec(&metrics.CounterOpts{Name: "testkit_test_total", Help: "test"}, []string{"result"})
	legacyregistry.MustRegister(counter)
	counter.WithLabelValues("ok").Add(3)
	counter.WithLabelValues("failed").Inc()
	if v, ok := MetricValue(t, "testkit_test_total", map[string]string{"result": "ok"}); !ok || v != 3 {
		t.Errorf("ok = %v, %v; want 3", v, ok)
	}
	if _, ok := MetricValue(t, "testkit_test_total", map[string]string{"result": "none"}); ok {
		t.Error("found a series that does not exist")
	}
}
