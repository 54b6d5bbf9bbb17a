package framework

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

const (
	dirPrefix = "scaleplane-integration-"
	ownerFile = "owner.pid"
)

// removeStaleDirs deletes the directories of earlier test binaries that died
// without cleaning up (a panicking test, a timeout). Their processes are gone
// already (see startOnSpawnerThread); the directory stays until here so that
// its logs can be read after such a crash. Directories whose owner still runs
// (another package's tests, right now) are left alone.
func removeStaleDirs() {
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), dirPrefix+"*"))
	for _, dir := range dirs {
		data, err := os.ReadFile(filepath.Join(dir, ownerFile))
		if err != nil {
			// Maybe being created this very moment; judge it by its age.
			if info, statErr := os.Stat(dir); statErr != nil || time.Since(info.ModTime()) < time.Hour {
				continue
			}
		} else if pid, err := strconv.Atoi(strings.TrimSpace(string(data))); err == nil && processAlive(pid) {
			continue
		}
		_ = os.RemoveAll(dir)
	}
}

func processAlive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}
