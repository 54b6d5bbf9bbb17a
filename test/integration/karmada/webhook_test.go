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

package karmada

import (
	"fmt"
	"net/url"
	"os"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/scaleplane/scaleplane/test/integration/framework"
)

const (
	webhookServer        = "artifacts/deploy/karmada/webhook.yaml"
	webhookConfiguration = "artifacts/deploy/karmada/webhook-configuration.yaml"
)

// TestWebhookManifests: the webhook's server manifests (host cluster) and
// its configuration (karmada-apiserver) are accepted by an apiserver, and the
// configuration's URL is the server's Service, which karmada-apiserver
// resolves through the host cluster's DNS.
func TestWebhookManifests(t *testing.T) {
	cp := framework.Get(t)
	ensureNamespace(t, cp, karmadaNamespace)
	for _, f := range []string{webhookServer, webhookConfiguration} {
		out := kubectl(t, cp, "apply", "--dry-run=server", "-f", repoPath(t, f))
		t.Logf("%s:\n%s", f, out)
	}

	service := serviceOf(t)
	host := fmt.Sprintf("%s.%s.svc", service.Name, service.Namespace)
	config := configurationOf(t)
	if len(config.Webhooks) != 1 {
		t.Fatalf("%d webhooks, want the CronFederatedHPA one only (the sidecar runs the cron-scaler)", len(config.Webhooks))
	}
	w := config.Webhooks[0]
	if w.ClientConfig.Service != nil || w.ClientConfig.URL == nil {
		t.Fatalf("clientConfig %+v: karmada-apiserver needs a url, it cannot resolve the host cluster's Services by reference", w.ClientConfig)
	}
	u, err := url.Parse(*w.ClientConfig.URL)
	if err != nil {
		t.Fatal(err)
	}
	if u.Scheme != "https" || u.Hostname() != host || u.Port() != fmt.Sprint(service.Spec.Ports[0].Port) {
		t.Errorf("url %s does not reach the Service %s port %d over https", u, host, service.Spec.Ports[0].Port)
	}
	if u.Path != "/validate-cronfederatedhpa" || len(w.Rules) != 1 || w.Rules[0].Resources[0] != "cronfederatedhpas" {
		t.Errorf("webhook %s: path %s, rules %+v; want CronFederatedHPAs on /validate-cronfederatedhpa", w.Name, u.Path, w.Rules)
	}
}

func serviceOf(t *testing.T) *corev1.Service {
	t.Helper()
	data, err := os.ReadFile(repoPath(t, webhookServer))
	if err != nil {
		t.Fatal(err)
	}
	for _, doc := range strings.Split(string(data), "\n---\n") {
		var s corev1.Service
		if err := yaml.Unmarshal([]byte(doc), &s); err == nil && s.Kind == "Service" {
			return &s
		}
	}
	t.Fatalf("no Service in %s", webhookServer)
	return nil
}

func configurationOf(t *testing.T) *admissionregistrationv1.ValidatingWebhookConfiguration {
	t.Helper()
	data, err := os.ReadFile(repoPath(t, webhookConfiguration))
	if err != nil {
		t.Fatal(err)
	}
	config := &admissionregistrationv1.ValidatingWebhookConfiguration{}
	if err := yaml.UnmarshalStrict(data, config); err != nil {
		t.Fatalf("decoding %s: %v", webhookConfiguration, err)
	}
	return config
}
