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
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	autoscalingv2 "k8s.io/api/autoscaling/v2"

	autoscalingv1alpha1 "github.com/scaleplane/scaleplane/pkg/apis/autoscaling/v1alpha1"
	lwsv1 "github.com/scaleplane/scaleplane/pkg/apis/leaderworkerset/v1"
	"github.com/scaleplane/scaleplane/test/integration/framework"
)

// TestShippedRBAC: the manager, running as its service account with the
// shipped RBAC (artifacts/deploy/controller-manager, applied as a cluster
// admin would), detects Karmada through discovery (no rule needed), creates
// the FederatedHPA with an owner reference that blocks the LeaderWorkerSet's
// deletion under OwnerReferencesPermissionEnforcement, and is refused
// nothing.
func TestShippedRBAC(t *testing.T) {
	cp := framework.Get(t)
	ns := cp.CreateNamespace(t)
	root, err := framework.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	kubectl, err := framework.Binary("kubectl")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{
		"artifacts/deploy/webhook/namespace.yaml",
		"artifacts/deploy/controller-manager/serviceaccount.yaml",
		"artifacts/deploy/controller-manager/rbac.yaml",
	} {
		out, err := exec.Command(kubectl, "--kubeconfig", cp.KubeconfigPath(), "apply", "-f", filepath.Join(root, f)).CombinedOutput()
		if err != nil {
			t.Fatalf("kubectl apply -f %s: %v\n%s", f, err, out)
		}
	}
	m := framework.StartManager(t, cp.ServiceAccountKubeconfig(t, "scaleplane-system", "scaleplane-controller-manager"), "hpa-generator")
	waitLog(t, m, "The hpa-generator keeps one autoscaler", "FederatedHPA", "Auto: the API server is a Karmada control plane")

	lws := createLWS(t, cp, leaderWorkerSet(ns, "llm", &lwsv1.ScalePolicy{MaxReplicas: 3, Metrics: []autoscalingv2.MetricSpec{cpuMetric(50)}}))
	waitFHPA(t, cp, ns, "llm", generated(lws, 1, 3, 50))
	// Drift repair and deletion need update and delete.
	updateFHPA(t, cp, ns, "llm", false, func(f *autoscalingv1alpha1.FederatedHPA) { f.Spec.MaxReplicas = 9 })
	waitFHPA(t, cp, ns, "llm", generated(lws, 1, 3, 50))
	updateLWS(t, cp, ns, "llm", func(l *lwsv1.LeaderWorkerSet) { l.Spec.ScalePolicy = nil })
	waitFHPA(t, cp, ns, "llm", fhpaGone)
	// RBAC's refusals say `User "..." cannot <verb> resource "..."`. (The
	// manager watches every namespace: other tests' namespaces being deleted
	// make it "forbidden" too, for another reason.)
	for _, line := range strings.Split(m.Tail(5000), "\n") {
		if strings.Contains(line, "forbidden") && strings.Contains(line, " cannot ") {
			t.Errorf("the manager was refused something with the shipped RBAC: %s", line)
		}
	}
}
