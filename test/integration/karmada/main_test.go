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

// Package karmada tests scaleplane's Karmada install the way a Karmada user
// runs it, against the karmada-controller-manager Deployment each of
// Karmada's four installers (Helm chart, karmadactl init, karmada-operator,
// the hack scripts) writes at v1.18.2, transcribed into testdata: the steps
// of docs/karmada/<installer>.md run with kubectl on a real apiserver, then
// that installer's upgrade (Helm 3's three-way merge, `kubectl apply`, the
// operator's full PUT, karmadactl's Create that an existing Deployment
// refuses), and the result must be what the README says. It also checks the webhook manifests for the host cluster
// and karmada-apiserver, and the pieces of `SCALEPLANE_LOCAL_KARMADA=1 make
// local-up` (the CRD without scaleplane's fields, the sidecar's args run
// locally).
package karmada

import (
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/scaleplane/scaleplane/test/integration/framework"
)

const (
	karmadaNamespace = "karmada-system"
	karmadaName      = "karmada-controller-manager"
	sidecarName      = "scaleplane-controller-manager"

	sidecarPatch = "artifacts/deploy/karmada/controller-manager-sidecar.yaml"
	removePatch  = "artifacts/deploy/karmada/controller-manager-sidecar-remove.yaml"
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
