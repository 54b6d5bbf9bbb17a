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

package main

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	"sigs.k8s.io/yaml"
)

// The Deployments of Karmada's installers, transcribed from Karmada v1.18.2
// for the integration tests (each file names its source).
const (
	karmadactlDeployment = "../../test/integration/karmada/testdata/karmadactl.yaml"
	// helm.yaml is the chart's manifest as rendered: without the labels
	// and annotations Helm adds when it installs it, as Argo CD applies it.
	helmManifest = "../../test/integration/karmada/testdata/helm.yaml"

	testImage = "registry.test/scaleplane/scaleplane-controller-manager:v0.1.0"
)

func runPatch(t *testing.T, args ...string) (dir, stderr string, err error) {
	t.Helper()
	dir = t.TempDir()
	var out bytes.Buffer
	err = run(append([]string{"-o", dir}, args...), strings.NewReader(""), &out)
	return dir, out.String(), err
}

func readFile(t *testing.T, dir, name string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// TestImageIsRequired: the images are not published, so a default would
// give a sidecar or companion that cannot pull, next to a Karmada whose
// cron controller is then switched off.
func TestImageIsRequired(t *testing.T) {
	for _, args := range [][]string{
		{"-f", karmadactlDeployment},
		{"-f", karmadactlDeployment, "-image", "registry.test/scaleplane-controller-manager"},
		{"-f", karmadactlDeployment, "-image", "registry.test:5000/scaleplane-controller-manager"},
		{"-f", karmadactlDeployment, "-image", "registry.test/scaleplane-controller-manager@sha256:0123"},
	} {
		dir, _, err := runPatch(t, args...)
		if err == nil || !strings.Contains(err.Error(), "image") {
			t.Errorf("karmada-patch %v: err %v, want a refusal naming the image", args, err)
		}
		if _, statErr := os.Stat(filepath.Join(dir, "cron-off.json")); statErr == nil {
			t.Errorf("karmada-patch %v wrote cron-off.json although it refused", args)
		}
	}
}

// TestImageReachesSidecarAndCompanion: -image is the sidecar's image and
// the companion's repository and tag.
func TestImageReachesSidecarAndCompanion(t *testing.T) {
	dir, stderr, err := runPatch(t, "-f", karmadactlDeployment, "-image", testImage)
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	var sidecar appsv1.Deployment
	if err := yaml.Unmarshal(readFile(t, dir, "sidecar.yaml"), &sidecar); err != nil {
		t.Fatal(err)
	}
	if cs := sidecar.Spec.Template.Spec.Containers; len(cs) != 1 || cs[0].Image != testImage {
		t.Errorf("sidecar.yaml containers %+v, want one with image %s", cs, testImage)
	}
	var values struct {
		ControllerManager struct {
			Image struct {
				Repository string `json:"repository"`
				Tag        string `json:"tag"`
			} `json:"image"`
		} `json:"controllerManager"`
	}
	if err := yaml.Unmarshal(readFile(t, dir, "companion-values.yaml"), &values); err != nil {
		t.Fatal(err)
	}
	if got := values.ControllerManager.Image; got.Repository+":"+got.Tag != testImage {
		t.Errorf("companion-values.yaml image %+v, want %s", got, testImage)
	}
}

// TestControllersReachSidecarAndCompanion: -controllers is the sidecar's
// --controllers and the companion's controllerManager.controllers; by
// default the cron-scaler alone; a list without it, or with a name the
// manager does not know, is refused before anything is written.
func TestControllersReachSidecarAndCompanion(t *testing.T) {
	for _, tc := range []struct {
		flag []string
		want []string
	}{
		{nil, []string{"cron-scaler"}},
		{[]string{"-controllers", "resizer, cron-scaler,hpa-generator"}, []string{"cron-scaler", "hpa-generator", "resizer"}},
	} {
		dir, stderr, err := runPatch(t, append([]string{"-f", karmadactlDeployment, "-image", testImage}, tc.flag...)...)
		if err != nil {
			t.Fatalf("%v: %v\n%s", tc.flag, err, stderr)
		}
		var sidecar appsv1.Deployment
		if err := yaml.Unmarshal(readFile(t, dir, "sidecar.yaml"), &sidecar); err != nil {
			t.Fatal(err)
		}
		if args := sidecar.Spec.Template.Spec.Containers[0].Args; !slices.Contains(args, "--controllers="+strings.Join(tc.want, ",")) {
			t.Errorf("%v: sidecar.yaml args %q, want --controllers=%s", tc.flag, args, strings.Join(tc.want, ","))
		}
		var values struct {
			ControllerManager struct {
				Controllers []string `json:"controllers"`
			} `json:"controllerManager"`
		}
		if err := yaml.Unmarshal(readFile(t, dir, "companion-values.yaml"), &values); err != nil {
			t.Fatal(err)
		}
		if got := values.ControllerManager.Controllers; !slices.Equal(got, tc.want) {
			t.Errorf("%v: companion-values.yaml controllers %q, want %q", tc.flag, got, tc.want)
		}
	}
	for flag, want := range map[string]string{
		"hpa-generator,resizer":  "leaves out cron-scaler",
		"cron-scaler,autoscaler": `unknown controller "autoscaler"`,
		"cron-scaler,":           `unknown controller ""`,
	} {
		dir := filepath.Join(t.TempDir(), "out")
		err := run([]string{"-f", karmadactlDeployment, "-image", testImage, "-o", dir, "-controllers", flag}, strings.NewReader(""), io.Discard)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("-controllers=%s: got %v, want an error saying %q", flag, err, want)
		}
		if _, statErr := os.Stat(dir); !os.IsNotExist(statErr) {
			t.Errorf("-controllers=%s: %s was written: %v", flag, dir, statErr)
		}
	}
}

// TestHelmChartWithoutHelmLabelsSaysSo: Karmada's chart applied without
// Helm's labels (Argo CD: client-side apply leaves kubectl's annotation,
// server-side apply none) is not taken for a Helm release; karmada-patch
// says what it is and still writes the chart's values.
func TestHelmChartWithoutHelmLabelsSaysSo(t *testing.T) {
	data, err := os.ReadFile(helmManifest)
	if err != nil {
		t.Fatal(err)
	}
	d := &appsv1.Deployment{}
	if err := yaml.Unmarshal(data, d); err != nil {
		t.Fatal(err)
	}
	d.Annotations = map[string]string{"kubectl.kubernetes.io/last-applied-configuration": "{}"}
	clientSide, err := yaml.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	applied := filepath.Join(t.TempDir(), "applied.yaml")
	if err := os.WriteFile(applied, clientSide, 0o600); err != nil {
		t.Fatal(err)
	}
	for name, file := range map[string]string{"server-side apply": helmManifest, "client-side apply": applied} {
		dir, stderr, err := runPatch(t, "-f", file, "-image", testImage)
		if err != nil {
			t.Fatalf("%s: %v\n%s", name, err, stderr)
		}
		for _, want := range []string{"laid out as Karmada's Helm chart", "Argo CD", "controllerManager.controllers"} {
			if !strings.Contains(stderr, want) {
				t.Errorf("%s: stderr does not say %q:\n%s", name, want, stderr)
			}
		}
		if got := string(readFile(t, dir, "helm-values.yaml")); !strings.Contains(got, `controllers: "*,-cronFederatedHorizontalPodAutoscaler"`) {
			t.Errorf("%s: helm-values.yaml:\n%s", name, got)
		}
	}
}

// TestUnrecognisedInstallerSaysSo: a Deployment no installer marked, in
// another layout than the chart's, gets the patches and a note why no
// installer setting is written.
func TestUnrecognisedInstallerSaysSo(t *testing.T) {
	data, err := os.ReadFile(karmadactlDeployment)
	if err != nil {
		t.Fatal(err)
	}
	d := &appsv1.Deployment{}
	if err := yaml.Unmarshal(data, d); err != nil {
		t.Fatal(err)
	}
	d.Labels = nil
	unmarked, err := yaml.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "unmarked.yaml")
	if err := os.WriteFile(file, unmarked, 0o600); err != nil {
		t.Fatal(err)
	}
	dir, stderr, err := runPatch(t, "-f", file, "-image", testImage)
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	if !strings.Contains(stderr, "installer not recognised") {
		t.Errorf("stderr does not say the installer is not recognised:\n%s", stderr)
	}
	for _, name := range []string{"cron-off.json", "sidecar.yaml", "companion-values.yaml"} {
		readFile(t, dir, name)
	}
}
