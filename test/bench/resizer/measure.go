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

// The measurement helpers that resizer shares with the other benchmarks
// are in test/bench/internal/benchutil; these are resizer's own.

// sumOf sums the samples of name in text by key.
func sumOf(text, name string, key func(map[string]string) string) (map[string]float64, error) {
	samples, err := benchutil.ParseSamples(text, name)
	if err != nil {
		return nil, err
	}
	return benchutil.SumBy(samples, key), nil
}

// all puts every sample under one key, "all".
func all(map[string]string) string { return "all" }

// procStat is what /proc tells about a process's memory and CPU.
type procStat struct {
	rssKiB, hwmKiB int
	cpu            float64 // utime+stime, seconds
}

func readProc(pid int) (procStat, error) {
	var s procStat
	var err error
	if s.rssKiB, err = benchutil.MemKiB(pid, "VmRSS"); err != nil {
		return s, err
	}
	if s.hwmKiB, err = benchutil.MemKiB(pid, "VmHWM"); err != nil {
		return s, err
	}
	s.cpu, err = benchutil.CPUSeconds(pid)
	return s, err
}

func mb(bytes float64) string { return fmt.Sprintf("%.1f MB", bytes/1e6) }

func secs(d time.Duration) string {
	if d >= 10*time.Second {
		return fmt.Sprintf("%.1f s", d.Seconds())
	}
	return fmt.Sprintf("%.3f s", d.Seconds())
}
