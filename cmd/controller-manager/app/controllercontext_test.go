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
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/record"

	"github.com/scaleplane/scaleplane/cmd/controller-manager/app/options"
)

// The cron-scaler's writes are bounded by its syncs, not by --kube-api-qps:
// its clients have no rate limiter, while the shared ones keep theirs.
func TestUnboundedClientsHaveNoRateLimiter(t *testing.T) {
	opts := options.NewOptions()
	cfg := &rest.Config{Host: "https://127.0.0.1:1", QPS: opts.Generic.KubeAPIQPS, Burst: opts.Generic.KubeAPIBurst}
	broadcaster := record.NewBroadcaster()
	defer broadcaster.Shutdown()
	cc, err := CreateControllerContext(context.Background(), cfg, opts, broadcaster)
	if err != nil {
		t.Fatal(err)
	}
	if cc.KubeClient.CoreV1().RESTClient().GetRateLimiter() == nil || cc.Client.AutoscalingV1alpha1().RESTClient().GetRateLimiter() == nil {
		t.Errorf("the shared clients lost their rate limiter")
	}
	if l := cc.Unbounded.KubeClient.CoreV1().RESTClient().GetRateLimiter(); l != nil {
		t.Errorf("the unbounded Kubernetes client has a rate limiter (%T)", l)
	}
	if l := cc.Unbounded.Client.AutoscalingV1alpha1().RESTClient().GetRateLimiter(); l != nil {
		t.Errorf("the unbounded scaleplane client has a rate limiter (%T)", l)
	}
	if cfg.QPS != opts.Generic.KubeAPIQPS {
		t.Errorf("building the unbounded clients changed the shared config's QPS to %v", cfg.QPS)
	}
}

// Each controller's requests carry its name in their user agent, as
// kube-controller-manager's do, so an apiserver's audit log tells the three
// apart; its unbounded clients stay unbounded.
func TestForControllerUserAgent(t *testing.T) {
	agents := make(chan string, 10)
	server := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		agents <- r.UserAgent()
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"major":"1","minor":"37","gitVersion":"v1.37.2"}`))
	}))
	defer server.Close()
	opts := options.NewOptions()
	broadcaster := record.NewBroadcaster()
	defer broadcaster.Shutdown()
	cc, err := CreateControllerContext(context.Background(), &rest.Config{Host: server.URL}, opts, broadcaster)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range KnownControllers(NewControllerDescriptors()) {
		own, err := cc.ForController(name)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := own.KubeClient.Discovery().ServerVersion(); err != nil {
			t.Fatal(err)
		}
		if _, err := own.Unbounded.KubeClient.Discovery().ServerVersion(); err != nil {
			t.Fatal(err)
		}
		for _, client := range []string{"client", "unbounded client"} {
			if agent := <-agents; !strings.HasSuffix(agent, "/"+name) {
				t.Errorf("%s's %s sends user agent %q; want it to end in /%s", name, client, agent, name)
			}
		}
		if l := own.Unbounded.KubeClient.CoreV1().RESTClient().GetRateLimiter(); l != nil {
			t.Errorf("%s's unbounded client has a rate limiter (%T)", name, l)
		}
		if own.InformerFactory != cc.InformerFactory {
			t.Errorf("%s got an informer factory of its own; informers are shared", name)
		}
	}
}
