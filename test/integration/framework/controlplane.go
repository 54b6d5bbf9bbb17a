// Package framework runs a real control plane for scaleplane's integration
// tests: etcd and kube-apiserver (and, on request, kube-controller-manager)
// built by hack/install-tools.sh, on free 127.0.0.1 ports, in a temporary
// directory, with the CRDs from artifacts/deploy/crds installed. Nothing is
// faked: what the tests talk to is the same apiserver a cluster runs.
//
// One control plane serves a whole test package; start it from TestMain:
//
//	func TestMain(m *testing.M) {
//		framework.Main(m, framework.Options{})
//	}
//
//	func TestSomething(t *testing.T) {
//		cp := framework.Get(t)
//		ns := cp.CreateNamespace(t)
//		_, err := cp.KubeClient().AppsV1().Deployments(ns).Create(...)
//	}
//
// Webhook tests can serve their webhook from the test process on 127.0.0.1
// (see GenerateServingCerts): kube-apiserver runs without an egress selector
// and with loopback exempted from any HTTP proxy, so it dials such URLs
// directly.
package framework

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/scaleplane/scaleplane/pkg/generated/clientset/versioned"
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

// Options tune the control plane a test package gets.
type Options struct {
	// KubeControllerManager starts kube-controller-manager next to
	// kube-apiserver. It can also be started later with
	// StartKubeControllerManager.
	KubeControllerManager bool
	// KubeControllerManagerControllers is its --controllers list;
	// DefaultKubeControllerManagerControllers when empty.
	KubeControllerManagerControllers []string
	// ExtraKubeControllerManagerArgs are appended to its command line, e.g.
	// "--horizontal-pod-autoscaler-sync-period=1s".
	ExtraKubeControllerManagerArgs []string
	// ExtraAPIServerArgs are appended to kube-apiserver's command line; a
	// later flag overrides an earlier one.
	ExtraAPIServerArgs []string
	// Metrics starts kwok (fake nodes whose pods reach Running, with
	// emulated kubelet resource metrics) and metrics-server, registered as
	// the v1beta1.metrics.k8s.io APIService, so that HorizontalPodAutoscalers
	// and the resizer's Metrics source work for real. Implies
	// KubeControllerManager is not required; ask for it separately.
	Metrics bool
	// CRDDir is where the CRDs to install are read from;
	// artifacts/deploy/crds in the repository when empty. A directory with no
	// YAML files in it is not an error.
	CRDDir string
}

const (
	etcdStartTimeout      = 60 * time.Second
	apiserverStartTimeout = 90 * time.Second
	kcmStartTimeout       = 60 * time.Second
	crdEstablishTimeout   = 60 * time.Second
	stopGrace             = 10 * time.Second
	startAttempts         = 3
)

// ControlPlane is a running etcd + kube-apiserver (+ kube-controller-manager).
type ControlPlane struct {
	opts    Options
	dir     string
	ca      *certAuthority
	caFile  string
	saKey   string
	token   string
	kubecfg string
	etcdURL string
	host    string

	config        *rest.Config
	kubeClient    kubernetes.Interface
	client        versioned.Interface
	dynamicClient dynamic.Interface
	crds          []CRD

	mu        sync.Mutex
	etcd      *process
	apiserver *process
	kcm       *process
	kwok      *process
	metrics   *process
	stopped   bool
	// etcdArgs and apiserverArgs are the command lines the running etcd and
	// kube-apiserver were started with, so that a restart brings them back
	// on the same ports and data directory (see restart.go).
	etcdArgs      []string
	apiserverArgs []string
}

// Start brings up a control plane in a new temporary directory. On error
// everything already started has been stopped again. Callers must Stop it;
// Main does both for a test package.
func Start(ctx context.Context, opts Options) (*ControlPlane, error) {
	// Fail before starting anything when a binary is missing, naming all of
	// them, so one `make tools` fixes it.
	needed := []string{"etcd", "kube-apiserver"}
	if opts.KubeControllerManager {
		needed = append(needed, "kube-controller-manager")
	}
	if opts.Metrics {
		needed = append(needed, "kwok", "metrics-server")
	}
	var missing []error
	for _, name := range needed {
		if _, err := binary(name); err != nil {
			missing = append(missing, err)
		}
	}
	if len(missing) > 0 {
		return nil, errors.Join(missing...)
	}

	removeStaleDirs()
	dir, err := os.MkdirTemp("", dirPrefix)
	if err != nil {
		return nil, fmt.Errorf("creating the control plane directory: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, ownerFile), []byte(strconv.Itoa(os.Getpid())), 0o644); err != nil {
		return nil, fmt.Errorf("recording the owner of the control plane directory: %w", err)
	}
	cp := &ControlPlane{opts: opts, dir: dir}
	if err := cp.start(ctx); err != nil {
		cp.printLogs(os.Stderr, logTailLines)
		cp.Stop()
		return nil, err
	}
	return cp, nil
}

func (cp *ControlPlane) start(ctx context.Context) error {
	if err := cp.writeCredentials(); err != nil {
		return err
	}
	if err := cp.startEtcd(ctx); err != nil {
		return err
	}
	if err := cp.startAPIServer(ctx); err != nil {
		return err
	}
	if err := cp.makeClients(); err != nil {
		return err
	}
	crdDir := cp.opts.CRDDir
	if crdDir == "" {
		root, err := RepoRoot()
		if err != nil {
			return err
		}
		crdDir = filepath.Join(root, "artifacts", "deploy", "crds")
	}
	crds, err := InstallCRDs(ctx, cp.dynamicClient, crdDir, crdEstablishTimeout)
	if err != nil {
		return err
	}
	cp.crds = crds
	if cp.opts.KubeControllerManager {
		if err := cp.StartKubeControllerManager(ctx); err != nil {
			return err
		}
	}
	if cp.opts.Metrics {
		if err := cp.startMetricsPipeline(ctx); err != nil {
			return err
		}
	}
	return nil
}

// writeCredentials creates what kube-apiserver needs to authenticate and be
// trusted: a serving certificate signed by a fresh CA, a front-proxy client
// certificate (signed by a CA of its own) that it presents to aggregated API
// servers such as metrics-server, a service account signing key, a static
// admin token in system:masters, and a kubeconfig with that token for the
// other components.
func (cp *ControlPlane) writeCredentials() error {
	var err error
	if cp.ca, err = newCertAuthority("scaleplane-test-ca"); err != nil {
		return err
	}
	certs, err := cp.ca.issue(x509.ExtKeyUsageServerAuth)
	if err != nil {
		return err
	}
	if _, _, cp.caFile, err = certs.WriteFiles(cp.dir, "apiserver"); err != nil {
		return err
	}
	proxyCA, err := newCertAuthority("scaleplane-test-front-proxy-ca")
	if err != nil {
		return err
	}
	proxyClient, err := proxyCA.issue(x509.ExtKeyUsageClientAuth, frontProxyClientName)
	if err != nil {
		return err
	}
	if _, _, _, err = proxyClient.WriteFiles(cp.dir, "front-proxy-client"); err != nil {
		return err
	}
	cp.saKey = filepath.Join(cp.dir, "service-account.key")
	if err := writeServiceAccountKey(cp.saKey); err != nil {
		return err
	}
	buf := make([]byte, 16)
	if _, err := rand.Read(buf); err != nil {
		return fmt.Errorf("generating the admin token: %w", err)
	}
	cp.token = hex.EncodeToString(buf)
	tokens := fmt.Sprintf("%s,admin,admin-uid,\"system:masters\"\n", cp.token)
	if err := os.WriteFile(filepath.Join(cp.dir, "tokens.csv"), []byte(tokens), 0o600); err != nil {
		return fmt.Errorf("writing the token file: %w", err)
	}
	return nil
}

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

func (cp *ControlPlane) startAPIServer(ctx context.Context) error {
	bin, err := binary("kube-apiserver")
	if err != nil {
		return err
	}
	var lastErr error
	for attempt := 0; attempt < startAttempts; attempt++ {
		ports, err := freePorts(1)
		if err != nil {
			return err
		}
		args := []string{
			"--etcd-servers=" + cp.etcdURL,
			"--bind-address=127.0.0.1",
			"--advertise-address=127.0.0.1",
			// The endpoint reconciler publishes the advertise address as the
			// "kubernetes" service's endpoint and refuses a loopback one; no
			// pod here needs to reach the apiserver through that service.
			"--endpoint-reconciler-type=none",
			"--secure-port=" + strconv.Itoa(ports[0]),
			"--tls-cert-file=" + filepath.Join(cp.dir, "apiserver.crt"),
			"--tls-private-key-file=" + filepath.Join(cp.dir, "apiserver.key"),
			"--client-ca-file=" + cp.caFile,
			"--token-auth-file=" + filepath.Join(cp.dir, "tokens.csv"),
			"--authorization-mode=RBAC",
			"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
			"--service-account-key-file=" + cp.saKey,
			"--service-account-signing-key-file=" + cp.saKey,
			"--service-cluster-ip-range=10.0.0.0/24",
			// Without kube-controller-manager nobody creates the "default"
			// service account, and the ServiceAccount admission plugin would
			// then reject every pod; tests care about scaling, not tokens.
			"--disable-admission-plugins=ServiceAccount",
			"--cert-dir=" + filepath.Join(cp.dir, "apiserver-certs"),
			"--profiling=false",
		}
		args = append(args, frontProxyArgs(cp.dir)...)
		args = append(args, cp.opts.ExtraAPIServerArgs...)
		p, err := startProcess(cp.dir, "kube-apiserver", bin, args)
		if err != nil {
			return err
		}
		cp.setAPIServer(p)
		host := "https://127.0.0.1:" + strconv.Itoa(ports[0])
		tlsConfig, err := cp.clientTLSConfig()
		if err != nil {
			return err
		}
		header := http.Header{"Authorization": []string{"Bearer " + cp.token}}
		if lastErr = waitHTTP(ctx, p, host+"/readyz", tlsConfig, header, apiserverStartTimeout); lastErr == nil {
			cp.host = host
			cp.mu.Lock()
			cp.apiserverArgs = args
			cp.mu.Unlock()
			return nil
		}
		p.stop(stopGrace)
	}
	return fmt.Errorf("kube-apiserver did not become ready: %w", lastErr)
}

func (cp *ControlPlane) clientTLSConfig() (*tls.Config, error) {
	caData, err := os.ReadFile(cp.caFile)
	if err != nil {
		return nil, fmt.Errorf("reading the apiserver CA: %w", err)
	}
	pool, err := certPool(caData)
	if err != nil {
		return nil, err
	}
	return &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}, nil
}

func (cp *ControlPlane) makeClients() error {
	caData, err := os.ReadFile(cp.caFile)
	if err != nil {
		return fmt.Errorf("reading the apiserver CA: %w", err)
	}
	cp.config = &rest.Config{
		Host:            cp.host,
		BearerToken:     cp.token,
		TLSClientConfig: rest.TLSClientConfig{CAData: caData},
		// Tests create objects in bursts; client-side throttling would only
		// make them slower and timing-dependent.
		QPS:   1000,
		Burst: 2000,
	}
	if cp.kubeClient, err = kubernetes.NewForConfig(cp.Config()); err != nil {
		return fmt.Errorf("creating the kube clientset: %w", err)
	}
	if cp.client, err = versioned.NewForConfig(cp.Config()); err != nil {
		return fmt.Errorf("creating the scaleplane clientset: %w", err)
	}
	if cp.dynamicClient, err = dynamic.NewForConfig(cp.Config()); err != nil {
		return fmt.Errorf("creating the dynamic client: %w", err)
	}

	kubeconfig := clientcmdapi.NewConfig()
	kubeconfig.Clusters["scaleplane-test"] = &clientcmdapi.Cluster{Server: cp.host, CertificateAuthorityData: caData}
	kubeconfig.AuthInfos["admin"] = &clientcmdapi.AuthInfo{Token: cp.token}
	kubeconfig.Contexts["scaleplane-test"] = &clientcmdapi.Context{Cluster: "scaleplane-test", AuthInfo: "admin"}
	kubeconfig.CurrentContext = "scaleplane-test"
	cp.kubecfg = filepath.Join(cp.dir, "admin.kubeconfig")
	if err := clientcmd.WriteToFile(*kubeconfig, cp.kubecfg); err != nil {
		return fmt.Errorf("writing the admin kubeconfig: %w", err)
	}
	return nil
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

// Stop stops every process in reverse start order and removes the
// directory (set SCALEPLANE_TEST_KEEP_DIR=1 to keep it). Safe to call twice.
func (cp *ControlPlane) Stop() {
	cp.mu.Lock()
	defer cp.mu.Unlock()
	if cp.stopped {
		return
	}
	cp.stopped = true
	cp.metrics.stop(stopGrace)
	cp.kwok.stop(stopGrace)
	cp.kcm.stop(stopGrace)
	cp.apiserver.stop(stopGrace)
	cp.etcd.stop(stopGrace)
	if os.Getenv("SCALEPLANE_TEST_KEEP_DIR") != "" {
		fmt.Fprintf(os.Stderr, "framework: kept the control plane directory %s\n", cp.dir)
		return
	}
	_ = os.RemoveAll(cp.dir)
}

// printLogs writes the last lines of every process log to w.
func (cp *ControlPlane) printLogs(w io.Writer, lines int) {
	cp.mu.Lock()
	procs := []*process{cp.etcd, cp.apiserver, cp.kcm, cp.kwok, cp.metrics}
	cp.mu.Unlock()
	for _, p := range procs {
		if p == nil {
			continue
		}
		fmt.Fprintf(w, "=== last %d lines of %s (%s) ===\n%s\n", lines, p.name, p.logPath, p.tail(lines))
	}
}

func (cp *ControlPlane) setEtcd(p *process) {
	cp.mu.Lock()
	defer cp.mu.Unlock()
	cp.etcd = p
}

func (cp *ControlPlane) setAPIServer(p *process) {
	cp.mu.Lock()
	defer cp.mu.Unlock()
	cp.apiserver = p
}

// Config returns a new copy of the admin (system:masters) client
// configuration; callers may change it freely.
func (cp *ControlPlane) Config() *rest.Config { return rest.CopyConfig(cp.config) }

// KubeClient is a clientset for the built-in APIs, as admin.
func (cp *ControlPlane) KubeClient() kubernetes.Interface { return cp.kubeClient }

// Client is scaleplane's generated clientset (CronFederatedHPA,
// FederatedHPA, LeaderWorkerSet, AddonResizer), as admin.
func (cp *ControlPlane) Client() versioned.Interface { return cp.client }

// DynamicClient is a dynamic client, as admin. CustomResourceDefinitions
// are at CRDResource.
func (cp *ControlPlane) DynamicClient() dynamic.Interface { return cp.dynamicClient }

// CRDs are the CustomResourceDefinitions installed at start, all Established.
func (cp *ControlPlane) CRDs() []CRD { return cp.crds }

// Dir is the temporary directory holding logs, certificates and etcd data.
func (cp *ControlPlane) Dir() string { return cp.dir }

// KubeconfigPath is an admin kubeconfig file, for running programs (such as
// scaleplane-controller-manager) against the control plane.
func (cp *ControlPlane) KubeconfigPath() string { return cp.kubecfg }

const (
	dirPrefix = "scaleplane-integration-"
	ownerFile = "owner.pid"
)

// removeStaleDirs deletes the directories of earlier test binaries that died
// without cleaning up (a panicking test, a timeout). Their processes are gone
// already (see startOnSpawnerThread); the directory stays until here so that
// its logs can be read after such a crash. Directories whose owner still runs
// (another package's tests, right now) are left alone.
func removeStaleDirs() {
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), dirPrefix+"*"))
	for _, dir := range dirs {
		data, err := os.ReadFile(filepath.Join(dir, ownerFile))
		if err != nil {
			// Maybe being created this very moment; judge it by its age.
			if info, statErr := os.Stat(dir); statErr != nil || time.Since(info.ModTime()) < time.Hour {
				continue
			}
		} else if pid, err := strconv.Atoi(strings.TrimSpace(string(data))); err == nil && processAlive(pid) {
			continue
		}
		_ = os.RemoveAll(dir)
	}
}

func processAlive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

// freePorts asks the kernel for n distinct free ports on 127.0.0.1.
func freePorts(n int) ([]int, error) {
	ports := make([]int, 0, n)
	listeners := make([]net.Listener, 0, n)
	defer func() {
		for _, l := range listeners {
			l.Close()
		}
	}()
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("finding a free port: %w", err)
		}
		listeners = append(listeners, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// waitHTTP polls url until it answers 200, the process exits, or timeout.
func waitHTTP(ctx context.Context, p *process, url string, tlsConfig *tls.Config, header http.Header, timeout time.Duration) error {
	client := &http.Client{
		Timeout:   5 * time.Second,
		Transport: &http.Transport{TLSClientConfig: tlsConfig, Proxy: nil},
	}
	defer client.CloseIdleConnections()
	var lastErr error
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		if exited, err := p.exited(); exited {
			return false, fmt.Errorf("%s exited: %w (log: %s)", p.name, err, p.logPath)
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return false, err
		}
		for k, v := range header {
			req.Header[k] = v
		}
		resp, err := client.Do(req)
		if err != nil {
			lastErr = err
			return false, nil
		}
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			lastErr = fmt.Errorf("%s: %s: %s", url, resp.Status, strings.TrimSpace(string(body)))
			return false, nil
		}
		return true, nil
	})
	if err != nil && lastErr != nil && wait.Interrupted(err) {
		return fmt.Errorf("%w: last answer: %w", err, lastErr)
	}
	return err
}
