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

// Package chart renders charts/scaleplane with the pinned helm and applies
// it to a real kube-apiserver with a server-side dry run, so every manifest
// the chart produces is one the apiserver accepts; and it checks that the
// chart grants the same RBAC as artifacts/deploy.
package chart

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"github.com/scaleplane/scaleplane/test/integration/framework"
)

const namespace = "scaleplane-system"

func TestMain(m *testing.M) {
	framework.Main(m, framework.Options{})
}

func tool(t *testing.T, name string) string {
	t.Helper()
	path, err := framework.Binary(name)
	if err != nil {
		t.Fatal(err)
	}
	return path
}

func repoPath(t *testing.T, rel string) string {
	t.Helper()
	root, err := framework.RepoRoot()
	if err != nil {
		t.Fatalf("locating the repository: %v", err)
	}
	return filepath.Join(root, rel)
}

// ensureNamespace creates the release namespace, which the tests share.
func ensureNamespace(t *testing.T, cp *framework.ControlPlane) {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}
	if _, err := cp.KubeClient().CoreV1().Namespaces().Create(context.Background(), ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("creating %s: %v", namespace, err)
	}
}

// render runs helm template with the given extra arguments.
func render(t *testing.T, args ...string) []byte {
	t.Helper()
	home := t.TempDir()
	cmd := exec.Command(tool(t, "helm"), append([]string{"template", "scaleplane", repoPath(t, "charts/scaleplane"), "--namespace", namespace}, args...)...)
	cmd.Env = append(os.Environ(), "HELM_CACHE_HOME="+home, "HELM_CONFIG_HOME="+home, "HELM_DATA_HOME="+home)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("helm template %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return out
}

func TestChartAppliesToARealAPIServer(t *testing.T) {
	cp := framework.Get(t)
	ensureNamespace(t, cp)
	standalone := []string{
		"deployment.apps/scaleplane-controller-manager created (server dry run)",
		"clusterrole.rbac.authorization.k8s.io/scaleplane:cron-scaler:base created (server dry run)",
		"validatingwebhookconfiguration.admissionregistration.k8s.io/scaleplane-webhook created (server dry run)",
	}
	karmada := repoPath(t, "charts/scaleplane/values-karmada.yaml")
	for _, tc := range []struct {
		name string
		args []string
		want []string
	}{
		{name: "default values (self-signed webhook certificate)", want: standalone},
		{name: "existing certificate and extra scale targets", args: []string{
			"--set", "webhook.existingSecret=my-cert", "--set", "webhook.caBundle=Zm9v",
			"--set", "controllerManager.extraScaleTargets[0].apiGroups[0]=example.com",
			"--set", "controllerManager.extraScaleTargets[0].resources[0]=myworkloads/scale",
		}, want: standalone},
		// On Karmada the webhook server goes to the host cluster and its
		// configuration to karmada-apiserver: two renders, no controller
		// manager (it is a sidecar of karmada-controller-manager).
		{name: "Karmada, host cluster", args: []string{"-f", karmada, "--set", "webhook.configuration.enabled=false"},
			want: []string{"deployment.apps/scaleplane-webhook created (server dry run)"}},
		{name: "Karmada, karmada-apiserver", args: []string{"-f", karmada, "--set", "webhook.server.enabled=false", "--set", "webhook.caBundle=Zm9v"},
			want: []string{"validatingwebhookconfiguration.admissionregistration.k8s.io/scaleplane-webhook created (server dry run)"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			manifests := render(t, tc.args...)
			cmd := exec.Command(tool(t, "kubectl"), "--kubeconfig", cp.KubeconfigPath(), "apply", "--dry-run=server", "-f", "-")
			cmd.Stdin = bytes.NewReader(manifests)
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("kubectl apply --dry-run=server of the rendered chart: %v\n%s", err, out)
			}
			for _, want := range tc.want {
				if !strings.Contains(string(out), want) {
					t.Errorf("applying the chart did not report %q:\n%s", want, out)
				}
			}
		})
	}
}

// TestRenderedManifestsApply: the plain manifests rendered from the chart
// into artifacts/deploy (hack/update-manifests.sh) are accepted as a whole,
// the way the README applies them.
func TestRenderedManifestsApply(t *testing.T) {
	cp := framework.Get(t)
	ensureNamespace(t, cp)
	cmd := exec.Command(tool(t, "kubectl"), "--kubeconfig", cp.KubeconfigPath(), "apply", "--dry-run=server",
		"-f", repoPath(t, "artifacts/deploy/controller-manager/"), "-f", repoPath(t, "artifacts/deploy/webhook/"))
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl apply --dry-run=server of artifacts/deploy: %v\n%s", err, out)
	}
	for _, want := range []string{"deployment.apps/scaleplane-controller-manager", "deployment.apps/scaleplane-webhook", "role.rbac.authorization.k8s.io/scaleplane:controller-manager:leader-election"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("applying artifacts/deploy did not report %s:\n%s", want, out)
		}
	}
}

// TestChartRBACMatchesArtifacts keeps the chart's roles and the plain
// manifests' roles equal, so the least-privilege rules proven by
// test/integration/rbac hold for Helm users too.
func TestChartRBACMatchesArtifacts(t *testing.T) {
	chartRoles := clusterRoles(t, render(t))
	plain, err := os.ReadFile(repoPath(t, "artifacts/deploy/controller-manager/rbac.yaml"))
	if err != nil {
		t.Fatalf("reading rbac.yaml: %v", err)
	}
	plainRoles := clusterRoles(t, plain)
	if len(plainRoles) == 0 {
		t.Fatal("no ClusterRoles in artifacts/deploy/controller-manager/rbac.yaml")
	}
	for name, rules := range plainRoles {
		got, ok := chartRoles[name]
		if !ok {
			t.Errorf("the chart has no ClusterRole %s", name)
			continue
		}
		if !reflect.DeepEqual(got, rules) {
			t.Errorf("ClusterRole %s differs:\nchart: %+v\nartifacts: %+v", name, got, rules)
		}
	}
}

func clusterRoles(t *testing.T, manifests []byte) map[string][]rbacv1.PolicyRule {
	t.Helper()
	roles := map[string][]rbacv1.PolicyRule{}
	reader := utilyaml.NewYAMLReader(bufioReader(manifests))
	for {
		doc, err := reader.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("reading YAML: %v", err)
		}
		var meta metav1.TypeMeta
		if err := yaml.Unmarshal(doc, &meta); err != nil || meta.Kind != "ClusterRole" {
			continue
		}
		var role rbacv1.ClusterRole
		if err := yaml.Unmarshal(doc, &role); err != nil {
			t.Fatalf("decoding a ClusterRole: %v", err)
		}
		roles[role.Name] = role.Rules
	}
	return roles
}

func bufioReader(b []byte) *bufio.Reader { return bufio.NewReader(bytes.NewReader(b)) }
