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
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
)

// The metrics pipeline is the one hack/local-up.sh runs: kwok emulates each
// fake node's kubelet /metrics/resource endpoint (its Metric configuration)
// with usage from pod annotations (its ClusterResourceUsage configuration);
// metrics-server scrapes the path each node names in its
// metrics.k8s.io/resource-metrics-path annotation, and kube-apiserver's
// aggregator serves it as metrics.k8s.io. kwok and metrics-server get serving
// certificates from the control plane's CA, and every hop verifies TLS.

const (
	// frontProxyClientName is the identity kube-apiserver presents to
	// aggregated API servers; they trust only this name from the front-proxy CA.
	frontProxyClientName = "front-proxy-client"
	metricsServerName    = "metrics-server"
	metricsStartTimeout  = 90 * time.Second
	// kwokNodeAnnotation makes kwok manage a node (see CreateFakeNodes).
	kwokNodeAnnotation = "kwok.x-k8s.io/node"
	// resourceMetricsPathAnnotation tells metrics-server (0.7 and later) where
	// a node's kubelet serves its resource metrics.
	resourceMetricsPathAnnotation = "metrics.k8s.io/resource-metrics-path"
)

// UsageCPUAnnotation and UsageMemoryAnnotation set a pod's emulated usage
// (a quantity) in kwok's usage-from-annotation configuration; without them a
// pod uses 1m CPU and 1Mi memory.
const (
	UsageCPUAnnotation    = "kwok.x-k8s.io/usage-cpu"
	UsageMemoryAnnotation = "kwok.x-k8s.io/usage-memory"
)

// frontProxyArgs are kube-apiserver's flags for authenticating to aggregated
// API servers with the front-proxy client certificate of writeCredentials.
func frontProxyArgs(dir string) []string {
	return []string{
		"--requestheader-client-ca-file=" + filepath.Join(dir, "front-proxy-client-ca.crt"),
		"--requestheader-allowed-names=" + frontProxyClientName,
		"--requestheader-username-headers=X-Remote-User",
		"--requestheader-group-headers=X-Remote-Group",
		"--requestheader-extra-headers-prefix=X-Remote-Extra-",
		"--proxy-client-cert-file=" + filepath.Join(dir, "front-proxy-client.crt"),
		"--proxy-client-key-file=" + filepath.Join(dir, "front-proxy-client.key"),
	}
}

// startMetricsPipeline starts kwok and metrics-server and registers the
// metrics API, waiting until the APIService is Available.
func (cp *ControlPlane) startMetricsPipeline(ctx context.Context) error {
	if err := cp.startKwok(ctx); err != nil {
		return err
	}
	port, err := cp.startMetricsServer(ctx)
	if err != nil {
		return err
	}
	return cp.registerMetricsAPI(ctx, port)
}

// KwokConfigFiles returns kwok's own published configurations this project
// runs it with, from the module cache of the kwok version hack/tools/kwok
// pins: the fast node and pod stages, the kubelet /metrics/resource
// emulation, and usage read from pod annotations; and the project's own
// stage that answers in-place pod resizes (hack/kwok/pod-resize.yaml).
func KwokConfigFiles() ([]string, error) {
	root, err := RepoRoot()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "sigs.k8s.io/kwok")
	cmd.Dir = filepath.Join(root, "hack", "tools", "kwok")
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod")
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("finding kwok's module directory (run `make tools`): %w", err)
	}
	dir := strings.TrimSpace(string(out))
	files := []string{
		filepath.Join(dir, "kustomize/stage/node/fast/node-initialize.yaml"),
		filepath.Join(dir, "kustomize/stage/node/heartbeat-with-lease/node-heartbeat-with-lease.yaml"),
		filepath.Join(dir, "kustomize/metrics/resource/metrics-resource.yaml"),
		filepath.Join(dir, "kustomize/metrics/usage/usage-from-annotation.yaml"),
	}
	pods, err := filepath.Glob(filepath.Join(dir, "kustomize/stage/pod/fast/pod-*.yaml"))
	if err != nil || len(pods) == 0 {
		return nil, fmt.Errorf("no pod stages in %s", dir)
	}
	files = append(files, pods...)
	files = append(files, filepath.Join(root, "hack", "kwok", "pod-resize.yaml"))
	for _, f := range files {
		if _, err := os.Stat(f); err != nil {
			return nil, fmt.Errorf("kwok configuration: %w", err)
		}
	}
	return files, nil
}

func (cp *ControlPlane) startKwok(ctx context.Context) error {
	bin, err := binary("kwok")
	if err != nil {
		return err
	}
	configs, err := KwokConfigFiles()
	if err != nil {
		return err
	}
	certs, err := cp.ca.issue(x509.ExtKeyUsageServerAuth, "127.0.0.1")
	if err != nil {
		return err
	}
	certFile, keyFile, _, err := certs.WriteFiles(cp.dir, "kwok")
	if err != nil {
		return err
	}
	var lastErr error
	for attempt := 0; attempt < startAttempts; attempt++ {
		port, err := FreePort()
		if err != nil {
			return err
		}
		addr := "127.0.0.1:" + strconv.Itoa(port)
		args := []string{
			"--kubeconfig=" + cp.kubecfg,
			"--config=" + strings.Join(configs, ","),
			"--manage-nodes-with-annotation-selector=" + kwokNodeAnnotation + "=fake",
			"--node-ip=127.0.0.1",
			// The node's kubelet port: metrics-server scrapes it there.
			"--node-port=" + strconv.Itoa(port),
			"--server-address=" + addr,
			"--tls-cert-file=" + certFile,
			"--tls-private-key-file=" + keyFile,
			"--cidr=10.244.0.0/16",
			"--node-lease-duration-seconds=40",
		}
		p, err := startProcess(cp.dir, "kwok", bin, args)
		if err != nil {
			return err
		}
		cp.mu.Lock()
		cp.kwok = p
		cp.mu.Unlock()
		if lastErr = waitHTTP(ctx, p, "http://"+addr+"/healthz", nil, nil, metricsStartTimeout); lastErr == nil {
			return nil
		}
		p.stop(stopGrace)
		cp.mu.Lock()
		cp.kwok = nil
		cp.mu.Unlock()
	}
	return fmt.Errorf("kwok did not become healthy: %w", lastErr)
}

func (cp *ControlPlane) startMetricsServer(ctx context.Context) (int, error) {
	bin, err := binary("metrics-server")
	if err != nil {
		return 0, err
	}
	// kube-apiserver's aggregator verifies the name <service>.<namespace>.svc.
	certs, err := cp.ca.issue(x509.ExtKeyUsageServerAuth, metricsServerName+".kube-system.svc", "127.0.0.1", "localhost")
	if err != nil {
		return 0, err
	}
	certFile, keyFile, _, err := certs.WriteFiles(cp.dir, metricsServerName)
	if err != nil {
		return 0, err
	}
	pool, err := certPool(cp.ca.pem)
	if err != nil {
		return 0, err
	}
	var lastErr error
	for attempt := 0; attempt < startAttempts; attempt++ {
		port, err := FreePort()
		if err != nil {
			return 0, err
		}
		args := []string{
			"--bind-address=127.0.0.1",
			"--secure-port=" + strconv.Itoa(port),
			"--kubeconfig=" + cp.kubecfg,
			"--authentication-kubeconfig=" + cp.kubecfg,
			"--authorization-kubeconfig=" + cp.kubecfg,
			"--tls-cert-file=" + certFile,
			"--tls-private-key-file=" + keyFile,
			"--kubelet-certificate-authority=" + cp.caFile,
			"--kubelet-preferred-address-types=InternalIP",
			"--kubelet-use-node-status-port",
			// The shortest metrics-server allows: tests wait for usage to show.
			"--metric-resolution=10s",
			"--kubelet-request-timeout=5s",
		}
		p, err := startProcess(cp.dir, metricsServerName, bin, args)
		if err != nil {
			return 0, err
		}
		cp.mu.Lock()
		cp.metrics = p
		cp.mu.Unlock()
		tlsConfig := &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
		if lastErr = waitHTTP(ctx, p, "https://127.0.0.1:"+strconv.Itoa(port)+"/livez", tlsConfig, nil, metricsStartTimeout); lastErr == nil {
			return port, nil
		}
		p.stop(stopGrace)
		cp.mu.Lock()
		cp.metrics = nil
		cp.mu.Unlock()
	}
	return 0, fmt.Errorf("metrics-server did not become healthy: %w", lastErr)
}

// APIServiceResource is apiregistration.k8s.io's APIService, for the dynamic
// client.
var APIServiceResource = schema.GroupVersionResource{Group: "apiregistration.k8s.io", Version: "v1", Resource: "apiservices"}

// registerMetricsAPI points the v1beta1.metrics.k8s.io APIService at
// metrics-server through an ExternalName Service (no kube-proxy here: the
// aggregator dials the external name and port directly).
func (cp *ControlPlane) registerMetricsAPI(ctx context.Context, port int) error {
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: metricsServerName, Namespace: "kube-system"},
		Spec: corev1.ServiceSpec{
			Type:         corev1.ServiceTypeExternalName,
			ExternalName: "localhost",
			Ports:        []corev1.ServicePort{{Name: "https", Port: int32(port), Protocol: corev1.ProtocolTCP}},
		},
	}
	if _, err := cp.kubeClient.CoreV1().Services("kube-system").Create(ctx, svc, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating the metrics-server service: %w", err)
	}
	apiService := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiregistration.k8s.io/v1",
		"kind":       "APIService",
		"metadata":   map[string]any{"name": "v1beta1.metrics.k8s.io"},
		"spec": map[string]any{
			"group":                "metrics.k8s.io",
			"version":              "v1beta1",
			"groupPriorityMinimum": int64(100),
			"versionPriority":      int64(100),
			"caBundle":             base64.StdEncoding.EncodeToString(cp.ca.pem),
			"service":              map[string]any{"namespace": "kube-system", "name": metricsServerName, "port": int64(port)},
		},
	}}
	if _, err := cp.dynamicClient.Resource(APIServiceResource).Create(ctx, apiService, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("registering the metrics API: %w", err)
	}
	var last string
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, metricsStartTimeout, true, func(ctx context.Context) (bool, error) {
		obj, err := cp.dynamicClient.Resource(APIServiceResource).Get(ctx, "v1beta1.metrics.k8s.io", metav1.GetOptions{})
		if err != nil {
			last = err.Error()
			return false, nil
		}
		conditions, _, _ := unstructured.NestedSlice(obj.Object, "status", "conditions")
		for _, c := range conditions {
			m, _ := c.(map[string]any)
			if m["type"] == "Available" {
				last = fmt.Sprintf("Available=%v: %v", m["status"], m["message"])
				return m["status"] == "True", nil
			}
		}
		return false, nil
	})
	if err != nil {
		return fmt.Errorf("the metrics API did not become available (%s): %w", last, err)
	}
	return nil
}

// FakeNode is a Node that kwok manages (it reports Ready, runs the pods bound
// to it, and emulates its kubelet's resource metrics for metrics-server).
func FakeNode(name string) *corev1.Node {
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name: name,
			Annotations: map[string]string{
				kwokNodeAnnotation:            "fake",
				resourceMetricsPathAnnotation: "/metrics/nodes/" + name + "/metrics/resource",
			},
			Labels: map[string]string{"type": "kwok", "kubernetes.io/hostname": name},
		},
		Status: corev1.NodeStatus{
			Allocatable: corev1.ResourceList{
				corev1.ResourceCPU:    resource.MustParse("32"),
				corev1.ResourceMemory: resource.MustParse("256Gi"),
				corev1.ResourcePods:   resource.MustParse("110"),
			},
			Capacity: corev1.ResourceList{
				corev1.ResourceCPU:    resource.MustParse("32"),
				corev1.ResourceMemory: resource.MustParse("256Gi"),
				corev1.ResourcePods:   resource.MustParse("110"),
			},
		},
	}
}

// CreateFakeNode creates a kwok-managed node (see FakeNode) and waits until
// it is Ready. It needs Options.Metrics (which runs kwok).
func (cp *ControlPlane) CreateFakeNode(ctx context.Context, name string) error {
	if _, err := cp.kubeClient.CoreV1().Nodes().Create(ctx, FakeNode(name), metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating node %s: %w", name, err)
	}
	return wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, metricsStartTimeout, true, func(ctx context.Context) (bool, error) {
		node, err := cp.kubeClient.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		for _, c := range node.Status.Conditions {
			if c.Type == corev1.NodeReady {
				return c.Status == corev1.ConditionTrue, nil
			}
		}
		return false, nil
	})
}
