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

package resizer

import (
	"runtime/debug"
	"testing"
)

// gcPercent reads GOGC (SetGCPercent returns the previous value).
func gcPercent() int {
	p := debug.SetGCPercent(100)
	debug.SetGCPercent(p)
	return p
}

func TestTightenGC(t *testing.T) {
	defer debug.SetGCPercent(gcPercent())
	for _, tc := range []struct {
		name        string
		before      int
		wantDuring  int
		wantRestore int
	}{
		{name: "default", before: 100, wantDuring: 50, wantRestore: 100},
		{name: "set higher", before: 400, wantDuring: 50, wantRestore: 400},
		{name: "lower already", before: 20, wantDuring: 20, wantRestore: 20},
		{name: "off", before: -1, wantDuring: -1, wantRestore: -1},
	} {
		debug.SetGCPercent(tc.before)
		restore := tightenGC(50)
		if got := gcPercent(); got != tc.wantDuring {
			t.Errorf("%s: GOGC during the list = %d; want %d", tc.name, got, tc.wantDuring)
		}
		restore()
		restore()
		if got := gcPercent(); got != tc.wantRestore {
			t.Errorf("%s: GOGC after = %d; want %d", tc.name, got, tc.wantRestore)
		}
	}
}
