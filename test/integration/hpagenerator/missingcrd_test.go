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

package hpagenerator

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	lwsv1 "github.com/scaleplane/scaleplane/pkg/apis/leaderworkerset/v1"
	"github.com/scaleplane/scaleplane/test/integration/framework"
)

const lwsCRD = "leaderworkersets.leaderworkerset.x-k8s.io"

// TestWaitsForMissingCRD: without the LeaderWorkerSet CRD the manager and its
// other controllers run, the hpa-generator says once that it waits, and once
// the CRD is installed it starts and does its job. (Its file sorts last: it
// removes the CRD the other tests use, and puts it back.)
func TestWaitsForMissingCRD(t *testing.T) {
	cp := framework.Get(t)
	ctx := context.Background()
	root, err := framework.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	crdDir := filepath.Join(root, "artifacts", "deploy", "crds")
	reinstall := func() {
		if _, err := framework.InstallCRDs(ctx, cp.DynamicClient(), crdDir, 60*time.Second); err != nil {
			t.Fatalf("reinstalling the CRDs: %v", err)
		}
	}
	t.Cleanup(reinstall)
	if err := cp.DynamicClient().Resource(framework.CRDResource).Delete(ctx, lwsCRD, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
		_, err := cp.DynamicClient().Resource(framework.CRDResource).Get(ctx, lwsCRD, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	if err != nil {
		t.Fatalf("the LeaderWorkerSet CRD was not removed: %v", err)
	}
	// Discovery drops the resource a moment after the CRD is gone; a manager
	// started in between finds it served, and its informer gets 404s that
	// would pass for discovery polls.
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
		list, err := cp.KubeClient().Discovery().ServerResourcesForGroupVersion(lwsv1.SchemeGroupVersion.String())
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		return err == nil && !slices.ContainsFunc(list.APIResources, func(r metav1.APIResource) bool { return r.Name == "leaderworkersets" }), nil
	})
	if err != nil {
		t.Fatalf("discovery still serves LeaderWorkerSets after their CRD was removed: %v", err)
	}

	m := framework.StartManager(t, cp.KubeconfigPath(), "hpa-generator,cron-scaler")
	// The wait is said at the first discovery poll; it must not be said again
	// at the next two (every 10 s). Each poll asks for the missing group
	// version and gets a 404, the only 404 this manager's client gets (its
	// other requests are for what is installed), so three of them are three
	// polls.
	waitDiscoveryPolls(t, m, 3)
	if m.Exited() {
		t.Fatalf("the manager exited without the CRD:\n%s", m.Tail(50))
	}
	log := m.Tail(1000)
	if n := strings.Count(log, "Waiting for API resources"); n != 1 {
		t.Errorf("the wait for the CRD was logged %d times, want once:\n%s", n, log)
	}
	resp, err := http.Get("http://127.0.0.1:" + strconv.Itoa(m.Port) + "/healthz/cron-scaler")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("the cron-scaler is not healthy while the hpa-generator waits: %d", resp.StatusCode)
	}

	reinstall()
	ns := cp.CreateNamespace(t)
	var lws *lwsv1.LeaderWorkerSet
	// The CRD was just created again: the first create may be refused until
	// the apiserver serves it.
	err = wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		var err error
		lws, err = cp.Client().LeaderworkersetV1().LeaderWorkerSets(ns).Create(ctx,
			leaderWorkerSet(ns, "late", &lwsv1.ScalePolicy{MaxReplicas: 3, Metrics: []autoscalingv2.MetricSpec{cpuMetric(50)}}), metav1.CreateOptions{})
		return err == nil, nil
	})
	if err != nil {
		t.Fatalf("creating a LeaderWorkerSet after reinstalling the CRD: %v", err)
	}
	waitHPA(t, cp, ns, "late", generated(lws, 1, 3, 50))
}

// waitDiscoveryPolls waits until the manager's client got n 404 answers to
// GETs (rest_client_requests_total), or fails the test if it exits first.
func waitDiscoveryPolls(t *testing.T, m *framework.Manager, n float64) {
	t.Helper()
	var got float64
	start := time.Now()
	err := wait.PollUntilContextTimeout(context.Background(), 500*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
		if m.Exited() {
			return false, fmt.Errorf("the manager exited without the CRD:\n%s", m.Tail(50))
		}
		v, _, err := m.Metric("rest_client_requests_total", `code="404"`, `method="GET"`)
		if err != nil {
			// Not serving /metrics yet.
			return false, nil
		}
		got = v
		return got >= n, nil
	})
	if err != nil {
		t.Fatalf("waiting for %v discovery polls (404s), saw %v: %v", n, got, err)
	}
	// About 20 s for three: much less would mean 404s that are not polls.
	t.Logf("%v discovery polls in %v", got, time.Since(start).Round(100*time.Millisecond))
}
