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
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
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

// The informers list and watch on a connection of their own, not on the one
// the controllers' writes take: on a shared HTTP/2 connection a burst of
// writes delays the watches' events until the apiserver closes the watchers
// (see createWatchClients). The server speaks HTTP/2 over TLS, as an
// apiserver does, so that every request of one transport shares one
// connection; the connection is told by the client's address.
func TestInformersWatchOnAConnectionOfTheirOwn(t *testing.T) {
	type request struct{ path, remote string }
	requests := make(chan request, 100)
	server := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests <- request{r.URL.Path, r.RemoteAddr}
		w.Header().Set("Content-Type", "application/json")
		switch {
		case r.URL.Query().Get("watch") == "true":
			// Neither a streamed list nor events: the informer lists instead
			// of streaming, then waits on its watch until the test ends.
			if r.URL.Query().Get("sendInitialEvents") == "true" {
				w.WriteHeader(http.StatusBadRequest)
				_, _ = w.Write([]byte(`{"kind":"Status","apiVersion":"v1","status":"Failure","code":400,"reason":"BadRequest"}`))
				return
			}
			w.WriteHeader(http.StatusOK)
			w.(http.Flusher).Flush()
			<-r.Context().Done()
		case strings.HasSuffix(r.URL.Path, "/namespaces"):
			_, _ = w.Write([]byte(`{"kind":"NamespaceList","apiVersion":"v1","metadata":{"resourceVersion":"1"},"items":[]}`))
		case strings.HasSuffix(r.URL.Path, "/cronfederatedhpas"):
			_, _ = w.Write([]byte(`{"kind":"CronFederatedHPAList","apiVersion":"autoscaling.karmada.io/v1alpha1","metadata":{"resourceVersion":"1"},"items":[]}`))
		default:
			_, _ = w.Write([]byte(`{"major":"1","minor":"37","gitVersion":"v1.37.2"}`))
		}
	}))
	server.EnableHTTP2 = true
	server.StartTLS()
	defer server.Close()
	cfg := &rest.Config{Host: server.URL, TLSClientConfig: rest.TLSClientConfig{
		CAData: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: server.Certificate().Raw}),
	}}
	opts := options.NewOptions()
	broadcaster := record.NewBroadcaster()
	defer broadcaster.Shutdown()
	cc, err := CreateControllerContext(context.Background(), cfg, opts, broadcaster)
	if err != nil {
		t.Fatal(err)
	}
	own, err := cc.ForController("cron-scaler")
	if err != nil {
		t.Fatal(err)
	}
	// The writes' connection: the unbounded clients' and the controller's own
	// clients' (one transport: client-go caches them by TLS settings).
	if _, err := own.Unbounded.KubeClient.Discovery().ServerVersion(); err != nil {
		t.Fatal(err)
	}
	writes := (<-requests).remote
	if _, err := own.KubeClient.Discovery().ServerVersion(); err != nil {
		t.Fatal(err)
	}
	if remote := (<-requests).remote; remote != writes {
		t.Fatalf("the controller's clients came from %s and %s; the test expects one connection for a transport", writes, remote)
	}

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	namespaces := cc.InformerFactory.Core().V1().Namespaces().Informer()
	crons := cc.ScaleplaneInformerFactory.Autoscaling().V1alpha1().CronFederatedHPAs().Informer()
	cc.StartInformers(ctx)
	if !cache.WaitForCacheSync(ctx.Done(), namespaces.HasSynced, crons.HasSynced) {
		t.Fatal("the informers did not sync")
	}
	lists := map[string]string{}
	for len(lists) < 2 {
		r := <-requests
		if strings.HasSuffix(r.path, "/namespaces") || strings.HasSuffix(r.path, "/cronfederatedhpas") {
			lists[r.path] = r.remote
		}
	}
	for path, remote := range lists {
		if remote == writes {
			t.Errorf("the informer of %s listed on the writes' connection (%s); want a connection of its own", path, remote)
		}
	}
	cancel()
	cc.InformerFactory.Shutdown()
	cc.ScaleplaneInformerFactory.Shutdown()
}
