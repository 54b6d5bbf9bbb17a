package framework

import (
	"context"
	"crypto/tls"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
)

// DefaultKubeControllerManagerControllers are the kube-controller-manager
// controllers scaleplane's tests rely on: the garbage collector (owner
// references), the HPA controller, the workload controllers that turn a scale
// into pods, and the service account and namespace controllers every other
// one assumes.
var DefaultKubeControllerManagerControllers = []string{
	"garbage-collector-controller",
	"horizontal-pod-autoscaler-controller",
	"deployment-controller",
	"replicaset-controller",
	"statefulset-controller",
	"daemonset-controller",
	"serviceaccount-controller",
	"namespace-controller",
}

// StartKubeControllerManager starts kube-controller-manager with the
// controllers from Options (DefaultKubeControllerManagerControllers when
// none) and waits until it is healthy. It does nothing if it already runs.
func (cp *ControlPlane) StartKubeControllerManager(ctx context.Context) error {
	cp.mu.Lock()
	running := cp.kcm != nil
	cp.mu.Unlock()
	if running {
		return nil
	}
	bin, err := binary("kube-controller-manager")
	if err != nil {
		return err
	}
	controllers := cp.opts.KubeControllerManagerControllers
	if len(controllers) == 0 {
		controllers = DefaultKubeControllerManagerControllers
	}
	var lastErr error
	for attempt := 0; attempt < startAttempts; attempt++ {
		ports, err := freePorts(1)
		if err != nil {
			return err
		}
		args := []string{
			"--kubeconfig=" + cp.kubecfg,
			"--controllers=" + strings.Join(controllers, ","),
			// One instance per test package: waiting for a lease would only
			// delay start-up.
			"--leader-elect=false",
			"--bind-address=127.0.0.1",
			"--secure-port=" + strconv.Itoa(ports[0]),
			"--cert-dir=" + filepath.Join(cp.dir, "kube-controller-manager-certs"),
			"--service-account-private-key-file=" + cp.saKey,
			"--root-ca-file=" + cp.caFile,
			"--use-service-account-credentials=false",
			"--profiling=false",
		}
		args = append(args, cp.opts.ExtraKubeControllerManagerArgs...)
		p, err := startProcess(cp.dir, "kube-controller-manager", bin, args)
		if err != nil {
			return err
		}
		cp.mu.Lock()
		cp.kcm = p
		cp.mu.Unlock()
		// Its serving certificate is self-signed in memory; /healthz is
		// public, so skipping verification exposes nothing.
		insecure := &tls.Config{InsecureSkipVerify: true}
		if lastErr = waitHTTP(ctx, p, "https://127.0.0.1:"+strconv.Itoa(ports[0])+"/healthz", insecure, nil, kcmStartTimeout); lastErr == nil {
			return nil
		}
		p.stop(stopGrace)
		cp.mu.Lock()
		cp.kcm = nil
		cp.mu.Unlock()
	}
	return fmt.Errorf("kube-controller-manager did not become healthy: %w", lastErr)
}
