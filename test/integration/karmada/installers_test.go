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
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"sigs.k8s.io/yaml"

	"github.com/scaleplane/scaleplane/pkg/karmadaadoption"
	"github.com/scaleplane/scaleplane/test/integration/framework"
)

// karmadaControllers are the controllers karmada-controller-manager v1.18.2
// registers (cmd/controller-manager/app/controllermanager.go), with whether
// "*" runs them (controllersDisabledByDefault): every one but the cron
// controller must run after the README's steps exactly as before.
var karmadaControllers = map[string]bool{
	"cluster": true, "clusterStatus": true, "binding": true, "bindingStatus": true, "execution": true,
	"workStatus": true, "namespace": true, "serviceExport": true, "endpointSlice": true, "serviceImport": true,
	"unifiedAuth": true, "federatedResourceQuotaSync": true, "federatedResourceQuotaStatus": true,
	"federatedResourceQuotaEnforcement": true, "gracefulEviction": true, "applicationFailover": true,
	"federatedHorizontalPodAutoscaler": true, "cronFederatedHorizontalPodAutoscaler": true,
	"hpaScaleTargetMarker": false, "deploymentReplicasSyncer": false, "multiclusterservice": true,
	"endpointsliceCollect": true, "endpointsliceDispatch": true, "remedy": true, "workloadRebalancer": true,
	"agentcsrapproving": true, "clustertaintpolicy": true,
}

// installer is one of Karmada's four installers as the tests play it.
type installer struct {
	name string
	// file is the Deployment it writes (testdata, transcribed from
	// Karmada's sources); cronOff the one it writes with its own setting
	// that switches the cron controller off ("" where it has none).
	file, cronOff string
	// readme holds the steps the test runs.
	readme string
	// webhook is Karmada's CronFederatedHPA webhook it registers on
	// karmada-apiserver ("" for Helm, which registers none).
	webhook string
}

var installers = []installer{
	{name: "helm", file: "testdata/helm.yaml", cronOff: "testdata/helm-cron-off.yaml", readme: "docs/karmada/helm.md"},
	{name: "karmadactl", file: "testdata/karmadactl.yaml", cronOff: "testdata/karmadactl-cron-off.yaml", readme: "docs/karmada/karmadactl.md", webhook: "testdata/karmadactl-webhook.yaml"},
	{name: "operator", file: "testdata/operator.yaml", cronOff: "testdata/operator-cron-off.yaml", readme: "docs/karmada/operator.md", webhook: "testdata/operator-webhook.yaml"},
	{name: "hack", file: "testdata/hack.yaml", readme: "docs/karmada/hack.md", webhook: "testdata/hack-webhook.yaml"},
}

func (in installer) deployment(t *testing.T) *appsv1.Deployment {
	t.Helper()
	return readDeployment(t, in.file)
}

func readDeployment(t *testing.T, file string) *appsv1.Deployment {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	d := &appsv1.Deployment{}
	if err := yaml.UnmarshalStrict(data, d); err != nil {
		t.Fatalf("decoding %s: %v", file, err)
	}
	return d
}

// helmOwnership is what Helm 3 adds to every object it installs or
// upgrades (action.setMetadataVisitor), and not to the manifest it keeps
// as the release's: the three-way merge's "original" lacks it.
func helmOwnership(d *appsv1.Deployment) *appsv1.Deployment {
	d = d.DeepCopy()
	if d.Labels == nil {
		d.Labels = map[string]string{}
	}
	if d.Annotations == nil {
		d.Annotations = map[string]string{}
	}
	d.Labels["app.kubernetes.io/managed-by"] = "Helm"
	d.Annotations["meta.helm.sh/release-name"] = "karmada"
	d.Annotations["meta.helm.sh/release-namespace"] = d.Namespace
	return d
}

// install creates the Deployment the way the installer does: Helm, karmadactl
// and the operator with a Create of the rendered object, the hack scripts
// with `kubectl apply`.
func (in installer) install(t *testing.T, cp *framework.ControlPlane) *appsv1.Deployment {
	t.Helper()
	d := in.deployment(t)
	ensureNamespace(t, cp, d.Namespace)
	// Each test starts from the installer's object, whatever ran before.
	err := cp.KubeClient().AppsV1().Deployments(d.Namespace).Delete(context.Background(), d.Name, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	switch in.name {
	case "hack":
		kubectl(t, cp, "apply", "-f", in.file)
	case "helm":
		d = helmOwnership(d)
		fallthrough
	default:
		if _, err := cp.KubeClient().AppsV1().Deployments(d.Namespace).Create(context.Background(), d, metav1.CreateOptions{}); err != nil {
			t.Fatalf("creating %s's Deployment: %v", in.name, err)
		}
	}
	return get(t, cp, d.Namespace, d.Name)
}

// upgrade is what the installer does to its existing Deployment when it
// runs again (its upgrade): from is the manifest it rendered last, to the
// one it renders now.
//   - Helm 3: a strategic merge patch made by a three-way merge of the last
//     release's manifest, the new one and the live object
//     (kube.Client.Update's createPatch);
//   - the hack scripts: `kubectl apply`, the same three-way merge with the
//     last-applied annotation as the original;
//   - karmadactl init and karmada-operator: a full Update (PUT) of the
//     rendered object (CreateOrUpdateDeployment in both).
func (in installer) upgrade(t *testing.T, cp *framework.ControlPlane, from, to string) *appsv1.Deployment {
	t.Helper()
	ctx := context.Background()
	target := readDeployment(t, to)
	deployments := cp.KubeClient().AppsV1().Deployments(target.Namespace)
	switch in.name {
	case "hack":
		kubectl(t, cp, "apply", "-f", to)
	case "helm":
		original, err := json.Marshal(readDeployment(t, from))
		if err != nil {
			t.Fatal(err)
		}
		modified, err := json.Marshal(helmOwnership(target))
		if err != nil {
			t.Fatal(err)
		}
		live, err := deployments.Get(ctx, target.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		current, err := json.Marshal(live)
		if err != nil {
			t.Fatal(err)
		}
		meta, err := strategicpatch.NewPatchMetaFromStruct(&appsv1.Deployment{})
		if err != nil {
			t.Fatal(err)
		}
		patch, err := strategicpatch.CreateThreeWayMergePatch(original, modified, current, meta, true)
		if err != nil {
			t.Fatalf("helm upgrade's three-way merge: %v", err)
		}
		if _, err := deployments.Patch(ctx, target.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}); err != nil {
			t.Fatalf("helm upgrade's patch %s: %v", patch, err)
		}
	default:
		live, err := deployments.Get(ctx, target.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		target.ResourceVersion = live.ResourceVersion
		if _, err := deployments.Update(ctx, target, metav1.UpdateOptions{}); err != nil {
			t.Fatalf("%s's full update: %v", in.name, err)
		}
	}
	return get(t, cp, target.Namespace, target.Name)
}

func get(t *testing.T, cp *framework.ControlPlane, namespace, name string) *appsv1.Deployment {
	t.Helper()
	d, err := cp.KubeClient().AppsV1().Deployments(namespace).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func ensureNamespace(t *testing.T, cp *framework.ControlPlane, name string) {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	_, err := cp.KubeClient().CoreV1().Namespaces().Create(context.Background(), ns, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("creating namespace %s: %v", name, err)
	}
}

// stored is what "the same object" means for the byte-for-byte checks: the
// spec, labels and annotations as the apiserver stores them (not the
// resourceVersion, generation or managedFields a write changes).
func stored(t *testing.T, d *appsv1.Deployment) string {
	t.Helper()
	out, err := json.Marshal(struct {
		Labels      map[string]string     `json:"labels"`
		Annotations map[string]string     `json:"annotations"`
		Spec        appsv1.DeploymentSpec `json:"spec"`
	}{d.Labels, d.Annotations, d.Spec})
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}

// readmeSession runs an installer README's command lines as a user pastes
// them into a shell, in a directory of their own: `kubectl` is the test's
// kubectl on the test's apiserver, `go run ./cmd/karmada-patch` the command
// built from this checkout.
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
	wrapper := fmt.Sprintf("#!/bin/sh\nexec %q --kubeconfig %q \"$@\"\n", binary(t, "kubectl"), cp.KubeconfigPath())
	if err := os.WriteFile(filepath.Join(bin, "kubectl"), []byte(wrapper), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(karmadaPatch(t), filepath.Join(bin, "karmada-patch")); err != nil {
		t.Fatal(err)
	}
	return &readmeSession{t: t, readme: readme, text: string(text), dir: dir,
		env: append(os.Environ(), "PATH="+bin+":"+os.Getenv("PATH"))}
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

var builtKarmadaPatch string

// karmadaPatch builds cmd/karmada-patch once per top-level test (the first
// caller's): its subtests reuse it, and it goes with that test's temporary
// directory.
func karmadaPatch(t *testing.T) string {
	t.Helper()
	if builtKarmadaPatch != "" {
		return builtKarmadaPatch
	}
	path := filepath.Join(t.TempDir(), "karmada-patch")
	cmd := exec.Command("go", "build", "-o", path, "./cmd/karmada-patch")
	cmd.Dir = repoPath(t, ".")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building cmd/karmada-patch: %v\n%s", err, out)
	}
	builtKarmadaPatch = path
	t.Cleanup(func() { builtKarmadaPatch = "" })
	return path
}

// karmadaContainer is the container running Karmada's binary.
func karmadaContainer(t *testing.T, d *appsv1.Deployment) *corev1.Container {
	t.Helper()
	for i := range d.Spec.Template.Spec.Containers {
		if c := &d.Spec.Template.Spec.Containers[i]; len(c.Command) > 0 && c.Command[0] == "/bin/karmada-controller-manager" {
			return c
		}
	}
	t.Fatalf("%s/%s has no Karmada container", d.Namespace, d.Name)
	return nil
}

// checkOnlyCronOff: after differs from before only in Karmada's command,
// every flag of which other than --controllers has the same values (in any
// order: the operator sorts them), and whose --controllers runs every
// Karmada controller as before except the cron controller, which is off.
func checkOnlyCronOff(t *testing.T, before, after *appsv1.Deployment) {
	t.Helper()
	b, a := before.DeepCopy(), after.DeepCopy()
	kb, ka := karmadaContainer(t, b), karmadaContainer(t, a)
	flagsB, flagsA := otherFlags(kb.Command), otherFlags(ka.Command)
	if !slices.Equal(flagsB, flagsA) {
		t.Errorf("Karmada's flags other than --controllers changed:\nbefore %v\nafter  %v", flagsB, flagsA)
	}
	was, now := karmadaadoption.ControllersOf(kb.Command), karmadaadoption.ControllersOf(ka.Command)
	for name, onByDefault := range karmadaControllers {
		want := karmadaadoption.Enabled(was, name, onByDefault)
		if name == karmadaadoption.CronController {
			if !want {
				t.Fatalf("the cron controller was off before (%v): not a starting point of the README", was)
			}
			want = false
		}
		if got := karmadaadoption.Enabled(now, name, onByDefault); got != want {
			t.Errorf("Karmada's %s enabled = %v with --controllers %v, want %v (before: %v)", name, got, now, want, was)
		}
	}
	kb.Command, ka.Command = nil, nil
	if sb, sa := stored(t, b), stored(t, a); sb != sa {
		t.Errorf("the Deployment changed beyond Karmada's command:\nbefore %s\nafter  %s", sb, sa)
	}
}

func cronOn(t *testing.T, d *appsv1.Deployment) bool {
	t.Helper()
	return karmadaadoption.Enabled(karmadaadoption.ControllersOf(karmadaContainer(t, d).Command), karmadaadoption.CronController, true)
}

// otherFlags is the sorted list of a command's flags but --controllers.
func otherFlags(command []string) []string {
	var out []string
	for _, a := range command[1:] {
		if !strings.HasPrefix(a, "--controllers=") {
			out = append(out, a)
		}
	}
	slices.Sort(out)
	return out
}

// sidecarOf returns scaleplane's container, or nil.
func sidecarOf(d *appsv1.Deployment) *corev1.Container {
	for i := range d.Spec.Template.Spec.Containers {
		if c := &d.Spec.Template.Spec.Containers[i]; c.Name == karmadaadoption.SidecarName {
			return c
		}
	}
	return nil
}

// checkSidecarAdded: after is before with one container more, and that
// container reads Karmada's kubeconfig through Karmada's own volume, at
// Karmada's path (a subPath mount included).
func checkSidecarAdded(t *testing.T, before, after *appsv1.Deployment) {
	t.Helper()
	sidecar := sidecarOf(after)
	if sidecar == nil {
		t.Fatalf("no container %s after the sidecar patch", karmadaadoption.SidecarName)
	}
	a := after.DeepCopy()
	a.Spec.Template.Spec.Containers = slices.DeleteFunc(a.Spec.Template.Spec.Containers, func(c corev1.Container) bool {
		return c.Name == karmadaadoption.SidecarName
	})
	if sb, sa := stored(t, before), stored(t, a); sb != sa {
		t.Errorf("the sidecar patch changed more than adding a container:\nbefore %s\nafter  %s", sb, sa)
	}
	karmada := karmadaContainer(t, after)
	path := flagValue(karmada.Command, "kubeconfig")
	if got := flagValue(sidecar.Args, "kubeconfig"); got != path {
		t.Errorf("the sidecar's --kubeconfig=%s, Karmada's is %s", got, path)
	}
	var want *corev1.VolumeMount
	for i := range karmada.VolumeMounts {
		m := &karmada.VolumeMounts[i]
		if m.MountPath == path || strings.HasPrefix(path, strings.TrimSuffix(m.MountPath, "/")+"/") {
			want = m
		}
	}
	if want == nil {
		t.Fatalf("no mount of Karmada's container holds %s", path)
	}
	if len(sidecar.VolumeMounts) != 1 {
		t.Fatalf("sidecar mounts %+v, want Karmada's kubeconfig mount only", sidecar.VolumeMounts)
	}
	got := sidecar.VolumeMounts[0]
	if got.Name != want.Name || got.MountPath != want.MountPath || got.SubPath != want.SubPath || !got.ReadOnly {
		t.Errorf("sidecar mount %+v, want Karmada's %+v read-only", got, *want)
	}
	if lease := flagValue(sidecar.Args, "leader-elect-resource-namespace"); lease != karmadaNamespace {
		t.Errorf("the sidecar's Lease is in %q, want %s on karmada-apiserver next to Karmada's", lease, karmadaNamespace)
	}
	checkSidecarContainer(t, after)
}

// TestInstallers runs, for each installer's real Deployment, its README's
// steps and its upgrade, and checks what the README says of them.
func TestInstallers(t *testing.T) {
	cp := framework.Get(t)
	karmadaPatch(t)
	for _, in := range installers {
		t.Run(in.name, func(t *testing.T) {
			t.Run("cron-off-patch", func(t *testing.T) { testCronOffPatch(t, cp, in) })
			if in.name != "operator" {
				t.Run("sidecar", func(t *testing.T) { testSidecar(t, cp, in) })
			}
			t.Run("companion", func(t *testing.T) { testCompanion(t, cp, in) })
			t.Run("upgrade", func(t *testing.T) { testUpgrade(t, cp, in) })
		})
	}
}

// readmeGet is the README's first step: the live Deployment into kcm.yaml,
// and the patches printed from it.
func readmeGet(d *appsv1.Deployment) (get, patch string) {
	return fmt.Sprintf("kubectl -n %s get deployment %s -o yaml > kcm.yaml", d.Namespace, d.Name),
		"go run ./cmd/karmada-patch -f kcm.yaml -o karmada-patches"
}

// testCronOffPatch: the README's JSON patch switches the cron controller off
// and changes nothing else (the command is Karmada's plus one element), and
// its reverse gives the stored object back byte for byte.
func testCronOffPatch(t *testing.T, cp *framework.ControlPlane, in installer) {
	original := in.install(t, cp)
	s := newREADMESession(t, cp, in.readme)
	getLine, patchLine := readmeGet(original)
	s.run(getLine)
	s.run(patchLine)
	s.run(fmt.Sprintf("kubectl -n %s patch deployment %s --type=json --patch-file karmada-patches/cron-off.json", original.Namespace, original.Name))
	off := get(t, cp, original.Namespace, original.Name)
	checkOnlyCronOff(t, original, off)
	if got, want := karmadaContainer(t, off).Command, append(slices.Clone(karmadaContainer(t, original).Command), karmadaadoption.CronOffFlag); !slices.Equal(got, want) {
		t.Errorf("command %v, want Karmada's with one element appended: %v", got, want)
	}
	s.run(fmt.Sprintf("kubectl -n %s patch deployment %s --type=json --patch-file karmada-patches/cron-on.json", original.Namespace, original.Name))
	if sb, sa := stored(t, original), stored(t, get(t, cp, original.Namespace, original.Name)); sb != sa {
		t.Errorf("cron-on.json did not restore the original:\nwant %s\ngot  %s", sb, sa)
	}
}

// testSidecar: the README's sidecar patch only adds scaleplane's container,
// which reaches the apiserver with the kubeconfig the installer mounts
// (there: a file at the same path, holding the test's kubeconfig) and takes
// its Lease; the reverse patch gives the original back byte for byte.
func testSidecar(t *testing.T, cp *framework.ControlPlane, in installer) {
	original := in.install(t, cp)
	s := newREADMESession(t, cp, in.readme)
	getLine, patchLine := readmeGet(original)
	s.run(getLine)
	s.run(patchLine)
	s.run(fmt.Sprintf("kubectl -n %s patch deployment %s --patch-file karmada-patches/sidecar.yaml", original.Namespace, original.Name))
	patched := get(t, cp, original.Namespace, original.Name)
	checkSidecarAdded(t, original, patched)
	if t.Failed() {
		out, _ := yaml.Marshal(patched.Spec.Template.Spec)
		t.Logf("patched pod spec:\n%s", out)
	}
	runContainer(t, cp, patched, sidecarOf(patched))
	s.run(fmt.Sprintf("kubectl -n %s patch deployment %s --patch-file karmada-patches/sidecar-remove.yaml", original.Namespace, original.Name))
	if sb, sa := stored(t, original), stored(t, get(t, cp, original.Namespace, original.Name)); sb != sa {
		t.Errorf("sidecar-remove.yaml did not restore the original:\nwant %s\ngot  %s", sb, sa)
	}
}

// runContainer runs scaleplane-controller-manager with a container's args
// as the kubelet would: $(POD_IP) expanded, and the Secret volume's files
// at their mount path (subPath: the key's file itself), here under a
// temporary directory holding the test apiserver's kubeconfig. It must take
// its Lease in karmada-system.
func runContainer(t *testing.T, cp *framework.ControlPlane, d *appsv1.Deployment, c *corev1.Container) {
	t.Helper()
	if c == nil {
		t.Fatal("no scaleplane container")
	}
	kubeconfig, err := os.ReadFile(cp.KubeconfigPath())
	if err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	path := flagValue(c.Args, "kubeconfig")
	var mounted string
	for _, m := range c.VolumeMounts {
		var secret *corev1.SecretVolumeSource
		for _, v := range d.Spec.Template.Spec.Volumes {
			if v.Name == m.Name {
				secret = v.Secret
			}
		}
		if secret == nil {
			t.Fatalf("mount %s is not of a Secret volume", m.Name)
		}
		switch {
		case m.SubPath != "" && m.MountPath == path:
			mounted = m.SubPath
		case m.SubPath == "" && strings.HasPrefix(path, strings.TrimSuffix(m.MountPath, "/")+"/"):
			mounted = strings.TrimPrefix(path, strings.TrimSuffix(m.MountPath, "/")+"/")
			for _, item := range secret.Items {
				if item.Path == mounted {
					mounted = item.Key
				}
			}
		default:
			continue
		}
		t.Logf("%s: --kubeconfig=%s is key %s of Secret %s", c.Name, path, mounted, secret.SecretName)
	}
	if mounted == "" {
		t.Fatalf("no mount of %s holds its --kubeconfig=%s", c.Name, path)
	}
	local := filepath.Join(root, path)
	if err := os.MkdirAll(filepath.Dir(local), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(local, kubeconfig, 0o600); err != nil {
		t.Fatal(err)
	}
	args := slices.Clone(c.Args)
	for i := range args {
		args[i] = strings.ReplaceAll(args[i], "$(POD_IP)", "127.0.0.1")
		args[i] = strings.ReplaceAll(args[i], "--kubeconfig="+path, "--kubeconfig="+local)
		args[i] = strings.ReplaceAll(args[i], "--bind-address=0.0.0.0", "--bind-address=127.0.0.1")
	}
	// A Lease left by an earlier run would already name a holder.
	lease := flagValue(args, "leader-elect-resource-name")
	if lease == "" {
		lease = karmadaadoption.LeaseName
		args = append(args, "--leader-elect-resource-name="+lease)
	}
	err = cp.KubeClient().CoordinationV1().Leases(karmadaNamespace).Delete(context.Background(), lease, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	runWithArgs(t, cp, args)
}

// testCompanion: charts/scaleplane with the README's values (printed by
// karmada-patch) renders a Deployment in Karmada's namespace that mounts
// Karmada's kubeconfig Secret and key, with no service account token and
// no RBAC, its Lease in karmada-system; the apiserver accepts it, and the
// binary with its args reaches the apiserver through that kubeconfig.
func testCompanion(t *testing.T, cp *framework.ControlPlane, in installer) {
	original := in.install(t, cp)
	s := newREADMESession(t, cp, in.readme)
	getLine, patchLine := readmeGet(original)
	s.run(getLine)
	s.run(patchLine)
	values := filepath.Join(s.dir, "karmada-patches", "companion-values.yaml")
	rendered := helmTemplate(t, original.Namespace, "-f", repoPath(t, "charts/scaleplane/values-karmada.yaml"), "-f", values,
		"--set", "webhook.enabled=false")
	var companion *appsv1.Deployment
	for _, doc := range strings.Split(rendered, "\n---\n") {
		var meta metav1.TypeMeta
		if err := yaml.Unmarshal([]byte(doc), &meta); err != nil {
			t.Fatal(err)
		}
		switch meta.Kind {
		case "Deployment":
			companion = &appsv1.Deployment{}
			if err := yaml.UnmarshalStrict([]byte(doc), companion); err != nil {
				t.Fatal(err)
			}
		case "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding":
			t.Errorf("the companion renders a %s: its identity is Karmada's kubeconfig, RBAC of the host cluster grants nothing it uses", meta.Kind)
		}
	}
	if companion == nil {
		t.Fatalf("no Deployment rendered:\n%s", rendered)
	}
	if companion.Namespace != original.Namespace && companion.Namespace != "" {
		t.Errorf("the companion is in %s, the Secret in %s", companion.Namespace, original.Namespace)
	}
	pod := companion.Spec.Template.Spec
	if pod.AutomountServiceAccountToken == nil || *pod.AutomountServiceAccountToken {
		t.Error("the companion mounts a service account token")
	}
	inspected, err := karmadaadoption.Inspect(original)
	if err != nil {
		t.Fatal(err)
	}
	if len(pod.Volumes) != 1 || pod.Volumes[0].Secret == nil || pod.Volumes[0].Secret.SecretName != inspected.SecretName {
		t.Errorf("volumes %+v, want Karmada's Secret %s", pod.Volumes, inspected.SecretName)
	}
	c := &pod.Containers[0]
	if got := flagValue(c.Args, "leader-elect-resource-namespace"); got != karmadaNamespace {
		t.Errorf("the companion's Lease is in %q, want %s on karmada-apiserver", got, karmadaNamespace)
	}
	if got := flagValue(c.Args, "controllers"); got != "cron-scaler" {
		t.Errorf("--controllers=%s, want cron-scaler", got)
	}
	ensureNamespace(t, cp, original.Namespace)
	created, err := cp.KubeClient().AppsV1().Deployments(original.Namespace).Create(context.Background(), companion, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating the companion: %v", err)
	}
	t.Cleanup(func() {
		_ = cp.KubeClient().AppsV1().Deployments(original.Namespace).Delete(context.Background(), created.Name, metav1.DeleteOptions{})
	})
	runContainer(t, cp, created, &created.Spec.Template.Spec.Containers[0])
	// The installer's own upgrade rewrites its Deployment, not this one.
	if after := in.upgrade(t, cp, in.file, in.file); sidecarOf(after) != nil {
		t.Errorf("an upgrade left a sidecar")
	}
	if _, err := cp.KubeClient().AppsV1().Deployments(original.Namespace).Get(context.Background(), created.Name, metav1.GetOptions{}); err != nil {
		t.Errorf("the companion after %s's upgrade: %v", in.name, err)
	}
}

// helmTemplate renders charts/scaleplane with the pinned helm.
func helmTemplate(t *testing.T, namespace string, args ...string) string {
	t.Helper()
	home := t.TempDir()
	cmd := exec.Command(binary(t, "helm"), append([]string{"template", "scaleplane", repoPath(t, "charts/scaleplane"), "--namespace", namespace}, args...)...)
	cmd.Env = append(os.Environ(), "HELM_CACHE_HOME="+home, "HELM_CONFIG_HOME="+home, "HELM_DATA_HOME="+home)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("helm template %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return stdout.String()
}

// testUpgrade follows the installer's README through its upgrade and checks
// what the README says the upgrade leaves.
func testUpgrade(t *testing.T, cp *framework.ControlPlane, in installer) {
	original := in.install(t, cp)
	s := newREADMESession(t, cp, in.readme)
	getLine, patchLine := readmeGet(original)
	s.run(getLine)
	s.run(patchLine)
	ns, name := original.Namespace, original.Name
	cronOffJSON := fmt.Sprintf("kubectl -n %s patch deployment %s --type=json --patch-file karmada-patches/cron-off.json", ns, name)
	cronOnJSON := fmt.Sprintf("kubectl -n %s patch deployment %s --type=json --patch-file karmada-patches/cron-on.json", ns, name)
	sidecar := fmt.Sprintf("kubectl -n %s patch deployment %s --patch-file karmada-patches/sidecar.yaml", ns, name)
	sidecarRemove := fmt.Sprintf("kubectl -n %s patch deployment %s --patch-file karmada-patches/sidecar-remove.yaml", ns, name)

	switch in.name {
	case "helm":
		// The README: the chart's own value, by `helm upgrade
		// --reuse-values -f helm-values.yaml`; its value is the one
		// testdata/helm-cron-off.yaml was rendered with.
		checkSettingValue(t, s.file("karmada-patches/helm-values.yaml"), in.cronOff)
		s.mustSay("helm upgrade karmada karmada-charts/karmada -n karmada-system --version v1.18.2 --reuse-values -f karmada-patches/helm-values.yaml")
		off := in.upgrade(t, cp, in.file, in.cronOff)
		checkOnlyCronOff(t, original, off)
		s.run(sidecar)
		withSidecar := get(t, cp, ns, name)
		checkSidecarAdded(t, off, withSidecar)
		// The next helm upgrade (same values): nothing changes.
		again := in.upgrade(t, cp, in.cronOff, in.cronOff)
		if sb, sa := stored(t, withSidecar), stored(t, again); sb != sa {
			t.Errorf("helm upgrade changed the adopted Deployment:\nbefore %s\nafter  %s", sb, sa)
		}
		// Undo: the sidecar's reverse, then the value as it was.
		s.run(sidecarRemove)
		s.mustSay("helm upgrade karmada karmada-charts/karmada -n karmada-system --version v1.18.2 --reuse-values -f karmada-patches/helm-values-undo.yaml")
		checkSettingValue(t, s.file("karmada-patches/helm-values-undo.yaml"), in.file)
		undone := in.upgrade(t, cp, in.cronOff, in.file)
		if sb, sa := stored(t, original), stored(t, undone); sb != sa {
			t.Errorf("undo did not restore the original:\nwant %s\ngot  %s", sb, sa)
		}
		// What the README warns of: the JSON patch does not survive a
		// helm upgrade, the sidecar does.
		s.run(cronOffJSON)
		s.run(sidecar)
		upgraded := in.upgrade(t, cp, in.file, in.file)
		if !cronOn(t, upgraded) || sidecarOf(upgraded) == nil {
			t.Errorf("after cron-off.json, the sidecar and a helm upgrade: cron controller on = %v, sidecar = %v; the README says on and kept",
				cronOn(t, upgraded), sidecarOf(upgraded) != nil)
		}

	case "karmadactl":
		s.run(cronOffJSON)
		s.run(sidecar)
		// An in-place change (a new image, as `kubectl set image` does)
		// keeps both.
		line := "kubectl -n karmada-system set image deployment/karmada-controller-manager karmada-controller-manager=docker.io/karmada/karmada-controller-manager:v1.18.3"
		s.run(line)
		imaged := get(t, cp, ns, name)
		if cronOn(t, imaged) || sidecarOf(imaged) == nil || karmadaContainer(t, imaged).Image != "docker.io/karmada/karmada-controller-manager:v1.18.3" {
			t.Errorf("after kubectl set image: cron on = %v, sidecar = %v, image %s", cronOn(t, imaged), sidecarOf(imaged) != nil, karmadaContainer(t, imaged).Image)
		}
		// Running karmadactl init again PUTs its whole Deployment: with
		// the extra args the cron controller stays off, the sidecar goes.
		s.mustSay("--karmada-controller-manager-extra-args='--controllers=*,-cronFederatedHorizontalPodAutoscaler'")
		rerun := in.upgrade(t, cp, in.file, in.cronOff)
		checkOnlyCronOff(t, original, rerun)
		if sidecarOf(rerun) != nil {
			t.Error("a re-run of karmadactl init kept the sidecar; the README says it removes it")
		}
		// Without them, Karmada's cron controller is back on.
		if plain := in.upgrade(t, cp, in.cronOff, in.file); !cronOn(t, plain) || sidecarOf(plain) != nil {
			t.Errorf("a re-run of karmadactl init without the extra args: cron on = %v, sidecar = %v", cronOn(t, plain), sidecarOf(plain) != nil)
		}
		// The sidecar patch applies again after it.
		s.run(sidecar)
		checkSidecarAdded(t, original, get(t, cp, ns, name))
		// The README's whole way there and back on a fresh install.
		fresh := in.install(t, cp)
		for _, line := range []string{getLine, patchLine, cronOffJSON, sidecar, sidecarRemove, getLine, patchLine, cronOnJSON} {
			s.run(line)
		}
		if sb, sa := stored(t, fresh), stored(t, get(t, cp, ns, name)); sb != sa {
			t.Errorf("undo did not restore the original:\nwant %s\ngot  %s", sb, sa)
		}

	case "operator":
		// The README: the Karmada object's extraArgs; the operator then
		// PUTs testdata/operator-cron-off.yaml on its next reconcile.
		checkOperatorPatch(t, s.file("karmada-patches/karmada-cron-off.json"), in.cronOff)
		s.mustSay("kubectl -n test patch karmada karmada-demo --type=merge --patch-file karmada-patches/karmada-cron-off.json")
		off := in.upgrade(t, cp, in.file, in.cronOff)
		checkOnlyCronOff(t, original, off)
		// Every later reconcile writes the same.
		again := in.upgrade(t, cp, in.cronOff, in.cronOff)
		if sb, sa := stored(t, off), stored(t, again); sb != sa {
			t.Errorf("a reconcile changed the Deployment:\nbefore %s\nafter  %s", sb, sa)
		}
		// Undo: the setting as it was; the operator writes the original.
		s.mustSay("kubectl -n test patch karmada karmada-demo --type=merge --patch-file karmada-patches/karmada-cron-on.json")
		var undo map[string]any
		if err := json.Unmarshal(s.file("karmada-patches/karmada-cron-on.json"), &undo); err != nil {
			t.Fatal(err)
		}
		if got := fmt.Sprint(undo); got != "map[spec:map[components:map[karmadaControllerManager:map[extraArgs:map[controllers:<nil>]]]]]" {
			t.Errorf("karmada-cron-on.json %s, want extraArgs.controllers removed (null)", got)
		}
		if undone := in.upgrade(t, cp, in.cronOff, in.file); stored(t, undone) != stored(t, original) {
			t.Errorf("the operator's Deployment after undo differs from the original")
		}
		// What the README warns of: the JSON patch on the Deployment does
		// not survive the next reconcile.
		s.run(cronOffJSON)
		if reconciled := in.upgrade(t, cp, in.file, in.file); !cronOn(t, reconciled) {
			t.Error("cron-off.json survived the operator's reconcile; the README says it does not")
		}

	case "hack":
		s.run(cronOffJSON)
		s.run(sidecar)
		adopted := get(t, cp, ns, name)
		checkOnlyCronOff(t, original, withoutSidecar(adopted))
		// Re-running hack/deploy-karmada.sh (`kubectl apply`): the sidecar
		// stays, Karmada's command comes back (cron controller on).
		rerun := in.upgrade(t, cp, in.file, in.file)
		if !cronOn(t, rerun) || sidecarOf(rerun) == nil {
			t.Errorf("after re-running the script: cron on = %v, sidecar = %v; the README says on and kept", cronOn(t, rerun), sidecarOf(rerun) != nil)
		}
		// The README: read the Deployment again (the re-run put the
		// sidecar first, so the earlier patch's test operations refuse it)
		// and apply the new cron-off.json.
		if err := runErr(s, cronOffJSON); err == nil {
			t.Error("the cron-off.json read before the re-run applied after it; its test operations should refuse a reordered pod")
		}
		s.run(getLine)
		s.run(patchLine)
		s.run(cronOffJSON)
		reoff := get(t, cp, ns, name)
		checkOnlyCronOff(t, rerun, reoff)
		if sidecarOf(reoff) == nil {
			t.Error("the sidecar is gone")
		}
		// Undo, in the README's order: the sidecar, then the Deployment
		// read again for its cron-on.json.
		s.run(sidecarRemove)
		s.run(getLine)
		s.run(patchLine)
		s.run(cronOnJSON)
		if sb, sa := stored(t, original), stored(t, get(t, cp, ns, name)); sb != sa {
			t.Errorf("undo did not restore the original:\nwant %s\ngot  %s", sb, sa)
		}
	}
}

// runErr runs a README line that may fail, with the session's environment.
func runErr(s *readmeSession, line string) error {
	cmd := exec.Command("bash", "-o", "errexit", "-o", "pipefail", "-c", line)
	cmd.Dir, cmd.Env = s.dir, s.env
	return cmd.Run()
}

func withoutSidecar(d *appsv1.Deployment) *appsv1.Deployment {
	d = d.DeepCopy()
	d.Spec.Template.Spec.Containers = slices.DeleteFunc(d.Spec.Template.Spec.Containers, func(c corev1.Container) bool {
		return c.Name == karmadaadoption.SidecarName
	})
	return d
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

// checkSettingValue: the values file sets controllerManager.controllers to
// what rendered's command has in --controllers ("" when none).
func checkSettingValue(t *testing.T, values []byte, rendered string) {
	t.Helper()
	var v struct {
		ControllerManager struct {
			Controllers string `json:"controllers"`
		} `json:"controllerManager"`
	}
	if err := yaml.Unmarshal(values, &v); err != nil {
		t.Fatal(err)
	}
	want := flagValue(karmadaContainer(t, readDeployment(t, rendered)).Command, "controllers")
	if v.ControllerManager.Controllers != want {
		t.Errorf("values set controllerManager.controllers=%q, %s was rendered with %q", v.ControllerManager.Controllers, rendered, want)
	}
}

// checkOperatorPatch: the merge patch sets extraArgs.controllers to what
// the operator's rendered command has in --controllers.
func checkOperatorPatch(t *testing.T, patch []byte, rendered string) {
	t.Helper()
	var p struct {
		Spec struct {
			Components struct {
				KarmadaControllerManager struct {
					ExtraArgs map[string]string `json:"extraArgs"`
				} `json:"karmadaControllerManager"`
			} `json:"components"`
		} `json:"spec"`
	}
	if err := json.Unmarshal(patch, &p); err != nil {
		t.Fatal(err)
	}
	want := flagValue(karmadaContainer(t, readDeployment(t, rendered)).Command, "controllers")
	if got := p.Spec.Components.KarmadaControllerManager.ExtraArgs["controllers"]; got != want {
		t.Errorf("the Karmada object's patch sets extraArgs.controllers=%q, %s has %q", got, rendered, want)
	}
}
