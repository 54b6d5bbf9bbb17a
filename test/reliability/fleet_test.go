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

package reliability

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/scaleplane/scaleplane/test/integration/framework"
)

// exitRecord is one end of a replica's process.
type exitRecord struct {
	at        time.Time
	killed    bool // by the test, with SIGKILL
	stopped   bool // by the test, with SIGTERM: a graceful stop
	code      int  // exit status; -1 when a signal ended it
	lostLease bool // it logged losing the lease, and exited as it should
	tail      string
}

// replica is one scaleplane-controller-manager "pod": the test restarts its
// process whenever it exits, standing in for the kubelet.
type replica struct {
	name string
	port int
	dir  string

	mu      sync.Mutex
	proc    *framework.Process
	logFrom int64 // size of the log when proc started: where its output begins
	starts  int
	killing bool // the test SIGKILLed proc
	// stopping: the test SIGTERMed proc, as the kubelet does when a pod is
	// deleted or drained.
	stopping bool
	exits    []exitRecord
}

// fleet runs and restarts the replicas until stopped.
type fleet struct {
	replicas []*replica
	wg       sync.WaitGroup
	cancel   context.CancelFunc
}

func startFleet(t *testing.T, n int, dir, bin string, args []string) *fleet {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	f := &fleet{cancel: cancel}
	for i := range n {
		port, err := framework.FreePort()
		if err != nil {
			t.Fatal(err)
		}
		r := &replica{name: fmt.Sprintf("controller-manager-%d", i), port: port, dir: dir}
		f.replicas = append(f.replicas, r)
		replicaArgs := append(append([]string(nil), args...), "--bind-address=127.0.0.1", "--port="+strconv.Itoa(port))
		f.wg.Add(1)
		go func() {
			defer f.wg.Done()
			r.supervise(ctx, t, bin, replicaArgs)
		}()
	}
	return f
}

// stop stops every replica gracefully (SIGTERM) and waits for them.
func (f *fleet) stop() {
	f.cancel()
	f.wg.Wait()
}

// restartBackoff stands in for the kubelet's crash-loop back-off, shortened:
// a replica that exited is started again after it.
const restartBackoff = time.Second

// replaceDelay stands in for the time a replacement pod takes to start after
// a graceful stop (a rollout, a drain). It is longer than the standbys'
// retry period (2 s, up to 2.4 s with jitter), so that the Lease released
// by the stopped leader goes to a standby, as the takeover measured is
// theirs, not to the stopped replica started again.
const replaceDelay = 5 * time.Second

func (r *replica) supervise(ctx context.Context, t *testing.T, bin string, args []string) {
	for ctx.Err() == nil {
		logPath := filepath.Join(r.dir, r.name+".log")
		var from int64
		if info, err := os.Stat(logPath); err == nil {
			from = info.Size()
		}
		p, err := framework.StartProcess(r.dir, r.name, bin, args)
		if err != nil {
			t.Errorf("starting %s: %v", r.name, err)
			return
		}
		r.mu.Lock()
		r.proc, r.logFrom, r.killing, r.stopping = p, from, false, false
		r.starts++
		r.mu.Unlock()
		for !p.Exited() && ctx.Err() == nil {
			time.Sleep(50 * time.Millisecond)
		}
		if ctx.Err() != nil {
			p.Stop(30 * time.Second)
			return
		}
		out := r.output()
		code, _ := p.ExitCode()
		r.mu.Lock()
		stopped := r.stopping
		r.exits = append(r.exits, exitRecord{
			at:        time.Now(),
			killed:    r.killing,
			stopped:   stopped,
			code:      code,
			lostLease: bytes.Contains(out, []byte("Lost the leader-election lease")),
			tail:      p.Tail(20),
		})
		r.mu.Unlock()
		delay := restartBackoff
		if stopped {
			delay = replaceDelay
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(delay):
		}
	}
}

// output is what the current process logged so far.
func (r *replica) output() []byte {
	r.mu.Lock()
	from, path := r.logFrom, filepath.Join(r.dir, r.name+".log")
	r.mu.Unlock()
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	if _, err := f.Seek(from, io.SeekStart); err != nil {
		return nil
	}
	data, _ := io.ReadAll(f)
	return data
}

// killIfIdentity SIGKILLs the current process, if it is the one whose
// leader-election identity is id, and reports whether it did.
func (r *replica) killIfIdentity(id string) bool {
	if !bytes.Contains(r.output(), []byte(`identity="`+id+`"`)) {
		return false
	}
	r.mu.Lock()
	p := r.proc
	r.killing = true
	r.mu.Unlock()
	p.Kill()
	return true
}

// stopGrace is the kubelet's default termination grace period: a replica
// stopped gracefully that still runs after it is SIGKILLed (and its exit is
// then not a clean one).
const stopGrace = 30 * time.Second

// stopIfIdentity asks the current process to stop (SIGTERM), if it is the
// one whose leader-election identity is id, and reports whether it did. It
// does not wait: the process drains its work and releases the Lease while
// the test watches the takeover; supervise restarts it once it exited.
func (r *replica) stopIfIdentity(id string) bool {
	if !bytes.Contains(r.output(), []byte(`identity="`+id+`"`)) {
		return false
	}
	r.mu.Lock()
	p := r.proc
	r.stopping = true
	r.mu.Unlock()
	go p.Stop(stopGrace)
	return true
}

// ready asks the replica's /readyz; it returns the status code, or 0 when
// the replica does not answer (not running, starting).
func (r *replica) ready() int {
	client := http.Client{Timeout: 2 * time.Second}
	resp, err := client.Get("http://127.0.0.1:" + strconv.Itoa(r.port) + "/readyz")
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode
}

func (r *replica) exitsSnapshot() []exitRecord {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]exitRecord(nil), r.exits...)
}

// leaderNames maps the leader-election identity of every process of every
// replica that became the leader to the replica's name, from their logs.
func (f *fleet) leaderNames() map[string]string {
	names := map[string]string{}
	for _, r := range f.replicas {
		data, err := os.ReadFile(filepath.Join(r.dir, r.name+".log"))
		if err != nil {
			continue
		}
		for _, m := range becameLeader.FindAllSubmatch(data, -1) {
			names[string(m[1])] = r.name
		}
	}
	return names
}

var becameLeader = regexp.MustCompile(`"Became the leader, starting controllers" identity="([^"]+)"`)

// running reports whether the process with leader-election identity id is
// one of the replicas' current, running processes.
func (f *fleet) running(id string) bool {
	for _, r := range f.replicas {
		r.mu.Lock()
		p := r.proc
		r.mu.Unlock()
		if p != nil && !p.Exited() && bytes.Contains(r.output(), []byte(`identity="`+id+`"`)) {
			return true
		}
	}
	return false
}
