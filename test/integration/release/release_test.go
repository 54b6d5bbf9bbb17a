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

// Package release installs a release from a real OCI registry, as a user
// would: it cuts a signed release of the working tree (hack/release.sh with a
// fresh cosign key pair, this host's platform only), starts a registry on
// 127.0.0.1 (go-containerregistry's implementation of the distribution API,
// `imagetool registry`), publishes the release to it (hack/push-release.sh),
// and then, with the tools a user has: verifies the images' and the chart's
// signatures with cosign and reads their SBOM and provenance attestations;
// sees verification fail for an image pushed unsigned, a tag moved to
// another image and a key that did not sign; installs the chart with `helm
// install oci://...`, which runs the images by digest; and runs the
// controller manager from the binary of the image the registry serves,
// with the chart's arguments and service account, until its controllers act.
package release

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	autoscalingv1alpha1 "github.com/scaleplane/scaleplane/pkg/apis/autoscaling/v1alpha1"
	lwsv1 "github.com/scaleplane/scaleplane/pkg/apis/leaderworkerset/v1"
	"github.com/scaleplane/scaleplane/test/integration/framework"
)

const (
	namespace      = "scaleplane-system"
	serviceAccount = "scaleplane-controller-manager"
	password       = "release-test"
)

func TestMain(m *testing.M) {
	// No CRDs: the chart pulled from the registry installs them.
	framework.Main(m, framework.Options{CRDDir: "testdata/no-crds"})
}

// env is what the test works with: the tools, the registry, the release.
type env struct {
	t        *testing.T
	root     string
	dir      string
	bin      map[string]string
	registry string            // host:port
	prefix   string            // host:port/scaleplane
	version  string            // vX.Y.Z
	commit   string            // what the release is cut from
	out      string            // the release directory
	images   map[string]string // name -> index digest, from images.txt
}

func TestInstallFromRegistry(t *testing.T) {
	e := newEnv(t)
	e.startRegistry()
	e.cutRelease()
	e.refusesTamperedRelease()
	e.run(nil, filepath.Join(e.root, "hack/push-release.sh"), e.prefix, e.out)

	e.verifySignatures()
	e.verifyAttestations()
	e.verifyRefusals()
	webhook := e.installChart()
	e.runPulled(webhook)
}

func newEnv(t *testing.T) *env {
	root, err := framework.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, root: root, dir: t.TempDir(), bin: map[string]string{}, images: map[string]string{}}
	for _, name := range []string{"imagetool", "cosign", "helm"} {
		if e.bin[name], err = framework.Binary(name); err != nil {
			t.Fatal(err)
		}
	}
	e.version = newestVersion(t, filepath.Join(root, "CHANGELOG.md"))
	e.commit = strings.TrimSpace(e.run(nil, "git", "rev-parse", "HEAD"))
	e.out = filepath.Join(e.dir, "release")
	return e
}

// newestVersion is the first "## [X.Y.Z]" heading of CHANGELOG.md, the
// version hack/verify-release-reproducible.sh releases too.
func newestVersion(t *testing.T, changelog string) string {
	data, err := os.ReadFile(changelog)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "## ["); ok && v != "" && v[0] >= '0' && v[0] <= '9' {
			return "v" + strings.TrimPrefix(v[:strings.Index(v, "]")], "v")
		}
	}
	t.Fatal("CHANGELOG.md has no released version")
	return ""
}

// run runs a command with the test's environment plus extra, and returns
// its standard output; it fails the test with both outputs if it fails.
func (e *env) run(extra []string, name string, args ...string) string {
	e.t.Helper()
	out, errOut, err := e.try(extra, name, args...)
	if err != nil {
		e.t.Fatalf("%s %s: %v\n%s\n%s", filepath.Base(name), strings.Join(args, " "), err, out, errOut)
	}
	return out
}

func (e *env) try(extra []string, name string, args ...string) (string, string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = e.root
	home := filepath.Join(e.dir, "home")
	// Helm's and cosign's caches and configuration of their own. Not a HOME
	// of its own for everything: Go's build and module caches are under it.
	cmd.Env = append(os.Environ(), "HELM_CACHE_HOME="+home+"/helm", "HELM_CONFIG_HOME="+home+"/helm",
		"HELM_DATA_HOME="+home+"/helm", "TUF_ROOT="+home+"/sigstore", "COSIGN_PASSWORD="+password)
	cmd.Env = append(cmd.Env, extra...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	return stdout.String(), stderr.String(), err
}

func (e *env) startRegistry() {
	addressFile := filepath.Join(e.dir, "registry.address")
	p, err := framework.StartProcess(e.dir, "registry", e.bin["imagetool"], []string{"registry", "--listen", "127.0.0.1:0", "--address-file", addressFile})
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { p.Stop(5 * time.Second) })
	e.registry = framework.WaitObject(e.t, 30*time.Second, "the registry's address", func(context.Context) (string, error) {
		data, err := os.ReadFile(addressFile)
		return strings.TrimSpace(string(data)), err
	}, func(addr string, err error) string {
		if p.Exited() {
			e.t.Fatalf("imagetool registry exited:\n%s", p.Tail(20))
		}
		if err != nil || addr == "" {
			return fmt.Sprintf("not written yet (%v)", err)
		}
		return ""
	})
	e.prefix = e.registry + "/scaleplane"
}

// cutRelease cuts a release of the working tree for this host's platform,
// signed with a key pair made for the test, its images named at the test's
// registry, as `make release` does for ghcr.io.
func (e *env) cutRelease() {
	keys := e.keyPair("keys")
	platform := "linux/" + runtime.GOARCH
	start := time.Now()
	e.run([]string{
		"SCALEPLANE_RELEASE_ALLOW_DIRTY=1", // the working tree is what is tested
		"SCALEPLANE_RELEASE_KEY=" + filepath.Join(keys, "cosign.key"),
		"SCALEPLANE_RELEASE_OUTPUT=" + e.out,
		"SCALEPLANE_RELEASE_WORK=" + filepath.Join(e.dir, "release-build"),
		"SCALEPLANE_RELEASE_IMAGE_PLATFORMS=" + platform,
		"SCALEPLANE_RELEASE_PLUGIN_PLATFORMS=" + platform,
		"SCALEPLANE_IMAGE_REGISTRY=" + e.prefix,
	}, filepath.Join(e.root, "hack/release.sh"), e.version)
	e.t.Logf("release %s for %s cut in %s", e.version, platform, time.Since(start).Round(time.Second))
	data, err := os.ReadFile(filepath.Join(e.out, "images.txt"))
	if err != nil {
		e.t.Fatal(err)
	}
	for _, line := range strings.Fields(string(data)) {
		ref, digest, _ := strings.Cut(line, "@")
		name := strings.TrimPrefix(ref[:strings.LastIndex(ref, ":")], e.prefix+"/")
		e.images[name] = digest
	}
	if len(e.images) != 2 {
		e.t.Fatalf("images.txt = %q, want the controller manager and the webhook at %s", data, e.prefix)
	}
}

// pulledWebhook is where the test serves the webhook the chart configures.
type pulledWebhook struct {
	port     int
	certs    *framework.ServingCerts
	certsDir string
}

// installChart installs the chart from the registry, as the release notes
// say. There is no kubelet: nothing runs the Deployments, so the test runs
// their images' binaries itself (runPulled), and the chart points the
// webhook configuration at a URL on 127.0.0.1 with a certificate of the
// test's (webhook.configuration.url, existingSecret and caBundle: the
// chart's mode for a webhook served outside the cluster).
func (e *env) installChart() pulledWebhook {
	cp := framework.Get(e.t)
	certs, err := framework.GenerateServingCerts("127.0.0.1")
	if err != nil {
		e.t.Fatal(err)
	}
	port, err := framework.FreePort()
	if err != nil {
		e.t.Fatal(err)
	}
	kubeconfig := cp.KubeconfigPath()
	e.run(nil, e.bin["helm"], "install", "scaleplane", "oci://"+e.prefix+"/charts/scaleplane",
		"--version", strings.TrimPrefix(e.version, "v"), "--plain-http", "--kubeconfig", kubeconfig,
		"--namespace", namespace, "--create-namespace",
		"--set", fmt.Sprintf("webhook.configuration.url=https://127.0.0.1:%d", port),
		"--set", "webhook.existingSecret=scaleplane-webhook-outside",
		"--set", "webhook.caBundle="+base64.StdEncoding.EncodeToString(certs.CACert))
	manifest := e.run(nil, e.bin["helm"], "get", "manifest", "scaleplane", "--kubeconfig", kubeconfig, "--namespace", namespace)
	for _, name := range []string{"scaleplane-controller-manager", "scaleplane-webhook"} {
		image := e.prefix + "/" + name + ":" + e.version + "@" + e.images[name]
		if !strings.Contains(manifest, "image: "+image) {
			e.t.Errorf("the installed chart does not run %s by digest (%s):\n%s", name, image, grep(manifest, "image:"))
		}
	}
	// The chart's CRDs came with it, from the registry.
	for _, crd := range []string{"cronfederatedhpas.autoscaling.karmada.io", "addonresizers.autoscaling.scaleplane.io", "leaderworkersets.leaderworkerset.x-k8s.io"} {
		if _, err := cp.DynamicClient().Resource(framework.CRDResource).Get(context.Background(), crd, metav1.GetOptions{}); err != nil {
			e.t.Errorf("CRD %s not installed by the chart: %v", crd, err)
		}
	}
	dir := filepath.Join(e.dir, "webhook-certs")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		e.t.Fatal(err)
	}
	return pulledWebhook{port: port, certs: certs, certsDir: dir}
}

func grep(s, substr string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, substr) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// runPulled extracts the binaries of the images the chart's Deployments
// run, from the registry, and runs each with its Deployment's arguments (the
// controller manager as the chart's service account, with its RBAC as
// installed), listening on loopback. Each must say what it is; the webhook
// must admit a valid LeaderWorkerSet and refuse an invalid CronFederatedHPA;
// the controller manager's hpa-generator must give the LeaderWorkerSet its HPA.
func (e *env) runPulled(webhook pulledWebhook) {
	cp := framework.Get(e.t)
	certFile, keyFile, _, err := webhook.certs.WriteFiles(webhook.certsDir, "webhook")
	if err != nil {
		e.t.Fatal(err)
	}
	wh := e.startPulled("scaleplane-webhook", func(args []string) []string {
		return append(replaceArgs(args, map[string]string{"--tls-cert-file": certFile, "--tls-private-key-file": keyFile}),
			"--bind-address=127.0.0.1", fmt.Sprintf("--secure-port=%d", webhook.port))
	})
	port, err := framework.FreePort()
	if err != nil {
		e.t.Fatal(err)
	}
	saKubeconfig := cp.ServiceAccountKubeconfig(e.t, namespace, serviceAccount)
	cm := e.startPulled("scaleplane-controller-manager", func(args []string) []string {
		return append(args, "--kubeconfig="+saKubeconfig, "--bind-address=127.0.0.1", fmt.Sprintf("--port=%d", port))
	})

	ns := cp.CreateNamespace(e.t)
	// Admitted by the pulled webhook once it serves (failurePolicy: Fail).
	framework.WaitObject(e.t, 60*time.Second, "creating a LeaderWorkerSet through the pulled webhook", func(ctx context.Context) (*lwsv1.LeaderWorkerSet, error) {
		return cp.Client().LeaderworkersetV1().LeaderWorkerSets(ns).Create(ctx, leaderWorkerSet(ns), metav1.CreateOptions{})
	}, func(_ *lwsv1.LeaderWorkerSet, err error) string {
		if wh.Exited() {
			e.t.Fatalf("the pulled webhook exited:\n%s", wh.Tail(50))
		}
		if err != nil {
			return err.Error()
		}
		return ""
	})
	invalid := &autoscalingv1alpha1.CronFederatedHPA{
		ObjectMeta: metav1.ObjectMeta{Name: "invalid", Namespace: ns},
		Spec: autoscalingv1alpha1.CronFederatedHPASpec{
			ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"},
			Rules:          []autoscalingv1alpha1.CronFederatedHPARule{{Name: "r", Schedule: "not a schedule", TargetReplicas: ptr.To[int32](2)}},
		},
	}
	_, err = cp.Client().AutoscalingV1alpha1().CronFederatedHPAs(ns).Create(context.Background(), invalid, metav1.CreateOptions{})
	if err == nil || !strings.Contains(err.Error(), "admission webhook") || !strings.Contains(err.Error(), "schedule") {
		e.t.Errorf("creating a CronFederatedHPA with schedule \"not a schedule\": %v; want the pulled webhook's refusal naming the schedule", err)
	}

	framework.WaitObject(e.t, 60*time.Second, "the LeaderWorkerSet's HPA", func(ctx context.Context) (*autoscalingv2.HorizontalPodAutoscaler, error) {
		return cp.KubeClient().AutoscalingV2().HorizontalPodAutoscalers(ns).Get(ctx, "llm", metav1.GetOptions{})
	}, func(hpa *autoscalingv2.HorizontalPodAutoscaler, err error) string {
		if cm.Exited() {
			e.t.Fatalf("the pulled controller manager exited:\n%s", cm.Tail(50))
		}
		if err != nil {
			return fmt.Sprintf("not created by the pulled controller manager: %v", err)
		}
		if hpa.Spec.MaxReplicas != 3 {
			return fmt.Sprintf("maxReplicas %d, want 3", hpa.Spec.MaxReplicas)
		}
		return ""
	})
}

// startPulled reads the chart's Deployment of name, extracts the binary of
// the image it runs from the registry, checks its --version, and starts it
// with the Deployment's arguments as adjust changes them.
func (e *env) startPulled(name string, adjust func([]string) []string) *framework.Process {
	cp := framework.Get(e.t)
	dep, err := cp.KubeClient().AppsV1().Deployments(namespace).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		e.t.Fatalf("the chart installed no Deployment %s: %v", name, err)
	}
	container := dep.Spec.Template.Spec.Containers[0]
	binary := filepath.Join(e.dir, "pulled", name)
	e.run(nil, e.bin["imagetool"], "extract", "--reference", container.Image, "--platform", "linux/"+runtime.GOARCH, "--output", binary)
	commit := e.commit
	if out := e.run(nil, binary, "--version"); !strings.HasPrefix(out, name+" "+e.version+" (commit "+commit+",") {
		e.t.Errorf("%s --version, pulled from the registry = %q, want %s of commit %s", name, out, e.version, commit)
	}
	logDir := filepath.Join(e.dir, name)
	if err := os.MkdirAll(logDir, 0o755); err != nil {
		e.t.Fatal(err)
	}
	p, err := framework.StartProcess(logDir, name, binary, adjust(container.Args))
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() {
		p.Stop(15 * time.Second)
		if e.t.Failed() {
			e.t.Logf("the pulled %s's log:\n%s", name, p.Tail(100))
		}
	})
	return p
}

// replaceArgs sets the value of --flag=value arguments.
func replaceArgs(args []string, values map[string]string) []string {
	out := make([]string, 0, len(args))
	for _, a := range args {
		flag, _, _ := strings.Cut(a, "=")
		if v, ok := values[flag]; ok {
			a = flag + "=" + v
		}
		out = append(out, a)
	}
	return out
}

func leaderWorkerSet(ns string) *lwsv1.LeaderWorkerSet {
	tmpl := corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "llm"}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "llm", Image: "registry.example/llm:1"}}},
	}
	return &lwsv1.LeaderWorkerSet{
		ObjectMeta: metav1.ObjectMeta{Name: "llm", Namespace: ns},
		Spec: lwsv1.LeaderWorkerSetSpec{
			Replicas:             ptr.To[int32](1),
			LeaderWorkerTemplate: lwsv1.LeaderWorkerTemplate{WorkerTemplate: tmpl},
			RolloutStrategy:      lwsv1.RolloutStrategy{Type: lwsv1.RollingUpdateStrategyType},
			StartupPolicy:        lwsv1.LeaderCreatedStartupPolicy,
			ScalePolicy: &lwsv1.ScalePolicy{MaxReplicas: 3, Metrics: []autoscalingv2.MetricSpec{{
				Type: autoscalingv2.ResourceMetricSourceType,
				Resource: &autoscalingv2.ResourceMetricSource{Name: corev1.ResourceCPU, Target: autoscalingv2.MetricTarget{
					Type: autoscalingv2.UtilizationMetricType, AverageUtilization: ptr.To[int32](50),
				}},
			}}},
		},
	}
}

// refusesTamperedRelease: hack/push-release.sh pushes nothing from a release
// whose files do not match its SHA256SUMS (docs/releasing.md): a copy of the
// release with one byte of its krew manifest changed is refused, and the
// registry holds no image of it.
func (e *env) refusesTamperedRelease() {
	tampered := filepath.Join(e.dir, "tampered")
	if out, err := exec.Command("cp", "-R", e.out, tampered).CombinedOutput(); err != nil {
		e.t.Fatalf("copying the release: %v\n%s", err, out)
	}
	manifest := filepath.Join(tampered, "scaleplane.yaml")
	data, err := os.ReadFile(manifest)
	if err != nil {
		e.t.Fatal(err)
	}
	if err := os.WriteFile(manifest, append(data, '#'), 0o644); err != nil {
		e.t.Fatal(err)
	}
	out, errOut, err := e.try(nil, filepath.Join(e.root, "hack/push-release.sh"), e.prefix+"/tampered", tampered)
	if err == nil || !strings.Contains(errOut, "does not match SHA256SUMS") {
		e.t.Errorf("push-release of a tampered release: %v, want a refusal naming SHA256SUMS\n%s\n%s", err, out, errOut)
	}
	if _, _, err := e.try(nil, e.bin["imagetool"], "resolve", "--reference", e.prefix+"/tampered/scaleplane-webhook:"+e.version); err == nil {
		e.t.Error("the tampered release's webhook image was pushed")
	}
}
