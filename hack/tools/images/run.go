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
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"

	"github.com/google/go-containerregistry/pkg/v1/mutate"
)

// runCommand unpacks one platform's image into a temporary root and runs
// its entrypoint with the given arguments, the way a container runtime
// would as far as the file system and user go: as root it chroots into the
// unpacked root and drops to the image's user, so the binary finds nothing
// of the host (no loader, no libraries, no CA bundle but the image's).
// Without root it runs the unpacked binary in place and says so.
func runCommand(args []string) error {
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	archive := fs.String("archive", "", "the OCI image layout tarball")
	platform := fs.String("platform", runtime.GOOS+"/"+runtime.GOARCH, "the image of the index to run")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *archive == "" {
		return errors.New("run needs --archive")
	}
	pi, cleanup, err := findImage(*archive, *platform)
	if err != nil {
		return err
	}
	defer cleanup()
	root, err := os.MkdirTemp("", "imagetool-root-")
	if err != nil {
		return fmt.Errorf("making a temporary root: %w", err)
	}
	defer os.RemoveAll(root)
	if err := unpack(pi, root); err != nil {
		return err
	}
	return execEntrypoint(pi, root, fs.Args())
}

// findImage opens the archive and returns the image for platform; cleanup
// removes the extracted layout.
func findImage(archive, platform string) (platformImage, func(), error) {
	dir, err := extractArchive(archive)
	if err != nil {
		return platformImage{}, nil, err
	}
	cleanup := func() { os.RemoveAll(dir) }
	_, index, err := openIndex(dir)
	if err == nil {
		var images []platformImage
		if images, err = platformImages(index); err == nil {
			for _, pi := range images {
				if pi.platform == platform {
					return pi, cleanup, nil
				}
			}
			err = fmt.Errorf("no image for %s in %s", platform, archive)
		}
	}
	cleanup()
	return platformImage{}, nil, err
}

// unpack writes the image's merged file system (layers applied in order,
// whiteouts honoured) into root.
func unpack(pi platformImage, root string) error {
	rc := mutate.Extract(pi.image)
	defer rc.Close()
	if err := untar(rc, root); err != nil {
		return fmt.Errorf("unpacking the %s image: %w", pi.platform, err)
	}
	// The image's user must be able to reach its entrypoint through "/".
	return os.Chmod(root, 0o755)
}

func execEntrypoint(pi platformImage, root string, args []string) error {
	cfg, err := pi.image.ConfigFile()
	if err != nil {
		return fmt.Errorf("reading the config: %w", err)
	}
	if len(cfg.Config.Entrypoint) == 0 {
		return errors.New("the image has no entrypoint")
	}
	argv := append(append([]string{}, cfg.Config.Entrypoint[1:]...), args...)
	var cmd *exec.Cmd
	if os.Geteuid() == 0 {
		if cmd, err = chrootCommand(cfg.Config.Entrypoint[0], argv, root, cfg.Config.User); err != nil {
			return err
		}
	} else {
		fmt.Fprintln(os.Stderr, "imagetool: not root, running the unpacked binary without chroot")
		cmd = exec.Command(filepath.Join(root, cfg.Config.Entrypoint[0]), argv...)
		cmd.Dir = root
	}
	cmd.Env = cfg.Config.Env
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	err = cmd.Run()
	var exitErr *exec.ExitError
	if errors.As(err, &exitErr) {
		return exitError(exitErr.ExitCode())
	}
	if err != nil {
		return fmt.Errorf("running %s from the image: %w", cfg.Config.Entrypoint[0], err)
	}
	return nil
}

// chrootCommand runs entrypoint inside root as the image's "uid:gid". The
// path is resolved inside the chroot: exec.Command would look it up on the
// host.
func chrootCommand(entrypoint string, args []string, root, user string) (*exec.Cmd, error) {
	uid, gid, err := parseUser(user)
	if err != nil {
		return nil, err
	}
	cmd := &exec.Cmd{Path: entrypoint, Args: append([]string{entrypoint}, args...), Dir: "/"}
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Chroot:     root,
		Credential: &syscall.Credential{Uid: uid, Gid: gid, NoSetGroups: true},
	}
	return cmd, nil
}

// parseUser reads the numeric "uid:gid" form the images use; names would
// need the image's /etc/passwd, which a runtime reads but we need not.
func parseUser(user string) (uint32, uint32, error) {
	u, g, ok := strings.Cut(user, ":")
	if !ok {
		g = u
	}
	uid, err := strconv.ParseUint(u, 10, 32)
	if err != nil {
		return 0, 0, fmt.Errorf("the image's user %q is not numeric: %w", user, err)
	}
	gid, err := strconv.ParseUint(g, 10, 32)
	if err != nil {
		return 0, 0, fmt.Errorf("the image's group in %q is not numeric: %w", user, err)
	}
	return uint32(uid), uint32(gid), nil
}
