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
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/component-base/metrics/testutil"

	autoscalingv1alpha1 "github.com/scaleplane/scaleplane/pkg/apis/autoscaling/v1alpha1"
)

// burst builds n CronFederatedHPAs, each on a Deployment of its own, all due
// at 08:00, and plans them at 07:59:59.
func burst(t *testing.T, n int) *harness {
	t.Helper()
	var objects []runtime.Object
	for i := 0; i < n; i++ {
		obj := cron(fmt.Sprintf("c%d", i), rule("r", "0 8 * * *", 10))
		obj.Spec.ScaleTargetRef.Name = fmt.Sprintf("web%d", i)
		objects = append(objects, obj)
	}
	h := newHarness(t, utc("2024-05-01 07:59:59"), objects...)
	for i := 0; i < n; i++ {
		h.scales.set("deployments", fmt.Sprintf("web%d", i), 1)
		h.syncAt(utc("2024-05-01 07:59:59"), fmt.Sprintf("c%d", i))
	}
	h.client.ClearActions()
	return h
}

// runBurst runs the controller with 4 workers over the n objects of burst,
// all due, until done (or 10 s), and stops it.
func runBurst(h *harness, n int, done func() bool) {
	h.clock.SetTime(utc("2024-05-01 08:00:00.100"))
	h.c.synced = func() bool { return true }
	h.c.workers = 4
	for i := 0; i < n; i++ {
		h.c.queue.Add(cache.ObjectName{Namespace: ns, Name: fmt.Sprintf("c%d", i)})
	}
	ctx, cancel := context.WithCancel(h.ctx)
	returned := make(chan struct{})
	go func() {
		defer close(returned)
		h.c.Run(ctx)
	}()
	deadline := time.Now().Add(10 * time.Second)
	for !done() && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	receive(h.t, returned, "Run to return once stopped")
}

// writeLog records target writes and status writes in the order they are
// made.
type writeLog struct {
	mu     sync.Mutex
	writes []string
}

func (l *writeLog) add(w string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.writes = append(l.writes, w)
}

func (l *writeLog) list() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.writes...)
}

func logWrites(h *harness) *writeLog {
	l := &writeLog{}
	h.scales.fake.PrependReactor("patch", "*", func(action clienttesting.Action) (bool, runtime.Object, error) {
		l.add("target " + action.(clienttesting.PatchAction).GetName())
		return false, nil, nil
	})
	h.client.PrependReactor("update", "cronfederatedhpas", func(action clienttesting.Action) (bool, runtime.Object, error) {
		if action.GetSubresource() == "status" {
			l.add("status " + action.(clienttesting.UpdateAction).GetObject().(*autoscalingv1alpha1.CronFederatedHPA).Name)
		}
		return false, nil, nil
	})
	return l
}

// Issue 9, bursts: when many rules fire at the same time, every target write
// goes out before the first status write, and each object still gets one
// status write recording its firing.
func TestBurstWritesTargetsBeforeStatuses(t *testing.T) {
	const n = 40
	h := burst(t, n)
	writes := logWrites(h)
	runBurst(h, n, func() bool { return h.statusWrites() >= n })

	got := writes.list()
	if len(got) != 2*n {
		t.Fatalf("%d writes; want %d target writes and %d status writes: %q", len(got), n, n, got)
	}
	for i, w := range got {
		if want := "target "; i < n && !strings.HasPrefix(w, want) || i >= n && !strings.HasPrefix(w, "status ") {
			t.Fatalf("write %d is %q; want the %d target writes first, then the status writes: %q", i, w, n, got)
		}
	}
	if n := h.statusWrites(); n != 40 {
		t.Errorf("%d status writes; want one per object", n)
	}
	for i := 0; i < n; i++ {
		hist := h.history(fmt.Sprintf("c%d", i), "r")
		if len(hist.SuccessfulExecutions) != 1 || !hist.SuccessfulExecutions[0].ScheduleTime.Time.Equal(utc("2024-05-01 08:00:00")) {
			t.Errorf("c%d: successful executions %+v; want 08:00 once", i, hist.SuccessfulExecutions)
		}
		if got := timeOf(hist.NextExecutionTime); !got.Equal(utc("2024-05-02 08:00:00")) {
			t.Errorf("c%d: next = %v; want tomorrow 08:00", i, got)
		}
	}
}

// Issue 9, bursts: a firing whose target is written and whose status is not
// yet is held in memory: a sync of the object before the status write plans
// from it and fires nothing again, and the status write records the firing
// once.
func TestFiringHeldUntilRecorded(t *testing.T) {
	h := burst(t, 1)
	h.clock.SetTime(utc("2024-05-01 08:00:00.100"))
	key := cache.ObjectName{Namespace: ns, Name: "c0"}
	d, record, err := h.c.fireSync(h.ctx, key)
	if err != nil || !record {
		t.Fatalf("fire phase: record %v, err %v; want a status left to write", record, err)
	}
	if d <= 0 || d > 24*time.Hour+time.Second {
		t.Errorf("requeue after %v; want until tomorrow's 08:00", d)
	}
	if got := h.scales.get("deployments", "web0"); got != 10 {
		t.Fatalf("replicas = %d after the fire phase; want 10", got)
	}
	if n := h.statusWrites(); n != 0 {
		t.Fatalf("%d status writes in the fire phase; want none", n)
	}

	// A sync before the status write (the object changed, say).
	h.clock.SetTime(utc("2024-05-01 08:00:00.500"))
	if _, _, err := h.c.fireSync(h.ctx, key); err != nil {
		t.Fatal(err)
	}
	if n := h.scales.updateCount(); n != 1 {
		t.Errorf("%d target writes; want 1: the firing held in memory is not fired again", n)
	}

	if err := h.c.record(h.ctx, key); err != nil {
		t.Fatal(err)
	}
	h.refresh()
	if n := h.statusWrites(); n != 1 {
		t.Errorf("%d status writes; want 1", n)
	}
	hist := h.history("c0", "r")
	if len(hist.SuccessfulExecutions) != 1 || !hist.SuccessfulExecutions[0].ScheduleTime.Time.Equal(utc("2024-05-01 08:00:00")) {
		t.Errorf("successful executions %+v; want 08:00 once", hist.SuccessfulExecutions)
	}
	// Nothing is left to record, and the next sync fires nothing.
	if err := h.c.record(h.ctx, key); err != nil {
		t.Fatal(err)
	}
	h.syncAt(utc("2024-05-01 08:00:01"), "c0")
	if n := h.statusWrites(); n != 1 {
		t.Errorf("%d status writes; want still 1", n)
	}
	if n := h.scales.updateCount(); n != 1 {
		t.Errorf("%d target writes; want still 1", n)
	}
	if n := h.c.memory.size(); n != 0 {
		t.Errorf("memory holds %d objects once the status is in the cache; want 0", n)
	}
}

// Issue 9, bursts: Run stopping between the phases writes the statuses still
// queued before it returns, so the next leader has nothing to repeat.
func TestRunRecordsQueuedStatusesWhenStopping(t *testing.T) {
	h := burst(t, 3)
	h.clock.SetTime(utc("2024-05-01 08:00:00.100"))
	h.c.synced = func() bool { return true }
	for i := 0; i < 3; i++ {
		key := cache.ObjectName{Namespace: ns, Name: fmt.Sprintf("c%d", i)}
		if _, record, err := h.c.fireSync(h.ctx, key); err != nil || !record {
			t.Fatalf("fire phase of %s: record %v, err %v", key, record, err)
		}
		h.c.records.Add(key)
	}
	ctx, cancel := context.WithCancel(h.ctx)
	cancel()
	h.c.Run(ctx)
	if n := h.statusWrites(); n != 3 {
		t.Errorf("%d status writes; want the 3 queued ones written before Run returned", n)
	}
}

// Issue 9, bursts: Normal events are limited so they do not crowd out target
// writes; Warning events are never dropped.
func TestNormalEventsLimitedWarningsNever(t *testing.T) {
	const n = 2 * normalEventBurst
	var objects []runtime.Object
	for i := 0; i < n; i++ {
		ok := cron(fmt.Sprintf("ok%d", i), rule("r", "0 8 * * *", 10))
		ok.Spec.ScaleTargetRef.Name = fmt.Sprintf("web%d", i)
		bad := cron(fmt.Sprintf("bad%d", i), rule("r", "0 8 * * *", 10))
		bad.Spec.Rules[0].TargetReplicas = nil
		objects = append(objects, ok, bad)
	}
	h := newHarness(t, utc("2024-05-01 07:59:59"), objects...)
	for i := 0; i < n; i++ {
		h.scales.set("deployments", fmt.Sprintf("web%d", i), 1)
		h.syncAt(utc("2024-05-01 07:59:59"), fmt.Sprintf("ok%d", i))
		h.syncAt(utc("2024-05-01 07:59:59"), fmt.Sprintf("bad%d", i))
	}
	h.events()
	for i := 0; i < n; i++ {
		h.syncAt(utc("2024-05-01 08:00:00.100"), fmt.Sprintf("ok%d", i))
		h.syncAt(utc("2024-05-01 08:00:00.100"), fmt.Sprintf("bad%d", i))
	}
	normal, warning := 0, 0
	for _, e := range h.events() {
		switch {
		case strings.HasPrefix(e, "Normal Scaled"):
			normal++
		case strings.HasPrefix(e, "Warning ScaleFailed"):
			warning++
		}
	}
	if normal != normalEventBurst {
		t.Errorf("%d Normal events in the burst; want %d (the limit's burst)", normal, normalEventBurst)
	}
	if warning != n {
		t.Errorf("%d Warning events; want %d, one per failed firing", warning, n)
	}
	if got := h.scales.updateCount(); got != n {
		t.Errorf("%d target writes; want %d", got, n)
	}
	// Every firing is in status, event or not.
	for i := 0; i < n; i++ {
		if hist := h.history(fmt.Sprintf("ok%d", i), "r"); len(hist.SuccessfulExecutions) != 1 {
			t.Errorf("ok%d: successful executions %+v; want 1", i, hist.SuccessfulExecutions)
		}
	}
	// The limit refills.
	h.clock.Step(time.Second)
	obj := h.get("ok0")
	for i := 0; i < 2*normalEventQPS; i++ {
		h.c.normalEventf(obj, reasonScaled, "refilled %d", i)
	}
	if got := len(h.events()); got != normalEventQPS {
		t.Errorf("%d Normal events a second later; want %d", got, normalEventQPS)
	}
}

// eventLog is an EventRecorder that logs each event's reason and object in
// the writeLog, after handing it to next.
type eventLog struct {
	record.EventRecorder
	log *writeLog
}

func (e eventLog) Eventf(obj runtime.Object, eventType, reason, messageFmt string, args ...any) {
	e.EventRecorder.Eventf(obj, eventType, reason, messageFmt, args...)
	e.log.add("event " + reason + " " + obj.(*autoscalingv1alpha1.CronFederatedHPA).Name)
}

// Issue 9, bursts: Normal events are writes too; in a burst they wait, like
// the status writes, until every target is written, and each is emitted
// once its firing is recorded in status.
func TestBurstDefersNormalEvents(t *testing.T) {
	const n = 40 // within the Normal events' burst: none is dropped
	h := burst(t, n)
	writes := logWrites(h)
	h.c.recorder = eventLog{EventRecorder: h.c.recorder, log: writes}
	runBurst(h, n, func() bool { return len(writes.list()) >= 3*n })

	got := writes.list()
	statusAt := map[string]int{}
	lastTarget, events := -1, 0
	for i, w := range got {
		switch f := strings.Fields(w); f[0] {
		case "target":
			lastTarget = i
		case "status":
			statusAt[f[1]] = i
		case "event":
			events++
			if f[1] != reasonScaled {
				t.Errorf("event %q; want only %s events", w, reasonScaled)
			}
			if at, ok := statusAt[f[2]]; !ok || at > i {
				t.Errorf("%q came before the status write of %s: %q", w, f[2], got)
			}
		}
	}
	if events != n {
		t.Fatalf("%d Scaled events; want one per firing (%d): %q", events, n, got)
	}
	for i, w := range got {
		if strings.HasPrefix(w, "event ") && i < lastTarget {
			t.Fatalf("%q (write %d) came before the last target write (%d): %q", w, i, lastTarget, got)
		}
	}
}

// The events of firings whose status cannot be written are held, at most
// maxDeferredEvents per object, and dropped with the object.
func TestDeferredEventsAreBounded(t *testing.T) {
	d := newDeferredEvents()
	key := cache.ObjectName{Namespace: ns, Name: "c"}
	for i := 0; i < 3*maxDeferredEvents; i++ {
		d.add(key, "uid-1", reasonScaled, fmt.Sprintf("firing %d", i))
	}
	got := d.take(key, "uid-1")
	if len(got) != maxDeferredEvents || got[len(got)-1].message != fmt.Sprintf("firing %d", 3*maxDeferredEvents-1) {
		t.Errorf("held %d events, the last %+v; want the newest %d", len(got), got[len(got)-1], maxDeferredEvents)
	}
	d.add(key, "uid-1", reasonScaled, "of the old object")
	if got := d.take(key, "uid-2"); len(got) != 0 {
		t.Errorf("events of a re-created object's predecessor were emitted: %+v", got)
	}
	d.add(key, "uid-2", reasonScaled, "x")
	d.forget(key)
	if len(d.events) != 0 {
		t.Errorf("%d objects held after forget", len(d.events))
	}
}

// Issue 21: in a burst, only the Normal events the event rate lets through
// wait for their status writes; the others are dropped when their firing is
// applied, not held until then (at 100,000 firings their messages were tens
// of megabytes).
func TestBurstHoldsOnlyEventsWithinTheRate(t *testing.T) {
	const n = 3 * normalEventBurst
	h := burst(t, n)
	dropped0, _ := testutil.GetCounterMetricValue(droppedEvents)
	h.clock.SetTime(utc("2024-05-01 08:00:00.100"))
	for i := 0; i < n; i++ {
		if _, record, err := h.c.fireSync(h.ctx, cache.ObjectName{Namespace: ns, Name: fmt.Sprintf("c%d", i)}); err != nil || !record {
			t.Fatalf("c%d: record %v, err %v; want a status left to write", i, record, err)
		}
	}
	h.c.deferred.mu.Lock()
	held := len(h.c.deferred.events)
	h.c.deferred.mu.Unlock()
	if held != normalEventBurst {
		t.Errorf("events of %d objects held until their status writes; want %d, the event rate's burst", held, normalEventBurst)
	}
	if dropped, _ := testutil.GetCounterMetricValue(droppedEvents); dropped-dropped0 != n-normalEventBurst {
		t.Errorf("%v events counted as dropped; want %d", dropped-dropped0, n-normalEventBurst)
	}
}
