package framework

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// ServingCerts is a throw-away certificate authority and a serving
// certificate it signed, all PEM encoded. The control plane uses one for
// kube-apiserver; webhook tests use one for the webhook server that
// kube-apiserver calls (put CACert in the webhook configuration's caBundle).
type ServingCerts struct {
	CACert []byte
	Cert   []byte
	Key    []byte
}

// GenerateServingCerts makes a new CA and a serving certificate for hosts,
// each an IP address or a DNS name. Without hosts the certificate is for
// 127.0.0.1 and localhost, which is where everything in tests listens.
func GenerateServingCerts(hosts ...string) (*ServingCerts, error) {
	ca, err := newCertAuthority("scaleplane-test-ca")
	if err != nil {
		return nil, err
	}
	return ca.issue(x509.ExtKeyUsageServerAuth, hosts...)
}

// certAuthority is a throw-away CA that can issue more than one certificate:
// the control plane's serving certificates (kube-apiserver, kwok,
// metrics-server) share one, so each trusts the others with one CA file.
type certAuthority struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  []byte
}

// Certificates are valid from an hour ago so that a little clock skew between
// processes cannot make them "not yet valid".
func certValidity() (notBefore, notAfter time.Time) {
	notBefore = time.Now().Add(-time.Hour)
	return notBefore, notBefore.Add(48 * time.Hour)
}

func newCertAuthority(name string) (*certAuthority, error) {
	notBefore, notAfter := certValidity()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generating CA key: %w", err)
	}
	template := &x509.Certificate{
		SerialNumber:          randomSerial(),
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             notBefore,
		NotAfter:              notAfter,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, template, template, &key.PublicKey, key)
	if err != nil {
		return nil, fmt.Errorf("signing CA certificate: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("parsing CA certificate: %w", err)
	}
	return &certAuthority{cert: cert, key: key, pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}, nil
}

// issue signs a certificate for usage. A serving certificate names hosts
// (IP addresses or DNS names; 127.0.0.1 and localhost when none); a client
// certificate's common name is hosts[0].
func (ca *certAuthority) issue(usage x509.ExtKeyUsage, hosts ...string) (*ServingCerts, error) {
	if len(hosts) == 0 {
		hosts = []string{"127.0.0.1", "localhost"}
	}
	notBefore, notAfter := certValidity()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generating key: %w", err)
	}
	template := &x509.Certificate{
		SerialNumber: randomSerial(),
		Subject:      pkix.Name{CommonName: hosts[0]},
		NotBefore:    notBefore,
		NotAfter:     notAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage:  []x509.ExtKeyUsage{usage},
	}
	if usage == x509.ExtKeyUsageServerAuth {
		for _, h := range hosts {
			if ip := net.ParseIP(h); ip != nil {
				template.IPAddresses = append(template.IPAddresses, ip)
			} else {
				template.DNSNames = append(template.DNSNames, h)
			}
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, template, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		return nil, fmt.Errorf("signing certificate for %s: %w", hosts[0], err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("encoding key: %w", err)
	}
	return &ServingCerts{
		CACert: ca.pem,
		Cert:   pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		Key:    pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}),
	}, nil
}

// TLSConfig is a server-side TLS configuration that serves the certificate,
// for an httptest.Server or http.Server standing in as a webhook.
func (c *ServingCerts) TLSConfig() (*tls.Config, error) {
	pair, err := tls.X509KeyPair(c.Cert, c.Key)
	if err != nil {
		return nil, fmt.Errorf("loading serving key pair: %w", err)
	}
	return &tls.Config{Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12}, nil
}

// WriteFiles writes <name>.crt, <name>.key and <name>-ca.crt into dir and
// returns their paths, for programs that take certificates as files.
func (c *ServingCerts) WriteFiles(dir, name string) (certFile, keyFile, caFile string, err error) {
	certFile = filepath.Join(dir, name+".crt")
	keyFile = filepath.Join(dir, name+".key")
	caFile = filepath.Join(dir, name+"-ca.crt")
	for path, data := range map[string][]byte{certFile: c.Cert, keyFile: c.Key, caFile: c.CACert} {
		if err := os.WriteFile(path, data, 0o600); err != nil {
			return "", "", "", fmt.Errorf("writing %s: %w", path, err)
		}
	}
	return certFile, keyFile, caFile, nil
}

// writeServiceAccountKey writes a new RSA private key in PEM. kube-apiserver
// signs service account tokens with it and reads the public half from the same
// file; kube-controller-manager signs legacy token secrets with it.
func writeServiceAccountKey(path string) error {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return fmt.Errorf("generating service account key: %w", err)
	}
	data := pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)})
	if err := os.WriteFile(path, data, 0o600); err != nil {
		return fmt.Errorf("writing service account key: %w", err)
	}
	return nil
}

// certPool parses PEM certificates into a pool.
func certPool(pemCerts []byte) (*x509.CertPool, error) {
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pemCerts) {
		return nil, fmt.Errorf("no PEM certificate found")
	}
	return pool, nil
}

func randomSerial() *big.Int {
	// 128 random bits, as x509 recommends; rand.Int only fails if the system
	// random source is broken, in which case nothing here can work anyway.
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 128))
	if err != nil {
		panic(fmt.Sprintf("reading random serial number: %v", err))
	}
	return serial
}
