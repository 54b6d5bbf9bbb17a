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

package webhook

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/scaleplane/scaleplane/cmd/webhook/app"
	"github.com/scaleplane/scaleplane/test/integration/framework"
)

// webhookEnv is a running webhook and its registration.
type webhookEnv struct {
	cp       *framework.ControlPlane
	addr     string
	dir      string
	certFile string
	keyFile  string
	// caPEM is the CA the webhook's current certificate is signed by.
	caPEM  []byte
	config *admissionregistrationv1.ValidatingWebhookConfiguration
}

// startWebhook serves the webhook from this process on 127.0.0.1 with a
// fresh CA, registers it, and waits until the apiserver calls it. Everything
// is undone when t ends.
func startWebhook(t *testing.T, cp *framework.ControlPlane) *webhookEnv {
	t.Helper()
	env := &webhookEnv{cp: cp, dir: t.TempDir()}
	certs, err := framework.GenerateServingCerts()
	if err != nil {
		t.Fatal(err)
	}
	env.certFile, env.keyFile, _, err = certs.WriteFiles(env.dir, "webhook")
	if err != nil {
		t.Fatal(err)
	}

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	env.addr = ln.Addr().String()
	env.caPEM = certs.CACert
	o := app.NewOptions()
	o.CertFile, o.KeyFile = env.certFile, env.keyFile
	o.ShutdownGracePeriod = 5 * time.Second
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- app.Serve(ctx, ln, o) }()
	t.Cleanup(func() {
		cancel()
		if err := <-served; err != nil {
			t.Errorf("webhook server: %v", err)
		}
	})

	env.config = localConfiguration(t, "https://"+env.addr, certs.CACert)
	client := cp.KubeClient().AdmissionregistrationV1().ValidatingWebhookConfigurations()
	if _, err := client.Create(context.Background(), env.config, metav1.CreateOptions{}); err != nil {
		t.Fatalf("registering the webhook: %v", err)
	}
	t.Cleanup(func() {
		if err := client.Delete(context.Background(), env.config.Name, metav1.DeleteOptions{}); err != nil {
			t.Errorf("deleting the webhook configuration: %v", err)
		}
	})
	env.waitRegistered(t)
	return env
}

// localConfiguration reads the shipped ValidatingWebhookConfiguration and
// points every webhook at baseURL + its service path, as
// hack/local-up-webhook.sh does.
func localConfiguration(t *testing.T, baseURL string, caBundle []byte) *admissionregistrationv1.ValidatingWebhookConfiguration {
	t.Helper()
	root, err := framework.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(root, "artifacts", "deploy", "webhook", "validatingwebhookconfiguration.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	config := &admissionregistrationv1.ValidatingWebhookConfiguration{}
	if err := yaml.UnmarshalStrict(data, config); err != nil {
		t.Fatalf("decoding the shipped ValidatingWebhookConfiguration: %v", err)
	}
	if len(config.Webhooks) != 3 {
		t.Fatalf("the shipped configuration has %d webhooks, want 3", len(config.Webhooks))
	}
	for i := range config.Webhooks {
		w := &config.Webhooks[i]
		if w.ClientConfig.Service == nil || w.ClientConfig.Service.Path == nil {
			t.Fatalf("webhook %s has no service path", w.Name)
		}
		w.ClientConfig = admissionregistrationv1.WebhookClientConfig{
			URL:      ptr.To(baseURL + *w.ClientConfig.Service.Path),
			CABundle: caBundle,
		}
	}
	return config
}

// waitRegistered waits until the apiserver's view of webhook configurations
// includes ours: a dry-run create that only the webhook refuses is refused
// by it.
func (env *webhookEnv) waitRegistered(t *testing.T) {
	t.Helper()
	ns := env.cp.CreateNamespace(t)
	probes := map[string]func(context.Context) error{
		"cronfederatedhpa": func(ctx context.Context) error {
			_, err := env.cp.Client().AutoscalingV1alpha1().CronFederatedHPAs(ns).Create(ctx,
				cronFHPA("probe", deploymentRef(), replicasRule("r", "0 8 31 2 *", 1)), dryRun)
			return err
		},
		"leaderworkerset": func(ctx context.Context) error {
			_, err := env.cp.Client().LeaderworkersetV1().LeaderWorkerSets(ns).Create(ctx,
				lws("probe", policyWithMetrics(podsMetric("a/b", "1"))), dryRun)
			return err
		},
		"addonresizer": func(ctx context.Context) error {
			ar := addonResizer("probe")
			ar.Spec.ContainerName = "pod.nanny"
			_, err := env.cp.Client().ScaleplaneV1alpha1().AddonResizers(ns).Create(ctx, ar, dryRun)
			return err
		},
	}
	for name, create := range probes {
		var last error
		err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, 30*time.Second, true,
			func(ctx context.Context) (bool, error) {
				last = create(ctx)
				return last != nil && strings.Contains(last.Error(), "denied the request"), nil
			})
		if err != nil {
			t.Fatalf("the apiserver does not call the %s webhook: %v (last answer: %v)", name, err, last)
		}
	}
}

var dryRun = metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}

// metric returns the value of a counter sample of the webhook's /metrics,
// 0 when it has not been counted yet.
func (env *webhookEnv) metric(t *testing.T, sample string) float64 {
	t.Helper()
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(env.caPEM)
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12},
	}}
	defer client.CloseIdleConnections()
	resp, err := client.Get("https://" + env.addr + "/metrics")
	if err != nil {
		t.Fatalf("reading /metrics: %v", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(body), "\n") {
		if value, ok := strings.CutPrefix(line, sample+" "); ok {
			v, err := strconv.ParseFloat(value, 64)
			if err != nil {
				t.Fatalf("metric %s: %v", line, err)
			}
			return v
		}
	}
	return 0
}

// servedCertificate returns the leaf certificate the webhook serves.
func (env *webhookEnv) servedCertificate() (*x509.Certificate, error) {
	conn, err := tls.Dial("tcp", env.addr, &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS12}) //nolint:gosec // only reads the certificate
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	certs := conn.ConnectionState().PeerCertificates
	if len(certs) == 0 {
		return nil, errors.New("no certificate served")
	}
	return certs[0], nil
}

// denial is the error text kube-apiserver returns for a webhook's denial.
func denial(webhook, message string) string {
	return fmt.Sprintf("admission webhook %q denied the request: %s", webhook, message)
}

const (
	cronWebhook = "cronfederatedhpa.validation.scaleplane.io"
	lwsWebhook  = "leaderworkerset-scalepolicy.validation.scaleplane.io"
	arWebhook   = "addonresizer.validation.scaleplane.io"
)

// checkErr compares an API error with what the test expects: nil for
// success, otherwise the error must contain want and be Forbidden (webhook
// denials) or Invalid (schema).
func checkErr(t *testing.T, err error, want string) {
	t.Helper()
	switch {
	case want == "" && err != nil:
		t.Errorf("refused: %v", err)
	case want == "":
	case err == nil:
		t.Errorf("accepted, want refused with %q", want)
	case !strings.Contains(err.Error(), want):
		t.Errorf("error:\n  %v\nwant it to contain:\n  %s", err, want)
	case !apierrors.IsForbidden(err) && !apierrors.IsInvalid(err):
		t.Errorf("error %v has reason %q, want Forbidden or Invalid", err, apierrors.ReasonForError(err))
	}
}

// leafOf parses the first certificate of a PEM bundle.
func leafOf(t *testing.T, certPEM []byte) *x509.Certificate {
	t.Helper()
	block, _ := pem.Decode(certPEM)
	if block == nil {
		t.Fatal("no PEM certificate")
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return cert
}
