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
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/yaml"

	"github.com/scaleplane/scaleplane/pkg/karmadaadoption"
	"github.com/scaleplane/scaleplane/test/integration/framework"
)

// checkSidecarAdded: after is before with one container more and the pod
// annotation that keeps Karmada's container the one `kubectl logs` and
// `exec` reach without -c, and that container reads Karmada's kubeconfig
// through Karmada's own volume, at Karmada's path (a subPath mount
// included).
func checkSidecarAdded(t *testing.T, before, after *appsv1.Deployment) {
	t.Helper()
	sidecar := sidecarOf(after)
	if sidecar == nil {
		t.Fatalf("no container %s after the sidecar patch", karmadaadoption.SidecarName)
	}
	karmada := karmadaContainer(t, after)
	if got := after.Spec.Template.Annotations[karmadaadoption.DefaultContainerAnnotation]; got != karmada.Name {
		t.Errorf("pod annotation %s=%q after the sidecar patch, want Karmada's container %s (containers %v)",
			karmadaadoption.DefaultContainerAnnotation, got, karmada.Name, containerNames(after))
	}
	a := after.DeepCopy()
	a.Spec.Template.Spec.Containers = slices.DeleteFunc(a.Spec.Template.Spec.Containers, func(c corev1.Container) bool {
		return c.Name == karmadaadoption.SidecarName
	})
	delete(a.Spec.Template.Annotations, karmadaadoption.DefaultContainerAnnotation)
	if sb, sa := stored(t, before), stored(t, a); sb != sa {
		t.Errorf("the sidecar patch changed more than adding a container and its annotation:\nbefore %s\nafter  %s", sb, sa)
	}
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
	checkLeaseLine(t, s)
	checkSidecarReapplied(t, cp, original, patched)
	s.run(fmt.Sprintf("kubectl -n %s patch deployment %s --patch-file karmada-patches/sidecar-remove.yaml", original.Namespace, original.Name))
	if sb, sa := stored(t, original), stored(t, get(t, cp, original.Namespace, original.Name)); sb != sa {
		t.Errorf("sidecar-remove.yaml did not restore the original:\nwant %s\ngot  %s", sb, sa)
	}
}

// checkSidecarReapplied: the sidecar patch of karmada-patch
// -controllers=cron-scaler,hpa-generator,resizer, applied over the sidecar
// as docs/karmada/leaderworkerset.md says (a strategic merge, as kubectl
// patch makes), replaces the container's --controllers and changes nothing
// else; Karmada's container is untouched.
func checkSidecarReapplied(t *testing.T, cp *framework.ControlPlane, original, patched *appsv1.Deployment) {
	t.Helper()
	in, err := karmadaadoption.Inspect(original)
	if err != nil {
		t.Fatal(err)
	}
	all := slices.Clone(karmadaadoption.Controllers)
	patch, err := in.SidecarPatch(sidecarOf(patched).Image, all)
	if err != nil {
		t.Fatal(err)
	}
	again, err := cp.KubeClient().AppsV1().Deployments(original.Namespace).Patch(context.Background(), original.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{})
	if err != nil {
		t.Fatalf("applying the sidecar patch with every controller over the sidecar: %v", err)
	}
	want := sidecarOf(patched).DeepCopy()
	for i, a := range want.Args {
		if strings.HasPrefix(a, "--controllers=") {
			want.Args[i] = "--controllers=" + strings.Join(all, ",")
		}
	}
	if got := sidecarOf(again); got == nil || !equality.Semantic.DeepEqual(got, want) {
		g, _ := yaml.Marshal(got)
		w, _ := yaml.Marshal(want)
		t.Errorf("the sidecar after the patch with every controller:\n%s\nwant:\n%s", g, w)
	}
	if n, m := len(again.Spec.Template.Spec.Containers), len(patched.Spec.Template.Spec.Containers); n != m {
		t.Errorf("%d containers after the patch with every controller, %d before", n, m)
	}
	if got, want := container(t, again, in.Container.Name), container(t, original, in.Container.Name); !equality.Semantic.DeepEqual(got, want) {
		t.Errorf("the patch with every controller changed Karmada's container %s", in.Container.Name)
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
	if got := c.Image; got != testImage {
		t.Errorf("the companion runs %s, want %s, the image given to karmada-patch", got, testImage)
	}
	runContainer(t, cp, created, &created.Spec.Template.Spec.Containers[0])
	checkLeaseLine(t, s)
	// The installer's own upgrade (or re-run) writes its Deployment, not this one.
	if after := in.upgrade(t, cp, in.file, in.file); sidecarOf(after) != nil {
		t.Errorf("an upgrade left a sidecar")
	}
	if _, err := cp.KubeClient().AppsV1().Deployments(original.Namespace).Get(context.Background(), created.Name, metav1.GetOptions{}); err != nil {
		t.Errorf("the companion after %s's upgrade: %v", in.name, err)
	}
}

func containerNames(d *appsv1.Deployment) []string {
	var names []string
	for _, c := range d.Spec.Template.Spec.Containers {
		names = append(names, c.Name)
	}
	return names
}

// checkLeaseLine runs the README's check that scaleplane runs, with a
// scaleplane-controller-manager leading: it prints the holder, whose
// identity starts with the pod's name (the hostname) and an underscore.
func checkLeaseLine(t *testing.T, s *readmeSession) {
	t.Helper()
	host, err := os.Hostname()
	if err != nil {
		t.Fatal(err)
	}
	line := leaseLine(s.readme)
	if out := strings.TrimSpace(s.run(line)); !strings.HasPrefix(out, host+"_") {
		t.Errorf("%s printed %q, want the holder %s_<uuid>", line, out, host)
	}
}
