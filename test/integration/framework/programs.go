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

package framework

import (
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Process is a program a test or benchmark runs next to the control plane
// (the real scaleplane-controller-manager, say), under the same rules as the
// control plane's own processes: output appended to <dir>/<name>.log, its own
// process group, and killed by the kernel when the test binary dies.
type Process struct {
	p *process
}

// StartProcess runs binary with args, logging to dir/name.log. Starting the
// same name in the same dir again appends to the same log, so a restarted
// program keeps one history.
func StartProcess(dir, name, binary string, args []string) (*Process, error) {
	p, err := startProcess(dir, name, binary, args)
	if err != nil {
		return nil, err
	}
	return &Process{p: p}, nil
}

// Pid is the process's id.
func (p *Process) Pid() int { return p.p.cmd.Process.Pid }

// LogPath is where the process's stdout and stderr go.
func (p *Process) LogPath() string { return p.p.logPath }

// Tail returns the last n lines of the process's log.
func (p *Process) Tail(n int) string { return p.p.tail(n) }

// Exited reports whether the process has ended.
func (p *Process) Exited() bool {
	exited, _ := p.p.exited()
	return exited
}

// ExitCode is the process's exit status once it has ended: 0 after a clean
// exit, -1 when a signal ended it. ok is false while it runs.
func (p *Process) ExitCode() (code int, ok bool) {
	select {
	case <-p.p.done:
		return p.p.cmd.ProcessState.ExitCode(), true
	default:
		return 0, false
	}
}

// Stop asks the process to terminate (SIGTERM) and kills it if it is still
// running after grace. Safe to call more than once.
func (p *Process) Stop(grace time.Duration) { p.p.stop(grace) }

// Kill ends the process the way a crash or an evicted pod does: SIGKILL, no
// graceful shutdown. It returns once the process has exited.
func (p *Process) Kill() {
	if p.Exited() {
		return
	}
	_ = syscall.Kill(-p.Pid(), syscall.SIGKILL)
	<-p.p.done
}

// FreePort returns a port on 127.0.0.1 that was free when asked.
func FreePort() (int, error) {
	ports, err := freePorts(1)
	if err != nil {
		return 0, err
	}
	return ports[0], nil
}

// Manager is a scaleplane-controller-manager a test runs against its control
// plane, with its HTTP server (/healthz, /metrics) on Port.
type Manager struct {
	*Process
	Port int
}

// StartManager runs the real scaleplane-controller-manager binary (built by
// `make build`) with the given --controllers, against kubeconfig, without
// leader election, serving /healthz and /metrics on a free 127.0.0.1 port.
// extraArgs are appended. The process is stopped when the test ends, and its
// log is printed if the test failed.
func StartManager(t testing.TB, kubeconfig, controllers string, extraArgs ...string) *Manager {
	t.Helper()
	bin, err := Binary("scaleplane-controller-manager")
	if err != nil {
		t.Fatal(err)
	}
	port, err := FreePort()
	if err != nil {
		t.Fatal(err)
	}
	args := []string{
		"--kubeconfig=" + kubeconfig,
		"--controllers=" + controllers,
		"--leader-elect=false",
		"--bind-address=127.0.0.1",
		"--port=" + strconv.Itoa(port),
		"-v=2",
	}
	p, err := StartProcess(t.TempDir(), "controller-manager", bin, append(args, extraArgs...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		p.Stop(15 * time.Second)
		if t.Failed() {
			t.Logf("scaleplane-controller-manager log:\n%s", p.Tail(150))
		}
	})
	return &Manager{Process: p, Port: port}
}

// Metric returns the sum of the samples of a counter or gauge in the
// manager's /metrics whose labels include every name="value" pair of labels
// (e.g. `verb="create"`), and whether any sample matched.
func (m *Manager) Metric(name string, labels ...string) (float64, bool, error) {
	resp, err := http.Get("http://127.0.0.1:" + strconv.Itoa(m.Port) + "/metrics")
	if err != nil {
		return 0, false, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, false, err
	}
	var sum float64
	found := false
	for _, line := range strings.Split(string(body), "\n") {
		if !strings.HasPrefix(line, name+"{") && !strings.HasPrefix(line, name+" ") {
			continue
		}
		fields := strings.Fields(line)
		if len(fields) < 2 {
			continue
		}
		matches := true
		for _, l := range labels {
			if !strings.Contains(fields[0], l) {
				matches = false
			}
		}
		if !matches {
			continue
		}
		v, err := strconv.ParseFloat(fields[len(fields)-1], 64)
		if err != nil {
			return 0, false, fmt.Errorf("parsing %q: %w", line, err)
		}
		sum += v
		found = true
	}
	return sum, found, nil
}
