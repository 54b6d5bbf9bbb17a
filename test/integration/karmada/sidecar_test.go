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
	"net"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"sigs.k8s.io/yaml"

	"github.com/scaleplane/scaleplane/pkg/karmadaadoption"
)

// Karmada's ports in its pod (health probe, metrics): the sidecar shares
// the pod's network and must use others.
var karmadaPorts = []int{10357, 8080}

// checkSidecarContainer: the sidecar's flags, ports, security settings and
// image, on a Deployment the README's sidecar patch was applied to.
func checkSidecarContainer(t *testing.T, d *appsv1.Deployment) {
	t.Helper()
	t.Run("sidecar-flags", func(t *testing.T) { checkSidecarFlags(t, d) })
	t.Run("no-port-clash", func(t *testing.T) { checkPorts(t, d) })
	t.Run("restricted", func(t *testing.T) { checkRestricted(t, d) })
	t.Run("image", func(t *testing.T) { checkImage(t, d) })
	t.Run("binary-accepts-flags", func(t *testing.T) { checkBinaryAcceptsArgs(t, d) })
	if d.Spec.Template.Spec.AutomountServiceAccountToken == nil || *d.Spec.Template.Spec.AutomountServiceAccountToken {
		t.Errorf("the pod mounts a service account token now; Karmada's does not")
	}
}

// TestStaticSidecarPatch: artifacts/deploy/karmada/controller-manager-sidecar.yaml
// (which `make local-up` runs the args of) is what karmada-patch prints for
// the layout karmadactl init and the hack scripts share (with the image the
// artifacts name), and controller-manager-sidecar-remove.yaml its reverse.
func TestStaticSidecarPatch(t *testing.T) {
	type podPatch struct {
		Spec struct {
			Template corev1.PodTemplateSpec `json:"template"`
		} `json:"spec"`
	}
	decode := func(name string, data []byte) podPatch {
		var patch podPatch
		if err := yaml.UnmarshalStrict(data, &patch); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		return patch
	}
	data, err := os.ReadFile(repoPath(t, sidecarPatch))
	if err != nil {
		t.Fatal(err)
	}
	static := decode(sidecarPatch, data)
	if n := len(static.Spec.Template.Spec.Containers); n != 1 {
		t.Fatalf("%s has %d containers; it must only add the sidecar", sidecarPatch, n)
	}
	remove, err := os.ReadFile(repoPath(t, removePatch))
	if err != nil {
		t.Fatal(err)
	}
	for _, file := range []string{"testdata/karmadactl.yaml", "testdata/hack.yaml"} {
		in, err := karmadaadoption.Inspect(readDeployment(t, file))
		if err != nil {
			t.Fatal(err)
		}
		printed, err := in.SidecarPatch(karmadaadoption.DefaultImage, []string{karmadaadoption.CronScaler})
		if err != nil {
			t.Fatal(err)
		}
		if want := decode("karmada-patch's sidecar.yaml", printed); !equality.Semantic.DeepEqual(static, want) {
			g, _ := yaml.Marshal(static)
			w, _ := yaml.Marshal(want)
			t.Errorf("%s differs from karmada-patch's for %s:\ngot:\n%s\nwant:\n%s", sidecarPatch, file, g, w)
		}
		var a, b any
		if err := yaml.Unmarshal(remove, &a); err != nil {
			t.Fatal(err)
		}
		if err := yaml.Unmarshal(in.SidecarRemovePatch(), &b); err != nil {
			t.Fatal(err)
		}
		if !equality.Semantic.DeepEqual(a, b) {
			t.Errorf("%s is %v, karmada-patch prints %v for %s", removePatch, a, b, file)
		}
	}
}

func container(t *testing.T, d *appsv1.Deployment, name string) *corev1.Container {
	t.Helper()
	for i := range d.Spec.Template.Spec.Containers {
		if c := &d.Spec.Template.Spec.Containers[i]; c.Name == name {
			return c
		}
	}
	t.Fatalf("the pod has no container %s", name)
	return nil
}

func controllers(v string) []string {
	if v == "" {
		return []string{"*"}
	}
	return strings.Split(v, ",")
}

// checkSidecarFlags: the cron-scaler runs, with leader election on a Lease
// of its own in karmada-system, and every $(VAR) it uses is its own env.
func checkSidecarFlags(t *testing.T, d *appsv1.Deployment) {
	sidecar := container(t, d, sidecarName)
	if len(sidecar.Command) != 0 {
		t.Errorf("command %v overrides the image's entrypoint", sidecar.Command)
	}
	if c := controllers(flagValue(sidecar.Args, "controllers")); !slices.Contains(c, "cron-scaler") && !slices.Contains(c, "*") {
		t.Errorf("--controllers=%v does not run cron-scaler", c)
	}
	for flag, want := range map[string]string{"leader-elect": "true", "leader-elect-resource-namespace": karmadaNamespace} {
		if got := flagValue(sidecar.Args, flag); got != want {
			t.Errorf("--%s=%q, want %q", flag, got, want)
		}
	}
	if lease := flagValue(sidecar.Args, "leader-elect-resource-name"); lease == "" || lease == karmadaName {
		t.Errorf("--leader-elect-resource-name=%q: the sidecar needs a Lease of its own, not Karmada's %s", lease, karmadaName)
	}
	env := map[string]bool{}
	for _, e := range sidecar.Env {
		env[e.Name] = true
	}
	for _, ref := range regexp.MustCompile(`\$\(([A-Za-z_][A-Za-z0-9_]*)\)`).FindAllStringSubmatch(strings.Join(sidecar.Args, " "), -1) {
		if !env[ref[1]] {
			t.Errorf("the args use $(%s), which the sidecar's env does not define (env is per container)", ref[1])
		}
	}
}

// checkPorts: no two containers of the pod listen on the same port, and
// the sidecar keeps off Karmada's 10357 and 8080.
func checkPorts(t *testing.T, d *appsv1.Deployment) {
	karmada, sidecar := karmadaContainer(t, d), container(t, d, sidecarName)
	port, err := strconv.Atoi(flagValue(sidecar.Args, "port"))
	if err != nil {
		t.Fatalf("the sidecar's --port: %v", err)
	}
	taken := append(slices.Clone(karmadaPorts), listeningPorts(karmada)...)
	slices.Sort(taken)
	if taken = slices.Compact(taken); slices.Contains(taken, port) {
		t.Errorf("the sidecar's --port=%d is one of Karmada's %v", port, taken)
	}
	names := map[string]string{}
	for _, c := range d.Spec.Template.Spec.Containers {
		for _, p := range c.Ports {
			if other, dup := names[p.Name]; dup && p.Name != "" {
				t.Errorf("port name %s is used by %s and %s", p.Name, other, c.Name)
			}
			names[p.Name] = c.Name
			if c.Name == sidecarName && int(p.ContainerPort) != port {
				t.Errorf("the sidecar declares port %d but serves --port=%d", p.ContainerPort, port)
			}
		}
	}
	if probe := sidecar.LivenessProbe; probe == nil || probe.HTTPGet == nil || probe.HTTPGet.Port.IntValue() != port {
		t.Errorf("the sidecar's liveness probe does not check /healthz on --port=%d: %+v", port, probe)
	}
}

// listeningPorts reads the ports a Karmada container serves from its
// declared ports and its *-bind-address=host:port and --secure-port flags.
func listeningPorts(c *corev1.Container) []int {
	var ports []int
	for _, p := range c.Ports {
		ports = append(ports, int(p.ContainerPort))
	}
	for _, a := range append(slices.Clone(c.Command), c.Args...) {
		name, value, ok := strings.Cut(strings.TrimPrefix(a, "--"), "=")
		if !ok {
			continue
		}
		if strings.HasSuffix(name, "bind-address") {
			if _, p, err := net.SplitHostPort(value); err == nil {
				value = p
			} else {
				continue
			}
		} else if name != "secure-port" && name != "port" {
			continue
		}
		if n, err := strconv.Atoi(value); err == nil {
			ports = append(ports, n)
		}
	}
	return ports
}

// checkRestricted: the sidecar meets the restricted Pod Security profile by
// itself (the pod-level settings are Karmada's), and asks for resources.
func checkRestricted(t *testing.T, d *appsv1.Deployment) {
	sc := container(t, d, sidecarName).SecurityContext
	if sc == nil {
		t.Fatal("the sidecar has no securityContext")
	}
	if sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot {
		t.Error("runAsNonRoot is not true")
	}
	if sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
		t.Error("allowPrivilegeEscalation is not false")
	}
	if sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
		t.Error("readOnlyRootFilesystem is not true")
	}
	if sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) || len(sc.Capabilities.Add) > 0 {
		t.Errorf("capabilities %+v, want drop ALL", sc.Capabilities)
	}
	if sc.SeccompProfile == nil || sc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("seccompProfile %+v, want RuntimeDefault", sc.SeccompProfile)
	}
	r := container(t, d, sidecarName).Resources
	if r.Requests.Cpu().IsZero() || r.Requests.Memory().IsZero() || r.Limits.Memory().IsZero() {
		t.Errorf("resources %+v: want cpu and memory requests and a memory limit", r)
	}
}

// checkImage: the sidecar runs the image the README's $IMAGE names (the
// images are not published: no default would pull).
func checkImage(t *testing.T, d *appsv1.Deployment) {
	if got := container(t, d, sidecarName).Image; got != testImage {
		t.Errorf("image %s, want %s, the image given to karmada-patch", got, testImage)
	}
}

// checkBinaryAcceptsArgs parses the sidecar's args with the real binary:
// --help after them exits 0 only if every flag and value before it parses.
func checkBinaryAcceptsArgs(t *testing.T, d *appsv1.Deployment) {
	args := slices.Clone(container(t, d, sidecarName).Args)
	for i := range args {
		args[i] = strings.ReplaceAll(args[i], "$(POD_IP)", "127.0.0.1")
	}
	out, err := exec.Command(binary(t, "scaleplane-controller-manager"), append(args, "--help")...).CombinedOutput()
	if err != nil {
		t.Errorf("scaleplane-controller-manager %s --help: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// flagValue returns the value of the last --name=value in args (pflag's
// "last one wins" for scalar flags), or "".
func flagValue(args []string, name string) string {
	value := ""
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, "--"+name+"="); ok {
			value = v
		}
	}
	return value
}
