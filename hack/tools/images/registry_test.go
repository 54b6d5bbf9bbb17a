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
	"archive/tar"
	"encoding/json"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// writeChart packages a minimal chart the way helm does: NAME/Chart.yaml and
// a template, gzipped.
func writeChart(t *testing.T, dir, chartYAML string) string {
	t.Helper()
	path := filepath.Join(dir, "demo-1.2.3.tgz")
	writeTgz(t, path, []tarEntry{
		{hdr: tar.Header{Name: "demo/Chart.yaml", Mode: 0o644, Typeflag: tar.TypeReg}, data: chartYAML},
		{hdr: tar.Header{Name: "demo/templates/cm.yaml", Mode: 0o644, Typeflag: tar.TypeReg}, data: "kind: ConfigMap\n"},
	}, "", time.Unix(0, 0))
	return path
}

const demoChart = "apiVersion: v2\nname: demo\ndescription: a demo\ntype: application\nversion: 1.2.3\nappVersion: \"v1.2.3\"\nkeywords: [a, b]\n"

// TestChartArtifact: the artifact has helm's media types and annotations,
// the .tgz as its layer and the metadata as its config, and the same chart
// and time give the same digest (helm push would not).
func TestChartArtifact(t *testing.T) {
	dir := t.TempDir()
	chart := writeChart(t, dir, demoChart)
	t.Setenv("SOURCE_DATE_EPOCH", "1700000000")
	out1, out2 := filepath.Join(dir, "a.tar"), filepath.Join(dir, "b.tar")
	for _, out := range []string{out1, out2} {
		if err := chartCommand([]string{"--chart", chart, "--output", out}); err != nil {
			t.Fatal(err)
		}
	}
	if sha(t, out1) != sha(t, out2) {
		t.Error("two runs of imagetool chart on the same chart wrote different archives")
	}
	layoutDir, err := extractArchive(out1)
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(layoutDir)
	entries, err := layoutEntries(layoutDir)
	if err != nil || len(entries) != 1 {
		t.Fatalf("layout entries: %v, %v", entries, err)
	}
	e := entries[0]
	if e.repository != "charts/demo" || e.tag != "1.2.3" {
		t.Errorf("saved as %s:%s, want charts/demo:1.2.3", e.repository, e.tag)
	}
	m, err := e.image.Manifest()
	if err != nil {
		t.Fatal(err)
	}
	if m.Config.MediaType != helmConfigMediaType || len(m.Layers) != 1 || m.Layers[0].MediaType != helmChartMediaType {
		t.Errorf("media types: config %s, layers %v; want helm's", m.Config.MediaType, m.Layers)
	}
	if m.Annotations["org.opencontainers.image.created"] != "2023-11-14T22:13:20Z" || m.Annotations["org.opencontainers.image.version"] != "1.2.3" ||
		m.Annotations["org.opencontainers.image.title"] != "demo" || m.Annotations["org.opencontainers.image.description"] != "a demo" {
		t.Errorf("annotations %v", m.Annotations)
	}
	tgz, _ := os.ReadFile(chart)
	if m.Layers[0].Size != int64(len(tgz)) {
		t.Errorf("the layer is %d bytes, the chart %d", m.Layers[0].Size, len(tgz))
	}
	config, err := e.image.RawConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	// helm's chart.Metadata field order and names.
	if want := `{"name":"demo","version":"1.2.3","description":"a demo","keywords":["a","b"],"apiVersion":"v2","appVersion":"v1.2.3","type":"application"}`; string(config) != want {
		t.Errorf("config = %s\nwant     %s", config, want)
	}
}

func TestChartRefusesUnknownFields(t *testing.T) {
	dir := t.TempDir()
	chart := writeChart(t, dir, demoChart+"maintainers:\n- name: x\n")
	err := chartCommand([]string{"--chart", chart, "--output", filepath.Join(dir, "out.tar")})
	if err == nil || !strings.Contains(err.Error(), "maintainers") {
		t.Errorf("chart with a field the artifact would drop: %v, want a refusal naming it", err)
	}
}

// TestPushSaveRoundTrip: an archive pushed by reference keeps its digest;
// manifests saved from a registry and pushed under another prefix land at
// the same repository and tag with the same digest.
func TestPushSaveRoundTrip(t *testing.T) {
	srv := httptest.NewServer(registry.New())
	defer srv.Close()
	host := strings.TrimPrefix(srv.URL, "http://")
	dir := t.TempDir()
	chart := writeChart(t, dir, demoChart)
	archive := filepath.Join(dir, "chart.tar")
	if err := chartCommand([]string{"--chart", chart, "--output", archive}); err != nil {
		t.Fatal(err)
	}
	want, err := captureStdout(t, func() error { return digestCommand([]string{"--archive", archive}) })
	if err != nil {
		t.Fatal(err)
	}
	want = strings.TrimSpace(want)
	if _, err := captureStdout(t, func() error {
		return pushCommand([]string{"--archive", archive, "--reference", host + "/a/charts/demo:1.2.3"})
	}); err != nil {
		t.Fatal(err)
	}
	saved := filepath.Join(dir, "saved.tar")
	if err := saveCommand([]string{"--output", saved, "--prefix", host + "/a", "charts/demo:1.2.3"}); err != nil {
		t.Fatal(err)
	}
	if _, err := captureStdout(t, func() error { return pushCommand([]string{"--archive", saved, "--prefix", host + "/b"}) }); err != nil {
		t.Fatal(err)
	}
	got, err := captureStdout(t, func() error { return resolveCommand([]string{"--reference", host + "/b/charts/demo:1.2.3"}) })
	if err != nil {
		t.Fatal(err)
	}
	if strings.TrimSpace(got) != want {
		t.Errorf("pushed, saved and pushed again: %s, want %s", got, want)
	}
	tags, err := remote.List(mustRepo(t, host+"/b/charts/demo"))
	if err != nil || len(tags) != 1 || tags[0] != "1.2.3" {
		t.Errorf("tags under the new prefix: %v, %v", tags, err)
	}
	if err := pushCommand([]string{"--archive", saved}); err == nil {
		t.Error("push without --reference or --prefix did not refuse")
	}
}

func TestRegistryRefusesNonLoopback(t *testing.T) {
	err := registryCommand([]string{"--listen", "0.0.0.0:0"})
	if err == nil || !strings.Contains(err.Error(), "loopback") {
		t.Errorf("registry on 0.0.0.0: %v, want a refusal", err)
	}
}

// TestProvenance: subjects from flags and from a sha256sum file, modules
// with go.sum's h1 as in-toto's dirHash in hex, and the predicate alone.
func TestProvenance(t *testing.T) {
	dir := t.TempDir()
	sums := filepath.Join(dir, "sums")
	mods := filepath.Join(dir, "mods")
	writeTestFile(t, sums, strings.Repeat("a", 64)+"  file.tgz\n", 0o644, time.Unix(0, 0))
	// h1:47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU= is the dirhash of nothing: sha256 of "".
	writeTestFile(t, mods, "example.com/m v1.0.0 h1:47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=\nexample.com/main\n", 0o644, time.Unix(0, 0))
	out, pred := filepath.Join(dir, "st.json"), filepath.Join(dir, "pred.json")
	err := provenanceCommand([]string{"--output", out, "--predicate-output", pred, "--build-type", "https://bt", "--builder-id", "https://b",
		"--subject", "reg/x=sha256:" + strings.Repeat("b", 64), "--subjects", sums, "--go-modules", mods,
		"--material", "git+https://repo@abc=gitCommit:abc", "--parameter", "version=v1", "--internal", "go=go1.26"})
	if err != nil {
		t.Fatal(err)
	}
	var st statement
	data, _ := os.ReadFile(out)
	if err := json.Unmarshal(data, &st); err != nil {
		t.Fatal(err)
	}
	if st.Type != statementType || st.PredicateType != provenanceType || len(st.Subject) != 2 ||
		st.Subject[0].Name != "reg/x" || st.Subject[1].Name != "file.tgz" || st.Subject[1].Digest["sha256"] != strings.Repeat("a", 64) {
		t.Errorf("statement %+v", st)
	}
	deps := st.Predicate.BuildDefinition.ResolvedDependencies
	if len(deps) != 2 || deps[0].Digest["gitCommit"] != "abc" || deps[1].URI != "pkg:golang/example.com/m@v1.0.0" ||
		deps[1].Digest["dirHash"] != "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855" {
		t.Errorf("resolved dependencies %+v", deps)
	}
	var p provenance
	data, _ = os.ReadFile(pred)
	if err := json.Unmarshal(data, &p); err != nil || p.RunDetails.Builder.ID != "https://b" || p.BuildDefinition.ExternalParameters["version"] != "v1" {
		t.Errorf("predicate %+v, %v", p, err)
	}
	if err := provenanceCommand([]string{"--output", out, "--build-type", "x", "--builder-id", "y"}); err == nil {
		t.Error("a statement without subjects was written")
	}
}

func mustRepo(t *testing.T, s string) name.Repository {
	t.Helper()
	r, err := name.NewRepository(s)
	if err != nil {
		t.Fatal(err)
	}
	return r
}
