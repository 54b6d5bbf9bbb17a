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
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/partial"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"sigs.k8s.io/yaml"
)

// The media types of a Helm chart stored in an OCI registry, as helm v3.22
// pushes and pulls it (pkg/registry/constants.go).
const (
	helmConfigMediaType = types.MediaType("application/vnd.cncf.helm.config.v1+json")
	helmChartMediaType  = types.MediaType("application/vnd.cncf.helm.chart.content.v1.tar+gzip")
)

// chartMetadata is the part of Chart.yaml scaleplane's chart uses, in the
// field order and with the JSON names of helm's chart.Metadata, which helm
// writes as the artifact's config. A field the chart gains that is not here
// fails `imagetool chart` (strict decoding) rather than being dropped.
type chartMetadata struct {
	Name        string            `json:"name,omitempty"`
	Home        string            `json:"home,omitempty"`
	Sources     []string          `json:"sources,omitempty"`
	Version     string            `json:"version,omitempty"`
	Description string            `json:"description,omitempty"`
	Keywords    []string          `json:"keywords,omitempty"`
	Icon        string            `json:"icon,omitempty"`
	APIVersion  string            `json:"apiVersion,omitempty"`
	AppVersion  string            `json:"appVersion,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
	KubeVersion string            `json:"kubeVersion,omitempty"`
	Type        string            `json:"type,omitempty"`
}

// chartCommand wraps a packaged chart (.tgz) as the OCI artifact `helm push`
// makes of it, but reproducibly: helm stamps the manifest's
// org.opencontainers.image.created with the time it runs, so two pushes of
// the same chart get two digests; here it is SOURCE_DATE_EPOCH's. `helm pull`
// and `helm install oci://...` read it as they read what helm pushed.
func chartCommand(args []string) error {
	fs := flag.NewFlagSet("chart", flag.ContinueOnError)
	chart := fs.String("chart", "", "the packaged chart, NAME-VERSION.tgz")
	output := fs.String("output", "", "the OCI image layout tarball to write")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *chart == "" || *output == "" {
		return errors.New("chart needs --chart and --output")
	}
	tgz, err := os.ReadFile(*chart)
	if err != nil {
		return fmt.Errorf("reading the chart: %w", err)
	}
	meta, err := readChartMetadata(*chart)
	if err != nil {
		return err
	}
	created := time.Unix(sourceDateEpoch(), 0).UTC()
	img, err := chartArtifact(tgz, meta, created)
	if err != nil {
		return err
	}
	entry := layoutEntry{image: img, repository: "charts/" + meta.Name, tag: meta.Version}
	return writeLayoutArchive(*output, created, func(dir string) error { return writeLayout(dir, []layoutEntry{entry}) })
}

// readChartMetadata reads NAME/Chart.yaml from a packaged chart.
func readChartMetadata(chart string) (chartMetadata, error) {
	files, err := readTarGz(chart)
	if err != nil {
		return chartMetadata{}, err
	}
	for _, f := range files {
		if dir, base, ok := strings.Cut(f.name, "/"); ok && base == "Chart.yaml" && !strings.Contains(dir, "/") {
			var meta chartMetadata
			if err := yaml.UnmarshalStrict(f.data, &meta); err != nil {
				return chartMetadata{}, fmt.Errorf("%s: %s: %w", chart, f.name, err)
			}
			if meta.Name == "" || meta.Version == "" {
				return chartMetadata{}, fmt.Errorf("%s: %s has no name or version", chart, f.name)
			}
			return meta, nil
		}
	}
	return chartMetadata{}, fmt.Errorf("%s has no CHART/Chart.yaml", chart)
}

// chartArtifact is the OCI manifest of a chart: its metadata as the config,
// the .tgz as the one layer, and the annotations helm writes (title,
// version, description, url, source, created).
func chartArtifact(tgz []byte, meta chartMetadata, created time.Time) (v1.Image, error) {
	config, err := json.Marshal(meta)
	if err != nil {
		return nil, err
	}
	annotations := map[string]string{
		"org.opencontainers.image.title":   meta.Name,
		"org.opencontainers.image.version": meta.Version,
		"org.opencontainers.image.created": created.Format(time.RFC3339),
	}
	for k, v := range map[string]string{"org.opencontainers.image.description": meta.Description, "org.opencontainers.image.url": meta.Home} {
		if v != "" {
			annotations[k] = v
		}
	}
	if len(meta.Sources) > 0 {
		annotations["org.opencontainers.image.source"] = meta.Sources[0]
	}
	layer := static.NewLayer(tgz, helmChartMediaType)
	manifest := v1.Manifest{
		SchemaVersion: 2,
		MediaType:     types.OCIManifestSchema1,
		Config:        blobDescriptor(helmConfigMediaType, config),
		Layers:        []v1.Descriptor{blobDescriptor(helmChartMediaType, tgz)},
		Annotations:   annotations,
	}
	raw, err := json.Marshal(manifest)
	if err != nil {
		return nil, err
	}
	return partial.CompressedToImage(&artifact{manifest: raw, config: config, layer: layer})
}

func blobDescriptor(mediaType types.MediaType, data []byte) v1.Descriptor {
	h, size, _ := v1.SHA256(bytes.NewReader(data))
	return v1.Descriptor{MediaType: mediaType, Size: size, Digest: h}
}

// artifact is an OCI manifest whose config is not an image's: go-containerregistry
// builds images whose config is a v1.ConfigFile, so the chart's is given raw.
type artifact struct {
	manifest []byte
	config   []byte
	layer    v1.Layer
}

func (a *artifact) MediaType() (types.MediaType, error) { return types.OCIManifestSchema1, nil }
func (a *artifact) RawManifest() ([]byte, error)        { return a.manifest, nil }
func (a *artifact) RawConfigFile() ([]byte, error)      { return a.config, nil }

func (a *artifact) LayerByDigest(h v1.Hash) (partial.CompressedLayer, error) {
	if d, err := a.layer.Digest(); err == nil && d == h {
		return a.layer, nil
	}
	return nil, fmt.Errorf("the chart artifact has no blob %s", h)
}

// extractCommand pulls an image from a registry and copies one file of its
// merged file system (the platform's image of an index) out: how a test runs
// the binary a registry serves without a container runtime.
func extractCommand(args []string) error {
	fs := flag.NewFlagSet("extract", flag.ContinueOnError)
	reference := fs.String("reference", "", "REGISTRY/REPOSITORY:TAG or @DIGEST")
	platform := fs.String("platform", "linux/amd64", "the image of the index to read")
	file := fs.String("file", "", "the path of the file in the image (default: its entrypoint)")
	output := fs.String("output", "", "where to write it (mode 0755)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *reference == "" || *output == "" {
		return errors.New("extract needs --reference and --output")
	}
	ref, err := name.ParseReference(*reference, name.StrictValidation)
	if err != nil {
		return fmt.Errorf("%s: %w", *reference, err)
	}
	e, err := readRemote(ref)
	if err != nil {
		return err
	}
	img := e.image
	if e.index != nil {
		images, err := platformImages(e.index)
		if err != nil {
			return err
		}
		for _, pi := range images {
			if pi.platform == *platform {
				img = pi.image
			}
		}
		if img == nil {
			return fmt.Errorf("%s has no image for %s", ref, *platform)
		}
	}
	path := *file
	if path == "" {
		cfg, err := img.ConfigFile()
		if err != nil {
			return fmt.Errorf("reading the image's config: %w", err)
		}
		if len(cfg.Config.Entrypoint) == 0 {
			return fmt.Errorf("%s has no entrypoint; name the file with --file", ref)
		}
		path = cfg.Config.Entrypoint[0]
	}
	return extractFile(img, strings.TrimPrefix(path, "/"), *output)
}

// extractFile copies the regular file at path of img's merged file system
// to output.
func extractFile(img v1.Image, path, output string) error {
	rc := mutate.Extract(img)
	defer rc.Close()
	tr := tar.NewReader(rc)
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			return fmt.Errorf("the image has no file /%s", path)
		}
		if err != nil {
			return fmt.Errorf("reading the image: %w", err)
		}
		if strings.TrimPrefix(hdr.Name, "./") == path && hdr.Typeflag == tar.TypeReg {
			return writeFile(tr, output, 0o755)
		}
	}
}
