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

// Package karmada tests the Karmada install of artifacts/deploy/karmada the
// way a Karmada user runs it: the README's kubectl commands patch a
// Deployment shaped like Karmada's karmada-controller-manager in a real
// apiserver, and the result must be the intended pod (both containers, the
// flags, the kubeconfig mount, no port clash); the reverse patch must give
// Karmada's Deployment back unchanged. It also checks the webhook manifests
// for the host cluster and karmada-apiserver, and the pieces of
// `SCALEPLANE_LOCAL_KARMADA=1 make local-up` (the CRD without scaleplane's
// fields, the sidecar's args run locally).
package karmada

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/scaleplane/scaleplane/test/integration/framework"
)

const (
	karmadaNamespace = "karmada-system"
	karmadaName      = "karmada-controller-manager"
	sidecarName      = "scaleplane-controller-manager"

	sidecarPatch = "artifacts/deploy/karmada/controller-manager-sidecar.yaml"
	removePatch  = "artifacts/deploy/karmada/controller-manager-sidecar-remove.yaml"
	readme       = "artifacts/deploy/karmada/README.md"
)

func TestMain(m *testing.M) {
	framework.Main(m, framework.Options{})
}

func repoPath(t *testing.T, rel string) string {
	t.Helper()
	root, err := framework.RepoRoot()
	if err != nil {
		t.Fatalf("locating the repository: %v", err)
	}
	return filepath.Join(root, rel)
}

func binary(t *testing.T, name string) string {
	t.Helper()
	path, err := framework.Binary(name)
	if err != nil {
		t.Fatal(err)
	}
	return path
}

// runREADMECommand runs a command line of the Karmada README, after checking
// that the README does hold it, from the repository root (its paths are
// relative to it), with the test's kubeconfig as the only addition: what
// passes here is what a user following the README gets.
func runREADMECommand(t *testing.T, cp *framework.ControlPlane, line string) string {
	t.Helper()
	text, err := os.ReadFile(repoPath(t, readme))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(text, []byte(line)) {
		t.Fatalf("%s no longer says %q; the test runs what the README says", readme, line)
	}
	fields := strings.Fields(line)
	if fields[0] != "kubectl" {
		t.Fatalf("not a kubectl command: %q", line)
	}
	args := append([]string{"--kubeconfig", cp.KubeconfigPath()}, fields[1:]...)
	cmd := exec.Command(binary(t, "kubectl"), args...)
	cmd.Dir = repoPath(t, ".")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v\n%s", line, err, out)
	}
	return string(out)
}

// localkarmada builds hack/localkarmada, the helper hack/local-up.sh runs in
// its Karmada mode (from the Go build cache after the first time).
func localkarmada(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "localkarmada")
	cmd := exec.Command("go", "build", "-o", path, "./hack/localkarmada")
	cmd.Dir = repoPath(t, ".")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building hack/localkarmada: %v\n%s", err, out)
	}
	return path
}
