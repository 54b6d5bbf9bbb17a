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
	"io"
	"slices"
	"time"

	"github.com/scaleplane/scaleplane/test/bench/internal/benchutil"
)

func secs(d time.Duration) string {
	if d == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f s", d.Seconds())
}

// report prints each run, then the median of each mode, as Markdown.
func report(w io.Writer, cfg config, loadStart, loadEnd string, results []result) {
	fmt.Fprintf(w, "machine: %s\n", benchutil.Machine())
	fmt.Fprintf(w, "runs per mode: %d; the Deployment's minReadySeconds: %d; load average at the start %s, at the end %s\n\n", cfg.runs, cfg.minReady, loadStart, loadEnd)
	fmt.Fprintln(w, "| mode | run | nodes | requests (cpu/memory) | pods recreated | old pods deleted | first change | all pods at the new size | old pods gone | load avg |")
	fmt.Fprintln(w, "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
	for _, r := range results {
		fmt.Fprintf(w, "| %s | %d | %d → %d | %s → %s | %d | %d | %s | %s | %s | %s |\n", r.mode, r.run, r.from, r.to,
			list(r.oldSize), list(r.size), r.created, r.deleted, secs(r.firstChange), secs(r.atSize), secs(r.oldGone), r.loadAvg)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| mode | pods recreated (each run) | all pods at the new size: median (min to max) |")
	fmt.Fprintln(w, "| --- | --- | --- |")
	for _, mode := range []string{modeRollout, modeInPlace} {
		var times []time.Duration
		var created []int
		for _, r := range results {
			if r.mode == mode {
				times = append(times, r.atSize)
				created = append(created, r.created)
			}
		}
		if len(times) == 0 {
			continue
		}
		slices.Sort(times)
		fmt.Fprintf(w, "| %s | %v | %s (%s to %s) |\n", mode, created, secs(times[len(times)/2]), secs(times[0]), secs(times[len(times)-1]))
	}
}
