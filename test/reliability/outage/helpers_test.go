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

package outage

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	autoscalingv1alpha1 "github.com/scaleplane/scaleplane/pkg/apis/autoscaling/v1alpha1"
	"github.com/scaleplane/scaleplane/test/integration/framework"
	"github.com/scaleplane/scaleplane/test/reliability/internal/recorder"
	"github.com/scaleplane/scaleplane/test/reliability/internal/workload"
)

const (
	// evenReplicas and oddReplicas are what the even- and odd-minute rules
	// set, so that a Deployment's replicas name the slot that set them.
	evenReplicas, oddReplicas = workload.EvenReplicas, workload.OddReplicas
	// slack covers the distance between when the apiserver stored
	// something and when the test's watch saw it, on a loaded machine.
	slack = 3 * time.Second
	// readyTimeout bounds the wait for a manager's /readyz after start-up
	// or an outage.
	readyTimeout = 60 * time.Second
)

// manager is one scaleplane-controller-manager process the test started,
// serving /readyz on port.
type manager struct {
	name string
	port int
	proc *framework.Process
}

// startManagers runs n scaleplane-controller-manager processes with args
// (plus their own /readyz port on 127.0.0.1), named prefix-0 and on,
// logging to the control plane's directory. They are stopped gracefully
// when the test ends, and their last lines printed if it failed.
func startManagers(t *testing.T, cp *framework.ControlPlane, prefix string, n int, args ...string) []*manager {
	t.Helper()
	bin, err := framework.Binary("scaleplane-controller-manager")
	if err != nil {
		t.Fatal(err)
	}
	var ms []*manager
	for i := range n {
		port, err := framework.FreePort()
		if err != nil {
			t.Fatal(err)
		}
		m := &manager{name: fmt.Sprintf("%s-%d", prefix, i), port: port}
		all := append([]string{
			"--kubeconfig=" + cp.KubeconfigPath(),
			"--controllers=cron-scaler",
			"--bind-address=127.0.0.1",
			"--port=" + strconv.Itoa(port),
			"-v=2",
		}, args...)
		if m.proc, err = framework.StartProcess(cp.Dir(), m.name, bin, all); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			// Graceful, like a pod deleted: the leader releases the Lease.
			m.proc.Stop(30 * time.Second)
			if t.Failed() {
				t.Logf("%s (log %s), last lines:\n%s", m.name, m.proc.LogPath(), m.proc.Tail(60))
			}
		})
		ms = append(ms, m)
	}
	return ms
}

// log is everything the manager logged so far.
func (m *manager) log() string {
	data, _ := os.ReadFile(m.proc.LogPath())
	return string(data)
}

// readyz asks /readyz at port and returns the status code, or 0 when
// nothing answers (the process is not running, or not serving yet).
func readyz(port int) int {
	client := http.Client{Timeout: 2 * time.Second}
	resp, err := client.Get("http://127.0.0.1:" + strconv.Itoa(port) + "/readyz")
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode
}

// waitReady waits until /readyz at port answers 200, and returns when.
func waitReady(t *testing.T, name string, port int, timeout time.Duration) time.Time {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		code := readyz(port)
		if code == http.StatusOK {
			return time.Now()
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: /readyz not 200 within %v (last answer %d)", name, timeout, code)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// checkAlive fails the test if the manager exited or logged a panic or the
// loss of its lease.
func checkAlive(t *testing.T, name string, p *framework.Process) {
	t.Helper()
	if p.Exited() {
		code, _ := p.ExitCode()
		t.Errorf("%s exited (status %d); it must ride out the outages:\n%s", name, code, p.Tail(40))
	}
	data, _ := os.ReadFile(p.LogPath())
	for _, bad := range []string{"panic:", "Observed a panic", "Lost the leader-election lease"} {
		if strings.Contains(string(data), bad) {
			t.Errorf("%s logged %q", name, bad)
		}
	}
}

// outage is one stop and start of kube-apiserver or etcd, what clients
// saw of it, and what a manager's /readyz said meanwhile.
type outage struct {
	what    string
	began   time.Time // stop asked
	down    time.Time // kube-apiserver's /healthz first failed
	gone    time.Time // the process had exited
	restart time.Time // start asked
	back    time.Time // the process was ready (kube-apiserver) or healthy (etcd) again
	answers time.Time // kube-apiserver's /healthz answered 200 again
	// notReady: the manager's /readyz answered not ready between down and
	// answers.
	notReady bool
	ready    time.Time // the manager's /readyz 200 again
}

func (o outage) String() string {
	at := func(t time.Time) string { return t.Sub(o.began).Round(100 * time.Millisecond).String() }
	return fmt.Sprintf("%s: SIGTERM at %s UTC; from then, kube-apiserver stopped answering after %s, the process exited after %s, was started again at %s, ready at %s, kube-apiserver answered again at %s: %v down for clients; "+
		"the manager's /readyz not ready during it: %t, 200 again at %s (%v after kube-apiserver answered)",
		o.what, o.began.UTC().Format("15:04:05.000"), at(o.down), at(o.gone), at(o.restart), at(o.back), at(o.answers),
		o.answers.Sub(o.down).Round(100*time.Millisecond), o.notReady, at(o.ready), o.ready.Sub(o.answers).Round(100*time.Millisecond))
}

// sample is one answer of a poll: the status code, 0 for none.
type sample struct {
	at   time.Time
	code int
}

// poller calls probe every 100 ms, keeping the answers, until stopped.
type poller struct {
	mu      sync.Mutex
	samples []sample
	done    chan struct{}
	exited  chan struct{}
}

func poll(probe func() int) *poller {
	p := &poller{done: make(chan struct{}), exited: make(chan struct{})}
	go func() {
		defer close(p.exited)
		for {
			code := probe()
			p.mu.Lock()
			p.samples = append(p.samples, sample{time.Now(), code})
			p.mu.Unlock()
			select {
			case <-p.done:
				return
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()
	return p
}

func (p *poller) snapshot() []sample {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]sample(nil), p.samples...)
}

func (p *poller) stop() []sample {
	close(p.done)
	<-p.exited
	return p.snapshot()
}

// downAndBack returns the first sample not 200, and the first 200 after it;
// zero when there is none.
func downAndBack(samples []sample) (down, back time.Time) {
	for _, s := range samples {
		switch {
		case down.IsZero() && s.code != http.StatusOK:
			down = s.at
		case !down.IsZero() && s.code == http.StatusOK:
			return down, s.at
		}
	}
	return down, time.Time{}
}

// apiserverHealth asks kube-apiserver's /healthz on a new connection each
// time, as a client that lost its connection does, and returns the status
// code, 0 when nothing answers. It fails while kube-apiserver is gone and
// while it cannot reach etcd.
func apiserverHealth(t *testing.T, cp *framework.ControlPlane) func() int {
	t.Helper()
	cfg := cp.Config()
	tlsConfig, err := rest.TLSConfigFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	client := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{TLSClientConfig: tlsConfig, DisableKeepAlives: true}}
	return func() int {
		req, err := http.NewRequest(http.MethodGet, cfg.Host+"/healthz", nil)
		if err != nil {
			return 0
		}
		req.Header.Set("Authorization", "Bearer "+cfg.BearerToken)
		resp, err := client.Do(req)
		if err != nil {
			return 0
		}
		defer resp.Body.Close()
		_, _ = io.Copy(io.Discard, resp.Body)
		return resp.StatusCode
	}
}

// runOutage stops what with stop, starts it again with start once the
// process has been gone until downUntil(when it was gone), and watches
// kube-apiserver's /healthz and the manager's /readyz at port throughout,
// until both are 200 again.
func runOutage(t *testing.T, cp *framework.ControlPlane, what string, port int, stop func(), start func() error, downUntil func(gone time.Time) time.Time) outage {
	t.Helper()
	o := outage{what: what, began: time.Now()}
	apiserver := poll(apiserverHealth(t, cp))
	manager := poll(func() int { return readyz(port) })
	defer apiserver.stop()
	defer manager.stop()
	stop()
	o.gone = time.Now()
	sleepUntil(downUntil(o.gone))
	o.restart = time.Now()
	if err := start(); err != nil {
		t.Fatalf("starting %s again: %v", what, err)
	}
	o.back = time.Now()
	// Clients see the outage end when kube-apiserver answers again: for
	// etcd, once kube-apiserver reconnected, after etcd itself is healthy.
	deadline := time.Now().Add(readyTimeout)
	for o.down, o.answers = downAndBack(apiserver.snapshot()); o.answers.IsZero(); o.down, o.answers = downAndBack(apiserver.snapshot()) {
		if time.Now().After(deadline) {
			t.Fatalf("%s outage: kube-apiserver's /healthz did not fail and answer 200 again (failed at %v)", what, o.down)
		}
		time.Sleep(100 * time.Millisecond)
	}
	o.ready = waitReady(t, what+" outage: the manager", port, readyTimeout)
	for _, s := range manager.snapshot() {
		// 0 is no answer at all (the manager gone): not what is asked.
		if s.code != 0 && s.code != http.StatusOK && !s.at.Before(o.down) && !s.at.After(o.answers) {
			o.notReady = true
		}
	}
	return o
}

// createTarget creates a Deployment at 1 replica and a CronFederatedHPA of
// the same name setting it to evenReplicas on even minutes and oddReplicas
// on odd ones, both rules with maxDelay. The CronFederatedHPA is deleted
// when the test ends, so that a later test's manager leaves it alone.
func createTarget(ctx context.Context, t *testing.T, cp *framework.ControlPlane, ns, name string, maxDelay time.Duration) {
	t.Helper()
	if err := workload.Create(ctx, cp.KubeClient(), cp.Client(), ns, name, maxDelay, 8); err != nil {
		t.Fatal(err)
	}
	crons := cp.Client().AutoscalingV1alpha1().CronFederatedHPAs(ns)
	t.Cleanup(func() {
		if err := crons.Delete(context.Background(), name, metav1.DeleteOptions{}); err != nil {
			t.Errorf("deleting CronFederatedHPA %s: %v", name, err)
		}
	})
}

// ruleOf is the rule whose slot t is, and valueOf what it sets.
func ruleOf(slot time.Time) string {
	if slot.Minute()%2 == 0 {
		return "even"
	}
	return "odd"
}

func valueOf(slot time.Time) int32 {
	if slot.Minute()%2 == 0 {
		return evenReplicas
	}
	return oddReplicas
}

// slotsBetween are the minute boundaries after from, up to and including to:
// with both rules, every one is a slot of one of them.
func slotsBetween(from, to time.Time) []time.Time {
	var slots []time.Time
	for s := from.Truncate(time.Minute).Add(time.Minute); !s.After(to); s = s.Add(time.Minute) {
		slots = append(slots, s)
	}
	return slots
}

// nextBoundary is the first minute boundary at or after t.
func nextBoundary(t time.Time) time.Time {
	if b := t.Truncate(time.Minute); b.Equal(t) {
		return b
	}
	return t.Truncate(time.Minute).Add(time.Minute)
}

func sleepUntil(t time.Time) {
	if d := time.Until(t); d > 0 {
		time.Sleep(d)
	}
}

// history is the execution history of the rule named rule, or nil.
func history(c *autoscalingv1alpha1.CronFederatedHPA, rule string) *autoscalingv1alpha1.ExecutionHistory {
	for i := range c.Status.ExecutionHistories {
		if c.Status.ExecutionHistories[i].RuleName == rule {
			return &c.Status.ExecutionHistories[i]
		}
	}
	return nil
}

var missedRange = regexp.MustCompile(`missed (?:at least )?\d+ scheduled times from (\S+) to (\S+)`)

// recordsOf returns the successful and the failed (or missed) records of
// slot in c's status. A record of several missed times covers each of them.
func recordsOf(c *autoscalingv1alpha1.CronFederatedHPA, slot time.Time) ([]autoscalingv1alpha1.SuccessfulExecution, []autoscalingv1alpha1.FailedExecution) {
	h := history(c, ruleOf(slot))
	if h == nil {
		return nil, nil
	}
	var ok []autoscalingv1alpha1.SuccessfulExecution
	var failed []autoscalingv1alpha1.FailedExecution
	for _, s := range h.SuccessfulExecutions {
		if s.ScheduleTime != nil && s.ScheduleTime.Time.Equal(slot) {
			ok = append(ok, s)
		}
	}
	for _, f := range h.FailedExecutions {
		if f.ScheduleTime == nil {
			continue
		}
		first := f.ScheduleTime.Time
		if m := missedRange.FindStringSubmatch(f.Message); m != nil {
			if t, err := time.Parse(time.RFC3339, m[1]); err == nil {
				first = t
			}
		}
		if !slot.Before(first) && !slot.After(f.ScheduleTime.Time) {
			failed = append(failed, f)
		}
	}
	return ok, failed
}

// waitRecorded waits until every slot of every CronFederatedHPA in ns up to
// last is recorded in status, and returns them.
func waitRecorded(ctx context.Context, t *testing.T, cp *framework.ControlPlane, ns string, last time.Time, timeout time.Duration) []autoscalingv1alpha1.CronFederatedHPA {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		list, err := cp.Client().AutoscalingV1alpha1().CronFederatedHPAs(ns).List(ctx, metav1.ListOptions{})
		if err == nil && allRecorded(list.Items, last) {
			return list.Items
		}
		if time.Now().After(deadline) {
			if err != nil {
				t.Fatalf("listing CronFederatedHPAs: %v", err)
			}
			t.Errorf("not every slot up to %s was recorded within %v", last.UTC().Format(time.TimeOnly), timeout)
			return list.Items
		}
		time.Sleep(time.Second)
	}
}

// waitWrites waits until the watch saw at least want[name] replicas writes
// of each Deployment name (status is written after the target, but the
// watch may still be behind), at most slack, and returns what it saw.
func waitWrites(t *testing.T, log *recorder.WriteLog, want map[string]int) map[string][]recorder.TargetWrite {
	t.Helper()
	deadline := time.Now().Add(slack)
	for {
		seen := log.Snapshot()
		complete := true
		for name, n := range want {
			if len(seen[name]) < n {
				complete = false
			}
		}
		if complete || time.Now().After(deadline) {
			return seen
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func allRecorded(crons []autoscalingv1alpha1.CronFederatedHPA, last time.Time) bool {
	for i := range crons {
		for _, s := range slotsBetween(crons[i].CreationTimestamp.Time, last) {
			if ok, failed := recordsOf(&crons[i], s); len(ok)+len(failed) == 0 {
				return false
			}
		}
	}
	return true
}
