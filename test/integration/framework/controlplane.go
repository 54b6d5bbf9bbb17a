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
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/scaleplane/scaleplane/pkg/generated/clientset/versioned"
)

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
