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
	"crypto/tls"
	"errors"
	"fmt"
	"log"
	"net"
	"net/http"
	"strings"
	"time"

	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/component-base/metrics/legacyregistry"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/scaleplane/scaleplane/pkg/webhook/addonresizer"
	"github.com/scaleplane/scaleplane/pkg/webhook/admission"
	"github.com/scaleplane/scaleplane/pkg/webhook/cronfederatedhpa"
	"github.com/scaleplane/scaleplane/pkg/webhook/leaderworkerset"
)

// The paths of the admission endpoints, as in the ValidatingWebhookConfiguration.
const (
	CronFederatedHPAPath = "/validate-cronfederatedhpa"
	LeaderWorkerSetPath  = "/validate-leaderworkerset"
	AddonResizerPath     = "/validate-addonresizer"
)

// NewHandler returns the webhook's HTTP handler: one admission endpoint per
// kind, /healthz and /metrics. clk is what CronFederatedHPA schedules are
// checked against.
func NewHandler(clk clock.PassiveClock) http.Handler {
	admission.RegisterMetrics()
	mux := http.NewServeMux()
	mux.Handle(CronFederatedHPAPath, admission.NewHandler(cronfederatedhpa.Kind,
		cronfederatedhpa.NewValidator(clk).AdmissionValidator()))
	mux.Handle(LeaderWorkerSetPath, admission.NewHandler(leaderworkerset.Kind, leaderworkerset.NewValidator()))
	mux.Handle(AddonResizerPath, admission.NewHandler(addonresizer.Kind, addonresizer.NewValidator()))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		// Serving at all means the certificate loaded and the listener is
		// up; the rules need nothing else.
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = w.Write([]byte("ok"))
	})
	mux.Handle("/metrics", legacyregistry.Handler())
	return mux
}

// Serve serves HTTPS on ln until ctx ends, then lets in-flight requests finish
// for the grace period. The serving certificate is loaded before anything is
// served, so a bad one fails the start instead of every request.
func Serve(ctx context.Context, ln net.Listener, o *Options) error {
	logger := klog.FromContext(ctx)
	cert, err := newServingCert(o.CertFile, o.KeyFile)
	if err != nil {
		_ = ln.Close()
		return err
	}
	certCtx, stopCerts := context.WithCancel(ctx)
	defer stopCerts()
	go func() {
		defer utilruntime.HandleCrash()
		cert.run(certCtx)
	}()

	srv := &http.Server{
		Handler: recoverPanics(NewHandler(clock.RealClock{})),
		TLSConfig: &tls.Config{
			MinVersion:     tls.VersionTLS12,
			GetCertificate: cert.getCertificate,
		},
		// kube-apiserver calls with a 5 s timeout; slow clients get less.
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       10 * time.Second,
		WriteTimeout:      10 * time.Second,
		IdleTimeout:       90 * time.Second,
		BaseContext:       func(net.Listener) context.Context { return ctx },
		ErrorLog:          log.New(httpErrorLog{logger: logger}, "", 0),
	}

	serveErr := make(chan error, 1)
	go func() {
		defer utilruntime.HandleCrash()
		logger.Info("Serving HTTPS", "address", ln.Addr().String())
		serveErr <- srv.ServeTLS(ln, "", "")
	}()

	select {
	case err := <-serveErr:
		return fmt.Errorf("serving HTTPS: %w", err)
	case <-ctx.Done():
	}
	logger.Info("Shutting down", "gracePeriod", o.ShutdownGracePeriod)
	// ctx is done; the grace period needs a context of its own.
	shutdownCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), o.ShutdownGracePeriod)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil {
		return fmt.Errorf("shutting down: %w", err)
	}
	if err := <-serveErr; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("serving HTTPS: %w", err)
	}
	logger.Info("Stopped")
	return nil
}

// recoverPanics answers 500 to a request whose handler panicked, and logs the
// panic, instead of letting net/http drop the connection silently.
func recoverPanics(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			if p := recover(); p != nil {
				if p == http.ErrAbortHandler {
					panic(p)
				}
				klog.FromContext(r.Context()).Error(fmt.Errorf("%v", p), "Panic serving request", "path", r.URL.Path)
				http.Error(w, "internal error", http.StatusInternalServerError)
			}
		}()
		next.ServeHTTP(w, r)
	})
}

// httpErrorLog sends net/http's own messages (mostly TLS handshake errors from
// clients that do not trust the certificate) to klog, at a verbosity where they
// do not drown the log.
type httpErrorLog struct {
	logger klog.Logger
}

func (l httpErrorLog) Write(p []byte) (int, error) {
	l.logger.V(2).Info("HTTP server", "msg", strings.TrimSpace(string(p)))
	return len(p), nil
}
