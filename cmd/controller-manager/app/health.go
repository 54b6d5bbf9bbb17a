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

package app

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/component-base/metrics/legacyregistry"
	"k8s.io/klog/v2"
)

// healthChecks holds the named checks behind /healthz and /readyz: one per
// controller (named after it) plus leader election.
type healthChecks struct {
	mu     sync.RWMutex
	checks map[string]func(*http.Request) error
	// notReady holds controllers that have not synced their informers yet,
	// and "apiserver" while the API server does not answer, with the reason;
	// /readyz fails while it is not empty.
	notReady map[string]string
}

func newHealthChecks() *healthChecks {
	return &healthChecks{checks: map[string]func(*http.Request) error{}, notReady: map[string]string{}}
}

func (h *healthChecks) add(name string, check func(*http.Request) error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.checks[name] = check
}

// setControllerState records a controller's state: healthy unless failed is
// set, ready once notReadyReason is empty.
func (h *healthChecks) setControllerState(name string, failed error, notReadyReason string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.checks[name] = func(*http.Request) error { return failed }
	if notReadyReason == "" {
		delete(h.notReady, name)
	} else {
		h.notReady[name] = notReadyReason
	}
}

// setNotReady makes /readyz fail with reason until it is called again with
// an empty reason. Unlike setControllerState it leaves /healthz alone: a
// process that cannot reach the API server is not ready, but restarting it
// would not help.
func (h *healthChecks) setNotReady(name, reason string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if reason == "" {
		delete(h.notReady, name)
	} else {
		h.notReady[name] = reason
	}
}

// apiserverProbeInterval is how often the manager checks that the API server
// answers, and apiserverProbeTimeout how long one check may take. Together
// they bound how long /readyz stays ready after the API server went away.
var (
	apiserverProbeInterval = 5 * time.Second
	apiserverProbeTimeout  = 3 * time.Second
)

// probeAPIServer keeps the "apiserver" readiness check up to date until ctx
// ends: not ready until the first probe succeeds, and from every failed
// probe until the next one succeeds. Informers and the leader elector retry
// on their own while the API server is away; this only makes the outage
// visible on /readyz, for the controller manager's own users and probes.
func probeAPIServer(ctx context.Context, probe func(context.Context) error, checks *healthChecks) {
	logger := klog.FromContext(ctx)
	checks.setNotReady("apiserver", "the API server has not answered yet")
	reachable := false
	wait.UntilWithContext(ctx, func(ctx context.Context) {
		probeCtx, cancel := context.WithTimeout(ctx, apiserverProbeTimeout)
		defer cancel()
		err := probe(probeCtx)
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			checks.setNotReady("apiserver", fmt.Sprintf("cannot reach the API server: %v", err))
			if reachable {
				logger.Info("The API server cannot be reached; not ready until it answers", "err", err)
			}
			reachable = false
			return
		}
		checks.setNotReady("apiserver", "")
		if !reachable {
			logger.Info("The API server answers")
		}
		reachable = true
	}, apiserverProbeInterval)
}

func (h *healthChecks) names() []string {
	h.mu.RLock()
	defer h.mu.RUnlock()
	names := make([]string, 0, len(h.checks))
	for name := range h.checks {
		names = append(names, name)
	}
	sort.Strings(names)
	return names
}

func (h *healthChecks) run(r *http.Request, name string) error {
	h.mu.RLock()
	check, ok := h.checks[name]
	h.mu.RUnlock()
	if !ok {
		return fmt.Errorf("no such check")
	}
	return check(r)
}

// healthz answers /healthz (every check) and /healthz/<name> (one check).
func (h *healthChecks) healthz(w http.ResponseWriter, r *http.Request) {
	name := strings.TrimPrefix(strings.TrimPrefix(r.URL.Path, "/healthz"), "/")
	names := h.names()
	if name != "" {
		names = []string{name}
	}
	var b strings.Builder
	failed := false
	for _, n := range names {
		if err := h.run(r, n); err != nil {
			failed = true
			fmt.Fprintf(&b, "[-]%s failed: %v\n", n, err)
			continue
		}
		fmt.Fprintf(&b, "[+]%s ok\n", n)
	}
	h.respond(w, r, failed, b.String())
}

// readyz answers /readyz: ready once every started controller has synced,
// while the API server answers.
func (h *healthChecks) readyz(w http.ResponseWriter, r *http.Request) {
	h.mu.RLock()
	var b strings.Builder
	reasons := make([]string, 0, len(h.notReady))
	for name, reason := range h.notReady {
		reasons = append(reasons, fmt.Sprintf("[-]%s not ready: %s\n", name, reason))
	}
	h.mu.RUnlock()
	sort.Strings(reasons)
	for _, r := range reasons {
		b.WriteString(r)
	}
	h.respond(w, r, len(reasons) > 0, b.String())
}

func (h *healthChecks) respond(w http.ResponseWriter, r *http.Request, failed bool, detail string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	if failed {
		w.WriteHeader(http.StatusInternalServerError)
		fmt.Fprint(w, detail)
		fmt.Fprintln(w, "check failed")
		return
	}
	if _, verbose := r.URL.Query()["verbose"]; verbose {
		fmt.Fprint(w, detail)
	}
	fmt.Fprint(w, "ok")
}

// serveHealthAndMetrics serves /healthz, /readyz and /metrics, and with
// profiling /debug/pprof/, until ctx ends.
func serveHealthAndMetrics(ctx context.Context, address string, port int, profiling bool, checks *healthChecks) error {
	logger := klog.FromContext(ctx)
	mux := newServeMux(checks, profiling)
	server := &http.Server{
		Addr:              net.JoinHostPort(address, strconv.Itoa(port)),
		Handler:           mux,
		ReadHeaderTimeout: 10 * time.Second,
	}
	listener, err := net.Listen("tcp", server.Addr)
	if err != nil {
		return fmt.Errorf("listening for /healthz and /metrics on %s (see --bind-address and --port): %w", server.Addr, err)
	}
	logger.Info("Serving /healthz, /readyz and /metrics", "address", listener.Addr().String())
	go func() {
		<-ctx.Done()
		shutdownCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = server.Shutdown(shutdownCtx)
	}()
	if err := server.Serve(listener); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("serving /healthz and /metrics: %w", err)
	}
	return nil
}

// newServeMux routes the health checks, the metrics and, with profiling, Go's
// profiles.
func newServeMux(checks *healthChecks, profiling bool) *http.ServeMux {
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", checks.healthz)
	mux.HandleFunc("/healthz/", checks.healthz)
	mux.HandleFunc("/readyz", checks.readyz)
	mux.Handle("/metrics", legacyregistry.Handler())
	if profiling {
		// What net/http/pprof registers on http.DefaultServeMux, on this mux
		// instead.
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	}
	return mux
}
