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

// Package style checks rules of the project's style that no linter enforces,
// on the Go files of the checkout. hack/test-unit.sh runs it with the unit
// tests.
package style

import (
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"testing/fstest"
)

// maxLines is the most lines (as wc -l counts them) a non-generated Go file
// may have (issue 36, "Files"): a file longer than that holds more than one
// thing, and is split along the seams of what it holds, into files named
// after what each holds.
const maxLines = 550

// knownOversized is the allow-list of known exceptions: non-generated Go
// files over maxLines that are being split, by slash-separated path from the
// repository's root, each with its line count when it was listed. That count
// is the file's upper bound: it may shrink, not grow. An entry is temporary:
// the work that splits the file removes it, and an entry whose file is gone
// or at most maxLines long fails the test, so that none outlives its file.
//
// Empty: when the guard was added (issue 36), the cron-scaler simulator's
// files (pkg/controllers/cronscaler/sim_*_test.go), the exceptions the guard
// was written to hold at their size while another change split them, were
// already split under maxLines, and every other file was split with the
// guard. A file that cannot be split at once goes here, with its count and a
// comment saying which work removes it, e.g.
//
//	"pkg/controllers/cronscaler/sim_oracle_test.go": 1332, // issue 36: being split along its checks
var knownOversized = map[string]int{}

// TestGoFilesAtMostMaxLines walks the repository's non-generated Go files
// and fails naming each one over maxLines that knownOversized does not let
// through.
func TestGoFilesAtMostMaxLines(t *testing.T) {
	root := filepath.Join("..", "..")
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("the repository's root is not %s: %v", root, err)
	}
	problems, checked, err := oversized(os.DirFS(root), knownOversized)
	if err != nil {
		t.Fatal(err)
	}
	if checked == 0 {
		t.Fatal("no Go file found under the repository's root")
	}
	for _, p := range problems {
		t.Error(p)
	}
}

// generatedMarker is the line Go's convention puts in a generated file
// (https://go.dev/s/generatedcode).
var generatedMarker = regexp.MustCompile(`(?m)^// Code generated .* DO NOT EDIT\.$`)

// generated says whether the Go file at name (slash-separated, from the
// root) is generated: the clientsets, listers and informers under
// pkg/generated/, the deepcopy functions in zz_generated.* files, or any
// file carrying Go's generated-code marker.
func generated(name string, content []byte) bool {
	return strings.HasPrefix(name, "pkg/generated/") ||
		strings.Contains(path.Base(name), "zz_generated") ||
		generatedMarker.Match(content)
}

// oversized checks the Go files of fsys (a checkout: directories whose name
// starts with "." or "_", such as .git and the build output _output, are not
// the repository's sources and are skipped). It returns a message for each
// non-generated file over maxLines that allow does not let through, and for
// each entry of allow that is stale, and how many files it checked.
func oversized(fsys fs.FS, allow map[string]int) (problems []string, checked int, err error) {
	seen := map[string]int{}
	err = fs.WalkDir(fsys, ".", func(name string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if name != "." && (strings.HasPrefix(d.Name(), ".") || strings.HasPrefix(d.Name(), "_")) {
				return fs.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(name, ".go") {
			return nil
		}
		content, err := fs.ReadFile(fsys, name)
		if err != nil {
			return err
		}
		if generated(name, content) {
			return nil
		}
		checked++
		lines := bytes.Count(content, []byte("\n"))
		seen[name] = lines
		bound, allowed := allow[name]
		switch {
		case lines <= maxLines:
		case !allowed:
			problems = append(problems, fmt.Sprintf("%s: %d lines, over the %d a Go file may have: split it along the seams of what it holds, into files named after what each holds", name, lines, maxLines))
		case lines > bound:
			problems = append(problems, fmt.Sprintf("%s: %d lines, more than the %d it had when knownOversized listed it as an exception: it may shrink, not grow", name, lines, bound))
		}
		return nil
	})
	if err != nil {
		return nil, 0, err
	}
	for name := range allow {
		lines, ok := seen[name]
		switch {
		case !ok:
			problems = append(problems, fmt.Sprintf("%s: listed in knownOversized, but there is no such non-generated Go file: remove the entry", name))
		case lines <= maxLines:
			problems = append(problems, fmt.Sprintf("%s: listed in knownOversized, but %d lines now, at most %d: remove the entry", name, lines, maxLines))
		}
	}
	sort.Strings(problems)
	return problems, checked, nil
}

// TestOversized checks the check itself, on a made-up checkout.
func TestOversized(t *testing.T) {
	file := func(lines int) *fstest.MapFile {
		return &fstest.MapFile{Data: []byte("package p\n" + strings.Repeat("//\n", lines-1))}
	}
	generatedFile := &fstest.MapFile{Data: []byte("// Code generated by hand-of-god. DO NOT EDIT.\n\npackage p\n" + strings.Repeat("//\n", maxLines))}
	fsys := fstest.MapFS{
		"go.mod":                               {Data: []byte("module m\n")},
		"pkg/a/small.go":                       file(maxLines),
		"pkg/a/big.go":                         file(maxLines + 1),
		"pkg/a/big_test.go":                    file(maxLines + 10),
		"pkg/a/listed_test.go":                 file(600),
		"pkg/a/grown_test.go":                  file(601),
		"pkg/a/shrunk_test.go":                 file(maxLines - 1),
		"pkg/a/notgo.md":                       file(maxLines + 1),
		"pkg/a/marked.go":                      generatedFile,
		"pkg/generated/clientset/c.go":         file(maxLines + 1),
		"pkg/apis/v1/zz_generated.deepcopy.go": file(maxLines + 1),
		".git/x.go":                            file(maxLines + 1),
		"_output/x.go":                         file(maxLines + 1),
	}
	allow := map[string]int{
		"pkg/a/listed_test.go": 600,
		"pkg/a/grown_test.go":  600,
		"pkg/a/shrunk_test.go": 600,
		"pkg/a/gone_test.go":   600,
	}
	problems, checked, err := oversized(fsys, allow)
	if err != nil {
		t.Fatal(err)
	}
	if checked != 6 {
		t.Errorf("checked %d files, want 6 (small, big, big_test, listed, grown, shrunk)", checked)
	}
	want := []string{"pkg/a/big.go: 551 lines", "pkg/a/big_test.go: 560 lines", "pkg/a/gone_test.go: listed", "pkg/a/grown_test.go: 601 lines, more than the 600", "pkg/a/shrunk_test.go: listed in knownOversized, but 549 lines"}
	if len(problems) != len(want) {
		t.Fatalf("problems:\n%s\nwant %d, starting with %q", strings.Join(problems, "\n"), len(want), want)
	}
	for i, w := range want {
		if !strings.HasPrefix(problems[i], w) {
			t.Errorf("problem %d: %q, want it to start with %q", i, problems[i], w)
		}
	}
}
