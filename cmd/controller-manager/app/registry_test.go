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
	"slices"
	"strings"
	"testing"

	"github.com/scaleplane/scaleplane/cmd/controller-manager/app/options"
	"github.com/scaleplane/scaleplane/pkg/karmadaadoption"
)

// TestEveryRegisteredControllerIsWiredUp walks the registry and checks the
// places docs/architecture.md's checklist names that a list could let drift:
// a controller the registry knows is described by the command, has its
// concurrency flag, its own ClusterRole in the chart, and its page or section
// in the documents.
func TestEveryRegisteredControllerIsWiredUp(t *testing.T) {
	descriptors := NewControllerDescriptors()
	cmd := newCommand(options.NewOptions(), descriptors)
	root := filepath.Join("..", "..", "..")
	rbac, err := os.ReadFile(filepath.Join(root, "charts/scaleplane/templates/controller-manager-rbac.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	architecture, err := os.ReadFile(filepath.Join(root, "docs/architecture.md"))
	if err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range KnownControllers(descriptors) {
		d := descriptors[name]
		t.Run(name, func(t *testing.T) {
			if d.Summary() == "" {
				t.Errorf("no summary in its descriptor")
			}
			if want := name + " (" + d.Summary() + ")"; !strings.Contains(cmd.Long, want) {
				t.Errorf("the command's description %q does not name %q", cmd.Long, want)
			}
			if cmd.Flags().Lookup("concurrent-"+name+"-syncs") == nil {
				t.Errorf("no --concurrent-%s-syncs flag", name)
			}
			if !strings.Contains(string(rbac), "name: scaleplane:"+name+"\n") {
				t.Errorf("the chart has no ClusterRole scaleplane:%s", name)
			}
			if !strings.Contains(string(readme), "**"+name+"**") {
				t.Errorf("the README has no paragraph for **%s**", name)
			}
			if !strings.Contains(string(architecture), "**"+name+"**") {
				t.Errorf("docs/architecture.md has no data path for **%s**", name)
			}
		})
	}
	// karmada-patch -controllers accepts the registry's names, no more.
	if got, want := karmadaadoption.Controllers, KnownControllers(descriptors); !slices.Equal(slices.Sorted(slices.Values(got)), want) {
		t.Errorf("karmadaadoption.Controllers = %q, the registry's controllers %q", got, want)
	}
}
