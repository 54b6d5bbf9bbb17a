package framework

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// packageControlPlane is the control plane Main started for this test binary.
var packageControlPlane *ControlPlane

// logTailLines is how much of each process log is printed when tests fail.
const logTailLines = 80

// Main is a TestMain body: it starts a control plane for the test package,
// runs the tests, prints the tail of every process log if any test failed,
// stops the control plane and exits with the tests' status. If the control
// plane cannot start (for instance because `make tools` was never run) the
// package fails with the reason; it never skips.
//
// The control plane is also stopped on SIGINT and SIGTERM. If the test binary
// dies in a way no Go code can catch (a test panics, `go test -timeout` fires,
// SIGKILL), the kernel kills the processes it started.
func Main(m *testing.M, opts Options) {
	os.Exit(run(m, opts))
}

func run(m *testing.M, opts Options) int {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	signals := make(chan os.Signal, 1)
	signal.Notify(signals, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(signals)

	start := time.Now()
	cp, err := Start(ctx, opts)
	if err != nil {
		fmt.Fprintf(os.Stderr, "FAIL: starting the integration test control plane: %v\n", err)
		return 1
	}
	packageControlPlane = cp
	fmt.Fprintf(os.Stderr, "framework: control plane up in %s at %s, logs in %s, %d CRDs installed\n",
		time.Since(start).Round(time.Millisecond), cp.config.Host, cp.dir, len(cp.crds))

	go func() {
		sig, ok := <-signals
		if !ok {
			return
		}
		fmt.Fprintf(os.Stderr, "framework: %v received, stopping the control plane\n", sig)
		cp.Stop()
		os.Exit(1)
	}()

	code := m.Run()
	if code != 0 {
		cp.printLogs(os.Stderr, logTailLines)
	}
	cp.Stop()
	return code
}

// Get returns the control plane Main started for this package. It fails the
// test if the package's TestMain does not call Main.
func Get(t testing.TB) *ControlPlane {
	t.Helper()
	if packageControlPlane == nil {
		t.Fatal("no control plane: the package's TestMain must call framework.Main(m, framework.Options{...})")
	}
	return packageControlPlane
}

var nonNameChars = regexp.MustCompile(`[^a-z0-9-]+`)

// CreateNamespace creates a namespace named after the test (plus a random
// suffix) and deletes it when the test ends, so tests sharing the control
// plane do not see each other's objects.
func (cp *ControlPlane) CreateNamespace(t testing.TB) string {
	t.Helper()
	prefix := strings.Trim(nonNameChars.ReplaceAllString(strings.ToLower(t.Name()), "-"), "-")
	if len(prefix) > 40 {
		prefix = strings.Trim(prefix[:40], "-")
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: prefix + "-"}}
	ns, err := cp.kubeClient.CoreV1().Namespaces().Create(context.Background(), ns, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating a namespace for %s: %v", t.Name(), err)
	}
	t.Cleanup(func() {
		// Without the namespace controller (kube-controller-manager) the
		// namespace stays Terminating; that is harmless, nothing reuses it.
		err := cp.kubeClient.CoreV1().Namespaces().Delete(context.Background(), ns.Name, metav1.DeleteOptions{})
		if err != nil {
			t.Errorf("deleting namespace %s: %v", ns.Name, err)
		}
	})
	return ns.Name
}
