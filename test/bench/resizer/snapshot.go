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
	"strings"
	"time"

	"k8s.io/client-go/kubernetes"

	"github.com/scaleplane/scaleplane/test/bench/internal/benchutil"
)

// apiSnapshot is the apiserver's counters at one moment; they count every
// client, so a window is attributed by what else ran in it.
type apiSnapshot struct {
	at time.Time
	// requests is apiserver_request_total by "VERB resource[/subresource]",
	// with the scope for LIST and WATCH ("LIST pods cluster").
	requests map[string]float64
	// listBytes is the bytes of LIST responses (apiserver_response_sizes),
	// by resource.
	listBytes map[string]float64
	// watchBytes and watchEvents are what the apiserver sent to watchers
	// (apiserver_watch_events_sizes, apiserver_watch_events_total), by
	// resource.
	watchBytes, watchEvents map[string]float64
	// watchLists counts the streaming lists (a WATCH with sendInitialEvents,
	// client-go's WatchListClient): apiserver_watch_list_duration_seconds.
	watchLists map[string]float64
	// The apiserver's process: CPU seconds and resident bytes.
	cpu, rss float64
}

func takeAPI(ctx context.Context, kube kubernetes.Interface) (apiSnapshot, error) {
	s := apiSnapshot{at: time.Now()}
	text, err := benchutil.ScrapeAPIServer(ctx, kube)
	if err != nil {
		return s, err
	}
	for _, m := range []struct {
		dst  *map[string]float64
		name string
		key  func(map[string]string) string
	}{
		{&s.requests, "apiserver_request_total", requestKey},
		{&s.listBytes, "apiserver_response_sizes_sum", listResource},
		{&s.watchBytes, "apiserver_watch_events_sizes_sum", resourceOrKind},
		{&s.watchEvents, "apiserver_watch_events_total", resourceOrKind},
		{&s.watchLists, "apiserver_watch_list_duration_seconds_count", benchutil.ByLabel("resource")},
	} {
		if *m.dst, err = sumOf(text, m.name, m.key); err != nil {
			return s, err
		}
	}
	proc, err := sumOf(text, "process_cpu_seconds_total", all)
	if err != nil {
		return s, err
	}
	rss, err := sumOf(text, "process_resident_memory_bytes", all)
	if err != nil {
		return s, err
	}
	s.cpu, s.rss = proc["all"], rss["all"]
	return s, nil
}

func requestKey(l map[string]string) string {
	key := l["verb"] + " " + l["resource"]
	if l["subresource"] != "" {
		key += "/" + l["subresource"]
	}
	if l["verb"] == "LIST" || l["verb"] == "WATCH" {
		key += " " + l["scope"]
	}
	return key
}

func listResource(l map[string]string) string {
	if l["verb"] != "LIST" {
		return ""
	}
	return l["resource"]
}

// resourceOrKind reads the resource label, or kind in older apiservers.
func resourceOrKind(l map[string]string) string {
	if r := l["resource"]; r != "" {
		return r
	}
	return l["kind"]
}

// apiWindow is what the apiserver counted between two snapshots.
type apiWindow struct {
	length                          time.Duration
	requests, listBytes, watchBytes map[string]float64
	watchEvents, watchLists         map[string]float64
	cpu                             float64 // the apiserver's CPU seconds
	rss                             float64 // its resident bytes at the end
}

func apiBetween(a, b apiSnapshot) apiWindow {
	return apiWindow{
		length:      b.at.Sub(a.at),
		requests:    benchutil.Delta(a.requests, b.requests),
		listBytes:   benchutil.Delta(a.listBytes, b.listBytes),
		watchBytes:  benchutil.Delta(a.watchBytes, b.watchBytes),
		watchEvents: benchutil.Delta(a.watchEvents, b.watchEvents),
		watchLists:  benchutil.Delta(a.watchLists, b.watchLists),
		cpu:         b.cpu - a.cpu,
		rss:         b.rss,
	}
}

// verb returns the window's requests of one verb, by the rest of the key.
func (w apiWindow) verb(v string) map[string]float64 {
	out := map[string]float64{}
	for k, n := range w.requests {
		if rest, ok := cutVerb(k, v); ok {
			out[rest] = n
		}
	}
	return out
}

// split divides the window's requests of verb between the manager's
// resources and the others.
func (w apiWindow) split(verb string) (mine, others map[string]float64) {
	mine, others = map[string]float64{}, map[string]float64{}
	for key, n := range w.verb(verb) {
		resource, _, _ := strings.Cut(key, " ")
		if managerResources[resource] {
			mine[key] = n
		} else {
			others[key] = n
		}
	}
	return mine, others
}

func cutVerb(key, verb string) (string, bool) {
	if len(key) > len(verb) && key[:len(verb)] == verb && key[len(verb)] == ' ' {
		return key[len(verb)+1:], true
	}
	return "", false
}

// managerSnapshot is the controller manager's own counters and its process.
type managerSnapshot struct {
	at        time.Time
	writes    map[string]float64 // resizer_writes_total by kind
	decisions map[string]float64 // resizer_decisions_total by outcome
	requests  map[string]float64 // rest_client_requests_total by method
	queueAdds float64            // workqueue_adds_total{name="resizer"}
	// Go runtime gauges: heap in use, heap objects' bytes (live and not yet
	// collected), the heap size of the next GC (GOGC), memory from the OS,
	// goroutines.
	heapInuse, heapAlloc, nextGC, sys, goroutines float64
	proc                                          procStat
}

func takeManager(ctx context.Context, port, pid int) (managerSnapshot, error) {
	s := managerSnapshot{at: time.Now()}
	text, err := benchutil.ScrapeManager(ctx, port)
	if err != nil {
		return s, err
	}
	for _, m := range []struct {
		dst  *map[string]float64
		name string
		key  func(map[string]string) string
	}{
		{&s.writes, "resizer_writes_total", benchutil.ByLabel("kind")},
		{&s.decisions, "resizer_decisions_total", benchutil.ByLabel("outcome")},
		{&s.requests, "rest_client_requests_total", benchutil.ByLabel("method")},
	} {
		if *m.dst, err = sumOf(text, m.name, m.key); err != nil {
			return s, err
		}
	}
	adds, err := sumOf(text, "workqueue_adds_total", benchutil.ByLabel("name"))
	if err != nil {
		return s, err
	}
	s.queueAdds = adds["resizer"]
	for _, g := range []struct {
		dst  *float64
		name string
	}{
		{&s.heapInuse, "go_memstats_heap_inuse_bytes"},
		{&s.heapAlloc, "go_memstats_heap_alloc_bytes"},
		{&s.nextGC, "go_memstats_next_gc_bytes"},
		{&s.sys, "go_memstats_sys_bytes"},
		{&s.goroutines, "go_goroutines"},
	} {
		v, err := sumOf(text, g.name, all)
		if err != nil {
			return s, err
		}
		*g.dst = v["all"]
	}
	s.proc, err = readProc(pid)
	return s, err
}

// managerWindow is what the controller manager did between two snapshots.
type managerWindow struct {
	length                      time.Duration
	writes, decisions, requests map[string]float64
	queueAdds, cpu              float64
}

func managerBetween(a, b managerSnapshot) managerWindow {
	return managerWindow{
		length:    b.at.Sub(a.at),
		writes:    benchutil.Delta(a.writes, b.writes),
		decisions: benchutil.Delta(a.decisions, b.decisions),
		requests:  benchutil.Delta(a.requests, b.requests),
		queueAdds: b.queueAdds - a.queueAdds,
		cpu:       b.proc.cpu - a.proc.cpu,
	}
}
