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
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/clock"
	testingclock "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	autoscalingv1alpha1 "github.com/scaleplane/scaleplane/pkg/apis/autoscaling/v1alpha1"
	"github.com/scaleplane/scaleplane/test/integration/framework"
)

// fakeTimeScenario is the set-up of the scenarios that run the controller on
// a fake clock against the real apiserver: minutes and hours pass at once, so
// they check real status writes, watch events and pruning, deterministically
// and fast. The clock starts at the object's creation.
type fakeTimeScenario struct {
	ctx   context.Context
	t     *testing.T
	cp    *framework.ControlPlane
	ns    string
	name  string
	clock *testingclock.FakeClock
	c     *Controller
}

func startFakeTime(t *testing.T, cp *framework.ControlPlane, cron *autoscalingv1alpha1.CronFederatedHPA, offset time.Duration) *fakeTimeScenario {
	t.Helper()
	s := &fakeTimeScenario{ctx: context.Background(), t: t, cp: cp, ns: cp.CreateNamespace(t), name: cron.Name}
	if _, err := cp.KubeClient().AppsV1().Deployments(s.ns).Create(s.ctx, deployment("web", 1), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	created, err := cp.Client().AutoscalingV1alpha1().CronFederatedHPAs(s.ns).Create(s.ctx, cron, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// The namespace stays Terminating without the namespace controller:
	// delete the objects so that nothing fires later.
	t.Cleanup(func() {
		_ = cp.Client().AutoscalingV1alpha1().CronFederatedHPAs(s.ns).DeleteCollection(context.Background(), metav1.DeleteOptions{}, metav1.ListOptions{})
	})
	s.clock = testingclock.NewFakeClock(created.CreationTimestamp.Time.Add(offset))
	s.c = StartController(t, cp, s.ns, s.clock)
	return s
}

// at moves the fake clock to t.
func (s *fakeTimeScenario) at(t time.Time) { s.clock.SetTime(t) }

// waitFor polls the first rule's history until cond holds. Each poll moves
// the fake clock by a millisecond, so that the workqueue's short retry
// backoffs pass.
func (s *fakeTimeScenario) waitFor(what string, cond func(*autoscalingv1alpha1.ExecutionHistory) bool) *autoscalingv1alpha1.ExecutionHistory {
	s.t.Helper()
	var last *autoscalingv1alpha1.ExecutionHistory
	err := wait.PollUntilContextTimeout(s.ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		s.clock.Step(time.Millisecond)
		h := history(ctx, s.cp, s.ns, s.name)
		if h != nil {
			last = h
		}
		return h != nil && cond(h), nil
	})
	if err != nil {
		s.t.Fatalf("waiting for %s: %v; last history %+v", what, err, last)
	}
	return last
}

// settle lets the syncs that the controller's own writes trigger run.
func (s *fakeTimeScenario) settle() {
	for i := 0; i < 10; i++ {
		time.Sleep(100 * time.Millisecond)
		s.clock.Step(time.Millisecond)
	}
}

func (s *fakeTimeScenario) replicas() int32 {
	return deploymentReplicas(s.ctx, s.t, s.cp, s.ns, "web")
}

func nextIs(want time.Time) func(*autoscalingv1alpha1.ExecutionHistory) bool {
	return func(h *autoscalingv1alpha1.ExecutionHistory) bool {
		return h.NextExecutionTime != nil && h.NextExecutionTime.Time.Equal(want)
	}
}

func succeededAt(slot time.Time) func(*autoscalingv1alpha1.ExecutionHistory) bool {
	return func(h *autoscalingv1alpha1.ExecutionHistory) bool {
		return len(h.SuccessfulExecutions) > 0 && h.SuccessfulExecutions[0].ScheduleTime.Time.Equal(slot)
	}
}

// ResumeDoesNotReplay is issue 12's first scenario: an hourly rule fires, is
// suspended ten minutes later and resumed 80 minutes after the firing. The
// resume plans the next hour, and the slot skipped while suspended is not
// replayed by the syncs that follow (the controller's own status writes
// trigger them). On Karmada's CRD a process memory of the first firing used
// to outlive its status and replay the skipped slot.
func ResumeDoesNotReplay(t *testing.T, cp *framework.ControlPlane) {
	s := startFakeTime(t, cp, cronOf("resume", deploymentRef("web"), replicasRule("r", "0 * * * *", 10)), 0)
	h1 := s.clock.Now().Truncate(time.Hour).Add(time.Hour)
	s.waitFor("the first plan", nextIs(h1))
	s.at(h1.Add(100 * time.Millisecond))
	s.waitFor("the first firing", succeededAt(h1))
	s.settle()
	setDeploymentReplicas(s.ctx, t, cp, s.ns, "web", 1)

	s.at(h1.Add(10 * time.Minute))
	updateCron(s.ctx, t, cp, s.ns, s.name, func(c *autoscalingv1alpha1.CronFederatedHPA) { c.Spec.Rules[0].Suspend = ptr.To(true) })
	s.waitFor("the suspended rule to have no next execution", func(h *autoscalingv1alpha1.ExecutionHistory) bool { return h.NextExecutionTime == nil })
	s.settle()
	s.at(h1.Add(80 * time.Minute))
	updateCron(s.ctx, t, cp, s.ns, s.name, func(c *autoscalingv1alpha1.CronFederatedHPA) { c.Spec.Rules[0].Suspend = ptr.To(false) })
	s.waitFor("the resumed plan", nextIs(h1.Add(2*time.Hour)))
	s.settle()
	if got := s.replicas(); got != 1 {
		t.Fatalf("the slot %v, skipped while suspended, was replayed after the resume: replicas %d", h1.Add(time.Hour), got)
	}
	if h := history(s.ctx, cp, s.ns, s.name); len(h.SuccessfulExecutions) != 1 || !h.NextExecutionTime.Time.Equal(h1.Add(2*time.Hour)) {
		t.Fatalf("history after the resume = %+v", h)
	}
	s.at(h1.Add(2*time.Hour + 100*time.Millisecond))
	s.waitFor("the firing after the resume", succeededAt(h1.Add(2*time.Hour)))
	if got := s.replicas(); got != 10 {
		t.Errorf("replicas = %d after the firing; want 10", got)
	}
}

// ScheduleChangeKeepsFiring is issue 12's second scenario: a daily rule fires,
// then is changed to hourly, and fires every hour from the next one; each
// firing costs one status write and the apiserver never warns about an
// unknown field. On Karmada's CRD it used to wait for the daily rule's next
// slot (firing none of the hours), and write status twice per firing with an
// "unknown field" warning each time.
func ScheduleChangeKeepsFiring(t *testing.T, cp *framework.ControlPlane) {
	// Created 5 minutes before the hour, so that the daily slot is the next
	// hour's.
	probe := time.Now().UTC()
	daily := probe.Truncate(time.Hour).Add(time.Hour)
	rule := replicasRule("r", fmt.Sprintf("0 %d * * *", daily.Hour()), 10)
	s := startFakeTime(t, cp, cronOf("reschedule", deploymentRef("web"), rule), 0)
	if s.clock.Now().After(daily) {
		daily = daily.Add(time.Hour)
		updateCron(s.ctx, t, cp, s.ns, s.name, func(c *autoscalingv1alpha1.CronFederatedHPA) {
			c.Spec.Rules[0].Schedule = fmt.Sprintf("0 %d * * *", daily.Hour())
		})
	}
	s.waitFor("the daily plan", nextIs(daily))
	s.at(daily.Add(100 * time.Millisecond))
	s.waitFor("the daily firing", succeededAt(daily))
	s.settle()

	s.at(daily.Add(150 * time.Minute))
	updateCron(s.ctx, t, cp, s.ns, s.name, func(c *autoscalingv1alpha1.CronFederatedHPA) { c.Spec.Rules[0].Schedule = "0 * * * *" })
	s.waitFor("the hourly plan", nextIs(daily.Add(3*time.Hour)))
	s.settle()
	writes := s.c.StatusWrites()
	for k := 3; k <= 6; k++ {
		slot := daily.Add(time.Duration(k) * time.Hour)
		setDeploymentReplicas(s.ctx, t, cp, s.ns, "web", 1)
		s.at(slot.Add(100 * time.Millisecond))
		s.waitFor(fmt.Sprintf("the hourly firing at %v", slot), succeededAt(slot))
		if got := s.replicas(); got != 10 {
			t.Fatalf("replicas = %d after the firing at %v; want 10", got, slot)
		}
		s.settle()
	}
	if got := s.c.StatusWrites() - writes; got != 4 {
		t.Errorf("status writes for 4 firings = %d; want 4, one per firing", got)
	}
	for _, w := range s.c.Warnings() {
		if strings.Contains(w, "unknown field") {
			t.Errorf("the apiserver warned the controller: %s", w)
		}
	}
}

// FirstSightRunsMissedSlot: an object created while the controller is down
// gets, on its first sync, the slot that passed since its creation (issue 12,
// item 3), within maxDelaySeconds (where the CRD stores it; until the next
// slot where it does not).
func FirstSightRunsMissedSlot(t *testing.T, cp *framework.ControlPlane) {
	rule := replicasRule("r", "* * * * *", 10)
	rule.MaxDelaySeconds = ptr.To[int32](45)
	// Created in the second half of a minute, first seen 40 s later: the
	// next minute's slot passed in between, 15 to 30 s ago.
	untilSecond(35, 50)
	s := startFakeTime(t, cp, cronOf("first-sight", deploymentRef("web"), rule), 40*time.Second)
	slot := s.clock.Now().Truncate(time.Minute)
	h := s.waitFor("the slot missed since creation", succeededAt(slot))
	if len(h.FailedExecutions) != 0 {
		t.Errorf("history = %+v; want only the slot since creation, run", h)
	}
	if got := s.replicas(); got != 10 {
		t.Errorf("replicas = %d; want 10", got)
	}
}

// TransientTargetErrorIsRecorded: with a validating webhook on the target's
// scale subresource down (the apiserver answers 500), the firing is retried
// with a Warning event per attempt, nextExecutionTime keeps naming it, and
// once the next slot comes it is recorded as failed with the webhook's reason
// (issue 12, item 2); the next slot runs once the webhook is gone.
func TransientTargetErrorIsRecorded(t *testing.T, cp *framework.ControlPlane) {
	s := startFakeTime(t, cp, cronOf("transient", deploymentRef("web"), replicasRule("r", "0 * * * *", 10)), 0)
	h1 := s.clock.Now().Truncate(time.Hour).Add(time.Hour)
	s.waitFor("the first plan", nextIs(h1))
	removeWebhook := webhookDown(t, cp, s.ns)

	s.at(h1.Add(100 * time.Millisecond))
	waitForEvent(t, cp, s.ns, "attempt 1 failed, will retry")
	s.at(h1.Add(5 * time.Second))
	waitForEvent(t, cp, s.ns, "attempt 2 failed, will retry")
	if h := s.waitFor("the retried slot as next execution", nextIs(h1)); len(h.SuccessfulExecutions)+len(h.FailedExecutions) != 0 {
		t.Errorf("history while retrying = %+v", h)
	}
	s.at(h1.Add(time.Hour + 100*time.Millisecond))
	h := s.waitFor("the first slot given up", func(h *autoscalingv1alpha1.ExecutionHistory) bool {
		return len(h.FailedExecutions) > 0 && h.FailedExecutions[0].ScheduleTime.Time.Equal(h1)
	})
	if msg := h.FailedExecutions[0].Message; !strings.Contains(msg, "failed calling webhook") {
		t.Errorf("failed execution %q does not give the webhook's reason", msg)
	}
	removeWebhook()
	s.at(h1.Add(time.Hour + 10*time.Second))
	s.waitFor("the second slot applied", succeededAt(h1.Add(time.Hour)))
	if got := s.replicas(); got != 10 {
		t.Errorf("replicas = %d; want 10", got)
	}
}

// webhookDown registers a validating webhook on Deployments' scale
// subresource in ns that cannot be reached, and waits until the apiserver
// uses it. It returns a function that removes it.
func webhookDown(t *testing.T, cp *framework.ControlPlane, ns string) func() {
	t.Helper()
	ctx := context.Background()
	client := cp.KubeClient().AdmissionregistrationV1().ValidatingWebhookConfigurations()
	name := "cron-scaler-down-" + ns
	cfg := &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{{
			Name: "down.scaleplane.test",
			// Nothing listens on port 1: every call fails.
			ClientConfig: admissionregistrationv1.WebhookClientConfig{URL: ptr.To("https://127.0.0.1:1/validate")},
			Rules: []admissionregistrationv1.RuleWithOperations{{
				Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Update},
				Rule: admissionregistrationv1.Rule{APIGroups: []string{"apps"}, APIVersions: []string{"v1"},
					Resources: []string{"deployments/scale"}, Scope: ptr.To(admissionregistrationv1.NamespacedScope)},
			}},
			NamespaceSelector:       &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": ns}},
			FailurePolicy:           ptr.To(admissionregistrationv1.Fail),
			SideEffects:             ptr.To(admissionregistrationv1.SideEffectClassNone),
			AdmissionReviewVersions: []string{"v1"},
			TimeoutSeconds:          ptr.To[int32](2),
		}},
	}
	if _, err := client.Create(ctx, cfg, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	remove := func() { _ = client.Delete(ctx, name, metav1.DeleteOptions{}) }
	t.Cleanup(remove)
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		sc, err := cp.KubeClient().AppsV1().Deployments(ns).GetScale(ctx, "web", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		_, err = cp.KubeClient().AppsV1().Deployments(ns).UpdateScale(ctx, "web", sc, metav1.UpdateOptions{DryRun: []string{metav1.DryRunAll}})
		return err != nil && strings.Contains(err.Error(), "failed calling webhook"), nil
	})
	if err != nil {
		t.Fatalf("the webhook that is down was never called: %v", err)
	}
	return func() {
		remove()
		// Wait until the apiserver stops calling it.
		_ = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
			sc, err := cp.KubeClient().AppsV1().Deployments(ns).GetScale(ctx, "web", metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			_, err = cp.KubeClient().AppsV1().Deployments(ns).UpdateScale(ctx, "web", sc, metav1.UpdateOptions{DryRun: []string{metav1.DryRunAll}})
			return err == nil, nil
		})
	}
}

func waitForEvent(t *testing.T, cp *framework.ControlPlane, ns, text string) {
	t.Helper()
	var seen []string
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		events, err := cp.KubeClient().CoreV1().Events(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		seen = seen[:0]
		for _, e := range events.Items {
			seen = append(seen, e.Reason+": "+e.Message)
			if strings.Contains(e.Message, text) {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("no event saying %q in %s: %v; events: %q", text, ns, err, seen)
	}
}

// DuplicateRuleNames: scaleplane's CRD rejects rules that share a name;
// where the CRD does not (Karmada's), the cron-scaler refuses the object with
// a Warning event and fires none of its rules (issue 12, item 5).
func DuplicateRuleNames(t *testing.T, cp *framework.ControlPlane) {
	ctx := context.Background()
	ns := cp.CreateNamespace(t)
	cron := cronOf("duplicates", deploymentRef("web"), replicasRule("r", "* * * * *", 3), replicasRule("r", "30 * * * *", 4))
	_, err := cp.Client().AutoscalingV1alpha1().CronFederatedHPAs(ns).Create(ctx, cron, metav1.CreateOptions{})
	if err != nil {
		if !strings.Contains(err.Error(), "spec.rules[1]: Duplicate value") {
			t.Fatalf("rejected with %v; want the duplicate rule name named", err)
		}
		t.Logf("the CRD rejects duplicate rule names: %v", err)
		return
	}
	t.Cleanup(func() {
		_ = cp.Client().AutoscalingV1alpha1().CronFederatedHPAs(ns).DeleteCollection(context.Background(), metav1.DeleteOptions{}, metav1.ListOptions{})
	})
	StartController(t, cp, ns, testingclock.NewFakeClock(time.Now()))
	waitForEvent(t, cp, ns, `Rule names ["r"] are used by more than one rule`)
}

// EveryTargetKind fires a "* * * * *" rule on a Deployment, a StatefulSet, a
// LeaderWorkerSet (a custom resource with a scale subresource, from 0
// replicas), a FederatedHPA and a HorizontalPodAutoscaler, all in the same
// minute, on the real clock, and checks each target and status.
func EveryTargetKind(t *testing.T, cp *framework.ControlPlane) {
	ctx := context.Background()
	ns := cp.CreateNamespace(t)
	kube, client := cp.KubeClient(), cp.Client()

	if _, err := kube.AppsV1().Deployments(ns).Create(ctx, deployment("web", 1), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := kube.AppsV1().StatefulSets(ns).Create(ctx, statefulSet("db", 1), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := client.LeaderworkersetV1().LeaderWorkerSets(ns).Create(ctx, leaderWorkerSet("llm", 0), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	fhpa := &autoscalingv1alpha1.FederatedHPA{
		ObjectMeta: metav1.ObjectMeta{Name: "fhpa"},
		Spec: autoscalingv1alpha1.FederatedHPASpec{
			ScaleTargetRef: deploymentRef("web"), MinReplicas: ptr.To[int32](1), MaxReplicas: 10,
		},
	}
	if _, err := client.AutoscalingV1alpha1().FederatedHPAs(ns).Create(ctx, fhpa, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	hpa := &autoscalingv2.HorizontalPodAutoscaler{
		ObjectMeta: metav1.ObjectMeta{Name: "hpa"},
		Spec: autoscalingv2.HorizontalPodAutoscalerSpec{
			ScaleTargetRef: deploymentRef("web"), MinReplicas: ptr.To[int32](1), MaxReplicas: 10,
		},
	}
	if _, err := kube.AutoscalingV2().HorizontalPodAutoscalers(ns).Create(ctx, hpa, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	replicas := func(n int32) autoscalingv1alpha1.CronFederatedHPARule {
		return autoscalingv1alpha1.CronFederatedHPARule{TargetReplicas: ptr.To(n)}
	}
	bounds := autoscalingv1alpha1.CronFederatedHPARule{TargetMinReplicas: ptr.To[int32](3), TargetMaxReplicas: ptr.To[int32](30)}
	crons := []*autoscalingv1alpha1.CronFederatedHPA{
		everyMinute("deployment", deploymentRef("web"), replicas(4)),
		everyMinute("statefulset", autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "StatefulSet", Name: "db"}, replicas(3)),
		everyMinute("lws", autoscalingv2.CrossVersionObjectReference{APIVersion: "leaderworkerset.x-k8s.io/v1", Kind: "LeaderWorkerSet", Name: "llm"}, replicas(2)),
		everyMinute("fhpa", autoscalingv2.CrossVersionObjectReference{APIVersion: "autoscaling.karmada.io/v1alpha1", Kind: "FederatedHPA", Name: "fhpa"}, bounds),
		everyMinute("hpa", autoscalingv2.CrossVersionObjectReference{APIVersion: "autoscaling/v2", Kind: "HorizontalPodAutoscaler", Name: "hpa"}, bounds),
		everyMinute("missing", deploymentRef("nope"), replicas(1)),
	}
	// Created and first seen within one minute: first sight plans the next
	// minute (a slot since creation would run at once).
	untilSecond(2, 40)
	for _, c := range crons {
		if _, err := client.AutoscalingV1alpha1().CronFederatedHPAs(ns).Create(ctx, c, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	stored := StoredFields(t, cp)
	StartController(t, cp, ns, clock.RealClock{})
	// The namespace stays Terminating without the namespace controller: delete
	// the CronFederatedHPAs so later tests' controllers do not fire them.
	t.Cleanup(func() {
		_ = client.AutoscalingV1alpha1().CronFederatedHPAs(ns).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{})
	})

	for _, c := range crons {
		h := waitForStatus(ctx, t, cp, ns, c.Name, 30*time.Second, "a planned next execution", func(h *autoscalingv1alpha1.ExecutionHistory) bool {
			return h.NextExecutionTime != nil
		})
		if !lastHandled(h).IsZero() {
			t.Errorf("%s: first sight fired: %+v", c.Name, h)
		}
	}

	// Then every rule fires in the same minute.
	var slot time.Time
	for _, c := range crons[:5] {
		h := waitForStatus(ctx, t, cp, ns, c.Name, 90*time.Second, "a successful execution", func(h *autoscalingv1alpha1.ExecutionHistory) bool {
			return len(h.SuccessfulExecutions) > 0
		})
		e := h.SuccessfulExecutions[0]
		if skew := e.ExecutionTime.Sub(e.ScheduleTime.Time); skew < 0 || skew > 5*time.Second {
			t.Errorf("%s: executed %v after its scheduled time", c.Name, skew)
		}
		if !h.NextExecutionTime.Time.Equal(e.ScheduleTime.Add(time.Minute)) {
			t.Errorf("%s: nextExecutionTime %v after firing %v", c.Name, h.NextExecutionTime, e.ScheduleTime)
		}
		if stored.LastScheduleTime != (h.LastScheduleTime != nil) || (h.LastScheduleTime != nil && !h.LastScheduleTime.Equal(e.ScheduleTime)) {
			t.Errorf("%s: lastScheduleTime %v after firing %v; the CRD stores it: %v", c.Name, h.LastScheduleTime, e.ScheduleTime, stored.LastScheduleTime)
		}
		if slot.IsZero() {
			slot = e.ScheduleTime.Time
		}
	}
	h := waitForStatus(ctx, t, cp, ns, "missing", 30*time.Second, "a failed execution", func(h *autoscalingv1alpha1.ExecutionHistory) bool {
		return len(h.FailedExecutions) > 0
	})
	t.Logf("missing target: %s", h.FailedExecutions[0].Message)

	if got := deploymentReplicas(ctx, t, cp, ns, "web"); got != 4 {
		t.Errorf("Deployment replicas = %d; want 4", got)
	}
	if sts, err := kube.AppsV1().StatefulSets(ns).Get(ctx, "db", metav1.GetOptions{}); err != nil || *sts.Spec.Replicas != 3 {
		t.Errorf("StatefulSet = %v, %v; want 3 replicas", sts.Spec.Replicas, err)
	}
	if lws, err := client.LeaderworkersetV1().LeaderWorkerSets(ns).Get(ctx, "llm", metav1.GetOptions{}); err != nil || *lws.Spec.Replicas != 2 {
		t.Errorf("LeaderWorkerSet = %v, %v; want 2 replicas (scaled from 0)", lws.Spec.Replicas, err)
	}
	if f, err := client.AutoscalingV1alpha1().FederatedHPAs(ns).Get(ctx, "fhpa", metav1.GetOptions{}); err != nil || *f.Spec.MinReplicas != 3 || f.Spec.MaxReplicas != 30 {
		t.Errorf("FederatedHPA = %+v, %v; want min 3 max 30", f.Spec, err)
	}
	if a, err := kube.AutoscalingV2().HorizontalPodAutoscalers(ns).Get(ctx, "hpa", metav1.GetOptions{}); err != nil || *a.Spec.MinReplicas != 3 || a.Spec.MaxReplicas != 30 {
		t.Errorf("HPA = %+v, %v; want min 3 max 30", a.Spec, err)
	}
	t.Logf("all kinds fired for the slot %v", slot)
}
