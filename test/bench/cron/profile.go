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
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/scaleplane/scaleplane/test/bench/internal/benchutil"
)

// profiler saves the controller manager's heap profile at the benchmark's
// moments (idle, last target, all statuses) and a CPU profile of the burst,
// from its /debug/pprof/ (--profiling). A zero profiler saves nothing.
type profiler struct {
	dir  string
	base string
	cpu  chan error
}

func newProfiler(dir string, port int) (*profiler, error) {
	if dir == "" {
		return &profiler{}, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	return &profiler{dir: dir, base: fmt.Sprintf("http://127.0.0.1:%d/debug/pprof/", port)}, nil
}

// heap saves the heap profile as heap-<moment>.pb.gz, after a GC (the
// profile's in-use figures are as of the last GC).
func (p *profiler) heap(ctx context.Context, moment string) {
	if p.dir == "" {
		return
	}
	p.save(ctx, "heap?gc=1", "heap-"+moment+".pb.gz")
}

// startCPU starts a CPU profile of the next d, saved as cpu-burst.pb.gz.
func (p *profiler) startCPU(ctx context.Context, d time.Duration) {
	if p.dir == "" {
		return
	}
	p.cpu = make(chan error, 1)
	go func() {
		p.cpu <- p.fetch(ctx, fmt.Sprintf("profile?seconds=%d", int(d.Seconds())), "cpu-burst.pb.gz")
	}()
}

// wait waits for the CPU profile, if one was started.
func (p *profiler) wait() {
	if p.cpu == nil {
		return
	}
	if err := <-p.cpu; err != nil {
		benchutil.Logf("CPU profile: %v", err)
	}
}

func (p *profiler) save(ctx context.Context, query, file string) {
	if err := p.fetch(ctx, query, file); err != nil {
		benchutil.Logf("profile %s: %v", file, err)
	}
}

func (p *profiler) fetch(ctx context.Context, query, file string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.base+query, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s (was the controller manager started with --profiling?)", req.URL, resp.Status)
	}
	path := filepath.Join(p.dir, file)
	out, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, resp.Body); err != nil {
		out.Close()
		return err
	}
	benchutil.Logf("saved %s", path)
	return out.Close()
}
