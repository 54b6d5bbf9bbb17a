package framework

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
)

const modulePath = "github.com/scaleplane/scaleplane"

// BinDirEnv overrides where the control plane binaries are looked up; the
// hack/ scripts honour the same variable.
const BinDirEnv = "SCALEPLANE_BIN_DIR"

// RepoRoot returns the root of the scaleplane repository: the nearest
// directory, from the working directory up (go test runs in the package
// directory), whose go.mod declares the scaleplane module. When the working
// directory is elsewhere it falls back to this source file's location.
func RepoRoot() (string, error) {
	var starts []string
	if wd, err := os.Getwd(); err == nil {
		starts = append(starts, wd)
	}
	if _, file, _, ok := runtime.Caller(0); ok && filepath.IsAbs(file) {
		starts = append(starts, filepath.Dir(file))
	}
	for _, dir := range starts {
		for {
			data, err := os.ReadFile(filepath.Join(dir, "go.mod"))
			if err == nil && declaresModule(data, modulePath) {
				return dir, nil
			}
			parent := filepath.Dir(dir)
			if parent == dir {
				break
			}
			dir = parent
		}
	}
	return "", fmt.Errorf("cannot find the root of the %s repository above %v", modulePath, starts)
}

// declaresModule reports whether a go.mod's module directive names module.
func declaresModule(gomod []byte, module string) bool {
	for _, line := range bytes.Split(gomod, []byte("\n")) {
		fields := bytes.Fields(line)
		if len(fields) >= 2 && string(fields[0]) == "module" {
			return string(bytes.Trim(fields[1], `"`)) == module
		}
	}
	return false
}

// BinDir returns the directory holding etcd, kube-apiserver and the other
// binaries that hack/install-tools.sh builds: $SCALEPLANE_BIN_DIR, or
// _output/bin in the repository.
func BinDir() (string, error) {
	if dir := os.Getenv(BinDirEnv); dir != "" {
		return filepath.Abs(dir)
	}
	root, err := RepoRoot()
	if err != nil {
		return "", err
	}
	return filepath.Join(root, "_output", "bin"), nil
}

// errMissingBinary marks the error tests see when the binaries were never
// built; the message says how to build them.
var errMissingBinary = errors.New("control plane binary missing")

// Binary returns the path of an executable in BinDir (etcd, kubectl,
// scaleplane-controller-manager, ...), or an error that tells the developer
// to run `make tools`. scaleplane's own binaries are built from the working
// tree first, once per test process (see buildOwn), so that `go test` after
// an edit never runs the binary of an older tree.
func Binary(name string) (string, error) {
	if pkg, ok := ownBinaries[name]; ok {
		if err := buildOwn(name, pkg); err != nil {
			return "", err
		}
	}
	return binary(name)
}

// ownBinaries are scaleplane's binaries, by the package that builds them.
var ownBinaries = map[string]string{
	"scaleplane-controller-manager": "./cmd/controller-manager",
	"scaleplane-webhook":            "./cmd/webhook",
	"kubectl-scaleplane":            "./cmd/kubectl-scaleplane",
}

var (
	ownBuilt   sync.Mutex
	ownResults = map[string]error{}
)

// buildOwn builds one of scaleplane's binaries from the working tree into
// BinDir, once per test process. With the Go build cache warm it takes a
// few seconds; several test packages building at once each write a
// temporary file and rename it, and a running copy is not disturbed.
func buildOwn(name, pkg string) error {
	ownBuilt.Lock()
	defer ownBuilt.Unlock()
	if err, done := ownResults[name]; done {
		return err
	}
	err := func() error {
		root, err := RepoRoot()
		if err != nil {
			return err
		}
		dir, err := BinDir()
		if err != nil {
			return err
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
		tmp, err := os.CreateTemp(dir, "."+name+"-*")
		if err != nil {
			return err
		}
		_ = tmp.Close()
		defer os.Remove(tmp.Name())
		cmd := exec.Command("go", "build", "-o", tmp.Name(), pkg)
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("building %s from the working tree: %w\n%s", name, err, out)
		}
		return os.Rename(tmp.Name(), filepath.Join(dir, name))
	}()
	ownResults[name] = err
	return err
}

// binary returns the path of an executable in BinDir, or an error that tells
// the developer to run `make tools`. Tests fail on it, they never skip: a
// test that silently does not run is worse than one that fails.
func binary(name string) (string, error) {
	dir, err := BinDir()
	if err != nil {
		return "", err
	}
	path := filepath.Join(dir, name)
	info, err := os.Stat(path)
	if err != nil || info.IsDir() || info.Mode()&0o111 == 0 {
		return "", fmt.Errorf("%w: %s not found at %s: run `make tools build` (hack/install-tools.sh builds the control plane) or set %s", errMissingBinary, name, path, BinDirEnv)
	}
	return path, nil
}
