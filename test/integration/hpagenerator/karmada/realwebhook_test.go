//go:build karmada

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
package karmada

import (
	"context"
	"crypto/tls"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"

	autoscalingv1alpha1 "github.com/scaleplane/scaleplane/pkg/apis/autoscaling/v1alpha1"
	lwsv1 "github.com/scaleplane/scaleplane/pkg/apis/leaderworkerset/v1"
	"github.com/scaleplane/scaleplane/test/integration/framework"
)

// TestRealKarmadaWebhook runs the generator against Karmada's own
// karmada-webhook, built by hand from Karmada's source (it is not a module
// dependency, so this test is opt-in, behind the build tag karmada):
//
//	git -C <karmada> archive v1.18.2 -- go.mod go.sum cmd pkg vendor third_party operator api | tar -x -C /tmp/karmada
//	(cd /tmp/karmada && GOFLAGS=-mod=vendor go build -o /tmp/karmada/bin/karmada-webhook ./cmd/webhook)
//	KARMADA_WEBHOOK=/tmp/karmada/bin/karmada-webhook go test -tags karmada -count=1 \
//	  -run TestRealKarmadaWebhook ./test/integration/hpagenerator/karmada/
//
// It registers the webhook's FederatedHPA mutating and validating handlers
// (/mutate-federatedhpa, /validate-federatedhpa) and checks what the
// generator relies on: karmada-webhook denies what the generator refuses
// before writing (an External metric, minReplicas 0), with a 403 whose message
// names the webhook, which the generator takes as a refusal, not a
// permission to wait for; it drops behavior's tolerance; and the defaults it
// fills into the generated FederatedHPA are not drift: the generator makes no
// write in a steady state.
func TestRealKarmadaWebhook(t *testing.T) {
	bin := os.Getenv("KARMADA_WEBHOOK")
	if bin == "" {
		t.Fatal("KARMADA_WEBHOOK is not set: build karmada-webhook from Karmada's source (see the comment above) and point it there")
	}
	cp := framework.Get(t)
	ctx := context.Background()
	certs, err := framework.GenerateServingCerts()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for name, data := range map[string][]byte{"tls.crt": certs.Cert, "tls.key": certs.Key} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	port, err := framework.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	p, err := framework.StartProcess(dir, "karmada-webhook", bin, []string{
		"--kubeconfig=" + cp.KubeconfigPath(),
		"--bind-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(port),
		"--cert-dir=" + dir,
		"--metrics-bind-address=0",
		"--health-probe-bind-address=0",
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		p.Stop(10 * time.Second)
		if t.Failed() {
			t.Logf("karmada-webhook log:\n%s", p.Tail(100))
		}
	})
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
		conn, err := tls.Dial("tcp", "127.0.0.1:"+strconv.Itoa(port), &tls.Config{InsecureSkipVerify: true}) //nolint:gosec // a readiness probe of a local test server
		if err != nil {
			return false, nil
		}
		conn.Close()
		return true, nil
	})
	if err != nil {
		t.Fatalf("karmada-webhook does not serve on %d: %v\n%s", port, err, p.Tail(50))
	}

	// Registered as Karmada's installers register them (artifacts/deploy/
	// webhook-configuration.yaml at v1.18.2: FederatedHPAs, CREATE and
	// UPDATE, failurePolicy Fail), at the local URL.
	rules := []admissionregistrationv1.RuleWithOperations{{
		Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update},
		Rule: admissionregistrationv1.Rule{APIGroups: []string{"autoscaling.karmada.io"}, APIVersions: []string{"*"},
			Resources: []string{"federatedhpas"}, Scope: ptr.To(admissionregistrationv1.NamespacedScope)},
	}}
	url := func(path string) admissionregistrationv1.WebhookClientConfig {
		return admissionregistrationv1.WebhookClientConfig{URL: ptr.To(fmt.Sprintf("https://127.0.0.1:%d%s", port, path)), CABundle: certs.CACert}
	}
	fail, none := admissionregistrationv1.Fail, admissionregistrationv1.SideEffectClassNone
	mutating := &admissionregistrationv1.MutatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "mutating-config"},
		Webhooks: []admissionregistrationv1.MutatingWebhook{{Name: "autoscaling.karmada.io", ClientConfig: url("/mutate-federatedhpa"), Rules: rules,
			FailurePolicy: &fail, SideEffects: &none, AdmissionReviewVersions: []string{"v1"}, TimeoutSeconds: ptr.To[int32](3)}},
	}
	validating := &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "validating-config"},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{{Name: "autoscaling.karmada.io", ClientConfig: url("/validate-federatedhpa"), Rules: rules,
			FailurePolicy: &fail, SideEffects: &none, AdmissionReviewVersions: []string{"v1"}, TimeoutSeconds: ptr.To[int32](3)}},
	}
	admission := cp.KubeClient().AdmissionregistrationV1()
	if _, err := admission.MutatingWebhookConfigurations().Create(ctx, mutating, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := admission.ValidatingWebhookConfigurations().Create(ctx, validating, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = admission.MutatingWebhookConfigurations().Delete(context.Background(), mutating.Name, metav1.DeleteOptions{})
		_ = admission.ValidatingWebhookConfigurations().Delete(context.Background(), validating.Name, metav1.DeleteOptions{})
	})

	ns := cp.CreateNamespace(t)
	fhpas := cp.Client().AutoscalingV1alpha1().FederatedHPAs(ns)
	external := autoscalingv2.MetricSpec{Type: autoscalingv2.ExternalMetricSourceType, External: &autoscalingv2.ExternalMetricSource{
		Metric: autoscalingv2.MetricIdentifier{Name: "queue_depth"},
		Target: autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageValue: ptr.To(resource.MustParse("30"))},
	}}
	probe := func(name string, change func(*autoscalingv1alpha1.FederatedHPA)) (*autoscalingv1alpha1.FederatedHPA, error) {
		f := &autoscalingv1alpha1.FederatedHPA{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: autoscalingv1alpha1.FederatedHPASpec{MinReplicas: ptr.To[int32](1), MaxReplicas: 3,
				ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"},
				Metrics:        []autoscalingv2.MetricSpec{cpuMetric(50)}},
		}
		change(f)
		return fhpas.Create(ctx, f, metav1.CreateOptions{})
	}
	// The webhook configuration takes a moment to be used.
	var denied error
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		_, denied = probe("external", func(f *autoscalingv1alpha1.FederatedHPA) { f.Spec.Metrics = append(f.Spec.Metrics, external) })
		if denied == nil {
			_ = fhpas.Delete(ctx, "external", metav1.DeleteOptions{})
		}
		return denied != nil, nil
	})
	if err != nil {
		t.Fatalf("karmada-webhook never denied a FederatedHPA with an External metric")
	}
	t.Logf("karmada-webhook's denial of an External metric: %v", denied)
	msg := denied.Error()
	if !apierrors.IsForbidden(denied) || !strings.Contains(msg, "admission webhook") || !strings.Contains(msg, "denied the request") || !strings.Contains(msg, "spec.metrics[1].type") {
		t.Errorf("the denial is %s %q; the generator expects a 403 naming the webhook and the field", apierrors.ReasonForError(denied), msg)
	}
	if _, err := probe("zero", func(f *autoscalingv1alpha1.FederatedHPA) { f.Spec.MinReplicas = ptr.To[int32](0) }); !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "spec.minReplicas") {
		t.Errorf("minReplicas 0: %v, want a 403 naming spec.minReplicas", err)
	} else {
		t.Logf("karmada-webhook's denial of minReplicas 0: %v", err)
	}
	tol, err := probe("tolerance", func(f *autoscalingv1alpha1.FederatedHPA) {
		f.Spec.Behavior = &autoscalingv2.HorizontalPodAutoscalerBehavior{ScaleUp: &autoscalingv2.HPAScalingRules{Tolerance: ptr.To(resource.MustParse("50m"))}}
	})
	if err != nil {
		t.Fatal(err)
	}
	if b := tol.Spec.Behavior; b == nil || b.ScaleUp == nil || b.ScaleUp.Tolerance != nil || len(b.ScaleUp.Policies) == 0 {
		t.Errorf("behavior as stored %+v; want karmada-webhook's defaults without the tolerance", b)
	}

	// The generator's FederatedHPA, with a behavior that karmada-webhook
	// completes: created once, then no writes while status changes.
	m := framework.StartManager(t, cp.KubeconfigPath(), "hpa-generator")
	lws := createLWS(t, cp, leaderWorkerSet(ns, "llm", &lwsv1.ScalePolicy{
		MaxReplicas: 4, Metrics: []autoscalingv2.MetricSpec{cpuMetric(60)},
		Behavior: &autoscalingv2.HorizontalPodAutoscalerBehavior{ScaleDown: &autoscalingv2.HPAScalingRules{StabilizationWindowSeconds: ptr.To[int32](30)}},
	}))
	f := waitFHPA(t, cp, ns, "llm", generated(lws, 1, 4, 60))
	if b := f.Spec.Behavior; b == nil || b.ScaleUp == nil || len(b.ScaleUp.Policies) != 2 || b.ScaleDown == nil || len(b.ScaleDown.Policies) != 1 {
		t.Errorf("karmada-webhook did not fill in behavior's defaults: %+v", b)
	}
	waitIdle(t, m)
	before := metric(t, m, "hpa_generator_writes_total")
	for i := int32(1); i <= 3; i++ {
		updateFHPA(t, cp, ns, "llm", true, func(f *autoscalingv1alpha1.FederatedHPA) {
			f.Status.CurrentReplicas, f.Status.DesiredReplicas = i, i
			f.Status.Conditions = []autoscalingv2.HorizontalPodAutoscalerCondition{{Type: autoscalingv2.AbleToScale, Status: corev1.ConditionTrue, Reason: "ReadyForNewScale", LastTransitionTime: metav1.Now()}}
		})
	}
	// A policy change goes through the webhooks too.
	updateLWS(t, cp, ns, "llm", func(l *lwsv1.LeaderWorkerSet) { l.Spec.ScalePolicy.MaxReplicas = 6 })
	waitFHPA(t, cp, ns, "llm", generated(lws, 1, 6, 60))
	waitIdle(t, m)
	if after := metric(t, m, "hpa_generator_writes_total"); after-before != 1 {
		t.Errorf("the generator wrote %v times for one policy change among status updates, want 1", after-before)
	}
}
