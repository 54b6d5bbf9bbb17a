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

package karmada

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/scaleplane/scaleplane/test/integration/framework"
)

// testImage is the image the session's $IMAGE names, as a user sets it
// before the README's karmada-patch line.
const testImage = "registry.test/scaleplane/scaleplane-controller-manager:v0.1.0"

// leaseLine is the README's check that scaleplane runs: the holder of its
// Lease on karmada-apiserver, which the hack scripts reach by a context of
// their kubeconfig and the other installers by a file.
func leaseLine(readme string) string {
	apiserver := "--kubeconfig karmada-apiserver.config"
	if strings.HasSuffix(readme, "hack.md") {
		apiserver = "--context karmada-apiserver"
	}
	return "kubectl " + apiserver + ` -n karmada-system get lease scaleplane-controller-manager -o jsonpath='{.spec.holderIdentity}{"\n"}'`
}

// readmeSession runs an installer README's command lines as a user pastes
// them into a shell, in a directory of their own: `kubectl` is the test's
// kubectl on the test's apiserver (karmada-apiserver.config, and the
// contexts karmada-host and karmada-apiserver, too), `go run ./cmd/karmada-patch` the command built from
// this checkout, $IMAGE testImage.
type readmeSession struct {
	t      *testing.T
	readme string
	text   string
	dir    string
	env    []string
}

func newREADMESession(t *testing.T, cp *framework.ControlPlane, readme string) *readmeSession {
	t.Helper()
	text, err := os.ReadFile(repoPath(t, readme))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, ".bin")
	if err := os.Mkdir(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	// The test's kubeconfig, with the contexts the hack scripts write
	// (karmada-host, karmada-apiserver) naming the same apiserver.
	config, err := clientcmd.LoadFromFile(cp.KubeconfigPath())
	if err != nil {
		t.Fatal(err)
	}
	current, ok := config.Contexts[config.CurrentContext]
	if !ok {
		t.Fatalf("%s has no current context", cp.KubeconfigPath())
	}
	config.Contexts["karmada-host"], config.Contexts["karmada-apiserver"] = current.DeepCopy(), current.DeepCopy()
	kubeconfig := filepath.Join(dir, "karmada-apiserver.config")
	if err := clientcmd.WriteToFile(*config, kubeconfig); err != nil {
		t.Fatal(err)
	}
	wrapper := fmt.Sprintf("#!/bin/sh\nexec %q --kubeconfig %q \"$@\"\n", binary(t, "kubectl"), kubeconfig)
	if err := os.WriteFile(filepath.Join(bin, "kubectl"), []byte(wrapper), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(karmadaPatch(t), filepath.Join(bin, "karmada-patch")); err != nil {
		t.Fatal(err)
	}
	return &readmeSession{t: t, readme: readme, text: string(text), dir: dir,
		env: append(os.Environ(), "PATH="+bin+":"+os.Getenv("PATH"), "IMAGE="+testImage)}
}

// run checks that the README holds line and runs it with bash.
func (s *readmeSession) run(line string) string {
	s.t.Helper()
	if !strings.Contains(s.text, line) {
		s.t.Fatalf("%s no longer says %q; the test runs what the README says", s.readme, line)
	}
	script := strings.ReplaceAll(line, "go run ./cmd/karmada-patch", "karmada-patch")
	cmd := exec.Command("bash", "-o", "errexit", "-o", "pipefail", "-c", script)
	cmd.Dir, cmd.Env = s.dir, s.env
	out, err := cmd.CombinedOutput()
	if err != nil {
		s.t.Fatalf("%s: %v\n%s", line, err, out)
	}
	return string(out)
}

func (s *readmeSession) file(name string) []byte {
	s.t.Helper()
	data, err := os.ReadFile(filepath.Join(s.dir, name))
	if err != nil {
		s.t.Fatal(err)
	}
	return data
}

// readmeGet is the README's first step: the live Deployment into kcm.yaml,
// and the patches printed from it.
func readmeGet(d *appsv1.Deployment) (get, patch string) {
	return fmt.Sprintf("kubectl -n %s get deployment %s -o yaml > kcm.yaml", d.Namespace, d.Name),
		`go run ./cmd/karmada-patch -f kcm.yaml -o karmada-patches -image "$IMAGE"`
}

// runErr runs a README line that may fail, with the session's environment.
func runErr(s *readmeSession, line string) error {
	cmd := exec.Command("bash", "-o", "errexit", "-o", "pipefail", "-c", line)
	cmd.Dir, cmd.Env = s.dir, s.env
	return cmd.Run()
}

// mustSay checks that the README holds a step the test cannot run as such
// (helm upgrade of Karmada's chart, a patch of the Karmada object: neither
// exists here) and simulates instead.
func (s *readmeSession) mustSay(line string) {
	s.t.Helper()
	if !strings.Contains(s.text, line) {
		s.t.Fatalf("%s no longer says %q", s.readme, line)
	}
}
