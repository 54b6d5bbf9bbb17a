package framework

import (
	"crypto/tls"
	"crypto/x509"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestGenerateServingCerts serves TLS with a generated certificate and
// connects to it on 127.0.0.1 trusting only the generated CA, as
// kube-apiserver does with a webhook's caBundle.
func TestGenerateServingCerts(t *testing.T) {
	certs, err := GenerateServingCerts()
	if err != nil {
		t.Fatal(err)
	}
	serverTLS, err := certs.TLSConfig()
	if err != nil {
		t.Fatal(err)
	}
	server := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte("ok"))
	}))
	server.TLS = serverTLS
	server.StartTLS()
	defer server.Close()

	pool, err := certPool(certs.CACert)
	if err != nil {
		t.Fatal(err)
	}
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}}
	resp, err := client.Get(server.URL)
	if err != nil {
		t.Fatalf("TLS request verified against the generated CA: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("status %d, want 200", resp.StatusCode)
	}

	// A client trusting another CA must refuse the certificate.
	other, err := GenerateServingCerts()
	if err != nil {
		t.Fatal(err)
	}
	otherPool, err := certPool(other.CACert)
	if err != nil {
		t.Fatal(err)
	}
	client = &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: otherPool, MinVersion: tls.VersionTLS12}}}
	if resp, err := client.Get(server.URL); err == nil {
		resp.Body.Close()
		t.Error("request trusting an unrelated CA succeeded, want a certificate error")
	}

	block, err := tls.X509KeyPair(certs.Cert, certs.Key)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(block.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	if err := leaf.VerifyHostname("localhost"); err != nil {
		t.Errorf("certificate not valid for localhost: %v", err)
	}
	if len(leaf.IPAddresses) != 1 || !leaf.IPAddresses[0].Equal(net.ParseIP("127.0.0.1")) {
		t.Errorf("certificate IPs = %v, want [127.0.0.1]", leaf.IPAddresses)
	}
}

func TestReadCRDs(t *testing.T) {
	t.Run("missing directory", func(t *testing.T) {
		crds, err := ReadCRDs(filepath.Join(t.TempDir(), "absent"))
		if err != nil || len(crds) != 0 {
			t.Errorf("ReadCRDs(missing) = %v, %v; want none and no error", crds, err)
		}
	})
	t.Run("multi-document file", func(t *testing.T) {
		dir := t.TempDir()
		data := `---
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: as.example.com
---
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: bs.example.com
---
`
		if err := os.WriteFile(filepath.Join(dir, "crds.yaml"), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "README.md"), []byte("not a CRD"), 0o644); err != nil {
			t.Fatal(err)
		}
		crds, err := ReadCRDs(dir)
		if err != nil {
			t.Fatal(err)
		}
		if len(crds) != 2 || crds[0].GetName() != "as.example.com" || crds[1].GetName() != "bs.example.com" {
			t.Errorf("ReadCRDs = %d CRDs, want as.example.com and bs.example.com", len(crds))
		}
	})
	t.Run("not a CRD", func(t *testing.T) {
		dir := t.TempDir()
		data := "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n"
		if err := os.WriteFile(filepath.Join(dir, "cm.yaml"), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := ReadCRDs(dir); err == nil {
			t.Error("ReadCRDs accepted a ConfigMap, want an error")
		}
	})
}

func TestBinaryMissingSaysMakeTools(t *testing.T) {
	t.Setenv(BinDirEnv, t.TempDir())
	_, err := Binary("kube-apiserver")
	if err == nil {
		t.Fatal("Binary found kube-apiserver in an empty directory")
	}
	if !strings.Contains(err.Error(), "make tools") {
		t.Errorf("error %q does not tell to run make tools", err)
	}
}
