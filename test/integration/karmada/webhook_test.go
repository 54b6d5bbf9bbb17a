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
	"context"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
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

// TestWebhookPerInstaller: for each installer, scaleplane's configuration as
// its README renders it calls a scaleplane-webhook in the namespace where
// that installer's karmada-webhook serves (the Karmada object's for the
// operator), and sits beside Karmada's own CronFederatedHPA webhook where
// the installer registers one: another object, another webhook name, both
// accepted by the apiserver at once, so that Karmada's rules still apply.
func TestWebhookPerInstaller(t *testing.T) {
	cp := framework.Get(t)
	karmadaPatch(t)
	for _, in := range installers {
		t.Run(in.name, func(t *testing.T) {
			d := in.deployment(t)
			namespace := d.Namespace
			var karmada *admissionregistrationv1.ValidatingWebhookConfiguration
			if in.webhook != "" {
				karmada = &admissionregistrationv1.ValidatingWebhookConfiguration{}
				data, err := os.ReadFile(in.webhook)
				if err != nil {
					t.Fatal(err)
				}
				if err := yaml.UnmarshalStrict(data, karmada); err != nil {
					t.Fatal(err)
				}
				u, err := url.Parse(*karmada.Webhooks[0].ClientConfig.URL)
				if err != nil {
					t.Fatal(err)
				}
				parts := strings.Split(u.Hostname(), ".")
				if len(parts) != 3 || parts[2] != "svc" || parts[1] != namespace {
					t.Fatalf("Karmada's webhook %s is not a Service in %s", u, namespace)
				}
			}
			want := fmt.Sprintf("https://scaleplane-webhook.%s.svc:443", namespace)
			s := newREADMESession(t, cp, in.readme)
			s.mustSay("--set webhook.configuration.url=" + want)
			rendered := helmTemplate(t, namespace, "-f", repoPath(t, "charts/scaleplane/values-karmada.yaml"),
				"--set", "webhook.server.enabled=false", "--set", "webhook.caBundle=Cg==", "--set", "webhook.configuration.url="+want)
			ours := &admissionregistrationv1.ValidatingWebhookConfiguration{}
			if err := yaml.Unmarshal([]byte(strings.TrimPrefix(strings.TrimSpace(rendered), "---")), ours); err != nil {
				t.Fatalf("decoding the rendered configuration: %v\n%s", err, rendered)
			}
			if len(ours.Webhooks) != 1 || *ours.Webhooks[0].ClientConfig.URL != want+"/validate-cronfederatedhpa" {
				t.Fatalf("rendered %+v, want one webhook at %s/validate-cronfederatedhpa", ours.Webhooks, want)
			}
			ctx := context.Background()
			client := cp.KubeClient().AdmissionregistrationV1().ValidatingWebhookConfigurations()
			for _, c := range []*admissionregistrationv1.ValidatingWebhookConfiguration{karmada, ours} {
				if c == nil {
					continue
				}
				if karmada != nil && c == ours && (c.Name == karmada.Name || c.Webhooks[0].Name == karmada.Webhooks[0].Name) {
					t.Errorf("scaleplane's configuration %s/%s would replace Karmada's", c.Name, c.Webhooks[0].Name)
				}
				// Real objects, but nothing serves them: removed at once.
				c = c.DeepCopy()
				c.Webhooks[0].FailurePolicy = ptr.To(admissionregistrationv1.Ignore)
				if _, err := client.Create(ctx, c, metav1.CreateOptions{}); err != nil {
					t.Fatalf("creating %s: %v", c.Name, err)
				}
				name := c.Name
				t.Cleanup(func() { _ = client.Delete(ctx, name, metav1.DeleteOptions{}) })
			}
			// The server's side, in the same namespace.
			server := helmTemplate(t, namespace, "-f", repoPath(t, "charts/scaleplane/values-karmada.yaml"), "--set", "webhook.configuration.enabled=false")
			if !strings.Contains(server, "namespace: "+namespace+"\n") || !strings.Contains(server, "secretName: scaleplane-webhook-cert") {
				t.Errorf("the webhook server is not rendered in %s with the Secret scaleplane-webhook-cert:\n%s", namespace, server)
			}
		})
	}
}

// TestExistingObjectsCheck runs the README's check of existing objects: a
// dry-run create of a renamed copy of each CronFederatedHPA, which goes
// through admission as a create (a dry-run replace of an unchanged object
// is an update the webhook does not judge), and stores nothing.
func TestExistingObjectsCheck(t *testing.T) {
	cp := framework.Get(t)
	karmadaPatch(t)
	ns := cp.CreateNamespace(t)
	object := filepath.Join(t.TempDir(), "cron.yaml")
	manifest := `apiVersion: autoscaling.karmada.io/v1alpha1
kind: CronFederatedHPA
metadata:
  name: nightly
spec:
  scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: web}
  rules:
    - {name: down, schedule: "0 22 * * *", targetReplicas: 1}
`
	if err := os.WriteFile(object, []byte(manifest), 0o600); err != nil {
		t.Fatal(err)
	}
	kubectl(t, cp, "-n", ns, "create", "-f", object)
	s := newREADMESession(t, cp, "docs/karmada/README.md")
	line := "kubectl --kubeconfig karmada-apiserver.config get cronfhpa -A -o json \\\n" +
		"  | jq '.items |= map({apiVersion, kind, metadata: {namespace: .metadata.namespace, name: (\"check-\" + .metadata.name)}, spec})' \\\n" +
		"  | kubectl --kubeconfig karmada-apiserver.config create --dry-run=server -f -"
	// Objects other tests left (in namespaces being deleted, say) may be
	// refused: the exit status is not this test's; its object's line is.
	s.mustSay(line)
	cmd := exec.Command("bash", "-o", "pipefail", "-c", line)
	cmd.Dir, cmd.Env = s.dir, s.env
	raw, _ := cmd.CombinedOutput()
	if out := string(raw); !strings.Contains(out, "check-nightly created (server dry run)") {
		t.Errorf("the README's check printed:\n%s\nwant check-nightly created (server dry run)", out)
	}
	if out, err := kubectlErr(cp, "-n", ns, "get", "cronfhpa", "check-nightly"); err == nil {
		t.Errorf("the dry run stored check-nightly:\n%s", out)
	}
}
