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

// Package localup tests the shell helpers of hack/lib/local.sh that
// hack/local-up.sh relies on, under the conditions where they used to fail:
// a loaded machine, and binaries with long help texts.
package localup

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/scaleplane/scaleplane/test/integration/framework"
)

// bash runs script with hack/lib/init.sh and hack/lib/local.sh sourced and
// _output/local pointed at dir, and returns its combined output.
func bash(t *testing.T, dir, script string) (string, error) {
	t.Helper()
	root, err := framework.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	full := fmt.Sprintf(`set -o errexit -o nounset -o pipefail
source %q/hack/lib/init.sh
source %q/hack/lib/local.sh
LOCAL_PIDS=%q; LOCAL_LOGS=%q
mkdir -p "${LOCAL_PIDS}" "${LOCAL_LOGS}"
%s`, root, root, filepath.Join(dir, "pids"), filepath.Join(dir, "logs"), script)
	cmd := exec.Command("bash", "-c", full)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// loadCPU keeps every core busy until the test ends, which is when a forked
// child is slowest to exec its binary.
func loadCPU(t *testing.T) {
	var stop atomic.Bool
	for range runtime.NumCPU() {
		go func() {
			for n := 0; !stop.Load(); n++ {
			}
		}()
	}
	t.Cleanup(func() { stop.Store(true) })
}

// TestStartReportsRunningComponent: once local::start returns, local::pid
// (which local::wait_cmd uses to decide that a component exited) must see
// the component's own binary, not the shell that is about to exec it.
func TestStartReportsRunningComponent(t *testing.T) {
	loadCPU(t)
	dir := t.TempDir()
	sleep, err := exec.LookPath("sleep")
	if err != nil {
		t.Fatal(err)
	}
	const runs = 20
	script := fmt.Sprintf(`
failures=0
for ((i = 0; i < %d; i++)); do
  local::start "c${i}" %q 30
  if ! local::pid "c${i}" >/dev/null; then
    failures=$((failures + 1))
  fi
  local::stop "c${i}" >/dev/null
done
echo "failures=${failures}"
`, runs, sleep)
	out, err := bash(t, dir, script)
	if err != nil {
		t.Fatalf("script failed: %v\n%s", err, out)
	}
	if !strings.Contains(out, "failures=0") {
		t.Fatalf("local::pid did not see a just-started component as running:\n%s", out)
	}
}

// TestStartOfMissingBinaryIsReportedExited: the wait for exec must not hang
// or hide a component that dies at once.
func TestStartOfMissingBinaryIsReportedExited(t *testing.T) {
	dir := t.TempDir()
	start := time.Now()
	out, err := bash(t, dir, `
local::start ghost /nonexistent/binary
local::wait_cmd ghost 20 false
`)
	if err == nil {
		t.Fatalf("waiting for a component that cannot start succeeded:\n%s", out)
	}
	if !strings.Contains(out, "ghost exited") {
		t.Errorf("want the component reported as exited, got:\n%s", out)
	}
	if d := time.Since(start); d > 15*time.Second {
		t.Errorf("took %v to notice: it waited for the timeout instead", d)
	}
}

// TestHasFlagWithLongHelp: a binary whose help text is longer than a pipe
// buffer, with the flag near the top, must be found every time (a `| grep -q`
// made the binary die of SIGPIPE, which pipefail turned into "no such flag").
func TestHasFlagWithLongHelp(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "fake-binary")
	// About 1 MiB of help after the flag.
	helper := "#!/usr/bin/env bash\necho '      --bind-address string   The address.'\nfor ((i = 0; i < 20000; i++)); do echo \"      --flag-${i} string   Some text that makes the help long enough.\"; done\n"
	if err := os.WriteFile(bin, []byte(helper), 0o755); err != nil {
		t.Fatal(err)
	}
	out, err := bash(t, dir, fmt.Sprintf(`
found=0
for ((i = 0; i < 20; i++)); do
  if local::has_flag %q bind-address; then found=$((found + 1)); fi
done
if local::has_flag %q no-such-flag; then echo "no-such-flag found"; fi
echo "found=${found}"
`, bin, bin))
	if err != nil {
		t.Fatalf("script failed: %v\n%s", err, out)
	}
	if !strings.Contains(out, "found=20") || strings.Contains(out, "no-such-flag found") {
		t.Fatalf("local::has_flag is unreliable:\n%s", out)
	}
}
