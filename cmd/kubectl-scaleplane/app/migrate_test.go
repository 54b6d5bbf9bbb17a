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

package app

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	kubefake "k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	testingclock "k8s.io/utils/clock/testing"

	scaleplanev1alpha1 "github.com/scaleplane/scaleplane/pkg/apis/scaleplane/v1alpha1"
	"github.com/scaleplane/scaleplane/pkg/generated/clientset/versioned/fake"
)

// migrateEnv is a fake cluster for migrate: the API server's dry run (a
// patch with dryRun writes nothing) and server-side apply of AddonResizers
// (the field manager recorded in managedFields) emulated, every write
// counted.
type migrateEnv struct {
	kube   *kubefake.Clientset
	sp     *fake.Clientset
	writes []string
	// failPatch fails the Deployment patch (not its dry run).
	failPatch error
	// refuseDryRun refuses the AddonResizer's dry run.
	refuseDryRun error
}

var arGVR = schema.GroupVersionResource{Group: scaleplanev1alpha1.GroupName, Version: "v1alpha1", Resource: "addonresizers"}

func newMigrateEnv(kubeObjs, objs []runtime.Object) *migrateEnv {
	e := &migrateEnv{kube: kubefake.NewClientset(kubeObjs...), sp: fake.NewSimpleClientset(objs...)}
	count := func(a clienttesting.Action) (bool, runtime.Object, error) {
		switch a.GetVerb() {
		case "get", "list", "watch":
			return false, nil, nil
		}
		if p, ok := a.(clienttesting.PatchActionImpl); ok && len(p.PatchOptions.DryRun) > 0 {
			if p.GetResource() == arGVR && e.refuseDryRun != nil {
				return true, nil, e.refuseDryRun
			}
			return true, nil, nil // the dry run writes nothing
		}
		if p, ok := a.(clienttesting.PatchActionImpl); ok && p.GetResource().Resource == "deployments" && e.failPatch != nil {
			return true, nil, e.failPatch
		}
		e.writes = append(e.writes, a.GetVerb()+" "+a.GetResource().Resource)
		return false, nil, nil
	}
	e.sp.PrependReactor("patch", "addonresizers", func(a clienttesting.Action) (bool, runtime.Object, error) {
		p := a.(clienttesting.PatchActionImpl)
		if p.GetPatchType() != types.ApplyPatchType {
			return false, nil, nil
		}
		ar := &scaleplanev1alpha1.AddonResizer{}
		if err := json.Unmarshal(p.GetPatch(), ar); err != nil {
			return true, nil, err
		}
		ar.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: p.PatchOptions.FieldManager, Operation: metav1.ManagedFieldsOperationApply}}
		tracker := e.sp.Tracker()
		if _, err := tracker.Get(arGVR, ar.Namespace, ar.Name); err != nil {
			return true, ar, tracker.Create(arGVR, ar, ar.Namespace)
		}
		return true, ar, tracker.Update(arGVR, ar, ar.Namespace)
	})
	// Prepended last, so it sees every action first.
	e.kube.PrependReactor("*", "*", count)
	e.sp.PrependReactor("*", "*", count)
	return e
}

// run runs kubectl scaleplane in the environment, in namespace kube-system,
// stdin as given.
func (e *migrateEnv) run(t *testing.T, stdin string, args ...string) (string, error) {
	t.Helper()
	var out, errOut bytes.Buffer
	clients := &Clients{Kube: e.kube, Scaleplane: e.sp, Clock: testingclock.NewFakePassiveClock(time.Now()), Namespace: "kube-system"}
	cmd := NewCommand(genericiooptions.IOStreams{In: strings.NewReader(stdin), Out: &out, ErrOut: &errOut}, clients)
	cmd.SetArgs(args)
	cmd.SetOut(&out)
	cmd.SetErr(&errOut)
	err := cmd.Execute()
	return out.String(), err
}

func shapePath(name string) string { return filepath.Join("testdata", "migrate", name+".yaml") }

// shapeObjects reads a transcribed shape as objects for the fake cluster.
func shapeObjects(t *testing.T, name string) []runtime.Object {
	t.Helper()
	f, err := os.Open(shapePath(name))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	dec := utilyaml.NewYAMLOrJSONDecoder(f, 4096)
	var objs []runtime.Object
	for {
		var doc map[string]any
		if err := dec.Decode(&doc); err != nil {
			break
		}
		data, _ := json.Marshal(doc)
		switch doc["kind"] {
		case "Deployment":
			d := &appsv1.Deployment{}
			_ = json.Unmarshal(data, d)
			objs = append(objs, d)
		case "ConfigMap":
			cm := &corev1.ConfigMap{}
			_ = json.Unmarshal(data, cm)
			objs = append(objs, cm)
		}
	}
	return objs
}

var migrateShapes = []string{"metrics-server-chart-3.13.1", "kubernetes-addons-metrics-server", "kubernetes-addons-heapster"}

// TestMigrateRealShapes: migrate on each transcribed user of the nanny
// prints the AddonResizer(s), the removal patch and the leftovers in the
// golden files, reading the manifest offline (no write, no cluster).
func TestMigrateRealShapes(t *testing.T) {
	for _, shape := range migrateShapes {
		t.Run(shape, func(t *testing.T) {
			e := newMigrateEnv(nil, nil)
			out, err := e.run(t, "", "migrate", "addon-resizer", "-n", "kube-system", "-f", shapePath(shape))
			if err != nil {
				t.Fatal(err)
			}
			golden(t, "migrate/"+shape+".txt", out)
			js, err := e.run(t, "", "migrate", "addon-resizer", "-n", "kube-system", "-f", shapePath(shape), "-o", "json")
			if err != nil {
				t.Fatal(err)
			}
			golden(t, "migrate/"+shape+".json", js)
			if len(e.writes) > 0 {
				t.Errorf("a dry run wrote: %v", e.writes)
			}
		})
	}
}

// TestMigrateStdin: -f - reads the manifest from stdin, as from helm template.
func TestMigrateStdin(t *testing.T) {
	data, err := os.ReadFile(shapePath("metrics-server-chart-3.13.1"))
	if err != nil {
		t.Fatal(err)
	}
	e := newMigrateEnv(nil, nil)
	out, err := e.run(t, string(data), "migrate", "addon-resizer", "-n", "kube-system", "-f", "-")
	if err != nil {
		t.Fatal(err)
	}
	want, _ := os.ReadFile(filepath.Join("testdata", "migrate", "metrics-server-chart-3.13.1.txt"))
	if got := strings.Replace(out, "read from -", "read from "+shapePath("metrics-server-chart-3.13.1"), 1); got != string(want) {
		t.Errorf("stdin differs from the file:\n%s", out)
	}
}

// TestMigrateApplyTwice: --apply on the live chart shape writes the
// AddonResizer and removes the nanny and its volume; the second run writes
// nothing (live: the nanny is gone; -f: the manifest still has it, the
// cluster holds what it maps to).
func TestMigrateApplyTwice(t *testing.T) {
	e := newMigrateEnv(shapeObjects(t, "metrics-server-chart-3.13.1"), nil)
	out, err := e.run(t, "", "migrate", "addon-resizer", "-n", "kube-system", "deployment/metrics-server", "--apply")
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"patch addonresizers", "patch deployments"}; strings.Join(e.writes, ",") != strings.Join(want, ",") {
		t.Errorf("writes %v, want %v", e.writes, want)
	}
	golden(t, "migrate/apply-live.txt", out)
	ctx := context.Background()
	d, _ := e.kube.AppsV1().Deployments("kube-system").Get(ctx, "metrics-server", metav1.GetOptions{})
	if n := len(d.Spec.Template.Spec.Containers); n != 1 || d.Spec.Template.Spec.Containers[0].Name != "metrics-server" {
		t.Errorf("containers after apply: %d, want metrics-server alone", n)
	}
	for _, v := range d.Spec.Template.Spec.Volumes {
		if v.Name == "nanny-config-volume" {
			t.Errorf("the nanny's volume is left")
		}
	}
	ar, err := e.sp.ScaleplaneV1alpha1().AddonResizers("kube-system").Get(ctx, "metrics-server", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if ar.Spec.UpdateMode != scaleplanev1alpha1.UpdateModeRollout || ar.Spec.Estimator.MinClusterSize != 100 || !*ar.Spec.SetLimits {
		t.Errorf("AddonResizer spec %+v", ar.Spec)
	}

	e.writes = nil
	out, err = e.run(t, "", "migrate", "addon-resizer", "-n", "kube-system", "deployment/metrics-server", "--apply")
	if err != nil {
		t.Fatal(err)
	}
	if len(e.writes) > 0 || !strings.Contains(out, "already migrated") {
		t.Errorf("second live --apply wrote %v:\n%s", e.writes, out)
	}
	out, err = e.run(t, "", "migrate", "addon-resizer", "-n", "kube-system", "-f", shapePath("metrics-server-chart-3.13.1"), "--apply")
	if err != nil {
		t.Fatal(err)
	}
	if len(e.writes) > 0 || !strings.Contains(out, "Applied: nothing to change") {
		t.Errorf("--apply -f after the migration wrote %v:\n%s", e.writes, out)
	}
}

// TestMigrateWatchOnlyThenSwitch: the migration's three steps. --watch-only
// writes the AddonResizer with updateMode Off and keeps the nanny; --apply
// then switches it to Rollout and removes the nanny; a third run changes
// nothing. --watch-only after the switch is refused.
func TestMigrateWatchOnlyThenSwitch(t *testing.T) {
	e := newMigrateEnv(shapeObjects(t, "kubernetes-addons-heapster"), nil)
	args := []string{"migrate", "addon-resizer", "-n", "kube-system", "-f", shapePath("kubernetes-addons-heapster"), "--apply"}
	if _, err := e.run(t, "", append(args, "--watch-only")...); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, name := range []string{"heapster-v1.5.3-heapster", "heapster-v1.5.3-eventer"} {
		ar, err := e.sp.ScaleplaneV1alpha1().AddonResizers("kube-system").Get(ctx, name, metav1.GetOptions{})
		if err != nil || ar.Spec.UpdateMode != "Off" {
			t.Fatalf("%s after --watch-only: %v %+v", name, err, ar)
		}
	}
	if want := "patch addonresizers,patch addonresizers"; strings.Join(e.writes, ",") != want {
		t.Errorf("--watch-only wrote %v, want %s (the nanny stays)", e.writes, want)
	}
	e.writes = nil
	out, err := e.run(t, "", args...)
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "migrate/apply-switch.txt", out)
	d, _ := e.kube.AppsV1().Deployments("kube-system").Get(ctx, "heapster-v1.5.3", metav1.GetOptions{})
	if n := len(d.Spec.Template.Spec.Containers); n != 2 || len(d.Spec.Template.Spec.Volumes) != 0 {
		t.Errorf("after the switch: %d containers, %d volumes; want heapster and eventer, no volume", n, len(d.Spec.Template.Spec.Volumes))
	}
	e.writes = nil
	if _, err := e.run(t, "", args...); err != nil || len(e.writes) > 0 {
		t.Errorf("third run: %v, wrote %v", err, e.writes)
	}
	_, err = e.run(t, "", append(args, "--watch-only")...)
	if err == nil || !strings.Contains(err.Error(), "has no nanny any more") || len(e.writes) > 0 {
		t.Errorf("--watch-only after the switch: %v, wrote %v", err, e.writes)
	}
}

// TestMigrateNothingHalfDone: a refusal by the API server's dry run writes
// nothing; a removal that fails after the AddonResizer was written deletes
// it again, so the nanny alone sizes.
func TestMigrateNothingHalfDone(t *testing.T) {
	args := []string{"migrate", "addon-resizer", "-n", "kube-system", "deployment/metrics-server", "--apply"}
	e := newMigrateEnv(shapeObjects(t, "metrics-server-chart-3.13.1"), nil)
	e.refuseDryRun = errors.New(`admission webhook "addonresizer.scaleplane.io" denied the request`)
	_, err := e.run(t, "", args...)
	if err == nil || !strings.Contains(err.Error(), "refused by the API server (dry run), nothing written") || len(e.writes) > 0 {
		t.Errorf("dry run refused: %v, wrote %v", err, e.writes)
	}

	e = newMigrateEnv(shapeObjects(t, "metrics-server-chart-3.13.1"), nil)
	e.failPatch = errors.New("the object has been modified")
	_, err = e.run(t, "", args...)
	if err == nil || !strings.Contains(err.Error(), "the nanny still sizes: deleted AddonResizer metrics-server again") {
		t.Errorf("failed removal: %v", err)
	}
	if _, err := e.sp.ScaleplaneV1alpha1().AddonResizers("kube-system").Get(context.Background(), "metrics-server", metav1.GetOptions{}); err == nil {
		t.Errorf("the AddonResizer is left after the removal failed")
	}
}

// TestMigrateExistingAddonResizer: an AddonResizer of the same name that
// migrate did not write and that differs, or another one on the same
// container, is refused before anything is written.
func TestMigrateExistingAddonResizer(t *testing.T) {
	args := []string{"migrate", "addon-resizer", "-n", "kube-system", "deployment/metrics-server", "--apply"}
	theirs := &scaleplanev1alpha1.AddonResizer{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "metrics-server"},
		Spec: scaleplanev1alpha1.AddonResizerSpec{TargetRef: scaleplanev1alpha1.TargetReference{Kind: "Deployment", Name: "metrics-server"}, ContainerName: "metrics-server", Threshold: 10}}
	e := newMigrateEnv(shapeObjects(t, "metrics-server-chart-3.13.1"), []runtime.Object{theirs})
	_, err := e.run(t, "", args...)
	if err == nil || !strings.Contains(err.Error(), "exists, differs, and was not written by migrate") || len(e.writes) > 0 {
		t.Errorf("same name: %v, wrote %v", err, e.writes)
	}
	other := theirs.DeepCopy()
	other.Name = "ms"
	e = newMigrateEnv(shapeObjects(t, "metrics-server-chart-3.13.1"), []runtime.Object{other})
	_, err = e.run(t, "", args...)
	if err == nil || !strings.Contains(err.Error(), "AddonResizer ms already sizes container metrics-server") || len(e.writes) > 0 {
		t.Errorf("other AddonResizer: %v, wrote %v", err, e.writes)
	}
}
