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
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// tarDirectory writes dir's files (an OCI image layout) to out as a tar with
// paths relative to dir, in lexical order, with fixed times and modes: the
// "oci-archive" form that `docker load`, `podman load` and skopeo read.
func tarDirectory(dir, out string, mtime time.Time) (err error) {
	f, err := os.Create(out)
	if err != nil {
		return fmt.Errorf("creating %s: %w", out, err)
	}
	defer func() {
		if cerr := f.Close(); err == nil && cerr != nil {
			err = fmt.Errorf("closing %s: %w", out, cerr)
		}
	}()
	tw := tar.NewWriter(f)
	// WalkDir visits in lexical order, which makes the archive reproducible.
	walkErr := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == dir {
			return err
		}
		return addToTar(tw, dir, p, d, mtime)
	})
	if walkErr != nil {
		return fmt.Errorf("archiving %s: %w", dir, walkErr)
	}
	if err := tw.Close(); err != nil {
		return fmt.Errorf("finishing %s: %w", out, err)
	}
	return nil
}

func addToTar(tw *tar.Writer, root, p string, d fs.DirEntry, mtime time.Time) error {
	rel, err := filepath.Rel(root, p)
	if err != nil {
		return err
	}
	name := filepath.ToSlash(rel)
	if d.IsDir() {
		return tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: name + "/", Mode: 0o755, ModTime: mtime, Format: tar.FormatPAX})
	}
	info, err := d.Info()
	if err != nil {
		return err
	}
	if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: 0o644, Size: info.Size(), ModTime: mtime, Format: tar.FormatPAX}); err != nil {
		return err
	}
	src, err := os.Open(p)
	if err != nil {
		return err
	}
	defer src.Close()
	_, err = io.Copy(tw, src)
	return err
}

// untar extracts a tar stream into dir. Only directories and regular files
// are expected (an image layout, or the flattened file system of one of our
// images); anything else, and any path that would leave dir, is an error
// rather than something to skip, because it means the archive is not one
// imagetool wrote.
func untar(r io.Reader, dir string) error {
	tr := tar.NewReader(r)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("reading the archive: %w", err)
		}
		if err := extractEntry(tr, hdr, dir); err != nil {
			return fmt.Errorf("extracting %s: %w", hdr.Name, err)
		}
	}
}

func extractEntry(tr *tar.Reader, hdr *tar.Header, dir string) error {
	name := filepath.Clean(filepath.FromSlash(strings.TrimPrefix(hdr.Name, "/")))
	if name == "." {
		return nil
	}
	if !filepath.IsLocal(name) {
		return errors.New("path leaves the extraction directory")
	}
	target := filepath.Join(dir, name)
	mode := fs.FileMode(hdr.Mode).Perm()
	switch hdr.Typeflag {
	case tar.TypeDir:
		if err := os.MkdirAll(target, 0o755); err != nil {
			return err
		}
		// MkdirAll leaves an existing directory's mode alone and the umask
		// trims new ones: set the archive's mode explicitly.
		return os.Chmod(target, mode|tarSticky(hdr))
	case tar.TypeReg:
		return writeFile(tr, target, mode)
	default:
		return fmt.Errorf("unexpected entry type %q", hdr.Typeflag)
	}
}

// tarSticky maps the tar sticky bit (01000), which fs.FileMode does not use,
// to Go's ModeSticky (for /tmp).
func tarSticky(hdr *tar.Header) fs.FileMode {
	if hdr.Mode&0o1000 != 0 {
		return fs.ModeSticky
	}
	return 0
}

func writeFile(r io.Reader, target string, mode fs.FileMode) error {
	if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
		return err
	}
	f, err := os.OpenFile(target, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, mode)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, r); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Chmod(target, mode)
}

// extractArchive untars an image tarball into a new temporary directory and
// returns it; the caller removes it.
func extractArchive(archive string) (string, error) {
	f, err := os.Open(archive)
	if err != nil {
		return "", fmt.Errorf("opening %s: %w", archive, err)
	}
	defer f.Close()
	dir, err := os.MkdirTemp("", "imagetool-layout-")
	if err != nil {
		return "", fmt.Errorf("making a temporary directory: %w", err)
	}
	if err := untar(f, dir); err != nil {
		os.RemoveAll(dir)
		return "", fmt.Errorf("%s: %w", archive, err)
	}
	return dir, nil
}
