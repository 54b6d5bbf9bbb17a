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

// The release helpers of hack/release.sh: the digest of an image archive
// (to pin it in the chart), and archives that are the same bytes whenever
// their inputs are (the kubectl plugin's, and the chart's, repacked from
// what `helm package` writes). GNU tar, zip and gzip could do the same with
// enough flags, but their output also depends on their versions and the
// host (owner names, the gzip header's name and time, the directory's
// order); these depend only on the inputs and the Go toolchain.

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"compress/gzip"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// digestCommand prints the digest of the one index or manifest an archive
// holds (an image of `imagetool build`, a chart of `imagetool chart`): what a
// registry will serve it by.
func digestCommand(args []string) error {
	fs := flag.NewFlagSet("digest", flag.ContinueOnError)
	archive := fs.String("archive", "", "the OCI image layout tarball")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *archive == "" {
		return errors.New("digest needs --archive")
	}
	dir, err := extractArchive(*archive)
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	entries, err := layoutEntries(dir)
	if err != nil {
		return err
	}
	if len(entries) != 1 {
		return fmt.Errorf("%s holds %d manifests, want 1", *archive, len(entries))
	}
	fmt.Println(entries[0].digest.String())
	return nil
}

// archiveFile is one file of an archive: its name, mode and contents.
type archiveFile struct {
	name string
	mode int64
	data []byte
}

// archiveCommand writes NAME=PATH files into a .tar.gz or .zip (by the
// output's extension), in name order, owned by 0:0, with one time and modes
// 0755 (a file its owner may execute) or 0644.
func archiveCommand(args []string) error {
	fs := flag.NewFlagSet("archive", flag.ContinueOnError)
	output := fs.String("output", "", "the archive to write: NAME.tar.gz or NAME.zip")
	files := keyValues{}
	fs.Var(files, "file", "NAME=PATH: the file at PATH, as NAME in the archive; repeatable")
	epoch := fs.Int64("source-date-epoch", sourceDateEpoch(), "the time of every entry ($SOURCE_DATE_EPOCH)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *output == "" || len(files) == 0 {
		return errors.New("archive needs --output and at least one --file")
	}
	var entries []archiveFile
	for _, name := range sortedKeys(files) {
		info, err := os.Stat(files[name])
		if err != nil {
			return err
		}
		data, err := readFile(files[name])
		if err != nil {
			return err
		}
		mode := int64(0o644)
		if info.Mode().Perm()&0o100 != 0 {
			mode = 0o755
		}
		entries = append(entries, archiveFile{name: name, mode: mode, data: data})
	}
	mtime := time.Unix(*epoch, 0).UTC()
	var buf bytes.Buffer
	var err error
	switch {
	case strings.HasSuffix(*output, ".tar.gz") || strings.HasSuffix(*output, ".tgz"):
		err = writeTarGz(&buf, entries, mtime)
	case strings.HasSuffix(*output, ".zip"):
		err = writeZip(&buf, entries, mtime)
	default:
		err = fmt.Errorf("%s: want a .tar.gz, .tgz or .zip name", *output)
	}
	if err != nil {
		return err
	}
	return writeAtomically(*output, buf.Bytes())
}

// repackCommand rewrites a .tgz (what `helm package` writes: it stamps
// every entry with the time it ran) with the entries in name order, one
// time, owner 0:0 and no names, gzipped without a name or time.
func repackCommand(args []string) error {
	fs := flag.NewFlagSet("repack", flag.ContinueOnError)
	input := fs.String("input", "", "the .tgz to read")
	output := fs.String("output", "", "the .tgz to write (may be the input)")
	epoch := fs.Int64("source-date-epoch", sourceDateEpoch(), "the time of every entry ($SOURCE_DATE_EPOCH)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *input == "" || *output == "" {
		return errors.New("repack needs --input and --output")
	}
	entries, err := readTarGz(*input)
	if err != nil {
		return fmt.Errorf("%s: %w", *input, err)
	}
	sort.Slice(entries, func(i, j int) bool { return entries[i].name < entries[j].name })
	var buf bytes.Buffer
	if err := writeTarGz(&buf, entries, time.Unix(*epoch, 0).UTC()); err != nil {
		return err
	}
	return writeAtomically(*output, buf.Bytes())
}

// readTarGz reads the regular files of a .tgz; a directory entry is left
// out (tar recreates directories from the files' paths), anything else is
// an error.
func readTarGz(path string) ([]archiveFile, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		return nil, err
	}
	tr := tar.NewReader(zr)
	var out []archiveFile
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		switch hdr.Typeflag {
		case tar.TypeDir:
			continue
		case tar.TypeReg:
		default:
			return nil, fmt.Errorf("%s: unexpected entry type %q", hdr.Name, hdr.Typeflag)
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			return nil, err
		}
		mode := int64(0o644)
		if hdr.Mode&0o100 != 0 {
			mode = 0o755
		}
		out = append(out, archiveFile{name: hdr.Name, mode: mode, data: data})
	}
}

func writeTarGz(w io.Writer, entries []archiveFile, mtime time.Time) error {
	zw, err := gzip.NewWriterLevel(w, gzip.BestCompression)
	if err != nil {
		return err
	}
	// No Name and a zero ModTime: the header then holds neither.
	tw := tar.NewWriter(zw)
	for _, e := range entries {
		hdr := &tar.Header{
			Typeflag: tar.TypeReg, Name: e.name, Mode: e.mode, Size: int64(len(e.data)),
			ModTime: mtime, Format: tar.FormatPAX,
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return fmt.Errorf("%s: %w", e.name, err)
		}
		if _, err := tw.Write(e.data); err != nil {
			return fmt.Errorf("%s: %w", e.name, err)
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	return zw.Close()
}

func writeZip(w io.Writer, entries []archiveFile, mtime time.Time) error {
	zw := zip.NewWriter(w)
	for _, e := range entries {
		hdr := &zip.FileHeader{Name: e.name, Method: zip.Deflate, Modified: mtime}
		hdr.SetMode(os.FileMode(e.mode))
		fw, err := zw.CreateHeader(hdr)
		if err != nil {
			return fmt.Errorf("%s: %w", e.name, err)
		}
		if _, err := fw.Write(e.data); err != nil {
			return fmt.Errorf("%s: %w", e.name, err)
		}
	}
	return zw.Close()
}

// writeAtomically writes data to a temporary file next to path and renames
// it into place, so an interrupted run leaves no half-written archive.
func writeAtomically(path string, data []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".imagetool-")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Chmod(0o644); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}
