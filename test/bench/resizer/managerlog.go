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
	"bufio"
	"fmt"
	"io"
	"os"
	"strings"
	"time"
)

// startupMarks are the controller manager's log lines (at -v=2) that tell
// where its startup time goes: when the resizer started each informer, and
// when each reflector's initial list was in.
var startupMarks = []string{"Started counting for AddonResizers", "Caches populated", "Starting workers"}

// startupLog returns the startupMarks lines of the manager's log, each with
// its time since t0. klog stamps lines with the local time of day.
func startupLog(path string, t0 time.Time) ([]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("reading the controller manager's log: %w", err)
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1024*1024), 16*1024*1024)
	for sc.Scan() {
		line := sc.Text()
		if !hasMark(line) {
			continue
		}
		at, ok := klogTime(line, t0)
		if !ok {
			continue
		}
		msg := line
		if i := strings.Index(line, "] "); i >= 0 {
			msg = line[i+2:]
		}
		out = append(out, fmt.Sprintf("%+.3f s %s", at.Sub(t0).Seconds(), msg))
	}
	return out, sc.Err()
}

func hasMark(line string) bool {
	for _, m := range startupMarks {
		if strings.Contains(line, m) {
			return true
		}
	}
	return false
}

// klogTime reads the time of a klog header ("I1124 03:39:01.123456 ...")
// as a time on t0's day.
func klogTime(line string, t0 time.Time) (time.Time, bool) {
	f := strings.Fields(line)
	if len(f) < 2 || len(f[0]) != 5 {
		return time.Time{}, false
	}
	tod, err := time.ParseInLocation("15:04:05.000000", f[1], t0.Location())
	if err != nil {
		return time.Time{}, false
	}
	y, m, d := t0.Date()
	return time.Date(y, m, d, tod.Hour(), tod.Minute(), tod.Second(), tod.Nanosecond(), t0.Location()), true
}

// copyFile copies the manager's log out of the control plane's directory,
// which Stop removes.
func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.Create(dst)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
