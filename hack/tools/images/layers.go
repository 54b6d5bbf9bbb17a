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
	"fmt"
	"io"
	"os"
	"path"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// The unprivileged user the images run as. 65532 is the "nonroot" user of
// distroless images, so policies written for those apply unchanged.
const (
	nonrootUID  = 65532
	nonrootName = "nonroot"
)

// entry is one file or directory of a layer.
type entry struct {
	name string // relative to the root, no leading slash
	mode int64
	uid  int
	data []byte // nil for a directory
}

func dir(name string, mode int64, uid int) entry { return entry{name: name, mode: mode, uid: uid} }

func file(name string, mode int64, data []byte) entry {
	return entry{name: name, mode: mode, data: data}
}

// baseEntries is what every image has besides its binary: the users the
// runtime resolves "65532:65532" against (for tools that print names), the
// CA bundle Go's crypto/x509 reads on Linux (for TLS to API servers whose
// certificates a public CA signed), a home for the user and a /tmp.
func baseEntries(caCerts []byte) []entry {
	passwd := fmt.Sprintf("root:x:0:0:root:/root:/sbin/nologin\n%[1]s:x:%[2]d:%[2]d:%[1]s:/home/%[1]s:/sbin/nologin\n", nonrootName, nonrootUID)
	group := fmt.Sprintf("root:x:0:\n%s:x:%d:\n", nonrootName, nonrootUID)
	return []entry{
		dir("etc", 0o755, 0),
		file("etc/passwd", 0o644, []byte(passwd)),
		file("etc/group", 0o644, []byte(group)),
		dir("etc/ssl", 0o755, 0),
		dir("etc/ssl/certs", 0o755, 0),
		file("etc/ssl/certs/ca-certificates.crt", 0o644, caCerts),
		dir("home", 0o755, 0),
		dir("home/"+nonrootName, 0o700, nonrootUID),
		dir("tmp", 0o1777, 0),
	}
}

// binaryEntries puts the binary at entrypoint (an absolute path) with the
// directories leading to it.
func binaryEntries(entrypoint string, binary []byte) []entry {
	var dirs []entry
	for d := path.Dir(entrypoint); d != "/"; d = path.Dir(d) {
		dirs = append([]entry{dir(d[1:], 0o755, 0)}, dirs...)
	}
	return append(dirs, file(entrypoint[1:], 0o755, binary))
}

// layerFrom writes entries as an uncompressed tar with a fixed modification
// time and owner names left out, so the same inputs always give the same
// layer digest, and wraps it as a gzip-compressed OCI layer.
func layerFrom(entries []entry, mtime time.Time) (v1.Layer, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		if err := writeEntry(tw, e, mtime); err != nil {
			return nil, fmt.Errorf("adding %s to a layer: %w", e.name, err)
		}
	}
	if err := tw.Close(); err != nil {
		return nil, fmt.Errorf("closing a layer: %w", err)
	}
	data := buf.Bytes()
	opener := func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(data)), nil }
	layer, err := tarball.LayerFromOpener(opener, tarball.WithMediaType(types.OCILayer), tarball.WithCompressedCaching)
	if err != nil {
		return nil, fmt.Errorf("making a layer: %w", err)
	}
	return layer, nil
}

func writeEntry(tw *tar.Writer, e entry, mtime time.Time) error {
	hdr := &tar.Header{
		Name:    e.name,
		Mode:    e.mode,
		Uid:     e.uid,
		Gid:     e.uid,
		ModTime: mtime,
		Format:  tar.FormatPAX,
	}
	if e.data == nil {
		hdr.Typeflag = tar.TypeDir
		hdr.Name += "/"
		return tw.WriteHeader(hdr)
	}
	hdr.Typeflag = tar.TypeReg
	hdr.Size = int64(len(e.data))
	if err := tw.WriteHeader(hdr); err != nil {
		return err
	}
	_, err := tw.Write(e.data)
	return err
}

func readFile(p string) ([]byte, error) {
	data, err := os.ReadFile(p)
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", p, err)
	}
	return data, nil
}
