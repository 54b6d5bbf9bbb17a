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

// Package images checks the OCI image tarballs `make images` writes to
// _output/images (`make test` builds this host's architecture): that each is
// the image the chart and the manifests run, is built to start on an empty
// base (a static binary for each platform, a non-root user, CA
// certificates, OCI labels), and does start: its binary runs from the
// unpacked image with --version (chrooted into it, as the image's user, when
// the test runs as root).
package images

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	"sigs.k8s.io/yaml"

	"github.com/scaleplane/scaleplane/test/integration/framework"
)

// report is the part of `imagetool inspect`'s output the test reads.
type report struct {
	Name    string `json:"name"`
	RefName string `json:"refName"`
	Images  []struct {
		Platform   string            `json:"platform"`
		User       string            `json:"user"`
		Entrypoint []string          `json:"entrypoint"`
		Labels     map[string]string `json:"labels"`
		Files      []string          `json:"files"`
		Binary     struct {
			Machine string `json:"machine"`
			Static  bool   `json:"static"`
		} `json:"binary"`
	} `json:"images"`
}

// The ELF machine of each architecture the images are built for.
var elfMachine = map[string]string{"amd64": "EM_X86_64", "arm64": "EM_AARCH64"}

func TestImages(t *testing.T) {
	for _, tc := range []struct{ name, manifest string }{
		{"scaleplane-controller-manager", "artifacts/deploy/controller-manager/deployment.yaml"},
		{"scaleplane-webhook", "artifacts/deploy/webhook/deployment.yaml"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			archive := archivePath(t, tc.name)
			want := shippedImage(t, tc.manifest)
			r := inspect(t, archive)
			checkName(t, r, want)
			checkPlatforms(t, r, tc.name, want)
			checkRuns(t, archive, tc.name, want)
		})
	}
}

func repoPath(t *testing.T, rel string) string {
	t.Helper()
	root, err := framework.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Join(root, rel)
}

func archivePath(t *testing.T, name string) string {
	t.Helper()
	p := repoPath(t, filepath.Join("_output", "images", name+".tar"))
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("%v: run `make images` (or hack/build-images.sh; `make test` builds this host's images)", err)
	}
	return p
}

// shippedImage is the image the manifests rendered from the chart run.
func shippedImage(t *testing.T, manifest string) string {
	t.Helper()
	data, err := os.ReadFile(repoPath(t, manifest))
	if err != nil {
		t.Fatal(err)
	}
	var docs []appsv1.Deployment
	for _, doc := range strings.Split(string(data), "\n---\n") {
		var d appsv1.Deployment
		if err := yaml.Unmarshal([]byte(doc), &d); err == nil && d.Kind == "Deployment" {
			docs = append(docs, d)
		}
	}
	if len(docs) != 1 {
		t.Fatalf("%s: %d Deployments, want 1", manifest, len(docs))
	}
	return docs[0].Spec.Template.Spec.Containers[0].Image
}

func imagetool(t *testing.T, args ...string) (string, error) {
	t.Helper()
	bin, err := framework.Binary("imagetool")
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(bin, args...).CombinedOutput()
	return string(out), err
}

func inspect(t *testing.T, archive string) *report {
	t.Helper()
	out, err := imagetool(t, "inspect", "--archive", archive)
	if err != nil {
		t.Fatalf("imagetool inspect: %v\n%s", err, out)
	}
	r := &report{}
	if err := json.Unmarshal([]byte(out), r); err != nil {
		t.Fatalf("decoding imagetool inspect: %v\n%s", err, out)
	}
	return r
}

// checkName: loading the archive gives the image the manifests pull.
func checkName(t *testing.T, r *report, want string) {
	t.Helper()
	if r.Name != want {
		t.Errorf("the archive names its image %q, the manifests run %q", r.Name, want)
	}
	if _, tag, _ := strings.Cut(want, ":"); r.RefName != tag {
		t.Errorf("ref name %q, want the tag %q", r.RefName, tag)
	}
}

// checkPlatforms: every image of the index has a static binary of its own
// architecture as entrypoint, runs as 65532, holds the CA bundle and a
// passwd entry, and carries the OCI labels; this host's is among them.
func checkPlatforms(t *testing.T, r *report, name, want string) {
	t.Helper()
	var platforms []string
	_, tag, _ := strings.Cut(want, ":")
	for _, img := range r.Images {
		platforms = append(platforms, img.Platform)
		arch := strings.TrimPrefix(img.Platform, "linux/")
		if !img.Binary.Static || img.Binary.Machine != elfMachine[arch] {
			t.Errorf("%s: binary %+v, want a static %s executable", img.Platform, img.Binary, elfMachine[arch])
		}
		if img.User != "65532:65532" {
			t.Errorf("%s: user %q, want 65532:65532", img.Platform, img.User)
		}
		if !slices.Equal(img.Entrypoint, []string{"/usr/local/bin/" + name}) {
			t.Errorf("%s: entrypoint %v", img.Platform, img.Entrypoint)
		}
		for _, f := range []string{"/etc/ssl/certs/ca-certificates.crt", "/etc/passwd", "/etc/group", "/tmp"} {
			if !slices.Contains(img.Files, f) {
				t.Errorf("%s: no %s in the image", img.Platform, f)
			}
		}
		for label, value := range map[string]string{
			"org.opencontainers.image.title":    name,
			"org.opencontainers.image.version":  tag,
			"org.opencontainers.image.source":   "https://github.com/scaleplane/scaleplane",
			"org.opencontainers.image.licenses": "Apache-2.0",
		} {
			if img.Labels[label] != value {
				t.Errorf("%s: label %s=%q, want %q", img.Platform, label, img.Labels[label], value)
			}
		}
		if img.Labels["org.opencontainers.image.revision"] == "" {
			t.Errorf("%s: no org.opencontainers.image.revision label", img.Platform)
		}
	}
	if host := "linux/" + runtime.GOARCH; !slices.Contains(platforms, host) {
		t.Fatalf("platforms %v, want %s among them", platforms, host)
	}
}

// checkRuns starts this host's image: --version must print the binary's
// name and the image's tag.
func checkRuns(t *testing.T, archive, name, want string) {
	t.Helper()
	_, tag, _ := strings.Cut(want, ":")
	out, err := imagetool(t, "run", "--archive", archive, "--", "--version")
	if err != nil {
		t.Fatalf("running %s --version from the image: %v\n%s", name, err, out)
	}
	if !strings.Contains(out, name+" "+tag+" (") || !strings.Contains(out, "linux/"+runtime.GOARCH) {
		t.Errorf("%s --version printed %q, want %q and linux/%s", name, out, name+" "+tag, runtime.GOARCH)
	}
	t.Logf("%s", strings.TrimSpace(out))
}
