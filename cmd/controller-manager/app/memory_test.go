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

package app

import (
	"os"
	"path/filepath"
	"testing"
)

// The limit is read as cgroup v2 and v1 write it; "max" and v1's huge
// number mean none.
func TestReadCgroupMemoryLimit(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	cases := []struct {
		name  string
		files []string
		want  int64
	}{
		{"v2 limit", []string{write("v2", "268435456\n")}, 256 << 20},
		{"v2 no limit", []string{write("v2max", "max\n")}, 0},
		{"v1 limit, v2 missing", []string{filepath.Join(dir, "missing"), write("v1", "536870912\n")}, 512 << 20},
		{"v1 no limit", []string{write("v1max", "9223372036854771712\n")}, 0},
		{"nothing", []string{filepath.Join(dir, "missing")}, 0},
	}
	for _, tc := range cases {
		if got := readCgroupMemoryLimit(tc.files); got != tc.want {
			t.Errorf("%s: %d; want %d", tc.name, got, tc.want)
		}
	}
	if goMemoryInUse() == 0 {
		t.Error("the Go runtime reports no memory in use")
	}
}
