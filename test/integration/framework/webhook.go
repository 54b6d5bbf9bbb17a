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

package framework

import (
	"strconv"
	"testing"
	"time"
)

// Webhook is a scaleplane-webhook process a test started.
type Webhook struct {
	*Process
	// URL is where it serves: https://127.0.0.1:PORT.
	URL string
	// CACert is the PEM of the CA its serving certificate is from, for a
	// webhook configuration's caBundle or a client.
	CACert []byte
}

// StartWebhook runs the scaleplane-webhook binary in dir on a free port of
// 127.0.0.1 with a serving certificate for 127.0.0.1 from a new CA, and
// stops it when the test ends (printing its log if the test failed).
func StartWebhook(t testing.TB, dir string) *Webhook {
	t.Helper()
	bin, err := Binary("scaleplane-webhook")
	if err != nil {
		t.Fatal(err)
	}
	certs, err := GenerateServingCerts("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile, _, err := certs.WriteFiles(dir, "webhook")
	if err != nil {
		t.Fatal(err)
	}
	port, err := FreePort()
	if err != nil {
		t.Fatal(err)
	}
	p, err := StartProcess(dir, "webhook", bin, []string{
		"--tls-cert-file=" + certFile, "--tls-private-key-file=" + keyFile,
		"--bind-address=127.0.0.1", "--secure-port=" + strconv.Itoa(port),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		p.Stop(5 * time.Second)
		if t.Failed() {
			t.Logf("scaleplane-webhook log:\n%s", p.Tail(50))
		}
	})
	return &Webhook{Process: p, URL: "https://127.0.0.1:" + strconv.Itoa(port), CACert: certs.CACert}
}
