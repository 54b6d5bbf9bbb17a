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
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/scaleplane/scaleplane/test/integration/framework"
)

// What `SCALEPLANE_LOCAL_KARMADA=1 make local-up` removes from the
// CronFederatedHPA schema (hack/local-up.sh): scaleplane's additions, which
// Karmada's CRD does not have.
var karmadaMissingFields = []string{"spec.rules[].maxDelaySeconds", "status.executionHistories[].lastScheduleTime"}

const cronCRD = "autoscaling.karmada.io_cronfederatedhpas"

// TestLocalUpRunsTheSidecarArgs: the args hack/local-up.sh starts the
// controller manager with in its Karmada mode are the sidecar container's,
// with only what the kubelet and the Secret mount would change, and the
// manager runs with them: it takes its own Lease in karmada-system with the
// kubeconfig at the local stand-in of /etc/karmada/config.
func TestLocalUpRunsTheSidecarArgs(t *testing.T) {
	cp := framework.Get(t)
	ensureNamespace(t, cp, karmadaNamespace)
	configDir := t.TempDir()
	data, err := os.ReadFile(cp.KubeconfigPath())
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(configDir, "karmada.config"), data, 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(localkarmada(t), "sidecar-args", "--patch", repoPath(t, sidecarPatch),
		"--container", sidecarName, "--pod-ip", "127.0.0.1", "--mount", "karmada-config="+configDir).Output()
	if err != nil {
		t.Fatalf("localkarmada sidecar-args: %v", err)
	}
	got := strings.Split(strings.TrimSpace(string(out)), "\n")
	want := sidecarArgsFromPatch(t)
	for i := range want {
		want[i] = strings.ReplaceAll(want[i], "$(POD_IP)", "127.0.0.1")
		want[i] = strings.ReplaceAll(want[i], "/etc/karmada/config", configDir)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("local-up's args:\n%v\nwant the sidecar's:\n%v", got, want)
	}
	runWithArgs(t, cp, got)
}

func sidecarArgsFromPatch(t *testing.T) []string {
	t.Helper()
	data, err := os.ReadFile(repoPath(t, sidecarPatch))
	if err != nil {
		t.Fatal(err)
	}
	var patch struct {
		Spec struct {
			Template corev1.PodTemplateSpec `json:"template"`
		} `json:"spec"`
	}
	if err := yaml.Unmarshal(data, &patch); err != nil {
		t.Fatal(err)
	}
	for _, c := range patch.Spec.Template.Spec.Containers {
		if c.Name == sidecarName {
			return c.Args
		}
	}
	t.Fatalf("%s has no container %s", sidecarPatch, sidecarName)
	return nil
}

// runWithArgs starts the manager with args; only the port is moved to a
// free one (a test must not take the fixed 10358), by a later --port.
func runWithArgs(t *testing.T, cp *framework.ControlPlane, args []string) {
	t.Helper()
	port, err := framework.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	p, err := framework.StartProcess(t.TempDir(), "controller-manager", binary(t, "scaleplane-controller-manager"),
		append(slices.Clone(args), fmt.Sprintf("--port=%d", port)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		p.Stop(15 * time.Second)
		if t.Failed() {
			t.Logf("scaleplane-controller-manager log:\n%s", p.Tail(100))
		}
	})
	ctx := context.Background()
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
		lease, err := cp.KubeClient().CoordinationV1().Leases(karmadaNamespace).Get(ctx, flagValue(args, "leader-elect-resource-name"), metav1.GetOptions{})
		return err == nil && ptr.Deref(lease.Spec.HolderIdentity, "") != "", nil
	})
	if err != nil {
		t.Fatalf("the manager did not take its Lease in %s: %v", karmadaNamespace, err)
	}
	resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/healthz", port))
	if err != nil {
		t.Fatalf("GET /healthz: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("/healthz answered %d", resp.StatusCode)
	}
}

// TestKarmadaShapedCRD installs the CronFederatedHPA CRD the way local-up's
// Karmada mode makes it and checks that the apiserver treats scaleplane's
// fields as Karmada's CRD would: kubectl's strict validation refuses them,
// and otherwise they are pruned, in spec and in status.
func TestKarmadaShapedCRD(t *testing.T) {
	cp := framework.Get(t)
	ctx := context.Background()
	t.Cleanup(func() {
		if _, err := framework.InstallCRDs(ctx, cp.DynamicClient(), repoPath(t, "artifacts/deploy/crds"), time.Minute); err != nil {
			t.Errorf("putting scaleplane's CRDs back: %v", err)
		}
	})
	crdFile := stripCRD(t)
	kubectl(t, cp, "apply", "--server-side", "--force-conflicts", "-f", crdFile)
	kubectl(t, cp, "wait", "--for=condition=Established", "--timeout=60s", "-f", crdFile)
	checkCRDLacks(t, cp)

	ns := cp.CreateNamespace(t)
	object := filepath.Join(t.TempDir(), "cron.yaml")
	manifest := `apiVersion: autoscaling.karmada.io/v1alpha1
kind: CronFederatedHPA
metadata:
  name: late
spec:
  scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: web}
  rules:
    - {name: up, schedule: "0 8 * * *", targetReplicas: 3, maxDelaySeconds: 60}
`
	if err := os.WriteFile(object, []byte(manifest), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := kubectlErr(cp, "-n", ns, "apply", "-f", object); err == nil || !strings.Contains(out, "maxDelaySeconds") {
		t.Errorf("kubectl apply (strict) of a rule with maxDelaySeconds: err %v, output %s; want it refused for the unknown field", err, out)
	}
	kubectl(t, cp, "-n", ns, "apply", "--validate=warn", "-f", object)
	checkPruned(t, cp, ns)
}

func stripCRD(t *testing.T) string {
	t.Helper()
	args := []string{"strip-crd", "--crd", repoPath(t, "artifacts/deploy/crds/"+cronCRD+".yaml")}
	for _, f := range karmadaMissingFields {
		args = append(args, "--remove", f)
	}
	out, err := exec.Command(localkarmada(t), args...).Output()
	if err != nil {
		t.Fatalf("localkarmada strip-crd: %v", err)
	}
	path := filepath.Join(t.TempDir(), cronCRD+".json")
	if err := os.WriteFile(path, out, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// checkCRDLacks reads the installed CRD back: neither field is in its schema.
func checkCRDLacks(t *testing.T, cp *framework.ControlPlane) {
	t.Helper()
	u, err := cp.DynamicClient().Resource(framework.CRDResource).Get(context.Background(), "cronfederatedhpas.autoscaling.karmada.io", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	versions, _, _ := unstructured.NestedSlice(u.Object, "spec", "versions")
	schemaJSON, err := yaml.Marshal(versions)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"maxDelaySeconds:", "lastScheduleTime:"} {
		if strings.Contains(string(schemaJSON), f) {
			t.Errorf("the installed schema still has %s", f)
		}
	}
}

// checkPruned: the stored object has no maxDelaySeconds, and a status write
// with lastScheduleTime keeps the rest and drops that field.
func checkPruned(t *testing.T, cp *framework.ControlPlane, ns string) {
	t.Helper()
	ctx := context.Background()
	gvr := schema.GroupVersionResource{Group: "autoscaling.karmada.io", Version: "v1alpha1", Resource: "cronfederatedhpas"}
	client := cp.DynamicClient().Resource(gvr).Namespace(ns)
	obj, err := client.Get(ctx, "late", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	rules, _, _ := unstructured.NestedSlice(obj.Object, "spec", "rules")
	if len(rules) != 1 || rules[0].(map[string]any)["maxDelaySeconds"] != nil {
		t.Errorf("stored rules %v, want maxDelaySeconds pruned", rules)
	}
	history := map[string]any{
		"ruleName":          "up",
		"nextExecutionTime": "2030-01-01T08:00:00Z",
		"lastScheduleTime":  "2029-12-31T08:00:00Z",
	}
	if err := unstructured.SetNestedSlice(obj.Object, []any{history}, "status", "executionHistories"); err != nil {
		t.Fatal(err)
	}
	updated, err := client.UpdateStatus(ctx, obj, metav1.UpdateOptions{})
	if err != nil {
		t.Fatalf("writing status: %v", err)
	}
	stored, _, _ := unstructured.NestedSlice(updated.Object, "status", "executionHistories")
	if len(stored) != 1 {
		t.Fatalf("stored histories %v", stored)
	}
	entry := stored[0].(map[string]any)
	if entry["lastScheduleTime"] != nil || entry["nextExecutionTime"] != "2030-01-01T08:00:00Z" {
		t.Errorf("stored history %v, want nextExecutionTime kept and lastScheduleTime pruned", entry)
	}
}

func kubectl(t *testing.T, cp *framework.ControlPlane, args ...string) string {
	t.Helper()
	out, err := kubectlErr(cp, args...)
	if err != nil {
		t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

func kubectlErr(cp *framework.ControlPlane, args ...string) (string, error) {
	bin, err := framework.Binary("kubectl")
	if err != nil {
		return "", err
	}
	out, err := exec.Command(bin, append([]string{"--kubeconfig", cp.KubeconfigPath()}, args...)...).CombinedOutput()
	return string(out), err
}
