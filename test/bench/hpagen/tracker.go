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

package main

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	lwsv1 "github.com/scaleplane/scaleplane/pkg/apis/leaderworkerset/v1"
	"github.com/scaleplane/scaleplane/test/bench/internal/benchutil"
)

// eventCounts counts watch events by what changed.
type eventCounts struct {
	added, deleted int
	// spec: spec, labels, annotations or owner references changed (what a
	// generator owns or reacts to); status: only the status changed;
	// other: neither (managedFields and the like).
	spec, status, other int
}

func (c eventCounts) modified() int { return c.spec + c.status + c.other }

func (c eventCounts) minus(o eventCounts) eventCounts {
	return eventCounts{
		added: c.added - o.added, deleted: c.deleted - o.deleted,
		spec: c.spec - o.spec, status: c.status - o.status, other: c.other - o.other,
	}
}

type lwsRecord struct {
	want    expectation
	created time.Time // when its create request was sent
}

type hpaRecord struct {
	obj  *autoscalingv2.HorizontalPodAutoscaler
	seen time.Time // when the watch delivered this version
}

// tracker follows the HPAs through a watch and records when each first
// became correct: the version seen by the watch is right in every field the
// generator owns, for the LeaderWorkerSet (by UID) the benchmark created.
type tracker struct {
	n int

	mu         sync.Mutex
	lws        map[string]lwsRecord
	hpas       map[string]hpaRecord
	correct    map[string]time.Time
	brokenOnce map[string]bool // correct once, then seen wrong again
	hpaEvents  eventCounts
	lwsEvents  eventCounts
	allCorrect chan struct{}
}

func newTracker(n int) *tracker {
	return &tracker{
		n:          n,
		lws:        map[string]lwsRecord{},
		hpas:       map[string]hpaRecord{},
		correct:    map[string]time.Time{},
		brokenOnce: map[string]bool{},
		allCorrect: make(chan struct{}),
	}
}

// created records a LeaderWorkerSet the benchmark created.
func (t *tracker) created(name string, rec lwsRecord) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.lws[name] = rec
	t.evaluate(name)
}

// observeHPA handles one watch event on the HPAs.
func (t *tracker) observeHPA(ev watch.Event, now time.Time) {
	hpa, ok := ev.Object.(*autoscalingv2.HorizontalPodAutoscaler)
	if !ok {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	switch ev.Type {
	case watch.Added:
		t.hpaEvents.added++
	case watch.Deleted:
		t.hpaEvents.deleted++
		delete(t.hpas, hpa.Name)
		return
	case watch.Modified:
		if old, ok := t.hpas[hpa.Name]; ok {
			classify(&t.hpaEvents, &old.obj.ObjectMeta, &hpa.ObjectMeta, old.obj.Spec, hpa.Spec, old.obj.Status, hpa.Status)
		} else {
			t.hpaEvents.other++
		}
	default:
		return
	}
	t.hpas[hpa.Name] = hpaRecord{obj: hpa, seen: now}
	t.evaluate(hpa.Name)
}

// observeLWS counts the watch events on the LeaderWorkerSets.
func (t *tracker) observeLWS(ev watch.Event, old map[string]*lwsv1.LeaderWorkerSet) {
	lws, ok := ev.Object.(*lwsv1.LeaderWorkerSet)
	if !ok {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	switch ev.Type {
	case watch.Added:
		t.lwsEvents.added++
	case watch.Deleted:
		t.lwsEvents.deleted++
	case watch.Modified:
		if prev, ok := old[lws.Name]; ok {
			classify(&t.lwsEvents, &prev.ObjectMeta, &lws.ObjectMeta, prev.Spec, lws.Spec, prev.Status, lws.Status)
		} else {
			t.lwsEvents.other++
		}
	default:
		return
	}
	old[lws.Name] = lws
}

func classify(c *eventCounts, oldMeta, newMeta *metav1.ObjectMeta, oldSpec, newSpec, oldStatus, newStatus any) {
	switch {
	case !equality.Semantic.DeepEqual(oldSpec, newSpec) ||
		!equality.Semantic.DeepEqual(oldMeta.Labels, newMeta.Labels) ||
		!equality.Semantic.DeepEqual(oldMeta.Annotations, newMeta.Annotations) ||
		!equality.Semantic.DeepEqual(oldMeta.OwnerReferences, newMeta.OwnerReferences):
		c.spec++
	case !equality.Semantic.DeepEqual(oldStatus, newStatus):
		c.status++
	default:
		c.other++
	}
}

// evaluate checks the newest HPA of name against its LeaderWorkerSet. Called
// with mu held.
func (t *tracker) evaluate(name string) {
	rec, ok1 := t.lws[name]
	hpa, ok2 := t.hpas[name]
	if !ok1 || !ok2 {
		return
	}
	wrong := rec.want.problems(hpa.obj) != ""
	if _, done := t.correct[name]; done {
		if wrong {
			t.brokenOnce[name] = true
		}
		return
	}
	if wrong {
		return
	}
	t.correct[name] = hpa.seen
	if len(t.correct) == t.n {
		close(t.allCorrect)
	}
}

func (t *tracker) counts() (hpa, lws eventCounts) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.hpaEvents, t.lwsEvents
}

func (t *tracker) correctCount() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.correct)
}

// latencies returns, sorted, each HPA's time to correct (seen correct minus
// its LeaderWorkerSet's create request), and when the last one became correct.
func (t *tracker) latencies() ([]time.Duration, time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]time.Duration, 0, len(t.correct))
	var last time.Time
	for name, at := range t.correct {
		out = append(out, at.Sub(t.lws[name].created))
		if at.After(last) {
			last = at
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out, last
}

// broken lists the HPAs that were correct once and wrong later.
func (t *tracker) broken() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []string
	for name := range t.brokenOnce {
		out = append(out, name)
	}
	sort.Strings(out)
	return out
}

// describe says what is wrong with the HPAs not correct yet, for a timeout.
func (t *tracker) describe(limit int) string {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []string
	for name, rec := range t.lws {
		if _, ok := t.correct[name]; ok {
			continue
		}
		hpa, ok := t.hpas[name]
		switch {
		case !ok:
			out = append(out, name+": no HPA")
		default:
			out = append(out, name+": "+rec.want.problems(hpa.obj))
		}
	}
	sort.Strings(out)
	if len(out) > limit {
		out = append(out[:limit], fmt.Sprintf("... %d more", len(out)-limit))
	}
	return fmt.Sprint(out)
}

// startWatch lists to get a resource version and watches from it
// (benchutil.Watch). The watch ends with ctx.
func startWatch(ctx context.Context, list func(context.Context) (string, error),
	watchFn func(context.Context, metav1.ListOptions) (watch.Interface, error), handle func(watch.Event, time.Time)) error {
	rv, err := list(ctx)
	if err != nil {
		return err
	}
	return benchutil.Watch(ctx, rv, watchFn, handle)
}
