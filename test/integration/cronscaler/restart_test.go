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

package cronscaler

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	autoscalingv1alpha1 "github.com/scaleplane/scaleplane/pkg/apis/autoscaling/v1alpha1"
	"github.com/scaleplane/scaleplane/test/integration/framework"
	"k8s.io/utils/ptr"
)

// buildControllerManager builds the real scaleplane-controller-manager, as
// `make build` does, into a temporary directory, so the test never runs a
// stale binary.
func buildControllerManager(t *testing.T) string {
	t.Helper()
	root, err := framework.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(t.TempDir(), "scaleplane-controller-manager")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/controller-manager")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building scaleplane-controller-manager: %v\n%s", err, out)
	}
	return bin
}

// managerProcess is one run of the controller manager binary.
type managerProcess struct {
	cmd  *exec.Cmd
	done chan struct{}
}

// startManager runs the binary against the test control plane, only the
// cron-scaler, without leader election and without its HTTP server. The
// process is killed when the test ends if it is still running.
func startManager(t *testing.T, bin, kubeconfig, logFile string) *managerProcess {
	t.Helper()
	log, err := os.OpenFile(logFile, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "--kubeconfig="+kubeconfig, "--controllers=cron-scaler", "--leader-elect=false", "--port=0", "-v=2")
	cmd.Stdout, cmd.Stderr = log, log
	// Die with the test binary, whatever kills it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting %s: %v", bin, err)
	}
	p := &managerProcess{cmd: cmd, done: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		_ = log.Close()
		close(p.done)
	}()
	t.Cleanup(p.kill)
	return p
}

// kill ends the process the way a crash or an evicted pod does: SIGKILL, no
// graceful shutdown.
func (p *managerProcess) kill() {
	select {
	case <-p.done:
		return
	default:
	}
	_ = p.cmd.Process.Kill()
	<-p.done
}

// TestRestartAppliesMissedSlotOnce kills the controller manager before a
// scheduled time and starts it again after it: the slot, still the rule's
// latest, runs late, once; a further restart does not run it again.
func TestRestartAppliesMissedSlotOnce(t *testing.T) {
	ctx := context.Background()
	cp := framework.Get(t)
	ns := cp.CreateNamespace(t)
	bin := buildControllerManager(t)
	logFile := filepath.Join(t.TempDir(), "controller-manager.log")
	t.Cleanup(func() {
		if t.Failed() {
			if out, err := os.ReadFile(logFile); err == nil {
				t.Logf("controller manager log:\n%s", out)
			}
		}
	})

	if _, err := cp.KubeClient().AppsV1().Deployments(ns).Create(ctx, deployment("web", 1), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// Act well before the next "* * * * *" slot, so the kill surely
	// precedes it.
	untilSecond(25, 42)
	cron := everyMinute("restart", deploymentRef("web"), autoscalingv1alpha1.CronFederatedHPARule{TargetReplicas: ptr.To[int32](4)})
	if _, err := cp.Client().AutoscalingV1alpha1().CronFederatedHPAs(ns).Create(ctx, cron, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	first := startManager(t, bin, cp.KubeconfigPath(), logFile)
	h := waitForStatus(ctx, t, cp, ns, "restart", 60*time.Second, "a planned next execution", func(h *autoscalingv1alpha1.ExecutionHistory) bool {
		return h.NextExecutionTime != nil
	})
	slot := h.NextExecutionTime.Time
	first.kill()
	if until := time.Until(slot); until < 2*time.Second {
		t.Fatalf("the controller manager was killed only %v before the slot %v; the test needs more margin", until, slot)
	}
	t.Logf("killed the controller manager %v before the slot %v", time.Until(slot).Round(time.Millisecond), slot)

	// The slot passes while nothing runs.
	time.Sleep(time.Until(slot) + 3*time.Second)
	if got := deploymentReplicas(ctx, t, cp, ns, "web"); got != 1 {
		t.Fatalf("replicas = %d while the controller manager was down", got)
	}

	second := startManager(t, bin, cp.KubeconfigPath(), logFile)
	h = waitForStatus(ctx, t, cp, ns, "restart", 30*time.Second, "the missed slot applied", func(h *autoscalingv1alpha1.ExecutionHistory) bool {
		return len(h.SuccessfulExecutions) > 0
	})
	e := h.SuccessfulExecutions[0]
	if !e.ScheduleTime.Time.Equal(slot) || len(h.SuccessfulExecutions) != 1 || len(h.FailedExecutions) != 0 {
		t.Fatalf("history after the restart = %+v; want one successful execution for %v", h, slot)
	}
	if late := e.ExecutionTime.Sub(slot); late < 3*time.Second {
		t.Errorf("executed %v after the slot; it was down then", late)
	}
	if got := deploymentReplicas(ctx, t, cp, ns, "web"); got != 4 {
		t.Errorf("replicas = %d; want 4", got)
	}

	// Someone scales by hand; another restart must not apply the slot again.
	d, err := cp.KubeClient().AppsV1().Deployments(ns).Get(ctx, "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	d.Spec.Replicas = ptr.To[int32](2)
	if _, err := cp.KubeClient().AppsV1().Deployments(ns).Update(ctx, d, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	second.kill()
	startManager(t, bin, cp.KubeconfigPath(), logFile)
	time.Sleep(5 * time.Second)
	if time.Now().After(slot.Add(55 * time.Second)) {
		t.Fatalf("too close to the next slot to tell a repeat from the next firing")
	}
	if got := deploymentReplicas(ctx, t, cp, ns, "web"); got != 2 {
		t.Errorf("replicas = %d after a second restart; the slot was applied again", got)
	}
	obj, err := cp.Client().AutoscalingV1alpha1().CronFederatedHPAs(ns).Get(ctx, "restart", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if h := obj.Status.ExecutionHistories[0]; len(h.SuccessfulExecutions) != 1 || !h.LastScheduleTime.Time.Equal(slot) {
		t.Errorf("history after the second restart = %+v", h)
	}
}
