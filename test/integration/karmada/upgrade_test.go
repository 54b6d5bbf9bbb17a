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
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/scaleplane/scaleplane/pkg/karmadaadoption"
	"github.com/scaleplane/scaleplane/test/integration/framework"
)

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
		// In the README's order: the sidecar first, then the value.
		checkSettingValue(t, s.file("karmada-patches/helm-values.yaml"), in.cronOff)
		s.run(sidecar)
		checkSidecarAdded(t, original, get(t, cp, ns, name))
		s.mustSay("helm upgrade karmada karmada-charts/karmada -n karmada-system --version v1.18.1 --reuse-values -f karmada-patches/helm-values.yaml")
		withSidecar := in.upgrade(t, cp, in.file, in.cronOff)
		checkOnlyCronOff(t, original, withoutSidecar(withSidecar))
		if sidecarOf(withSidecar) == nil || withSidecar.Spec.Template.Annotations[karmadaadoption.DefaultContainerAnnotation] != karmadaContainer(t, withSidecar).Name {
			t.Errorf("the helm upgrade that switched the cron controller off dropped the sidecar (%v) or its annotation (%v)",
				containerNames(withSidecar), withSidecar.Spec.Template.Annotations)
		}
		// The next helm upgrade (same values): nothing changes.
		again := in.upgrade(t, cp, in.cronOff, in.cronOff)
		if sb, sa := stored(t, withSidecar), stored(t, again); sb != sa {
			t.Errorf("helm upgrade changed the adopted Deployment:\nbefore %s\nafter  %s", sb, sa)
		}
		// Undo, in the README's order: the value as it was (Karmada's
		// cron controller on, the sidecar kept), then the sidecar's
		// reverse.
		s.mustSay("helm upgrade karmada karmada-charts/karmada -n karmada-system --version v1.18.1 --reuse-values -f karmada-patches/helm-values-undo.yaml")
		checkSettingValue(t, s.file("karmada-patches/helm-values-undo.yaml"), in.file)
		if on := in.upgrade(t, cp, in.cronOff, in.file); !cronOn(t, on) || sidecarOf(on) == nil {
			t.Errorf("after helm-values-undo.yaml: cron on = %v, sidecar = %v; want both", cronOn(t, on), sidecarOf(on) != nil)
		}
		s.run(sidecarRemove)
		if sb, sa := stored(t, original), stored(t, get(t, cp, ns, name)); sb != sa {
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
		// Running karmadactl init again (with another --port; the
		// default one stops at its nodePort check) only Creates its
		// Deployment: refused, the adopted one stays byte for byte, with
		// the extra args or without them.
		s.mustSay("nodePort of karmada apiserver 32443 already exist")
		s.mustSay("--karmada-controller-manager-extra-args='--controllers=*,-cronFederatedHorizontalPodAutoscaler'")
		for _, rendered := range []string{in.cronOff, in.file} {
			if rerun := in.upgrade(t, cp, in.file, rendered); stored(t, rerun) != stored(t, imaged) {
				t.Errorf("a re-run of karmadactl init rendering %s changed the adopted Deployment:\nbefore %s\nafter  %s", rendered, stored(t, imaged), stored(t, rerun))
			}
		}
		// The README's whole way there and back on a fresh install: the
		// sidecar, the Deployment read again (the sidecar moved Karmada's
		// container), the cron controller off; undo in reverse: the cron
		// controller on (the Deployment read again), the sidecar removed.
		fresh := in.install(t, cp)
		for _, line := range []string{getLine, patchLine, sidecar, getLine, patchLine, cronOffJSON} {
			s.run(line)
		}
		adopted := get(t, cp, ns, name)
		checkOnlyCronOff(t, fresh, withoutSidecar(adopted))
		checkSidecarAdded(t, withoutSidecar(adopted), adopted)
		for _, line := range []string{getLine, patchLine, cronOnJSON, sidecarRemove} {
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
		// The README's wait: it keeps waiting while the operator has not
		// acted (here: cut short, it fails), and returns once it has.
		wait := `timeout 600 sh -c 'until kubectl -n test get deployment karmada-demo-controller-manager -o jsonpath="{.spec.template.spec.containers[*].command}" | grep -q -- -cronFederatedHorizontalPodAutoscaler; do sleep 5; done'`
		s.mustSay(wait)
		if err := runErr(s, strings.Replace(wait, "timeout 600", "timeout 3", 1)); err == nil {
			t.Error("the README's wait returned before the operator changed the Deployment")
		}
		off := in.upgrade(t, cp, in.file, in.cronOff)
		s.run(wait)
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
		undoWait := strings.Replace(wait, "until kubectl", "while kubectl", 1)
		s.mustSay(undoWait)
		if err := runErr(s, strings.Replace(undoWait, "timeout 600", "timeout 3", 1)); err == nil {
			t.Error("the README's undo wait returned before the operator changed the Deployment")
		}
		if undone := in.upgrade(t, cp, in.cronOff, in.file); stored(t, undone) != stored(t, original) {
			t.Errorf("the operator's Deployment after undo differs from the original")
		}
		s.run(undoWait)
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
		// The re-run puts the sidecar first; the annotation keeps
		// Karmada's container the default of kubectl logs and exec.
		if got := rerun.Spec.Template.Annotations[karmadaadoption.DefaultContainerAnnotation]; got != karmadaContainer(t, rerun).Name {
			t.Errorf("after re-running the script: %s=%q, want %s (containers %v)", karmadaadoption.DefaultContainerAnnotation, got, karmadaContainer(t, rerun).Name, containerNames(rerun))
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
		// Undo, in the README's order: the Deployment read again for its
		// cron-on.json, then the sidecar.
		s.run(getLine)
		s.run(patchLine)
		s.run(cronOnJSON)
		s.run(sidecarRemove)
		if sb, sa := stored(t, original), stored(t, get(t, cp, ns, name)); sb != sa {
			t.Errorf("undo did not restore the original:\nwant %s\ngot  %s", sb, sa)
		}
	}
}

// withoutSidecar is d without what the sidecar patch adds: the container
// and the default-container annotation.
func withoutSidecar(d *appsv1.Deployment) *appsv1.Deployment {
	d = d.DeepCopy()
	d.Spec.Template.Spec.Containers = slices.DeleteFunc(d.Spec.Template.Spec.Containers, func(c corev1.Container) bool {
		return c.Name == karmadaadoption.SidecarName
	})
	delete(d.Spec.Template.Annotations, karmadaadoption.DefaultContainerAnnotation)
	return d
}
