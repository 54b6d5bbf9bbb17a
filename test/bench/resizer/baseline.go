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
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/scaleplane/scaleplane/test/bench/internal/benchutil"
	"github.com/scaleplane/scaleplane/test/integration/framework"
)

// activePods is the field selector of Addon Resizer's container count
// (KEP-5546): the non-terminal pods.
const activePods = "status.phase!=Succeeded,status.phase!=Failed"

// pollResult is one poll of the baseline: a full list of the pods and one
// of the nodes, as two Addon Resizer nannies (one per mode) make them.
type pollResult struct {
	PodList    time.Duration `json:"podList"`
	NodeList   time.Duration `json:"nodeList"`
	Pods       int           `json:"pods"`
	Containers int           `json:"containers"`
	Nodes      int           `json:"nodes"`
	PodBytes   int64         `json:"podBytes"` // the pod list's body, decompressed
	RSSKiB     int           `json:"rssKiB"`   // after the poll
}

// baselineResult is what the baseline child reports.
type baselineResult struct {
	Polls  []pollResult `json:"polls"`
	Lists  int          `json:"lists"`
	RSSKiB int          `json:"rssKiB"`
	HWMKiB int          `json:"hwmKiB"`
	CPU    float64      `json:"cpuSeconds"`
}

// runBaselineChild is the baseline process: Addon Resizer's way of counting.
// Every period it lists all the non-terminal pods in one request (no
// pagination, as Addon Resizer does) and sums their containers, and lists
// the nodes; it keeps nothing between polls. It writes its result to out.
func runBaselineChild(kubeconfig, out string, period time.Duration, polls int) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return fmt.Errorf("reading %s: %w", kubeconfig, err)
	}
	var read atomic.Int64
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { return countingTransport{rt: rt, n: &read} })
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	var res baselineResult
	start := time.Now()
	for i := range polls {
		if i > 0 {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(time.Until(start.Add(time.Duration(i) * period))):
			}
		}
		p, err := poll(ctx, kube, &read)
		if err != nil {
			return err
		}
		res.Lists += 2
		res.Polls = append(res.Polls, p)
		fmt.Printf("poll %d: %+v\n", i+1, p)
	}
	self := os.Getpid()
	st, err := readProc(self)
	if err != nil {
		return err
	}
	res.RSSKiB, res.HWMKiB, res.CPU = st.rssKiB, st.hwmKiB, st.cpu
	data, err := json.Marshal(res)
	if err != nil {
		return err
	}
	return os.WriteFile(out, data, 0o644)
}

func poll(ctx context.Context, kube kubernetes.Interface, read *atomic.Int64) (pollResult, error) {
	var p pollResult
	t, before := time.Now(), read.Load()
	pods, err := kube.CoreV1().Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{FieldSelector: activePods})
	if err != nil {
		return p, fmt.Errorf("listing pods: %w", err)
	}
	p.PodList, p.PodBytes = time.Since(t), read.Load()-before
	p.Pods = len(pods.Items)
	p.Containers = countContainers(pods.Items)
	t = time.Now()
	nodes, err := kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return p, fmt.Errorf("listing nodes: %w", err)
	}
	p.NodeList = time.Since(t)
	p.Nodes = len(nodes.Items)
	p.RSSKiB, err = benchutil.MemKiB(os.Getpid(), "VmRSS")
	return p, err
}

// countingTransport counts the bytes of the response bodies, as the
// client reads them: after the transport's gzip decoding.
type countingTransport struct {
	rt http.RoundTripper
	n  *atomic.Int64
}

func (c countingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := c.rt.RoundTrip(req)
	if err == nil {
		resp.Body = &countingBody{ReadCloser: resp.Body, n: c.n}
	}
	return resp, err
}

type countingBody struct {
	io.ReadCloser
	n *atomic.Int64
}

func (b *countingBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.n.Add(int64(n))
	return n, err
}

func countContainers(pods []corev1.Pod) int {
	n := 0
	for i := range pods {
		s := &pods[i].Spec
		n += len(s.InitContainers) + len(s.Containers) + len(s.EphemeralContainers)
	}
	return n
}

// runBaseline runs this binary again as the baseline child against the
// control plane and returns what it reported.
func runBaseline(ctx context.Context, cp *framework.ControlPlane, period time.Duration, polls int) (baselineResult, error) {
	var res baselineResult
	exe, err := os.Executable()
	if err != nil {
		return res, fmt.Errorf("finding this binary: %w", err)
	}
	out := filepath.Join(cp.Dir(), "baseline.json")
	args := []string{"-baseline-child", "-kubeconfig=" + cp.KubeconfigPath(), "-baseline-out=" + out,
		"-poll=" + period.String(), "-baseline-polls=" + strconv.Itoa(polls)}
	child, err := framework.StartProcess(cp.Dir(), "baseline", exe, args)
	if err != nil {
		return res, fmt.Errorf("starting the baseline: %w", err)
	}
	defer child.Stop(10 * time.Second)
	benchutil.Logf("baseline pid %d, log %s: %d polls every %s", child.Pid(), child.LogPath(), polls, period)
	timeout := time.Duration(polls)*period + 5*time.Minute
	if err := waitExit(ctx, child, timeout); err != nil {
		return res, err
	}
	data, err := os.ReadFile(out)
	if err != nil {
		return res, fmt.Errorf("the baseline reported nothing (%w); log:\n%s", err, child.Tail(20))
	}
	if err := json.Unmarshal(data, &res); err != nil {
		return res, fmt.Errorf("reading the baseline's result: %w", err)
	}
	return res, nil
}

func waitExit(ctx context.Context, p *framework.Process, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for !p.Exited() {
		if time.Now().After(deadline) {
			return errors.New("the baseline did not finish in " + timeout.String())
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
	return nil
}
