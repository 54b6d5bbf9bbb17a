package framework

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
)

func (cp *ControlPlane) startEtcd(ctx context.Context) error {
	bin, err := binary("etcd")
	if err != nil {
		return err
	}
	// A free port can be taken by someone else between choosing it and the
	// process binding it; retry with new ports rather than flake.
	var lastErr error
	for attempt := 0; attempt < startAttempts; attempt++ {
		ports, err := freePorts(2)
		if err != nil {
			return err
		}
		clientURL := "http://127.0.0.1:" + strconv.Itoa(ports[0])
		peerURL := "http://127.0.0.1:" + strconv.Itoa(ports[1])
		dataDir := filepath.Join(cp.dir, "etcd-data")
		if err := os.RemoveAll(dataDir); err != nil {
			return fmt.Errorf("clearing etcd data: %w", err)
		}
		args := []string{
			"--name=default",
			"--data-dir=" + dataDir,
			"--listen-client-urls=" + clientURL,
			"--advertise-client-urls=" + clientURL,
			"--listen-peer-urls=" + peerURL,
			"--initial-advertise-peer-urls=" + peerURL,
			"--initial-cluster=default=" + peerURL,
			// Test data is thrown away: skipping fsync makes every write
			// (and so every test) much faster on slow disks.
			"--unsafe-no-fsync=true",
			"--log-level=warn",
		}
		p, err := startProcess(cp.dir, "etcd", bin, args)
		if err != nil {
			return err
		}
		cp.setEtcd(p)
		if lastErr = waitHTTP(ctx, p, clientURL+"/health", nil, nil, etcdStartTimeout); lastErr == nil {
			cp.etcdURL = clientURL
			cp.mu.Lock()
			cp.etcdArgs = args
			cp.mu.Unlock()
			return nil
		}
		p.stop(stopGrace)
	}
	return fmt.Errorf("etcd did not become healthy: %w", lastErr)
}
