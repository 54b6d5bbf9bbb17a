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
	"debug/elf"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
)

// report is what `imagetool inspect` prints, as JSON: enough for a test to
// check that an archive is the image the chart expects and can start.
type report struct {
	Name        string            `json:"name"`
	RefName     string            `json:"refName"`
	MediaType   string            `json:"mediaType"`
	Annotations map[string]string `json:"annotations,omitempty"`
	Images      []imageReport     `json:"images"`
}

type imageReport struct {
	Platform    string            `json:"platform"`
	MediaType   string            `json:"mediaType"`
	User        string            `json:"user"`
	Entrypoint  []string          `json:"entrypoint"`
	Labels      map[string]string `json:"labels,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
	Files       []string          `json:"files"`
	Binary      binaryReport      `json:"binary"`
}

// binaryReport describes the entrypoint: a static binary (no ELF
// interpreter) for the image's architecture runs on an empty base.
type binaryReport struct {
	Path    string `json:"path"`
	Machine string `json:"machine"`
	Static  bool   `json:"static"`
}

// platformImage is one image of the archive's index.
type platformImage struct {
	platform string
	image    v1.Image
}

func inspectCommand(args []string) error {
	fs := flag.NewFlagSet("inspect", flag.ContinueOnError)
	archive := fs.String("archive", "", "the OCI image layout tarball to inspect")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *archive == "" {
		return errors.New("inspect needs --archive")
	}
	r, err := inspectArchive(*archive)
	if err != nil {
		return err
	}
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

func inspectArchive(archive string) (*report, error) {
	dir, err := extractArchive(archive)
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	desc, index, err := openIndex(dir)
	if err != nil {
		return nil, err
	}
	r := &report{
		Name:        desc.Annotations[imageNameAnnotation],
		RefName:     desc.Annotations[refNameAnnotation],
		MediaType:   string(desc.MediaType),
		Annotations: indexAnnotations(index),
	}
	images, err := platformImages(index)
	if err != nil {
		return nil, err
	}
	for _, pi := range images {
		ir, err := inspectImage(pi)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", pi.platform, err)
		}
		r.Images = append(r.Images, *ir)
	}
	return r, nil
}

// openIndex reads the layout's index.json, which must name exactly one
// multi-platform index (what `imagetool build` writes).
func openIndex(dir string) (v1.Descriptor, v1.ImageIndex, error) {
	root, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		return v1.Descriptor{}, nil, fmt.Errorf("reading the image layout: %w", err)
	}
	manifest, err := root.IndexManifest()
	if err != nil {
		return v1.Descriptor{}, nil, fmt.Errorf("reading index.json: %w", err)
	}
	if len(manifest.Manifests) != 1 {
		return v1.Descriptor{}, nil, fmt.Errorf("index.json lists %d entries, want 1", len(manifest.Manifests))
	}
	desc := manifest.Manifests[0]
	index, err := root.ImageIndex(desc.Digest)
	if err != nil {
		return v1.Descriptor{}, nil, fmt.Errorf("reading the image index %s: %w", desc.Digest, err)
	}
	return desc, index, nil
}

func indexAnnotations(index v1.ImageIndex) map[string]string {
	m, err := index.IndexManifest()
	if err != nil {
		return nil
	}
	return m.Annotations
}

func platformImages(index v1.ImageIndex) ([]platformImage, error) {
	m, err := index.IndexManifest()
	if err != nil {
		return nil, fmt.Errorf("reading the image index: %w", err)
	}
	var out []platformImage
	for _, desc := range m.Manifests {
		if desc.Platform == nil {
			return nil, fmt.Errorf("manifest %s has no platform", desc.Digest)
		}
		img, err := index.Image(desc.Digest)
		if err != nil {
			return nil, fmt.Errorf("reading image %s: %w", desc.Digest, err)
		}
		out = append(out, platformImage{platform: desc.Platform.String(), image: img})
	}
	return out, nil
}

func inspectImage(pi platformImage) (*imageReport, error) {
	cfg, err := pi.image.ConfigFile()
	if err != nil {
		return nil, fmt.Errorf("reading the config: %w", err)
	}
	manifest, err := pi.image.Manifest()
	if err != nil {
		return nil, fmt.Errorf("reading the manifest: %w", err)
	}
	files, contents, err := flatten(pi.image, cfg.Config.Entrypoint)
	if err != nil {
		return nil, err
	}
	ir := &imageReport{
		Platform:    pi.platform,
		MediaType:   string(manifest.MediaType),
		User:        cfg.Config.User,
		Entrypoint:  cfg.Config.Entrypoint,
		Labels:      cfg.Config.Labels,
		Annotations: manifest.Annotations,
		Files:       files,
	}
	if len(cfg.Config.Entrypoint) > 0 {
		ir.Binary, err = describeBinary(cfg.Config.Entrypoint[0], contents)
	}
	return ir, err
}

// flatten lists the files of the image's merged file system and returns the
// contents of the entrypoint, if it is one of them.
func flatten(img v1.Image, entrypoint []string) ([]string, []byte, error) {
	rc := mutate.Extract(img)
	defer rc.Close()
	tr := tar.NewReader(rc)
	var files []string
	var contents []byte
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return files, contents, nil
		}
		if err != nil {
			return nil, nil, fmt.Errorf("reading the file system: %w", err)
		}
		name := "/" + strings.TrimSuffix(strings.TrimPrefix(hdr.Name, "/"), "/")
		files = append(files, name)
		if len(entrypoint) > 0 && path.Clean(entrypoint[0]) == name && hdr.Typeflag == tar.TypeReg {
			if contents, err = io.ReadAll(tr); err != nil {
				return nil, nil, fmt.Errorf("reading %s: %w", name, err)
			}
		}
	}
}

func describeBinary(p string, contents []byte) (binaryReport, error) {
	if contents == nil {
		return binaryReport{}, fmt.Errorf("the entrypoint %s is not a file of the image", p)
	}
	f, err := elf.NewFile(bytes.NewReader(contents))
	if err != nil {
		return binaryReport{}, fmt.Errorf("the entrypoint %s is not an ELF binary: %w", p, err)
	}
	defer f.Close()
	static := true
	for _, prog := range f.Progs {
		// A dynamic executable names its loader (ld-linux) here; there is
		// none in an image built on an empty base.
		if prog.Type == elf.PT_INTERP {
			static = false
		}
	}
	return binaryReport{Path: p, Machine: f.Machine.String(), Static: static}, nil
}
