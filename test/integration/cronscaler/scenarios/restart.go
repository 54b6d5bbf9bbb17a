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

package scenarios

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	autoscalingv1alpha1 "github.com/scaleplane/scaleplane/pkg/apis/autoscaling/v1alpha1"
	"github.com/scaleplane/scaleplane/test/integration/framework"
)

// startManager runs the controller manager with the cron-scaler, logging to
// dir/controller-manager.log (appended to by each start); extraArgs are
// appended to its flags.
func startManager(t *testing.T, dir, kubeconfig string, extraArgs ...string) *framework.Process {
	t.Helper()
	bin, err := framework.Binary("scaleplane-controller-manager")
	if err != nil {
		t.Fatal(err)
	}
	args := []string{"--kubeconfig=" + kubeconfig, "--controllers=cron-scaler", "--leader-elect=false", "--port=0", "-v=2"}
	p, err := framework.StartProcess(dir, "controller-manager", bin, append(args, extraArgs...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Kill)
	return p
}

// startTimeout bounds each wait for a controller manager just started to do
// its first work. It is long because CI's machine is loaded; a wait ends
// as soon as the work is seen.
const startTimeout = 2 * time.Minute

// minuteAhead is the first whole minute at least margin after now.
func minuteAhead(now time.Time, margin time.Duration) time.Time {
	return now.Add(margin).Truncate(time.Minute).Add(time.Minute)
}

// downAfterSlot is how long after the slot the controller manager stays
// down.
const downAfterSlot = 3 * time.Second

// RestartAppliesMissedSlotOnce runs the real controller manager binary: a
// slot that passes while it is down runs once when it comes back, and never
// again after a second restart, on the real clock.
func RestartAppliesMissedSlotOnce(t *testing.T, cp *framework.ControlPlane) {
	ctx := context.Background()
	ns := cp.CreateNamespace(t)
	logDir := t.TempDir()
	t.Cleanup(func() {
		if t.Failed() {
			if out, err := os.ReadFile(filepath.Join(logDir, "controller-manager.log")); err == nil {
				t.Logf("controller manager log:\n%s", out)
			}
		}
	})
	t.Cleanup(func() {
		_ = cp.Client().AutoscalingV1alpha1().CronFederatedHPAs(ns).DeleteCollection(context.Background(), metav1.DeleteOptions{}, metav1.ListOptions{})
	})
	if _, err := cp.KubeClient().AppsV1().Deployments(ns).Create(ctx, deployment("web", 1), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// Every wait below is for the controller manager, which a loaded machine
	// may start slowly (CI once took 13s from exec to its first request):
	// the timeouts are generous, and the slot is picked only once the first
	// process runs, so a slow start cannot eat the margin before it.
	began := time.Now()
	first := startManager(t, logDir, cp.KubeconfigPath())
	first.WaitLog(t, startTimeout, "Starting workers", `stage="cron-scaler"`)
	// An hourly slot: the one after it is an hour away, so nothing after the
	// restarts can be mistaken for a repeat of it.
	slot := minuteAhead(time.Now(), 20*time.Second)
	cron := cronOf("restart", deploymentRef("web"), autoscalingv1alpha1.CronFederatedHPARule{
		Name: "hourly", Schedule: fmt.Sprintf("%d * * * *", slot.Minute()), TimeZone: ptr.To("UTC"), TargetReplicas: ptr.To[int32](4),
	})
	if _, err := cp.Client().AutoscalingV1alpha1().CronFederatedHPAs(ns).Create(ctx, cron, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	h := waitForStatus(ctx, t, cp, ns, "restart", time.Until(slot), "a planned next execution", func(h *autoscalingv1alpha1.ExecutionHistory) bool {
		return h.NextExecutionTime != nil
	})
	if !h.NextExecutionTime.Time.Equal(slot) {
		t.Fatalf("next execution %v; want %v", h.NextExecutionTime.Time, slot)
	}
	first.Kill()
	if until := time.Until(slot); until < 2*time.Second {
		t.Fatalf("the controller manager was killed only %v before the slot %v; the test needs more margin", until, slot)
	}
	t.Logf("the first controller manager ran its workers %v after its start; killed it %v before the slot %v",
		time.Since(began).Round(time.Millisecond), time.Until(slot).Round(time.Millisecond), slot)
	// The slot passes while nothing runs: a wait for the wall clock, not for
	// the controller. It comes back downAfterSlot after the slot.
	time.Sleep(time.Until(slot) + downAfterSlot)
	if got := deploymentReplicas(ctx, t, cp, ns, "web"); got != 1 {
		t.Fatalf("replicas = %d while the controller manager was down", got)
	}
	restarted := time.Now()
	second := startManager(t, logDir, cp.KubeconfigPath())
	h = waitForStatus(ctx, t, cp, ns, "restart", startTimeout, "the missed slot applied", func(h *autoscalingv1alpha1.ExecutionHistory) bool {
		return len(h.SuccessfulExecutions) > 0
	})
	t.Logf("the second controller manager recorded the slot %v after its start", time.Since(restarted).Round(time.Millisecond))
	e := h.SuccessfulExecutions[0]
	if !e.ScheduleTime.Time.Equal(slot) || len(h.SuccessfulExecutions) != 1 || len(h.FailedExecutions) != 0 {
		t.Fatalf("history after the restart = %+v; want one successful execution for %v", h, slot)
	}
	if late := e.ExecutionTime.Sub(slot); late < downAfterSlot {
		t.Errorf("executed %v after the slot; it was down then", late)
	}
	if got := deploymentReplicas(ctx, t, cp, ns, "web"); got != 4 {
		t.Errorf("replicas = %d; want 4", got)
	}
	// Someone scales by hand; another restart must not apply the slot again.
	setDeploymentReplicas(ctx, t, cp, ns, "web", 2)
	second.Kill()
	// The third process has synced the object past the point where it would
	// have fired when it logs the requeue for the next slot (-v=4): the
	// sync fires, then plans the requeue.
	third := startManager(t, logDir, cp.KubeconfigPath(), "-v=4")
	third.WaitLog(t, startTimeout, "Requeued until the next firing", ns+"/restart")
	if got := deploymentReplicas(ctx, t, cp, ns, "web"); got != 2 {
		t.Errorf("replicas = %d after a second restart; the slot was applied again", got)
	}
	obj, err := cp.Client().AutoscalingV1alpha1().CronFederatedHPAs(ns).Get(ctx, "restart", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if h := obj.Status.ExecutionHistories[0]; len(h.SuccessfulExecutions) != 1 || !lastHandled(&h).Equal(slot) {
		t.Errorf("history after the second restart = %+v", h)
	}
}
