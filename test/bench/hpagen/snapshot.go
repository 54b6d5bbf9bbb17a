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
	"time"

	"k8s.io/client-go/kubernetes"

	"github.com/scaleplane/scaleplane/test/bench/internal/benchutil"
)

// snapshot is every counter the benchmark compares between the start and
// the end of a window.
type snapshot struct {
	at time.Time
	// The controller manager's own counters.
	generatorWrites map[string]float64 // hpa_generator_writes_total by verb
	queueAdds       float64            // workqueue_adds_total{name="hpa_generator"}
	managerRequests map[string]float64 // rest_client_requests_total by method
	// The apiserver's counters (apiserver_request_total), all clients.
	apiWrites map[string]float64 // mutating, by "VERB resource[/subresource]"
	apiReads  map[string]float64 // GET and LIST, same keys
	// The benchmark's watches.
	hpaEvents, lwsEvents eventCounts
	// The controller manager's process.
	cpu float64
	// The churn driver's scale patches so far.
	churnPatches int64
}

type probes struct {
	kube        kubernetes.Interface
	managerPort int
	managerPid  int
	tracker     *tracker
	churn       *churner
}

func (p probes) take(ctx context.Context) (snapshot, error) {
	s := snapshot{at: time.Now()}
	mtext, err := benchutil.ScrapeManager(ctx, p.managerPort)
	if err != nil {
		return s, err
	}
	writes, err := benchutil.ParseSamples(mtext, "hpa_generator_writes_total")
	if err != nil {
		return s, err
	}
	s.generatorWrites = benchutil.SumBy(writes, benchutil.ByLabel("verb"))
	adds, err := benchutil.ParseSamples(mtext, "workqueue_adds_total")
	if err != nil {
		return s, err
	}
	s.queueAdds = benchutil.SumBy(adds, func(l map[string]string) string {
		if l["name"] == "hpa_generator" {
			return "adds"
		}
		return ""
	})["adds"]
	reqs, err := benchutil.ParseSamples(mtext, "rest_client_requests_total")
	if err != nil {
		return s, err
	}
	s.managerRequests = benchutil.SumBy(reqs, benchutil.ByLabel("method"))

	atext, err := benchutil.ScrapeAPIServer(ctx, p.kube)
	if err != nil {
		return s, err
	}
	api, err := benchutil.ParseSamples(atext, "apiserver_request_total")
	if err != nil {
		return s, err
	}
	s.apiWrites = benchutil.SumBy(api, mutatingKey)
	s.apiReads = benchutil.SumBy(api, readKey)

	s.hpaEvents, s.lwsEvents = p.tracker.counts()
	if s.cpu, err = benchutil.CPUSeconds(p.managerPid); err != nil {
		return s, err
	}
	if p.churn != nil {
		s.churnPatches = p.churn.patches.Load()
	}
	return s, nil
}

// window is what happened between two snapshots.
type window struct {
	length          time.Duration
	generatorWrites map[string]float64
	queueAdds       float64
	managerRequests map[string]float64
	apiWrites       map[string]float64
	apiReads        map[string]float64
	hpaEvents       eventCounts
	lwsEvents       eventCounts
	cpu             float64
	churnPatches    int64
}

func between(a, b snapshot) window {
	return window{
		length:          b.at.Sub(a.at),
		generatorWrites: benchutil.Delta(a.generatorWrites, b.generatorWrites),
		queueAdds:       b.queueAdds - a.queueAdds,
		managerRequests: benchutil.Delta(a.managerRequests, b.managerRequests),
		apiWrites:       benchutil.Delta(a.apiWrites, b.apiWrites),
		apiReads:        benchutil.Delta(a.apiReads, b.apiReads),
		hpaEvents:       b.hpaEvents.minus(a.hpaEvents),
		lwsEvents:       b.lwsEvents.minus(a.lwsEvents),
		cpu:             b.cpu - a.cpu,
		churnPatches:    b.churnPatches - a.churnPatches,
	}
}

// hpaStatusWrites are the HPA controller's status updates in the window:
// nobody else writes the status subresource of HPAs here.
func (w window) hpaStatusWrites() float64 {
	return w.apiWrites["PUT horizontalpodautoscalers/status"]
}

// hpaSpecWrites are the writes to HPA objects themselves (not their
// status): only the generator makes them here.
func (w window) hpaSpecWrites() float64 {
	return w.apiWrites["POST horizontalpodautoscalers"] + w.apiWrites["PUT horizontalpodautoscalers"] +
		w.apiWrites["PATCH horizontalpodautoscalers"] + w.apiWrites["DELETE horizontalpodautoscalers"] +
		w.apiWrites["APPLY horizontalpodautoscalers"]
}
