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
	"os"
	"strconv"
	"strings"
	"testing"
)

// TestImportsNoController keeps docs/architecture.md's layering for the
// plugin: it computes with the pieces it shares with the controllers
// (pkg/cronschedule, pkg/resizeestimate), never with a controller's package,
// so it cannot pull the controller manager into a kubectl plugin.
func TestImportsNoController(t *testing.T) {
	entries, err := os.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".go") {
			continue
		}
		f, err := parser.ParseFile(fset, e.Name(), nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			for _, banned := range []string{"github.com/scaleplane/scaleplane/pkg/controllers/", "github.com/scaleplane/scaleplane/pkg/webhook", "github.com/scaleplane/scaleplane/cmd/controller-manager", "github.com/scaleplane/scaleplane/cmd/webhook"} {
				if strings.HasPrefix(p, banned) {
					t.Errorf("%s imports %s: the plugin shares pkg/ pieces, not controllers", e.Name(), p)
				}
			}
		}
	}
}
