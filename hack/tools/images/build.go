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
	"errors"
	"flag"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Annotations on the index.json entry: the OCI convention (the tag alone)
// and containerd's (the full name), which `docker load`, `ctr images import`
// and `podman load` use to name the loaded image.
const (
	refNameAnnotation    = "org.opencontainers.image.ref.name"
	imageNameAnnotation  = "io.containerd.image.name"
	defaultEntrypointDir = "/usr/local/bin"
)

type buildOptions struct {
	output     string
	repository string
	tag        string
	caCerts    string
	binaries   map[string]string // "os/arch" -> path of its static binary
	labels     map[string]string
	mtime      time.Time
}

func buildCommand(args []string) error {
	opts, err := parseBuildFlags(args)
	if err != nil {
		return err
	}
	index, err := buildIndex(opts)
	if err != nil {
		return err
	}
	if err := writeArchive(index, opts); err != nil {
		return err
	}
	fmt.Printf("%s: %s:%s (%s)\n", opts.output, opts.repository, opts.tag, strings.Join(sortedKeys(opts.binaries), ", "))
	return nil
}

func parseBuildFlags(args []string) (*buildOptions, error) {
	fs := flag.NewFlagSet("build", flag.ContinueOnError)
	opts := &buildOptions{binaries: map[string]string{}, labels: map[string]string{}}
	fs.StringVar(&opts.output, "output", "", "the OCI image layout tarball to write")
	fs.StringVar(&opts.repository, "repository", "", "the image's repository, e.g. ghcr.io/scaleplane/scaleplane-webhook")
	fs.StringVar(&opts.tag, "tag", "", "the image's tag")
	fs.StringVar(&opts.caCerts, "ca-certificates", "/etc/ssl/certs/ca-certificates.crt", "the CA bundle to put at /etc/ssl/certs/ca-certificates.crt")
	fs.Var(keyValues(opts.binaries), "binary", "os/arch=path of a static binary, once per platform")
	fs.Var(keyValues(opts.labels), "label", "key=value of an image label (also a manifest annotation), repeatable")
	epoch := fs.Int64("source-date-epoch", sourceDateEpoch(), "the time of every file and of the image config, in seconds since 1970 ($SOURCE_DATE_EPOCH)")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	opts.mtime = time.Unix(*epoch, 0).UTC()
	if opts.output == "" || opts.repository == "" || opts.tag == "" || len(opts.binaries) == 0 {
		return nil, errors.New("build needs --output, --repository, --tag and at least one --binary")
	}
	return opts, nil
}

// sourceDateEpoch follows the reproducible-builds convention; 0 otherwise,
// so rebuilding the same binaries gives byte-identical images.
func sourceDateEpoch() int64 {
	if v, err := strconv.ParseInt(os.Getenv("SOURCE_DATE_EPOCH"), 10, 64); err == nil {
		return v
	}
	return 0
}

// buildIndex makes one image per platform, on a shared base layer, and the
// multi-platform index that lists them.
func buildIndex(opts *buildOptions) (v1.ImageIndex, error) {
	caCerts, err := readFile(opts.caCerts)
	if err != nil {
		return nil, err
	}
	base, err := layerFrom(baseEntries(caCerts), opts.mtime)
	if err != nil {
		return nil, err
	}
	index := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	for _, platform := range sortedKeys(opts.binaries) {
		img, p, err := buildImage(opts, platform, base)
		if err != nil {
			return nil, fmt.Errorf("image for %s: %w", platform, err)
		}
		index = mutate.AppendManifests(index, mutate.IndexAddendum{
			Add:        img,
			Descriptor: v1.Descriptor{Platform: p},
		})
	}
	return mutate.Annotations(index, opts.labels).(v1.ImageIndex), nil
}

func buildImage(opts *buildOptions, platform string, base v1.Layer) (v1.Image, *v1.Platform, error) {
	p, err := v1.ParsePlatform(platform)
	if err != nil {
		return nil, nil, fmt.Errorf("parsing platform: %w", err)
	}
	binary, err := readFile(opts.binaries[platform])
	if err != nil {
		return nil, nil, err
	}
	entrypoint := path.Join(defaultEntrypointDir, filepath.Base(opts.binaries[platform]))
	bin, err := layerFrom(binaryEntries(entrypoint, binary), opts.mtime)
	if err != nil {
		return nil, nil, err
	}
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	if img, err = mutate.AppendLayers(img, base, bin); err != nil {
		return nil, nil, fmt.Errorf("adding layers: %w", err)
	}
	if img, err = mutate.ConfigFile(img, configFile(opts, p, entrypoint)); err != nil {
		return nil, nil, fmt.Errorf("setting the config: %w", err)
	}
	return mutate.Annotations(img, opts.labels).(v1.Image), p, nil
}

// configFile is the image config: the binary as entrypoint, run as the
// unprivileged user by number (so runAsNonRoot can verify it without
// resolving a name), with the labels.
func configFile(opts *buildOptions, p *v1.Platform, entrypoint string) *v1.ConfigFile {
	user := strconv.Itoa(nonrootUID)
	return &v1.ConfigFile{
		Architecture: p.Architecture,
		OS:           p.OS,
		Variant:      p.Variant,
		Created:      v1.Time{Time: opts.mtime},
		Config: v1.Config{
			Entrypoint: []string{entrypoint},
			User:       user + ":" + user,
			WorkingDir: "/",
			Env:        []string{"PATH=" + defaultEntrypointDir + ":/usr/bin:/bin"},
			Labels:     opts.labels,
		},
		RootFS: v1.RootFS{Type: "layers"},
	}
}

// writeArchive writes the index as an OCI image layout tarball, named by
// its repository and tag (see writeLayoutArchive).
func writeArchive(index v1.ImageIndex, opts *buildOptions) error {
	return writeLayoutArchive(opts.output, opts.mtime, func(dir string) error {
		lp, err := layout.Write(dir, empty.Index)
		if err != nil {
			return fmt.Errorf("writing the image layout: %w", err)
		}
		annotations := map[string]string{
			refNameAnnotation:   opts.tag,
			imageNameAnnotation: opts.repository + ":" + opts.tag,
		}
		if err := lp.AppendIndex(index, layout.WithAnnotations(annotations)); err != nil {
			return fmt.Errorf("writing the image index: %w", err)
		}
		return nil
	})
}

// keyValues is a repeatable key=value flag.
type keyValues map[string]string

func (kv keyValues) String() string { return fmt.Sprint(map[string]string(kv)) }

func (kv keyValues) Set(s string) error {
	k, v, ok := strings.Cut(s, "=")
	if !ok || k == "" {
		return fmt.Errorf("%q is not key=value", s)
	}
	kv[k] = v
	return nil
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
