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
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/scaleplane/scaleplane/pkg/karmadaadoption"
	"github.com/scaleplane/scaleplane/test/integration/framework"
)

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
