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

// Package upgrade upgrades a Helm release of scaleplane from the previous
// release's chart (testdata/scaleplane-0.1.0.tgz) to the working tree's, on
// a real kube-apiserver, the way docs/upgrading.md tells users to: the new
// CRDs first, server-side, from the chart itself, then helm upgrade. It
// checks that nothing stored is lost and the new fields are served; what
// helm upgrade alone does (Helm never upgrades crds/); and what a rollback
// leaves.
//
// There is no kubelet: the chart's Deployments never run. The webhook the
// chart registers is served by a scaleplane-webhook process started here, on
// 127.0.0.1, which the chart's ValidatingWebhookConfiguration reaches
// through webhook.configuration.url, with the test's CA as webhook.caBundle.
// It is the working tree's binary for both charts: there is no 0.1.0 binary
// (0.1.0 was never built as a release), and what is tested is the chart and
// the CRDs, not the webhook's rules.
package upgrade

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/scaleplane/scaleplane/test/integration/framework"
)

func TestMain(m *testing.M) {
	// No CRDs at start (the directory does not exist): helm install of the
	// 0.1.0 chart installs its own, as on a new cluster.
	framework.Main(m, framework.Options{CRDDir: "testdata/no-crds-at-start"})
}

// TestUpgradeFrom0_1_0 follows docs/upgrading.md from the 0.1.0 chart to
// the working tree's: the CRDs first, then helm upgrade; then back with
// helm rollback.
func TestUpgradeFrom0_1_0(t *testing.T) {
	removeCRDs(t)
	u := newUser(t)

	// 0.1.0, as installed by its users.
	u.helmInstall(u.oldChart)
	u.checkDeployed(1, "scaleplane-0.1.0")
	if got := u.schemaIs(); got != "0.1.0" {
		t.Fatalf("after helm install of %s the CRDs are %s, want 0.1.0's", oldChart, got)
	}
	// helm install creates crds/ as the field manager helm, by an update:
	// a server-side apply by another manager that changes a field helm
	// set conflicts (TestHelmUpgradeWithoutCRDStep shows it).
	if m := managers(u.crd(crdNames[0])); !slices.Contains(m, "helm/Update") {
		t.Errorf("after helm install the AddonResizer CRD's field managers are %v, want helm/Update among them", m)
	}
	u.checkWebhook("0.1.0 installed")
	u.createObjects()
	if _, found, _ := unstructured.NestedFieldNoCopy(u.get(lwsGVR, "vllm").Object, "status", "observedGeneration"); found {
		t.Errorf("0.1.0's LeaderWorkerSet schema kept status.observedGeneration: the test's premise is wrong")
	}
	before := u.snapshot()
	if h := u.header(); slices.Contains(h, "UPDATE-MODE") {
		t.Errorf("kubectl get addonresizers under 0.1.0's CRD shows %v: UPDATE-MODE was a wide column then", h)
	}

	// The upgrade, as documented.
	crdsBefore := u.crdVersions()
	out := u.mustRun(nil, "bash", fmt.Sprintf(crdStep, u.newChart))
	t.Logf("%s:\n%s", fmt.Sprintf(crdStep, "scaleplane-"+newVersion+".tgz"), out)
	for _, name := range crdNames {
		if !strings.Contains(out, "customresourcedefinition.apiextensions.k8s.io/"+name+" serverside-applied") {
			t.Errorf("the CRD step did not apply %s:\n%s", name, out)
		}
	}
	if got := u.schemaIs(); got != "new" {
		t.Fatalf("after the CRD step the CRDs are %s, want the new ones", got)
	}
	if m := managers(u.crd(crdNames[0])); !slices.Contains(m, "kubectl/Apply") {
		t.Errorf("after the CRD step the AddonResizer CRD's field managers are %v, want kubectl/Apply among them", m)
	}
	if tries := u.waitServed(); tries > 1 {
		t.Logf("the new AddonResizer schema was served after %d tries", tries)
	}
	u.helmUpgrade(u.newChart)
	u.checkDeployed(2, "scaleplane-"+newVersion)
	crdsAfter := u.crdVersions()
	for _, name := range []string{crdNames[0], crdNames[3]} {
		if crdsAfter[name] == crdsBefore[name] {
			t.Errorf("the CRD step left %s as it was", name)
		}
	}

	t.Run("nothing lost", func(t *testing.T) {
		u := u.in(t)
		u.checkUnchanged("the CRD step and helm upgrade", before)
	})

	t.Run("webhook", func(t *testing.T) { u.in(t).checkWebhook("upgraded") })

	t.Run("columns", func(t *testing.T) {
		u := u.in(t)
		if h := u.header(); !slices.Contains(h, "UPDATE-MODE") {
			t.Errorf("kubectl get addonresizers shows %v, want UPDATE-MODE", h)
		}
		if h := u.header("-o", "wide"); !slices.Contains(h, "CPU") || !slices.Contains(h, "MEM") {
			t.Errorf("kubectl get addonresizers -o wide shows %v, want CPU and MEM", h)
		}
	})

	t.Run("new fields served", func(t *testing.T) {
		u := u.in(t)
		// The existing AddonResizer, switched to recommend-only with
		// bounds, and a new one, both by kubectl apply (strict validation).
		u.mustRun([]byte(addonResizerNew), "kubectl", "apply", "-n", u.ns, "-f", "-")
		fresh := strings.Replace(addonResizerNew, "name: metrics-server\nspec", "name: recommend-only\nspec", 1)
		u.mustRun([]byte(fresh), "kubectl", "apply", "-n", u.ns, "-f", "-")
		for _, name := range []string{"metrics-server", "recommend-only"} {
			u.checkNewSpec(name)
		}
		// The new schema's rule between the bounds.
		bad := strings.Replace(fresh, `maxAllowed: "2"`, "maxAllowed: 10m", 1)
		out, err := u.apply(bad, "--dry-run=server")
		if err == nil || !strings.Contains(out, "maxAllowed must be greater than or equal to minAllowed") {
			t.Errorf("an AddonResizer with maxAllowed < minAllowed: %v\n%s", err, out)
		}
		// Statuses with what 0.1.0 lacked.
		if err := u.writeStatus(arGVR, "metrics-server", arStatusNew); err != nil {
			t.Fatalf("writing a status with the states Capped, NotApplied and Recommended: %v", err)
		}
		u.checkStatus(arGVR, "metrics-server", arStatusNew)
		if err := u.writeStatus(lwsGVR, "vllm", statuses0_1_0[lwsGVR]); err != nil {
			t.Fatal(err)
		}
		u.checkStatus(lwsGVR, "vllm", statuses0_1_0[lwsGVR])
	})
	if t.Failed() {
		return
	}

	t.Run("rollback", func(t *testing.T) {
		u := u.in(t)
		out := u.mustRun(nil, "bash", findOff)
		if want := u.ns + "/metrics-server\n" + u.ns + "/recommend-only\n"; out != want {
			t.Errorf("%s printed %q, want %q", findOff, out, want)
		}
		before := u.snapshot()
		crds := u.crdVersions()
		u.mustRun(nil, "helm", "rollback", release, "1", "-n", u.ns)
		u.checkDeployed(3, "scaleplane-0.1.0")
		// Helm never touches crds/: not on upgrade, not on rollback.
		if got := u.crdVersions(); !equalMaps(got, crds) {
			t.Errorf("helm rollback changed CRDs: resourceVersions %v, were %v", got, crds)
		}
		if got := u.schemaIs(); got != "new" {
			t.Errorf("after helm rollback the CRDs are %s, want still the new ones", got)
		}
		u.checkUnchanged("helm rollback", before)
		u.checkNewSpec("metrics-server")
		u.checkWebhook("rolled back")

		// What 0.1.0's controller manager writes, emulated: it decodes
		// into its own types, so whatever they lack is left out of what
		// it sends. The resizer writes an AddonResizer's status only
		// (UpdateStatus): the spec's new fields stay; the status fields
		// 0.1.0 does not know are dropped until a newer resizer writes
		// them again.
		ar := u.get(arGVR, "metrics-server")
		clusters, _, _ := unstructured.NestedSlice(ar.Object, "status", "clusters")
		for _, c := range clusters {
			m := c.(map[string]any)
			delete(m, "recommendation")
			if m["state"] != "Sized" {
				m["state"] = "Unknown"
			}
		}
		if err := unstructured.SetNestedSlice(ar.Object, clusters, "status", "clusters"); err != nil {
			t.Fatal(err)
		}
		if _, err := u.dyn.Resource(arGVR).Namespace(u.ns).UpdateStatus(context.Background(), ar, metav1.UpdateOptions{}); err != nil {
			t.Fatalf("a status write of 0.1.0's shape: %v", err)
		}
		u.checkNewSpec("metrics-server")
		ar = u.get(arGVR, "metrics-server")
		clusters, _, _ = unstructured.NestedSlice(ar.Object, "status", "clusters")
		for _, c := range clusters {
			if _, ok := c.(map[string]any)["recommendation"]; ok {
				t.Errorf("a status write without clusters[].recommendation kept it: %v", c)
			}
		}
		// The cron-scaler Updates a whole LeaderWorkerSet to set its
		// scalePolicy bounds; 0.1.0's type lacks status.observedGeneration,
		// but an update of the object ignores its status.
		lws := u.get(lwsGVR, "vllm")
		unstructured.RemoveNestedField(lws.Object, "status", "observedGeneration")
		if err := unstructured.SetNestedField(lws.Object, int64(2), "spec", "scalePolicy", "minReplicas"); err != nil {
			t.Fatal(err)
		}
		if _, err := u.dyn.Resource(lwsGVR).Namespace(u.ns).Update(context.Background(), lws, metav1.UpdateOptions{}); err != nil {
			t.Fatalf("an update of the LeaderWorkerSet of 0.1.0's shape: %v", err)
		}
		if g, _, _ := unstructured.NestedInt64(u.get(lwsGVR, "vllm").Object, "status", "observedGeneration"); g != 1 {
			t.Errorf("after an update of the LeaderWorkerSet without it, status.observedGeneration is %d, want 1", g)
		}
	})

	t.Run("uninstall keeps CRDs and objects", func(t *testing.T) {
		u := u.in(t)
		u.mustRun(nil, "helm", "uninstall", release, "-n", u.ns)
		u.crdVersions() // fails if one is gone
		for _, k := range theObjects {
			u.get(k.gvr, k.name)
		}
		u.get(arGVR, "recommend-only")
	})
}

// TestHelmUpgradeWithoutCRDStep shows what docs/upgrading.md says happens
// when helm upgrade runs alone, and the way back.
func TestHelmUpgradeWithoutCRDStep(t *testing.T) {
	removeCRDs(t)
	u := newUser(t)
	u.helmInstall(u.oldChart)
	u.checkWebhook("0.1.0 installed")
	u.createObjects()
	crds := u.crdVersions()

	u.helmUpgrade(u.newChart)
	u.checkDeployed(2, "scaleplane-"+newVersion)
	if got := u.crdVersions(); !equalMaps(got, crds) {
		t.Errorf("helm upgrade changed CRDs: resourceVersions %v, were %v", got, crds)
	}
	if got := u.schemaIs(); got != "0.1.0" {
		t.Fatalf("after helm upgrade alone the CRDs are %s, want still 0.1.0's", got)
	}

	// kubectl validates strictly: unknown fields are refused.
	withBounds := strings.Replace(addonResizerNew, `updateMode: "Off"`, "updateMode: Rollout", 1)
	out, err := u.apply(withBounds)
	for _, field := range []string{"spec.resources[0].minAllowed", "spec.resources[0].maxAllowed", "spec.resources[1].maxAllowed"} {
		if err == nil || !strings.Contains(out, fmt.Sprintf("unknown field %q", field)) {
			t.Errorf("kubectl apply of an AddonResizer with %s under 0.1.0's CRD: %v, want refused as an unknown field:\n%s", field, err, out)
		}
	}
	// Without strict validation (kubectl --validate=warn, and client-go's
	// default) they are pruned, with a warning.
	out, err = u.apply(withBounds, "--validate=warn")
	if err != nil || !strings.Contains(out, `unknown field "spec.resources[0].minAllowed"`) {
		t.Errorf("kubectl apply --validate=warn of an AddonResizer with bounds: %v, want accepted with a warning:\n%s", err, out)
	}
	resources, _, _ := unstructured.NestedSlice(u.get(arGVR, "metrics-server").Object, "spec", "resources")
	for _, r := range resources {
		for _, field := range []string{"minAllowed", "maxAllowed"} {
			if v, ok := r.(map[string]any)[field]; ok {
				t.Errorf("0.1.0's CRD kept spec.resources[].%s = %v", field, v)
			}
		}
	}
	// A new enum value is refused, not pruned.
	out, err = u.apply(addonResizerNew, "--validate=warn")
	if err == nil || !strings.Contains(out, `spec.updateMode: Unsupported value: "Off"`) {
		t.Errorf("updateMode Off under 0.1.0's CRD: %v, want refused:\n%s", err, out)
	}
	// The new resizer's status: a new state is refused (the whole write),
	// a member's recommendation pruned.
	err = u.writeStatus(arGVR, "metrics-server", arStatusNew)
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), `status.clusters[0].state: Unsupported value: "Capped"`) {
		t.Errorf("a status with state Capped under 0.1.0's CRD: %v, want Invalid", err)
	}
	sized := strings.ReplaceAll(strings.ReplaceAll(strings.ReplaceAll(arStatusNew, "Capped", "Sized"), "NotApplied", "Unknown"), "Recommended", "Sized")
	if err := u.writeStatus(arGVR, "metrics-server", sized); err != nil {
		t.Fatal(err)
	}
	clusters, _, _ := unstructured.NestedSlice(u.get(arGVR, "metrics-server").Object, "status", "clusters")
	for _, c := range clusters {
		if v, ok := c.(map[string]any)["recommendation"]; ok {
			t.Errorf("0.1.0's CRD kept status.clusters[].recommendation = %v", v)
		}
	}
	// The LeaderWorkerSet's status.observedGeneration is pruned.
	if err := u.writeStatus(lwsGVR, "vllm", statuses0_1_0[lwsGVR]); err != nil {
		t.Fatal(err)
	}
	if g, found, _ := unstructured.NestedFieldNoCopy(u.get(lwsGVR, "vllm").Object, "status", "observedGeneration"); found {
		t.Errorf("0.1.0's CRD kept the LeaderWorkerSet's status.observedGeneration = %v", g)
	}

	// The way back: the CRD step after the fact. Without
	// --force-conflicts the changed CRDs are refused: helm install owns
	// their fields.
	out, err = u.run(nil, "bash", fmt.Sprintf(crdStepNoForce, u.newChart))
	t.Logf("%s: %v\n%s", fmt.Sprintf(crdStepNoForce, "scaleplane-"+newVersion+".tgz"), err, out)
	conflict := `Apply failed with 1 conflict: conflict with "helm" using apiextensions.k8s.io/v1: .spec.versions`
	if err == nil || strings.Count(out, conflict) != 2 {
		t.Errorf("the CRD step without --force-conflicts: %v, want two CRDs (those that changed) refused with %q:\n%s", err, conflict, out)
	}
	for _, name := range crdNames {
		applied := strings.Contains(out, "customresourcedefinition.apiextensions.k8s.io/"+name+" serverside-applied")
		if changed := name == crdNames[0] || name == crdNames[3]; applied == changed {
			t.Errorf("the CRD step without --force-conflicts applied %s: %v, want %v (it changed: %v)", name, applied, !changed, changed)
		}
	}
	if got := u.schemaIs(); got != "0.1.0" {
		t.Errorf("after the CRD step without --force-conflicts the CRDs are %s, want still 0.1.0's", got)
	}
	u.mustRun(nil, "bash", fmt.Sprintf(crdStep, u.newChart))
	if got := u.schemaIs(); got != "new" {
		t.Fatalf("after the CRD step the CRDs are %s, want the new ones", got)
	}
	u.waitServed()
	// What was pruned is gone: the bounds must be applied again.
	resources, _, _ = unstructured.NestedSlice(u.get(arGVR, "metrics-server").Object, "spec", "resources")
	if _, ok := resources[0].(map[string]any)["minAllowed"]; ok {
		t.Errorf("a pruned minAllowed came back with the new CRD")
	}
	u.mustRun([]byte(addonResizerNew), "kubectl", "apply", "-n", u.ns, "-f", "-")
	u.checkNewSpec("metrics-server")
}

// TestKarmadaCRDStep: on Karmada the chart is installed with --skip-crds in
// the host cluster; karmada-apiserver holds Karmada's own CronFederatedHPA
// and FederatedHPA CRDs and, applied by the user, scaleplane's AddonResizer
// and LeaderWorkerSet CRDs. The CRD step upgrades those two, and nothing
// else.
func TestKarmadaCRDStep(t *testing.T) {
	removeCRDs(t)
	u := newUser(t)
	u.mustRun(nil, "bash", fmt.Sprintf(karmadaInstall0_1_0, u.oldChart))
	if got := u.schemaIs(); got != "0.1.0" {
		t.Fatalf("0.1.0's CRDs as installed on karmada-apiserver are %s", got)
	}
	u.mustRun([]byte(addonResizer0_1_0), "kubectl", "apply", "-n", u.ns, "-f", "-")
	before := u.get(arGVR, "metrics-server")

	// Nothing of 0.1.0's chart left where the new one is unpacked.
	if err := os.RemoveAll(filepath.Join(u.dir, "scaleplane")); err != nil {
		t.Fatal(err)
	}
	out := u.mustRun(nil, "bash", fmt.Sprintf(karmadaCRDStep, u.newChart))
	for _, name := range []string{crdNames[0], crdNames[3]} {
		if !strings.Contains(out, "customresourcedefinition.apiextensions.k8s.io/"+name+" serverside-applied") {
			t.Errorf("the Karmada CRD step did not apply %s:\n%s", name, out)
		}
	}
	if got := u.schemaIs(); got != "new" {
		t.Fatalf("after the Karmada CRD step the CRDs are %s, want the new ones", got)
	}
	for _, name := range []string{crdNames[1], crdNames[2]} {
		if _, err := u.dyn.Resource(framework.CRDResource).Get(context.Background(), name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("the Karmada CRD step touched %s (Karmada's): %v", name, err)
		}
	}
	if after := u.get(arGVR, "metrics-server"); after.GetResourceVersion() != before.GetResourceVersion() {
		t.Errorf("the Karmada CRD step rewrote an AddonResizer")
	}
	u.waitServed()
	u.mustRun([]byte(addonResizerNew), "kubectl", "apply", "-n", u.ns, "-f", "-")
	u.checkNewSpec("metrics-server")
}

// TestCRDsInTemplatesAlternative checks one reason docs/upgrading.md gives
// against moving the CRDs to the chart's templates/: an install of 0.1.0
// cannot be upgraded to such a chart.
func TestCRDsInTemplatesAlternative(t *testing.T) {
	removeCRDs(t)
	u := newUser(t)
	root, err := framework.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	variant := filepath.Join(u.dir, "variant", "scaleplane")
	if err := os.CopyFS(variant, os.DirFS(filepath.Join(root, "charts", "scaleplane"))); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(variant, "crds"), filepath.Join(variant, "templates", "crds")); err != nil {
		t.Fatal(err)
	}

	u.helmInstall(u.oldChart)
	out, err := u.run(nil, "helm", "upgrade", release, variant, "-n", u.ns, "-f", u.values)
	want := `in namespace "" exists and cannot be imported into the current release: invalid ownership metadata`
	if err == nil || !strings.Contains(out, want) {
		t.Errorf("helm upgrade of a 0.1.0 install to a chart with its CRDs in templates/: %v, want %q:\n%s", err, want, out)
	}

}
