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
	"fmt"
	"time"

	"github.com/scaleplane/scaleplane/test/bench/internal/benchutil"
)

// print writes the results as a Markdown table, and the details under it.
func (r *results) print() {
	fmt.Println()
	fmt.Printf("machine: %s\n", benchutil.Machine())
	fmt.Printf("load average (1/5/15 min): start %s; all HPAs correct %s; end %s\n", r.loadStart, r.loadCreated, r.loadEnd)
	fmt.Printf("controller manager args: %v; kube-controller-manager --horizontal-pod-autoscaler-sync-period=%s\n", r.cfg.managerArg, r.cfg.hpaSync)
	fmt.Println()
	fmt.Println("| measure | value |")
	fmt.Println("| --- | --- |")
	for _, row := range r.rows() {
		fmt.Printf("| %s | %s |\n", row[0], row[1])
	}
	fmt.Println()
	r.printWindow("creation", r.creation)
	if r.cfg.quiet > 0 {
		r.printWindow("quiet window", r.quiet)
	}
	r.printWindow("steady window", r.steady)
	if r.churnErr != nil {
		fmt.Printf("churn: %v\n", r.churnErr)
	}
}

func (r *results) rows() [][2]string {
	n := r.cfg.n
	lat := r.latencies
	s := r.steady
	rows := [][2]string{
		{"LeaderWorkerSets created at once", fmt.Sprintf("%d (%d creators, %s from the first create sent to the last answered)", n, r.cfg.creators, ms(r.created))},
		{"all HPAs correct, from the first create", ms(r.allCorrectFromT0)},
		{"all HPAs correct, from the last create answered", ms(r.allCorrectFromLastCreated)},
		{"per HPA (correct - its LWS's create sent): p50 / p99 / max", fmt.Sprintf("%s / %s / %s", ms(pct(lat, 50)), ms(pct(lat, 99)), ms(pct(lat, 100)))},
		{"generator writes during creation (manager metric, by verb)", benchutil.Format(r.creation.generatorWrites)},
		{"HPA object writes during creation (apiserver)", fmt.Sprintf("%.0f", r.creation.hpaSpecWrites())},
		{"controller CPU during creation", fmt.Sprintf("%.2f CPU-s over %s", r.creation.cpu, ms(r.creation.length))},
	}
	if r.cfg.quiet > 0 {
		q := r.quiet
		rows = append(rows,
			[2]string{fmt.Sprintf("quiet %s (no churn): HPA status writes (apiserver) / HPA watch events", dur(q.length)),
				fmt.Sprintf("%.0f / %d", q.hpaStatusWrites(), q.hpaEvents.modified())},
			[2]string{"quiet: generator writes", fmt.Sprintf("%.0f", benchutil.Total(q.generatorWrites))})
	}
	rows = append(rows,
		[2]string{"steady window", fmt.Sprintf("%s; churn: every LWS's replicas set once per %s (%d scale patches)", dur(s.length), r.cfg.churn, s.churnPatches)},
		[2]string{"steady: HPA status writes by the HPA controller (apiserver PUT horizontalpodautoscalers/status)", fmt.Sprintf("%.0f", s.hpaStatusWrites())},
		[2]string{"steady: HPA watch events (spec / status-only / other)", fmt.Sprintf("%d (%d / %d / %d)", s.hpaEvents.modified()+s.hpaEvents.added+s.hpaEvents.deleted, s.hpaEvents.spec, s.hpaEvents.status, s.hpaEvents.other)},
		[2]string{"steady: LWS watch events (spec / status-only / other)", fmt.Sprintf("%d (%d / %d / %d)", s.lwsEvents.modified()+s.lwsEvents.added+s.lwsEvents.deleted, s.lwsEvents.spec, s.lwsEvents.status, s.lwsEvents.other)},
		[2]string{"steady: **generator writes** (manager metric, by verb)", fmt.Sprintf("**%.0f** (%s)", benchutil.Total(s.generatorWrites), benchutil.Format(s.generatorWrites))},
		[2]string{"steady: HPA object writes by anyone (apiserver)", fmt.Sprintf("%.0f", s.hpaSpecWrites())},
		[2]string{"steady: writes a compare-less reconciler would make (one per HPA event)", fmt.Sprintf("%d", s.hpaEvents.modified()+s.hpaEvents.added)},
		[2]string{"steady: generator queue adds / manager API requests", fmt.Sprintf("%.0f / %s", s.queueAdds, benchutil.Format(s.managerRequests))},
		[2]string{"controller RSS: after creation / end / peak (VmHWM)", fmt.Sprintf("%s / %s / %s", benchutil.MiB(r.rssCreated), benchutil.MiB(r.rssEnd), benchutil.MiB(r.hwm))},
		[2]string{"controller CPU in the steady window", fmt.Sprintf("%.2f CPU-s over %s (%.2f%% of one core)", s.cpu, dur(s.length), s.cpu/s.length.Seconds()*100)},
		[2]string{"HPAs correct at the end (fresh list) / broken after being correct", fmt.Sprintf("%d of %d / %d", r.finalCorrect, n, len(r.broken))},
	)
	return rows
}

func (r *results) printWindow(name string, w window) {
	fmt.Printf("%s (%s):\n", name, dur(w.length))
	fmt.Printf("  apiserver writes: %s (total %.0f)\n", benchutil.Format(w.apiWrites), benchutil.Total(w.apiWrites))
	fmt.Printf("  apiserver reads: %s\n", benchutil.Format(w.apiReads))
	fmt.Printf("  generator writes: %s; queue adds %.0f; manager requests: %s\n", benchutil.Format(w.generatorWrites), w.queueAdds, benchutil.Format(w.managerRequests))
	fmt.Printf("  HPA events: %+v; LWS events: %+v\n", w.hpaEvents, w.lwsEvents)
	fmt.Printf("  controller CPU %.2f s\n", w.cpu)
}

func ms(d time.Duration) string {
	if d >= 10*time.Second {
		return fmt.Sprintf("%.1f s", d.Seconds())
	}
	return fmt.Sprintf("%.2f s", d.Seconds())
}

func dur(d time.Duration) string { return d.Round(time.Second).String() }
