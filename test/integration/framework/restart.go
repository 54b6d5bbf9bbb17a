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
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"
)

// Outages: the reliability tests take kube-apiserver or etcd away for a
// while, the way an upgrade or a crashed control-plane node does, and bring
// it back on the same address with the same data, so that clients (the
// controller manager, the test's own watches) reconnect to what they knew.

// StopAPIServer stops kube-apiserver (SIGTERM, then SIGKILL after the usual
// grace). Clients get connection refused until StartAPIServer.
func (cp *ControlPlane) StopAPIServer() {
	cp.mu.Lock()
	p := cp.apiserver
	cp.mu.Unlock()
	p.stop(stopGrace)
}

// StartAPIServer starts kube-apiserver again with the command line it last
// ran with (same port, certificates and etcd) and waits until it is ready.
// It does nothing if kube-apiserver runs.
func (cp *ControlPlane) StartAPIServer(ctx context.Context) error {
	cp.mu.Lock()
	p, args := cp.apiserver, cp.apiserverArgs
	cp.mu.Unlock()
	if args == nil {
		return errors.New("kube-apiserver was never started")
	}
	if exited, _ := p.exited(); !exited {
		return nil
	}
	bin, err := binary("kube-apiserver")
	if err != nil {
		return err
	}
	tlsConfig, err := cp.clientTLSConfig()
	if err != nil {
		return err
	}
	header := http.Header{"Authorization": []string{"Bearer " + cp.token}}
	// The old process's listening socket is gone once it exited, but the
	// port can be briefly unavailable; a failed start is retried on the same
	// port, as clients only know this one.
	var lastErr error
	for attempt := 0; attempt < startAttempts; attempt++ {
		p, err := startProcess(cp.dir, "kube-apiserver", bin, args)
		if err != nil {
			return err
		}
		cp.setAPIServer(p)
		if lastErr = waitHTTP(ctx, p, cp.host+"/readyz", tlsConfig, header, apiserverStartTimeout); lastErr == nil {
			return nil
		}
		p.stop(stopGrace)
	}
	return fmt.Errorf("restarted kube-apiserver did not become ready: %w", lastErr)
}

// RestartAPIServer stops kube-apiserver, leaves it down for downFor, and
// starts it again on the same port.
func (cp *ControlPlane) RestartAPIServer(ctx context.Context, downFor time.Duration) error {
	cp.StopAPIServer()
	if err := sleep(ctx, downFor); err != nil {
		return err
	}
	return cp.StartAPIServer(ctx)
}

// StopEtcd stops etcd. kube-apiserver keeps running and answers requests
// that need storage with errors (and its /readyz fails) until StartEtcd.
func (cp *ControlPlane) StopEtcd() {
	cp.mu.Lock()
	p := cp.etcd
	cp.mu.Unlock()
	p.stop(stopGrace)
}

// StartEtcd starts etcd again on the same ports and data directory, so
// every object and resourceVersion survives, and waits until it is healthy.
// It does nothing if etcd runs.
func (cp *ControlPlane) StartEtcd(ctx context.Context) error {
	cp.mu.Lock()
	p, args := cp.etcd, cp.etcdArgs
	cp.mu.Unlock()
	if args == nil {
		return errors.New("etcd was never started")
	}
	if exited, _ := p.exited(); !exited {
		return nil
	}
	bin, err := binary("etcd")
	if err != nil {
		return err
	}
	var lastErr error
	for attempt := 0; attempt < startAttempts; attempt++ {
		p, err := startProcess(cp.dir, "etcd", bin, args)
		if err != nil {
			return err
		}
		cp.setEtcd(p)
		if lastErr = waitHTTP(ctx, p, cp.etcdURL+"/health", nil, nil, etcdStartTimeout); lastErr == nil {
			return nil
		}
		p.stop(stopGrace)
	}
	return fmt.Errorf("restarted etcd did not become healthy: %w", lastErr)
}

// RestartEtcd stops etcd, leaves it down for downFor, and starts it again
// with its data. kube-apiserver is not restarted: it reconnects by itself.
func (cp *ControlPlane) RestartEtcd(ctx context.Context, downFor time.Duration) error {
	cp.StopEtcd()
	if err := sleep(ctx, downFor); err != nil {
		return err
	}
	return cp.StartEtcd(ctx)
}

func sleep(ctx context.Context, d time.Duration) error {
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-timer.C:
		return nil
	}
}
