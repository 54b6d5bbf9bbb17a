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
package upgrade

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/yaml"

	"github.com/scaleplane/scaleplane/test/integration/framework"
)

// user is a shell with the pinned helm and kubectl first on PATH, the
// control plane's admin kubeconfig as KUBECONFIG, and a Helm home of its
// own, in the namespace of one release.
type user struct {
	t          *testing.T
	cp         *framework.ControlPlane
	env        []string
	dir        string
	ns         string
	values     string
	oldChart   string
	newChart   string
	dyn        dynamic.Interface
	webhookURL string
}

// newUser starts the webhook, writes the values every helm install and
// upgrade of the test is given, and packages the working tree's chart.
func newUser(t *testing.T) *user {
	t.Helper()
	cp := framework.Get(t)
	helm := tool(t, "helm")
	tool(t, "kubectl")
	dir := t.TempDir()
	u := &user{t: t, cp: cp, dir: dir, ns: cp.CreateNamespace(t), dyn: cp.DynamicClient()}
	u.env = append(os.Environ(),
		"PATH="+filepath.Dir(helm)+string(os.PathListSeparator)+os.Getenv("PATH"),
		"KUBECONFIG="+cp.KubeconfigPath(),
		"HOME="+dir, // kubectl's discovery cache
		"HELM_CACHE_HOME="+filepath.Join(dir, "helm"), "HELM_CONFIG_HOME="+filepath.Join(dir, "helm"), "HELM_DATA_HOME="+filepath.Join(dir, "helm"))

	caBundle := u.startWebhook()
	// The chart's own ValidatingWebhookConfiguration, pointed at the
	// process by URL (as on Karmada), with the test's CA. existingSecret
	// keeps the chart from generating a CA of its own, which would replace
	// caBundle; the Secret is never mounted, nothing runs the Deployment.
	values := fmt.Sprintf("webhook:\n  existingSecret: scaleplane-webhook-test-cert\n  caBundle: %s\n  configuration:\n    url: %s\n",
		base64.StdEncoding.EncodeToString(caBundle), u.webhookURL)
	u.values = filepath.Join(dir, "values.yaml")
	if err := os.WriteFile(u.values, []byte(values), 0o644); err != nil {
		t.Fatal(err)
	}

	root, err := framework.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	u.mustRun(nil, "helm", "package", filepath.Join(root, "charts", "scaleplane"), "--version", newVersion,
		"--app-version", "v"+newVersion, "--destination", dir)
	u.newChart = filepath.Join(dir, "scaleplane-"+newVersion+".tgz")
	// Commands run in dir.
	if u.oldChart, err = filepath.Abs(oldChart); err != nil {
		t.Fatal(err)
	}
	// Last registered, first run: the release goes before the webhook
	// process and the namespace. Idempotent: a test may uninstall first.
	t.Cleanup(func() {
		if out, err := u.run(nil, "helm", "uninstall", release, "-n", u.ns, "--ignore-not-found"); err != nil {
			t.Errorf("helm uninstall: %v\n%s", err, out)
		}
	})
	return u
}

func tool(t *testing.T, name string) string {
	t.Helper()
	path, err := framework.Binary(name)
	if err != nil {
		t.Fatal(err)
	}
	return path
}

// startWebhook runs scaleplane-webhook on 127.0.0.1 with a certificate of a
// new CA and returns that CA.
func (u *user) startWebhook() []byte {
	dir := filepath.Join(u.dir, "webhook")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		u.t.Fatal(err)
	}
	w := framework.StartWebhook(u.t, dir)
	u.webhookURL = w.URL
	return w.CACert
}

// run runs a program of the user's PATH, or a bash command line when name
// is "bash", and returns its combined output.
func (u *user) run(stdin []byte, name string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), commandTimeout)
	defer cancel()
	var cmd *exec.Cmd
	switch name {
	case "bash":
		cmd = exec.CommandContext(ctx, "bash", "-o", "pipefail", "-c", strings.Join(args, " "))
	default:
		// exec.Command looks a name up in the test's PATH, not in the
		// user's: name the pinned binary.
		cmd = exec.CommandContext(ctx, tool(u.t, name), args...)
	}
	cmd.Env = u.env
	cmd.Dir = u.dir
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func (u *user) mustRun(stdin []byte, name string, args ...string) string {
	u.t.Helper()
	out, err := u.run(stdin, name, args...)
	if err != nil {
		u.t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return out
}

// apply is kubectl apply of manifests into the user's namespace, with
// kubectl's defaults (client-side apply, strict field validation).
func (u *user) apply(manifests string, extra ...string) (string, error) {
	return u.run([]byte(manifests), "kubectl", append([]string{"apply", "-n", u.ns, "-f", "-"}, extra...)...)
}

func (u *user) helmInstall(chart string) {
	u.t.Helper()
	u.mustRun(nil, "helm", "install", release, chart, "-n", u.ns, "-f", u.values)
}

func (u *user) helmUpgrade(chart string) {
	u.t.Helper()
	u.mustRun(nil, "helm", "upgrade", release, chart, "-n", u.ns, "-f", u.values)
}

// revision is one line of helm history.
type revision struct {
	Revision    int    `json:"revision"`
	Status      string `json:"status"`
	Chart       string `json:"chart"`
	Description string `json:"description"`
}

// checkDeployed checks that the release's last revision is n, deployed,
// from chart.
func (u *user) checkDeployed(n int, chart string) {
	u.t.Helper()
	var history []revision
	if err := json.Unmarshal([]byte(u.mustRun(nil, "helm", "history", release, "-n", u.ns, "-o", "json")), &history); err != nil {
		u.t.Fatalf("helm history -o json: %v", err)
	}
	if len(history) == 0 {
		u.t.Fatal("helm history is empty")
	}
	last := history[len(history)-1]
	if last.Revision != n || last.Status != "deployed" || last.Chart != chart {
		u.t.Fatalf("the release's last revision is %+v, want revision %d of %s, deployed", last, n, chart)
	}
}

// object decodes one YAML object.
func object(t *testing.T, manifest string) *unstructured.Unstructured {
	t.Helper()
	obj := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(manifest), &obj.Object); err != nil {
		t.Fatalf("decoding %s: %v", manifest, err)
	}
	return obj
}

func (u *user) get(gvr schema.GroupVersionResource, name string) *unstructured.Unstructured {
	u.t.Helper()
	obj, err := u.dyn.Resource(gvr).Namespace(u.ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		u.t.Fatalf("reading %s %s: %v", gvr.Resource, name, err)
	}
	return obj
}

// writeStatus replaces an object's status through its status subresource,
// as a controller does.
func (u *user) writeStatus(gvr schema.GroupVersionResource, name, status string) error {
	obj := u.get(gvr, name)
	var s map[string]any
	if err := yaml.Unmarshal([]byte(status), &s); err != nil {
		u.t.Fatalf("decoding status %s: %v", status, err)
	}
	obj.Object["status"] = s
	_, err := u.dyn.Resource(gvr).Namespace(u.ns).UpdateStatus(context.Background(), obj, metav1.UpdateOptions{})
	return err
}

// stored is what the API server returns of one object.
type stored struct {
	resourceVersion string
	spec, status    string
}

// key names an object for messages.
type key struct {
	gvr  schema.GroupVersionResource
	name string
}

func (k key) String() string { return k.gvr.Resource + "/" + k.name }

var theObjects = []key{
	{fhpaGVR, "nginx-fhpa"},
	{cronGVR, "nginx-fhpa-cronfhpa"},
	{arGVR, "metrics-server"},
	{lwsGVR, "vllm"},
}

// snapshot reads every object of theObjects.
func (u *user) snapshot() map[key]stored {
	u.t.Helper()
	snap := map[key]stored{}
	for _, k := range theObjects {
		obj := u.get(k.gvr, k.name)
		spec, err := json.Marshal(obj.Object["spec"])
		if err != nil {
			u.t.Fatal(err)
		}
		status, err := json.Marshal(obj.Object["status"])
		if err != nil {
			u.t.Fatal(err)
		}
		snap[k] = stored{resourceVersion: obj.GetResourceVersion(), spec: string(spec), status: string(status)}
	}
	return snap
}

// checkUnchanged checks that every object reads as in before: the same
// spec and status, byte for byte, and the same resourceVersion (nothing
// rewrote it).
func (u *user) checkUnchanged(step string, before map[key]stored) {
	u.t.Helper()
	after := u.snapshot()
	for _, k := range theObjects {
		b, a := before[k], after[k]
		if a.spec != b.spec {
			u.t.Errorf("after %s, %s's spec changed:\nbefore: %s\nafter:  %s", step, k, b.spec, a.spec)
		}
		if a.status != b.status {
			u.t.Errorf("after %s, %s's status changed:\nbefore: %s\nafter:  %s", step, k, b.status, a.status)
		}
		if a.resourceVersion != b.resourceVersion {
			u.t.Errorf("after %s, %s was rewritten: resourceVersion %s, was %s", step, k, a.resourceVersion, b.resourceVersion)
		}
	}
}

// createObjects creates one object of each kind with kubectl apply, through
// the webhook, and writes their statuses.
func (u *user) createObjects() {
	u.t.Helper()
	out := u.mustRun([]byte(objects0_1_0), "kubectl", "apply", "-n", u.ns, "-f", "-")
	for _, k := range theObjects {
		if !strings.Contains(out, "/"+k.name+" created") {
			u.t.Errorf("kubectl apply did not create %s:\n%s", k, out)
		}
	}
	for gvr, status := range statuses0_1_0 {
		if err := u.writeStatus(gvr, nameOf(gvr), status); err != nil {
			u.t.Fatalf("writing the status of %s: %v", gvr.Resource, err)
		}
	}
}

func nameOf(gvr schema.GroupVersionResource) string {
	for _, k := range theObjects {
		if k.gvr == gvr {
			return k.name
		}
	}
	panic("no object of " + gvr.String())
}
