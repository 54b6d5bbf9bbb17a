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

package karmadaadoption

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
)

func TestControllersOf(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{nil, []string{"*"}},
		{[]string{"--v=2"}, []string{"*"}},
		{[]string{"--controllers=*,hpaScaleTargetMarker"}, []string{"*", "hpaScaleTargetMarker"}},
		// pflag's string slice: the first occurrence replaces the
		// default, later ones append.
		{[]string{"--controllers=a", "--controllers=*,-b"}, []string{"a", "*", "-b"}},
	} {
		if got := ControllersOf(tc.args); !slices.Equal(got, tc.want) {
			t.Errorf("ControllersOf(%v) = %v, want %v", tc.args, got, tc.want)
		}
	}
}

func TestEnabled(t *testing.T) {
	for _, tc := range []struct {
		list        []string
		name        string
		onByDefault bool
		want        bool
	}{
		{[]string{"*"}, CronController, true, true},
		{[]string{"*", "-" + CronController}, CronController, true, false},
		{[]string{"*", "hpaScaleTargetMarker", "*", "-" + CronController}, "hpaScaleTargetMarker", false, true},
		{[]string{"*", "-" + CronController}, "hpaScaleTargetMarker", false, false},
		{[]string{CronController, "*", "-" + CronController}, CronController, true, true},
		// Without "*" nothing runs but what is named.
		{[]string{"-" + CronController}, "binding", true, false},
	} {
		if got := Enabled(tc.list, tc.name, tc.onByDefault); got != tc.want {
			t.Errorf("Enabled(%v, %s) = %v, want %v", tc.list, tc.name, got, tc.want)
		}
	}
}

func deployment(command []string, mount corev1.VolumeMount, volume corev1.Volume) *appsv1.Deployment {
	d := &appsv1.Deployment{}
	d.Spec.Template.Spec.Containers = []corev1.Container{{Name: "karmada-controller-manager", Command: command, VolumeMounts: []corev1.VolumeMount{mount}}}
	d.Spec.Template.Spec.Volumes = []corev1.Volume{volume}
	return d
}

func secretVolume(name, secret string) corev1.Volume {
	return corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: secret}}}
}

func TestInspectFindsTheKubeconfig(t *testing.T) {
	subPath := deployment([]string{karmadaBinary, "--kubeconfig=/etc/kubeconfig"},
		corev1.VolumeMount{Name: "kubeconfig-secret", MountPath: "/etc/kubeconfig", SubPath: "kubeconfig"},
		secretVolume("kubeconfig-secret", "karmada-kubeconfig"))
	dir := deployment([]string{karmadaBinary, "--kubeconfig=/etc/karmada/config/karmada.config"},
		corev1.VolumeMount{Name: "karmada-config", MountPath: "/etc/karmada/config"},
		secretVolume("karmada-config", "karmada-controller-manager-config"))
	for _, tc := range []struct {
		d           *appsv1.Deployment
		secret, key string
	}{
		{subPath, "karmada-kubeconfig", "kubeconfig"},
		{dir, "karmada-controller-manager-config", "karmada.config"},
	} {
		in, err := Inspect(tc.d)
		if err != nil {
			t.Fatal(err)
		}
		if in.SecretName != tc.secret || in.SecretKey != tc.key || in.LeaseNamespace != "karmada-system" || !in.CronEnabled {
			t.Errorf("Inspect: secret %s key %s lease %s cron %v; want %s %s karmada-system true",
				in.SecretName, in.SecretKey, in.LeaseNamespace, in.CronEnabled, tc.secret, tc.key)
		}
		if got := in.SidecarContainer(DefaultImage, []string{CronScaler}).VolumeMounts[0]; got.SubPath != tc.d.Spec.Template.Spec.Containers[0].VolumeMounts[0].SubPath || !got.ReadOnly {
			t.Errorf("sidecar mount %+v", got)
		}
	}
}

func TestCanAppend(t *testing.T) {
	mount := corev1.VolumeMount{Name: "c", MountPath: "/etc/c"}
	vol := secretVolume("c", "s")
	for _, tc := range []struct {
		controllers string
		ok          bool
	}{
		{"", true},
		{"--controllers=*,hpaScaleTargetMarker", true},
		{"--controllers=*,-" + CronController, false},           // already off
		{"--controllers=" + CronController + ",binding", false}, // named first: an append cannot win
		{"--controllers=binding", false},                        // no "*": the cron controller is off
	} {
		command := []string{karmadaBinary, "--kubeconfig=/etc/c/k"}
		if tc.controllers != "" {
			command = append(command, tc.controllers)
		}
		in, err := Inspect(deployment(command, mount, vol))
		if err != nil {
			t.Fatal(err)
		}
		if err := in.CanAppend(); (err == nil) != tc.ok {
			t.Errorf("%q: CanAppend() = %v, want ok %v", tc.controllers, err, tc.ok)
		}
	}
}

// applyPatch applies a strategic merge patch to d, as the apiserver does
// for `kubectl patch`.
func applyPatch(t *testing.T, d *appsv1.Deployment, patch []byte) *appsv1.Deployment {
	t.Helper()
	original, err := json.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	merged, err := strategicpatch.StrategicMergePatch(original, patch, &appsv1.Deployment{})
	if err != nil {
		t.Fatalf("applying %s: %v", patch, err)
	}
	out := &appsv1.Deployment{}
	if err := json.Unmarshal(merged, out); err != nil {
		t.Fatal(err)
	}
	return out
}

func karmadactlLike() *appsv1.Deployment {
	return deployment([]string{karmadaBinary, "--kubeconfig=/etc/karmada/config/karmada.config"},
		corev1.VolumeMount{Name: "karmada-config", MountPath: "/etc/karmada/config"},
		secretVolume("karmada-config", "karmada-controller-manager-config"))
}

// TestSidecarKeepsKarmadaTheDefaultContainer: the sidecar patch puts the
// sidecar first in the pod, and names Karmada's container in the
// annotation kubectl logs/exec/attach follow; the remove patch takes both
// away, also when it was printed from the Deployment with the sidecar.
func TestSidecarKeepsKarmadaTheDefaultContainer(t *testing.T) {
	original := karmadactlLike()
	in, err := Inspect(original)
	if err != nil {
		t.Fatal(err)
	}
	patch, err := in.SidecarPatch("registry.test/scaleplane-controller-manager:v0.1.0", []string{CronScaler})
	if err != nil {
		t.Fatal(err)
	}
	adopted := applyPatch(t, original, patch)
	pod := adopted.Spec.Template
	if len(pod.Spec.Containers) != 2 || pod.Spec.Containers[0].Name != SidecarName {
		t.Errorf("containers after the patch: %v; want the sidecar first (what makes the annotation needed)", names(pod.Spec.Containers))
	}
	if got := pod.Annotations[DefaultContainerAnnotation]; got != "karmada-controller-manager" {
		t.Errorf("%s = %q, want Karmada's container", DefaultContainerAnnotation, got)
	}
	again, err := Inspect(adopted)
	if err != nil {
		t.Fatal(err)
	}
	for name, remove := range map[string][]byte{"printed before": in.SidecarRemovePatch(), "printed after": again.SidecarRemovePatch()} {
		undone := applyPatch(t, adopted, remove)
		if !equality.Semantic.DeepEqual(undone.Spec.Template, original.Spec.Template) {
			t.Errorf("the remove patch %s the sidecar did not give the pod back: %+v", name, undone.Spec.Template)
		}
	}
}

// TestSidecarKeepsTheUsersDefaultContainer: a pod that already names its
// default container keeps that annotation through the patch and the undo.
func TestSidecarKeepsTheUsersDefaultContainer(t *testing.T) {
	original := karmadactlLike()
	original.Spec.Template.Annotations = map[string]string{DefaultContainerAnnotation: "karmada-controller-manager"}
	in, err := Inspect(original)
	if err != nil {
		t.Fatal(err)
	}
	patch, err := in.SidecarPatch("registry.test/scaleplane-controller-manager:v0.1.0", []string{CronScaler})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(patch), DefaultContainerAnnotation) {
		t.Errorf("the patch sets %s, which the pod already has:\n%s", DefaultContainerAnnotation, patch)
	}
	undone := applyPatch(t, applyPatch(t, original, patch), in.SidecarRemovePatch())
	if !equality.Semantic.DeepEqual(undone.Spec.Template, original.Spec.Template) {
		t.Errorf("patch and undo changed the pod: %+v", undone.Spec.Template)
	}
}

func names(cs []corev1.Container) []string {
	var out []string
	for _, c := range cs {
		out = append(out, c.Name)
	}
	return out
}
