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
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

const module = "github.com/scaleplane/scaleplane/"

// TestLayering checks docs/architecture.md's import rules on every Go file
// under pkg/: nothing imports cmd/, no controller imports another controller
// or the webhook, and the webhook imports no controller.
func TestLayering(t *testing.T) {
	root := filepath.Join("..", "..", "..")
	fset := token.NewFileSet()
	err := filepath.WalkDir(filepath.Join(root, "pkg"), func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		rel = filepath.ToSlash(rel)
		f, err := parser.ParseFile(fset, path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			if !strings.HasPrefix(p, module) {
				continue
			}
			if why := forbidden(rel, strings.TrimPrefix(p, module)); why != "" {
				t.Errorf("%s imports %s: %s", rel, p, why)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// forbidden says why file (a path under pkg/) may not import pkg (a path in
// the module), or "" when it may.
func forbidden(file, pkg string) string {
	own := func(prefix string) string {
		rest := strings.TrimPrefix(file, prefix)
		return prefix + strings.SplitN(rest, "/", 2)[0]
	}
	switch {
	case strings.HasSuffix(file, "_test.go") && pkg == "cmd/kubectl-scaleplane/app":
		// A test may read what a user reads: the resizer's rendering
		// oracle runs `kubectl scaleplane explain` on its fake clientsets
		// and checks it against what each member renders. Code never.
		return ""
	case strings.HasPrefix(pkg, "cmd/"):
		return "pkg/ never imports cmd/"
	case strings.HasPrefix(file, "pkg/controllers/") && strings.HasPrefix(pkg, "pkg/controllers/") && !strings.HasPrefix(pkg+"/", own("pkg/controllers/")+"/"):
		return "a controller never imports another controller; move what they share to a pkg/<piece> of its own"
	case strings.HasPrefix(file, "pkg/controllers/") && strings.HasPrefix(pkg, "pkg/webhook"):
		return "a controller never imports the webhook"
	case strings.HasPrefix(file, "pkg/webhook/") && strings.HasPrefix(pkg, "pkg/controllers/"):
		return "the webhook never imports a controller"
	}
	return ""
}

func TestForbidden(t *testing.T) {
	cases := map[[2]string]bool{
		{"pkg/controllers/cronscaler/sync.go", "pkg/workloop"}:                    false,
		{"pkg/controllers/cronscaler/sync.go", "pkg/controllers/cronscaler/x"}:    false,
		{"pkg/controllers/cronscaler/sync.go", "pkg/controllers/resizer"}:         true,
		{"pkg/controllers/cronscaler/sync.go", "pkg/webhook/cronfederatedhpa"}:    true,
		{"pkg/webhook/cronfederatedhpa/validation.go", "pkg/controllers/resizer"}: true,
		{"pkg/workloop/workloop.go", "cmd/controller-manager/app"}:                true,
		{"pkg/controllers/resizer/oracle_test.go", "cmd/kubectl-scaleplane/app"}:  false,
		{"pkg/controllers/resizer/karmada.go", "cmd/kubectl-scaleplane/app"}:      true,
		{"pkg/controllers/resizer/oracle_test.go", "cmd/controller-manager/app"}:  true,
		{"pkg/webhook/cronfederatedhpa/validation.go", "pkg/cronschedule"}:        false,
	}
	for c, want := range cases {
		if got := forbidden(c[0], c[1]) != ""; got != want {
			t.Errorf("forbidden(%q, %q) = %v; want %v", c[0], c[1], got, want)
		}
	}
}
