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
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	fakediscovery "k8s.io/client-go/discovery/fake"
	kubefake "k8s.io/client-go/kubernetes/fake"
)

func get(t *testing.T, handler http.HandlerFunc, path string) (int, string) {
	t.Helper()
	rec := httptest.NewRecorder()
	handler(rec, httptest.NewRequest(http.MethodGet, path, nil))
	return rec.Code, rec.Body.String()
}

func TestHealthz(t *testing.T) {
	h := newHealthChecks()
	h.setControllerState("cron-scaler", nil, "")
	h.setControllerState("resizer", errors.New("boom"), "boom")

	code, body := get(t, h.healthz, "/healthz/cron-scaler")
	if code != http.StatusOK || body != "ok" {
		t.Errorf("/healthz/cron-scaler = %d %q, want 200 ok", code, body)
	}
	code, body = get(t, h.healthz, "/healthz/resizer")
	if code != http.StatusInternalServerError || !strings.Contains(body, "[-]resizer failed: boom") {
		t.Errorf("/healthz/resizer = %d %q, want 500 naming the failure", code, body)
	}
	code, body = get(t, h.healthz, "/healthz")
	if code != http.StatusInternalServerError || !strings.Contains(body, "[+]cron-scaler ok") {
		t.Errorf("/healthz = %d %q, want 500 listing every check", code, body)
	}
	code, _ = get(t, h.healthz, "/healthz/unknown")
	if code != http.StatusInternalServerError {
		t.Errorf("/healthz/unknown = %d, want 500", code)
	}

	h.setControllerState("resizer", nil, "")
	code, body = get(t, h.healthz, "/healthz?verbose")
	if code != http.StatusOK || !strings.Contains(body, "[+]resizer ok") {
		t.Errorf("/healthz?verbose after recovery = %d %q", code, body)
	}
}

func TestReadyz(t *testing.T) {
	h := newHealthChecks()
	h.setControllerState("cron-scaler", nil, "waiting for informer caches to sync")
	code, body := get(t, h.readyz, "/readyz")
	if code != http.StatusInternalServerError || !strings.Contains(body, "cron-scaler not ready: waiting for informer caches to sync") {
		t.Errorf("/readyz while syncing = %d %q", code, body)
	}
	h.setControllerState("cron-scaler", nil, "")
	if code, body := get(t, h.readyz, "/readyz"); code != http.StatusOK || body != "ok" {
		t.Errorf("/readyz once synced = %d %q", code, body)
	}
}

func discoveryWith(resources map[string][]string) *fakediscovery.FakeDiscovery {
	client := kubefake.NewClientset()
	fake := client.Discovery().(*fakediscovery.FakeDiscovery)
	for gv, names := range resources {
		list := &metav1.APIResourceList{GroupVersion: gv}
		for _, name := range names {
			list.APIResources = append(list.APIResources, metav1.APIResource{Name: name})
		}
		fake.Resources = append(fake.Resources, list)
	}
	return fake
}

func TestMissingResources(t *testing.T) {
	cron := schema.GroupVersionResource{Group: "autoscaling.karmada.io", Version: "v1alpha1", Resource: "cronfederatedhpas"}
	lws := schema.GroupVersionResource{Group: "leaderworkerset.x-k8s.io", Version: "v1", Resource: "leaderworkersets"}
	client := discoveryWith(map[string][]string{"autoscaling.karmada.io/v1alpha1": {"cronfederatedhpas", "federatedhpas"}})
	missing, err := missingResources(client, []schema.GroupVersionResource{cron, lws})
	if err != nil {
		t.Fatalf("missingResources: %v", err)
	}
	if len(missing) != 1 || missing[0] != lws.String() {
		t.Errorf("missing = %v, want only %s", missing, lws)
	}
}

func TestWaitForResourcesReturnsWhenServed(t *testing.T) {
	cron := schema.GroupVersionResource{Group: "autoscaling.karmada.io", Version: "v1alpha1", Resource: "cronfederatedhpas"}
	client := discoveryWith(map[string][]string{"autoscaling.karmada.io/v1alpha1": {"cronfederatedhpas"}})
	if err := waitForResources(context.Background(), client, []schema.GroupVersionResource{cron}); err != nil {
		t.Fatalf("waitForResources with the resource served: %v", err)
	}
}

func TestWaitForResourcesStopsWithContext(t *testing.T) {
	lws := schema.GroupVersionResource{Group: "leaderworkerset.x-k8s.io", Version: "v1", Resource: "leaderworkersets"}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := waitForResources(ctx, discoveryWith(nil), []schema.GroupVersionResource{lws}); err == nil {
		t.Fatal("waitForResources returned nil for a missing resource and a cancelled context")
	}
}

// /readyz fails while the API server does not answer, and recovers when it
// does; /healthz is not affected (a restart would not bring the API server
// back).
func TestReadyzFollowsTheAPIServer(t *testing.T) {
	savedInterval := apiserverProbeInterval
	apiserverProbeInterval = 10 * time.Millisecond
	t.Cleanup(func() { apiserverProbeInterval = savedInterval })

	h := newHealthChecks()
	h.setControllerState("cron-scaler", nil, "")
	var down atomic.Bool
	probe := func(context.Context) error {
		if down.Load() {
			return errors.New("connection refused")
		}
		return nil
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	down.Store(true)
	go probeAPIServer(ctx, probe, h)
	waitFor(t, func() bool {
		code, body := get(t, h.readyz, "/readyz")
		return code == http.StatusInternalServerError && strings.Contains(body, "[-]apiserver not ready: cannot reach the API server: connection refused")
	}, "/readyz to fail while the API server is down")
	if code, _ := get(t, h.healthz, "/healthz"); code != http.StatusOK {
		t.Errorf("/healthz while the API server is down = %d, want 200", code)
	}

	down.Store(false)
	waitFor(t, func() bool {
		code, _ := get(t, h.readyz, "/readyz")
		return code == http.StatusOK
	}, "/readyz to recover once the API server answers")

	down.Store(true)
	waitFor(t, func() bool {
		code, _ := get(t, h.readyz, "/readyz")
		return code == http.StatusInternalServerError
	}, "/readyz to fail again on the next outage")
}

func waitFor(t *testing.T, cond func() bool, what string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestProfilingIsOptIn: /debug/pprof/ is served only with --profiling, and
// the health checks and metrics either way.
func TestProfilingIsOptIn(t *testing.T) {
	for _, profiling := range []bool{false, true} {
		mux := newServeMux(newHealthChecks(), profiling)
		for path, want := range map[string]int{
			"/debug/pprof/":     map[bool]int{false: http.StatusNotFound, true: http.StatusOK}[profiling],
			"/debug/pprof/heap": map[bool]int{false: http.StatusNotFound, true: http.StatusOK}[profiling],
			"/metrics":          http.StatusOK,
			"/healthz":          http.StatusOK,
		} {
			code, _ := get(t, mux.ServeHTTP, path)
			if code != want {
				t.Errorf("profiling=%v: GET %s = %d, want %d", profiling, path, code, want)
			}
		}
	}
}
