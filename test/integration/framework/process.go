package framework

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"time"
)

// process is one control plane program running under the test binary, with
// its stdout and stderr going to <dir>/<name>.log.
type process struct {
	name    string
	logPath string
	cmd     *exec.Cmd

	done    chan struct{} // closed when the process has exited
	waitErr error         // set before done is closed
}

// spawn requests go to a single goroutine locked to its OS thread for the
// life of the test binary. Pdeathsig is delivered when the *thread* that
// started a child exits, not the process; starting every child from a thread
// that never exits makes the kernel kill the children exactly when the test
// binary dies, even when it dies without running any cleanup (a panicking
// test, a `go test -timeout` abort, SIGKILL).
type spawnRequest struct {
	cmd    *exec.Cmd
	result chan error
}

var (
	spawnOnce     sync.Once
	spawnRequests chan spawnRequest
)

// startLine begins the line a process's log starts with: the command.
const startLine = "### "

func startOnSpawnerThread(cmd *exec.Cmd) error {
	spawnOnce.Do(func() {
		spawnRequests = make(chan spawnRequest)
		go func() {
			runtime.LockOSThread()
			// Deliberately never unlocked and never returning: see above.
			for req := range spawnRequests {
				req.result <- req.cmd.Start()
			}
		}()
	})
	result := make(chan error)
	spawnRequests <- spawnRequest{cmd: cmd, result: result}
	return <-result
}

// startProcess runs binary with args in its own process group, logging to
// dir/name.log (appending, so a restarted process keeps its history).
func startProcess(dir, name, binary string, args []string) (*process, error) {
	logPath := filepath.Join(dir, name+".log")
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("opening log of %s: %w", name, err)
	}
	fmt.Fprintf(logFile, "%s%s %s\n", startLine, binary, strings.Join(args, " "))

	cmd := exec.Command(binary, args...)
	cmd.Dir = dir
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	cmd.Env = childEnv()
	cmd.SysProcAttr = &syscall.SysProcAttr{
		// Own process group: a Ctrl-C aimed at `go test` reaches the test
		// binary, which then stops the children in order, instead of every
		// process dying at once in random order.
		Setpgid:   true,
		Pdeathsig: syscall.SIGKILL,
	}
	if err := startOnSpawnerThread(cmd); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	p := &process{name: name, logPath: logPath, cmd: cmd, done: make(chan struct{})}
	go func() {
		p.waitErr = cmd.Wait()
		logFile.Close()
		close(p.done)
	}()
	return p, nil
}

// childEnv is the test binary's environment with loopback exempted from any
// HTTP proxy, so kube-apiserver reaches etcd, webhooks served by the test on
// 127.0.0.1, and aggregated APIs directly even on a machine with a proxy set.
func childEnv() []string {
	env := os.Environ()
	noProxy := "127.0.0.1,localhost,::1"
	for _, key := range []string{"NO_PROXY", "no_proxy"} {
		if v := os.Getenv(key); v != "" {
			noProxy = v + "," + noProxy
		}
	}
	return append(env, "NO_PROXY="+noProxy, "no_proxy="+noProxy)
}

// exited reports whether the process has ended, and how.
func (p *process) exited() (bool, error) {
	select {
	case <-p.done:
		if p.waitErr == nil {
			return true, errors.New("exited with status 0")
		}
		return true, p.waitErr
	default:
		return false, nil
	}
}

// stop asks the process group to terminate, and kills it if it has not
// exited within grace. It is safe to call more than once.
func (p *process) stop(grace time.Duration) {
	if p == nil {
		return
	}
	pgid := p.cmd.Process.Pid
	select {
	case <-p.done:
		// The leader is gone; still make sure nothing it forked survives.
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		return
	default:
	}
	_ = syscall.Kill(-pgid, syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(grace):
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		<-p.done
	}
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
}

// tail returns the last n lines of the process log.
func (p *process) tail(n int) string {
	data, err := os.ReadFile(p.logPath)
	if err != nil {
		return fmt.Sprintf("(cannot read %s: %v)", p.logPath, err)
	}
	lines := bytes.Split(bytes.TrimRight(data, "\n"), []byte("\n"))
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return string(bytes.Join(lines, []byte("\n")))
}
