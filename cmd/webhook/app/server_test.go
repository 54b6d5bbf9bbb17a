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
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/util/cert"
)

// writeCert writes a new self-signed certificate for 127.0.0.1 into dir and
// returns its PEM.
func writeCert(t *testing.T, dir string) []byte {
	t.Helper()
	certPEM, keyPEM, err := cert.GenerateSelfSignedCertKey("127.0.0.1", []net.IP{net.ParseIP("127.0.0.1")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "tls.key"), keyPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "tls.crt"), certPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	return certPEM
}

// leaf returns the DER of the first certificate in certPEM.
func leaf(t *testing.T, certPEM []byte) []byte {
	t.Helper()
	block, _ := pem.Decode(certPEM)
	if block == nil {
		t.Fatal("no PEM block")
	}
	return block.Bytes
}

func TestServingCertReload(t *testing.T) {
	dir := t.TempDir()
	first := writeCert(t, dir)
	s, err := newServingCert(filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key"))
	if err != nil {
		t.Fatal(err)
	}
	got, err := s.getCertificate(nil)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got.Certificate[0], leaf(t, first)) {
		t.Fatal("not serving the certificate on disk")
	}

	second := writeCert(t, dir)
	// RunOnce is what the file watcher calls on a change.
	if err := s.content.RunOnce(context.Background()); err != nil {
		t.Fatal(err)
	}
	got, err = s.getCertificate(nil)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got.Certificate[0], leaf(t, second)) {
		t.Error("still serving the old certificate after the files changed")
	}

	// A key that does not match keeps the previous pair in service.
	if err := os.WriteFile(filepath.Join(dir, "tls.crt"), first, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := s.content.RunOnce(context.Background()); err == nil {
		t.Error("loading a certificate that does not match its key succeeded")
	}
	got, err = s.getCertificate(nil)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got.Certificate[0], leaf(t, second)) {
		t.Error("a broken pair on disk replaced the served certificate")
	}
}

func TestNewServingCertFailsOnMissingFiles(t *testing.T) {
	dir := t.TempDir()
	if _, err := newServingCert(filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")); err == nil {
		t.Error("want an error for missing files")
	}
}

// TestServe runs the server on 127.0.0.1 with TLS, checks its endpoints, and
// stops it.
func TestServe(t *testing.T) {
	dir := t.TempDir()
	certPEM := writeCert(t, dir)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	o := NewOptions()
	o.CertFile, o.KeyFile = filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	o.ShutdownGracePeriod = 5 * time.Second

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Serve(ctx, ln, o) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	}()

	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(certPEM)
	client := &http.Client{
		Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}},
		Timeout:   10 * time.Second,
	}
	defer client.CloseIdleConnections()
	base := "https://" + ln.Addr().String()

	get := func(path string) (int, string) {
		resp, err := client.Get(base + path)
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	if code, body := get("/healthz"); code != http.StatusOK || body != "ok" {
		t.Errorf("/healthz = %d %q", code, body)
	}
	for _, path := range []string{CronFederatedHPAPath, LeaderWorkerSetPath, AddonResizerPath} {
		resp, err := client.Post(base+path, "application/json", strings.NewReader("not a review"))
		if err != nil {
			t.Fatalf("POST %s: %v", path, err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest {
			t.Errorf("POST %s with garbage = %d, want 400", path, resp.StatusCode)
		}
	}
	code, body := get("/metrics")
	if code != http.StatusOK || !strings.Contains(body, `scaleplane_webhook_admission_requests_total{kind="LeaderWorkerSet",verdict="bad_request"}`) {
		t.Errorf("/metrics = %d, without the admission request counter:\n%s", code, body)
	}
	if code, _ := get("/nothing"); code != http.StatusNotFound {
		t.Errorf("/nothing = %d, want 404", code)
	}
}

func TestOptionsValidate(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(o *Options)
		want   []string
	}{
		{name: "valid", mutate: func(o *Options) {}},
		{name: "no certificate", mutate: func(o *Options) { o.CertFile = "" },
			want: []string{"--tls-cert-file and --tls-private-key-file are required"}},
		{name: "bad address, port, grace", mutate: func(o *Options) {
			o.BindAddress, o.SecurePort, o.ShutdownGracePeriod = "localhost", 0, -time.Second
		}, want: []string{
			`--bind-address "localhost" is not an IP address`,
			"--secure-port 0 must be between 1 and 65535",
			"--shutdown-grace-period -1s must not be negative",
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o := NewOptions()
			o.CertFile, o.KeyFile = "tls.crt", "tls.key"
			tc.mutate(o)
			err := o.Validate()
			if len(tc.want) == 0 {
				if err != nil {
					t.Errorf("Validate: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("Validate succeeded, want %q", tc.want)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
		})
	}
}

func TestVersionFlag(t *testing.T) {
	cmd := NewWebhookCommand()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetArgs([]string{"--version"})
	if err := cmd.Execute(); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(out.String(), WebhookName+" ") {
		t.Errorf("--version printed %q", out.String())
	}
}
