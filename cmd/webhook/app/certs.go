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
	"fmt"
	"sync"

	"k8s.io/apiserver/pkg/server/dynamiccertificates"
)

// servingCert serves the certificate and key files, reloaded when they change
// on disk (a Secret volume being updated, cert-manager rotating it). The
// files are watched by apiserver's dynamic certificate loader, which also
// re-reads them every minute in case a change was missed.
type servingCert struct {
	content *dynamiccertificates.DynamicCertKeyPairContent

	mu sync.Mutex
	// certPEM and keyPEM are what cert was parsed from.
	certPEM, keyPEM []byte
	cert            *tls.Certificate
}

func newServingCert(certFile, keyFile string) (*servingCert, error) {
	content, err := dynamiccertificates.NewDynamicServingContentFromFiles("serving-cert", certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("loading the serving certificate: %w", err)
	}
	return &servingCert{content: content}, nil
}

// run watches the files until ctx ends.
func (s *servingCert) run(ctx context.Context) {
	s.content.Run(ctx, 1)
}

// getCertificate returns the current key pair, parsing it only when the
// files' content changed. The loader only ever holds a pair that parsed, so
// a half-written file keeps the previous pair in service.
func (s *servingCert) getCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	certPEM, keyPEM := s.content.CurrentCertKeyContent()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cert != nil && bytes.Equal(certPEM, s.certPEM) && bytes.Equal(keyPEM, s.keyPEM) {
		return s.cert, nil
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("parsing the serving certificate: %w", err)
	}
	s.certPEM, s.keyPEM, s.cert = certPEM, keyPEM, &pair
	return s.cert, nil
}
