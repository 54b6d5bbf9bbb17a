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
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// repositoryAnnotation names, in a layout `imagetool save` wrote, the
// repository (relative to the registry prefix) a manifest was saved from; its
// tag is in org.opencontainers.image.ref.name.
const repositoryAnnotation = "io.scaleplane.repository"

// layoutEntry is one manifest (image) or index of a layout or a registry.
type layoutEntry struct {
	digest     v1.Hash
	repository string
	tag        string
	index      v1.ImageIndex
	image      v1.Image
}

// layoutEntries lists what a layout's index.json names, in its order.
func layoutEntries(dir string) ([]layoutEntry, error) {
	root, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		return nil, fmt.Errorf("reading the image layout: %w", err)
	}
	manifest, err := root.IndexManifest()
	if err != nil {
		return nil, fmt.Errorf("reading index.json: %w", err)
	}
	var out []layoutEntry
	for _, desc := range manifest.Manifests {
		e := layoutEntry{digest: desc.Digest, repository: desc.Annotations[repositoryAnnotation], tag: desc.Annotations[refNameAnnotation]}
		if desc.MediaType.IsIndex() {
			e.index, err = root.ImageIndex(desc.Digest)
		} else {
			e.image, err = root.Image(desc.Digest)
		}
		if err != nil {
			return nil, fmt.Errorf("reading %s: %w", desc.Digest, err)
		}
		out = append(out, e)
	}
	return out, nil
}

// writeLayout writes entries into a new layout at dir, each annotated with
// its repository and tag.
func writeLayout(dir string, entries []layoutEntry) error {
	lp, err := layout.Write(dir, empty.Index)
	if err != nil {
		return fmt.Errorf("writing the image layout: %w", err)
	}
	for _, e := range entries {
		annotations := layout.WithAnnotations(map[string]string{repositoryAnnotation: e.repository, refNameAnnotation: e.tag})
		if e.index != nil {
			err = lp.AppendIndex(e.index, annotations)
		} else {
			err = lp.AppendImage(e.image, annotations)
		}
		if err != nil {
			return fmt.Errorf("writing %s:%s: %w", e.repository, e.tag, err)
		}
	}
	return nil
}

// withAuth uses the credentials of `docker login` / `crane auth login`
// (~/.docker/config.json), or none: a release is pushed to a registry the
// user has logged in to, a test's loopback registry needs none.
var withAuth = remote.WithAuthFromKeychain(authn.DefaultKeychain)

// readRemote fetches a manifest or an index from a registry.
func readRemote(ref name.Reference) (layoutEntry, error) {
	desc, err := remote.Get(ref, withAuth)
	if err != nil {
		return layoutEntry{}, fmt.Errorf("fetching %s: %w", ref, err)
	}
	e := layoutEntry{digest: desc.Digest}
	if desc.MediaType.IsIndex() {
		e.index, err = desc.ImageIndex()
	} else {
		e.image, err = desc.Image()
	}
	if err != nil {
		return layoutEntry{}, fmt.Errorf("reading %s: %w", ref, err)
	}
	return e, nil
}

// writeRemote pushes a manifest or an index, with every blob it names, and
// checks that the registry serves it by the same digest.
func writeRemote(ref name.Reference, e layoutEntry) error {
	var err error
	if e.index != nil {
		err = remote.WriteIndex(ref, e.index, withAuth)
	} else {
		err = remote.Write(ref, e.image, withAuth)
	}
	if err != nil {
		return fmt.Errorf("pushing %s to %s: %w", e.digest, ref, err)
	}
	got, err := remote.Head(ref, withAuth)
	if err != nil {
		return fmt.Errorf("checking %s: %w", ref, err)
	}
	if got.Digest != e.digest {
		return fmt.Errorf("%s is served as %s after pushing %s", ref, got.Digest, e.digest)
	}
	return nil
}

// writeLayoutArchive writes an OCI image layout (fill writes it into the
// directory it is given) in a temporary directory next to output, tars it
// with mtime, and renames the tarball into place last, so that an
// interrupted run never leaves a half-written archive.
func writeLayoutArchive(output string, mtime time.Time, fill func(dir string) error) error {
	tmp, err := os.MkdirTemp(filepath.Dir(output), ".imagetool-")
	if err != nil {
		return fmt.Errorf("making a temporary directory: %w", err)
	}
	defer os.RemoveAll(tmp)
	dir := filepath.Join(tmp, "layout")
	if err := fill(dir); err != nil {
		return err
	}
	partial := filepath.Join(tmp, "layout.tar")
	if err := tarDirectory(dir, partial, mtime); err != nil {
		return err
	}
	if err := os.Rename(partial, output); err != nil {
		return fmt.Errorf("moving %s into place: %w", output, err)
	}
	return nil
}
