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
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/scaleplane/scaleplane/test/bench/internal/benchutil"
)

// cpuMark is the CPU time used so far by the controller manager, by this
// process, and by the whole machine (busy and in all), to tell in a phase
// whether the cores were saturated and who used them: a controller and a
// bare client that write the same targets on the same two cores differ in
// what they leave to the apiserver.
type cpuMark struct {
	at                      time.Time
	controller, self        float64
	machineBusy, machineAll float64
}

func markCPU(controllerPid int) cpuMark {
	m := cpuMark{at: time.Now()}
	m.controller, _ = benchutil.CPUSeconds(controllerPid)
	m.self, _ = benchutil.CPUSeconds(os.Getpid())
	m.machineBusy, m.machineAll = machineCPU()
	return m
}

// cpuPhase is the CPU time used between two marks.
type cpuPhase struct {
	wall                    time.Duration
	controller, self        float64
	machineBusy, machineAll float64
}

func (m cpuMark) since(start cpuMark) cpuPhase {
	return cpuPhase{
		wall:       m.at.Sub(start.at),
		controller: m.controller - start.controller, self: m.self - start.self,
		machineBusy: m.machineBusy - start.machineBusy, machineAll: m.machineAll - start.machineAll,
	}
}

func (p cpuPhase) String() string {
	busy := 0.0
	if p.machineAll > 0 {
		busy = 100 * p.machineBusy / p.machineAll
	}
	return fmt.Sprintf("over %s: controller %.2f, benchmark %.2f, machine %.2f of %.2f (%.0f%% busy)",
		p.wall.Round(time.Millisecond), p.controller, p.self, p.machineBusy, p.machineAll, busy)
}

// machineCPU returns the machine's busy and total CPU-seconds from the
// first line of /proc/stat (idle and iowait are not busy).
func machineCPU() (busy, all float64) {
	data, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, 0
	}
	line, _, _ := strings.Cut(string(data), "\n")
	fields := strings.Fields(line)
	if len(fields) < 6 || fields[0] != "cpu" {
		return 0, 0
	}
	// user nice system idle iowait irq softirq steal: USER_HZ ticks.
	for i, f := range fields[1:] {
		if i >= 8 {
			break
		}
		v, _ := strconv.ParseFloat(f, 64)
		all += v
		if i != 3 && i != 4 {
			busy += v
		}
	}
	return busy / 100, all / 100
}
