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

// Package karmada tests the hpa-generator on a control plane that looks like
// karmada-apiserver to it: Karmada's own FederatedHPA CRD (v1.18.2, in
// testdata) instead of scaleplane's, and a stand-in PropagationPolicy CRD so
// that --hpa-generator-output=Auto detects Karmada. No Karmada component
// runs: nothing acts on the FederatedHPAs but the generator, and the tests
// write their status where Karmada's controller would. kube-controller-manager
// runs for its garbage collector. The OwnerReferencesPermissionEnforcement
// admission plugin is on (as in OpenShift): the FederatedHPA's owner
// reference blocks the LeaderWorkerSet's deletion, which it allows only to
// who may update the LeaderWorkerSet's finalizers; the tests that run the
// manager as admin are not affected, TestShippedRBAC runs it with the shipped
// RBAC.
package karmada

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/scaleplane/scaleplane/test/integration/framework"
)

const fhpaCRDName = "federatedhpas.autoscaling.karmada.io"

func TestMain(m *testing.M) {
	dir, err := writeCRDs()
	if err != nil {
		fmt.Fprintf(os.Stderr, "FAIL: writing the CRDs: %v\n", err)
		os.Exit(1)
	}
	framework.Main(m, framework.Options{
		KubeControllerManager: true,
		CRDDir:                dir,
		ExtraAPIServerArgs:    []string{"--enable-admission-plugins=OwnerReferencesPermissionEnforcement"},
	})
}

// writeCRDs writes scaleplane's CRDs with Karmada's FederatedHPA CRD in
// place of scaleplane's, and the PropagationPolicy stand-in, to a directory
// of _output.
func writeCRDs() (string, error) {
	root, err := framework.RepoRoot()
	if err != nil {
		return "", err
	}
	testdata := filepath.Join(root, "test", "integration", "hpagenerator", "karmada", "testdata")
	karmada, err := framework.ReadCRDs(testdata)
	if err != nil {
		return "", err
	}
	var fhpa *unstructured.Unstructured
	for _, crd := range karmada {
		if crd.GetName() == fhpaCRDName {
			fhpa = crd
		}
	}
	if fhpa == nil {
		return "", fmt.Errorf("no %s in %s", fhpaCRDName, testdata)
	}
	dst := filepath.Join(root, "_output", "integration", "hpagenerator-karmada-crds")
	err = framework.WriteCRDVariant(filepath.Join(root, "artifacts", "deploy", "crds"), dst, func(crd *unstructured.Unstructured) error {
		if crd.GetName() == fhpaCRDName {
			crd.Object = fhpa.DeepCopy().Object
		}
		return nil
	})
	if err != nil {
		return "", err
	}
	for _, crd := range karmada {
		if crd.GetName() == fhpaCRDName {
			continue
		}
		data, err := crd.MarshalJSON()
		if err != nil {
			return "", err
		}
		if err := os.WriteFile(filepath.Join(dst, crd.GetName()+".json"), data, 0o644); err != nil {
			return "", err
		}
	}
	return dst, nil
}
