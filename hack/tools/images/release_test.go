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

// Tests of the release helpers (release.go): the same inputs give the same
// bytes whatever the files' times, owners and order on disk, entries are
// sorted, with one time, owner 0:0 and modes 0755/0644.

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

const testEpoch = 1764374400 // 2025-11-29T00:00:00Z

// entryInfo is what the tests check of one archive entry.
type entryInfo struct {
	name  string
	mode  int64
	mtime time.Time
	data  string
}

func sha(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

func writeTestFile(t *testing.T, path, data string, mode os.FileMode, mtime time.Time) {
	t.Helper()
	if err := os.WriteFile(path, []byte(data), mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, mode); err != nil { // past the umask
		t.Fatal(err)
	}
	if err := os.Chtimes(path, mtime, mtime); err != nil {
		t.Fatal(err)
	}
}

// readTarGzEntries reads a .tar.gz and checks what the archive must never
// hold: a gzip name or time, an owner other than 0:0, owner names.
func readTarGzEntries(t *testing.T, path string) []entryInfo {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	if zr.Name != "" || !zr.ModTime.IsZero() {
		t.Errorf("%s: gzip header has name %q, time %v; want neither", path, zr.Name, zr.ModTime)
	}
	tr := tar.NewReader(zr)
	var out []entryInfo
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		if hdr.Uid != 0 || hdr.Gid != 0 || hdr.Uname != "" || hdr.Gname != "" {
			t.Errorf("%s: owner %d:%d (%q:%q), want 0:0 without names", hdr.Name, hdr.Uid, hdr.Gid, hdr.Uname, hdr.Gname)
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, entryInfo{name: hdr.Name, mode: hdr.Mode, mtime: hdr.ModTime.UTC(), data: string(data)})
	}
}

func readZipEntries(t *testing.T, path string) []entryInfo {
	t.Helper()
	zr, err := zip.OpenReader(path)
	if err != nil {
		t.Fatal(err)
	}
	defer zr.Close()
	var out []entryInfo
	for _, f := range zr.File {
		rc, err := f.Open()
		if err != nil {
			t.Fatal(err)
		}
		data, err := io.ReadAll(rc)
		rc.Close()
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, entryInfo{name: f.Name, mode: int64(f.Mode().Perm()), mtime: f.Modified.UTC(), data: string(data)})
	}
	return out
}

func checkEntries(t *testing.T, got, want []entryInfo) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("entries %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i].name != want[i].name || got[i].mode != want[i].mode || !got[i].mtime.Equal(want[i].mtime) || got[i].data != want[i].data {
			t.Errorf("entry %d: %+v, want %+v", i, got[i], want[i])
		}
	}
}

func TestArchive(t *testing.T) {
	mtime := time.Unix(testEpoch, 0).UTC()
	want := []entryInfo{
		{name: "LICENSE", mode: 0o644, mtime: mtime, data: "license"},
		{name: "kubectl-scaleplane", mode: 0o755, mtime: mtime, data: "binary"},
	}
	for _, tc := range []struct {
		name string
		ext  string
		read func(*testing.T, string) []entryInfo
	}{
		{name: "tar.gz", ext: ".tar.gz", read: readTarGzEntries},
		{name: "tgz", ext: ".tgz", read: readTarGzEntries},
		{name: "zip", ext: ".zip", read: readZipEntries},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			var shas []string
			// Twice, the files on disk differing only in their times and
			// in the group and others' bits of their modes.
			for i, fileMode := range []os.FileMode{0o600, 0o777} {
				bin, lic := filepath.Join(dir, "bin"), filepath.Join(dir, "lic")
				onDisk := time.Unix(int64(1000000000+i*12345), 0)
				writeTestFile(t, bin, "binary", fileMode|0o100, onDisk)
				writeTestFile(t, lic, "license", fileMode&^0o111, onDisk)
				out := filepath.Join(dir, "out"+tc.ext)
				// The files given in reverse name order: the archive sorts them.
				err := run([]string{"archive", "--output", out, "--source-date-epoch", "1764374400",
					"--file", "kubectl-scaleplane=" + bin, "--file", "LICENSE=" + lic})
				if err != nil {
					t.Fatal(err)
				}
				checkEntries(t, tc.read(t, out), want)
				shas = append(shas, sha(t, out))
			}
			if shas[0] != shas[1] {
				t.Errorf("two archives of the same files differ: %s, %s", shas[0], shas[1])
			}
		})
	}
}

func TestArchiveErrors(t *testing.T) {
	dir := t.TempDir()
	f := filepath.Join(dir, "f")
	writeTestFile(t, f, "x", 0o644, time.Unix(0, 0))
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{name: "no output", args: []string{"--file", "f=" + f}, want: "needs --output"},
		{name: "no file", args: []string{"--output", filepath.Join(dir, "a.zip")}, want: "at least one --file"},
		{name: "bad extension", args: []string{"--output", filepath.Join(dir, "a.rar"), "--file", "f=" + f}, want: "want a .tar.gz"},
		{name: "missing file", args: []string{"--output", filepath.Join(dir, "a.zip"), "--file", "f=" + f + ".missing"}, want: "no such file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := run(append([]string{"archive"}, tc.args...))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
}

// tarEntry is one entry of a .tgz the repack tests write, as helm would.
type tarEntry struct {
	hdr  tar.Header
	data string
}

func writeTgz(t *testing.T, path string, entries []tarEntry, gzipName string, gzipTime time.Time) {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	zw.Name, zw.ModTime = gzipName, gzipTime
	tw := tar.NewWriter(zw)
	for _, e := range entries {
		hdr := e.hdr
		hdr.Size = int64(len(e.data))
		if err := tw.WriteHeader(&hdr); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write([]byte(e.data)); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestRepack(t *testing.T) {
	mtime := time.Unix(testEpoch, 0).UTC()
	want := []entryInfo{
		{name: "scaleplane/Chart.yaml", mode: 0o644, mtime: mtime, data: "name: scaleplane"},
		{name: "scaleplane/templates/a.yaml", mode: 0o644, mtime: mtime, data: "a"},
		{name: "scaleplane/values.yaml", mode: 0o644, mtime: mtime, data: "x: 1"},
		{name: "scaleplane/x.sh", mode: 0o755, mtime: mtime, data: "#!/bin/sh"},
	}
	// Two packagings of the same chart: the entries in different orders,
	// at different times, with different owners and a directory entry.
	inputs := [][]tarEntry{
		{
			{hdr: tar.Header{Typeflag: tar.TypeReg, Name: "scaleplane/values.yaml", Mode: 0o600, ModTime: time.Unix(1, 0), Uid: 1000, Uname: "me"}, data: "x: 1"},
			{hdr: tar.Header{Typeflag: tar.TypeDir, Name: "scaleplane/templates/", Mode: 0o755, ModTime: time.Unix(1, 0)}},
			{hdr: tar.Header{Typeflag: tar.TypeReg, Name: "scaleplane/templates/a.yaml", Mode: 0o644, ModTime: time.Unix(1, 0)}, data: "a"},
			{hdr: tar.Header{Typeflag: tar.TypeReg, Name: "scaleplane/x.sh", Mode: 0o700, ModTime: time.Unix(1, 0)}, data: "#!/bin/sh"},
			{hdr: tar.Header{Typeflag: tar.TypeReg, Name: "scaleplane/Chart.yaml", Mode: 0o644, ModTime: time.Unix(1, 0)}, data: "name: scaleplane"},
		},
		{
			{hdr: tar.Header{Typeflag: tar.TypeReg, Name: "scaleplane/Chart.yaml", Mode: 0o664, ModTime: time.Unix(2000000000, 0), Gid: 50, Gname: "staff"}, data: "name: scaleplane"},
			{hdr: tar.Header{Typeflag: tar.TypeReg, Name: "scaleplane/x.sh", Mode: 0o775, ModTime: time.Unix(2000000000, 0)}, data: "#!/bin/sh"},
			{hdr: tar.Header{Typeflag: tar.TypeReg, Name: "scaleplane/values.yaml", Mode: 0o644, ModTime: time.Unix(2000000000, 0)}, data: "x: 1"},
			{hdr: tar.Header{Typeflag: tar.TypeReg, Name: "scaleplane/templates/a.yaml", Mode: 0o644, ModTime: time.Unix(2000000000, 0)}, data: "a"},
		},
	}
	dir := t.TempDir()
	var shas []string
	for i, entries := range inputs {
		in := filepath.Join(dir, "in.tgz")
		writeTgz(t, in, entries, "chart.tar", time.Unix(int64(1000+i), 0))
		out := filepath.Join(dir, "out.tgz")
		if err := run([]string{"repack", "--input", in, "--output", out, "--source-date-epoch", "1764374400"}); err != nil {
			t.Fatal(err)
		}
		checkEntries(t, readTarGzEntries(t, out), want)
		shas = append(shas, sha(t, out))
	}
	if shas[0] != shas[1] {
		t.Errorf("two repacks of the same chart differ: %s, %s", shas[0], shas[1])
	}

	// In place, as the usage says it may be.
	in := filepath.Join(dir, "in.tgz")
	if err := run([]string{"repack", "--input", in, "--output", in, "--source-date-epoch", "1764374400"}); err != nil {
		t.Fatal(err)
	}
	if got := sha(t, in); got != shas[0] {
		t.Errorf("repacked in place: %s, want %s", got, shas[0])
	}
}

func TestRepackRefuses(t *testing.T) {
	for _, tc := range []struct {
		name    string
		entries []tarEntry
		want    string
	}{
		{name: "symlink", entries: []tarEntry{{hdr: tar.Header{Typeflag: tar.TypeSymlink, Name: "c/l", Linkname: "x"}}}, want: "unexpected entry type"},
		{name: "hard link", entries: []tarEntry{{hdr: tar.Header{Typeflag: tar.TypeLink, Name: "c/l", Linkname: "x"}}}, want: "unexpected entry type"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			in := filepath.Join(dir, "in.tgz")
			writeTgz(t, in, tc.entries, "", time.Time{})
			err := run([]string{"repack", "--input", in, "--output", filepath.Join(dir, "out.tgz")})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
			if _, err := os.Stat(filepath.Join(dir, "out.tgz")); !os.IsNotExist(err) {
				t.Errorf("out.tgz written (%v), want nothing", err)
			}
		})
	}
}

// captureStdout runs f and returns what it printed.
func captureStdout(t *testing.T, f func() error) (string, error) {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	saved := os.Stdout
	os.Stdout = w
	done := make(chan string)
	go func() {
		b, _ := io.ReadAll(r)
		done <- string(b)
	}()
	ferr := f()
	os.Stdout = saved
	w.Close()
	return <-done, ferr
}

func TestDigest(t *testing.T) {
	dir := t.TempDir()
	ca := filepath.Join(dir, "ca.crt")
	writeTestFile(t, ca, "not really a CA bundle", 0o644, time.Unix(0, 0))
	digestRE := regexp.MustCompile(`^sha256:[0-9a-f]{64}\n$`)

	// digestOf builds an image of a fake binary into its own directory and
	// prints the archive's index digest.
	digestOf := func(name, binary, tag string, mtime time.Time) string {
		t.Helper()
		sub := filepath.Join(dir, name)
		if err := os.MkdirAll(sub, 0o755); err != nil {
			t.Fatal(err)
		}
		bin := filepath.Join(sub, "scaleplane-webhook")
		writeTestFile(t, bin, binary, 0o755, mtime)
		archive := filepath.Join(sub, "image.tar")
		if _, err := captureStdout(t, func() error {
			return run([]string{"build", "--output", archive, "--repository", "example.com/scaleplane-webhook",
				"--tag", tag, "--ca-certificates", ca, "--binary", "linux/amd64=" + bin,
				"--label", "org.opencontainers.image.version=" + tag, "--source-date-epoch", "1764374400"})
		}); err != nil {
			t.Fatal(err)
		}
		out, err := captureStdout(t, func() error { return run([]string{"digest", "--archive", archive}) })
		if err != nil {
			t.Fatal(err)
		}
		if !digestRE.MatchString(out) {
			t.Fatalf("digest printed %q, want sha256:<64 hex> and a newline", out)
		}
		return strings.TrimSpace(out)
	}

	first := digestOf("a", "binary v1", "v0.1.0", time.Unix(1, 0))
	for _, tc := range []struct {
		name, binary, tag string
		mtime             time.Time
		same              bool
	}{
		{name: "same inputs, the binary written at another time", binary: "binary v1", tag: "v0.1.0", mtime: time.Unix(2000000000, 0), same: true},
		{name: "another binary", binary: "binary v2", tag: "v0.1.0", mtime: time.Unix(1, 0)},
		{name: "another version label", binary: "binary v1", tag: "v0.1.1", mtime: time.Unix(1, 0)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := digestOf(strings.ReplaceAll(tc.name, " ", "_"), tc.binary, tc.tag, tc.mtime)
			if (got == first) != tc.same {
				t.Errorf("digest %s, first %s; want the same: %v", got, first, tc.same)
			}
		})
	}

	if err := run([]string{"digest"}); err == nil || !strings.Contains(err.Error(), "needs --archive") {
		t.Errorf("digest without --archive: error %v, want needs --archive", err)
	}
}
