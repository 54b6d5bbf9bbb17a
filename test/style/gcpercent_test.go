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

package style

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// gcOwner is the one file that sets the garbage collector's target: holds
// from two controllers that each saved and restored the value they found
// could leave the other's behind for good (see pkg/gcpace).
const gcOwner = "pkg/gcpace/gcpace.go"

// TestOnlyGCPaceSetsGCPercent fails naming each non-test Go file under cmd/
// and pkg/ but gcOwner that calls debug.SetGCPercent. Tests may: they set a
// target to start from.
func TestOnlyGCPaceSetsGCPercent(t *testing.T) {
	root := filepath.Join("..", "..")
	fsys := os.DirFS(root)
	checked := 0
	for _, dir := range []string{"cmd", "pkg"} {
		err := fs.WalkDir(fsys, dir, func(name string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
				return err
			}
			content, err := fs.ReadFile(fsys, name)
			if err != nil {
				return err
			}
			checked++
			if name != gcOwner && strings.Contains(string(content), "SetGCPercent(") {
				t.Errorf("%s calls debug.SetGCPercent: hold the target through %s (gcpace.Cap, gcpace.Headroom, gcpace.SetPercent) instead", name, gcOwner)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if checked == 0 {
		t.Fatal("no Go file found under cmd/ and pkg/")
	}
}
