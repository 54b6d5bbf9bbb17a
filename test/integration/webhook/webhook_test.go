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

package webhook

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"

	autoscalingv1alpha1 "github.com/scaleplane/scaleplane/pkg/apis/autoscaling/v1alpha1"
	lwsv1 "github.com/scaleplane/scaleplane/pkg/apis/leaderworkerset/v1"
	scaleplanev1alpha1 "github.com/scaleplane/scaleplane/pkg/apis/scaleplane/v1alpha1"
	"github.com/scaleplane/scaleplane/test/integration/framework"
)

// TestWebhook runs every webhook test against one webhook server and one
// registration: webhook configurations are cluster-wide, and a stale one
// pointing at a stopped server would refuse the next test's objects.
func TestWebhook(t *testing.T) {
	cp := framework.Get(t)
	env := startWebhook(t, cp)
	t.Run("CronFederatedHPA", func(t *testing.T) { testCronFederatedHPA(t, env) })
	t.Run("CronFederatedHPAUpdate", func(t *testing.T) { testCronFederatedHPAUpdate(t, env) })
	t.Run("AddonResizer", func(t *testing.T) { testAddonResizer(t, env) })
	t.Run("LeaderWorkerSet", func(t *testing.T) { testLeaderWorkerSet(t, env) })
	t.Run("LeaderWorkerSetWithoutScalePolicyNotSent", func(t *testing.T) { testLeaderWorkerSetNotSent(t, env) })
	t.Run("ScalePolicyAgreesWithHPAValidation", func(t *testing.T) { testScalePolicyCrossCheck(t, env) })
	// Last: it replaces the serving certificate.
	t.Run("CertificateRotation", func(t *testing.T) { testCertificateRotation(t, env) })
}

func testCronFederatedHPA(t *testing.T, env *webhookEnv) {
	ns := env.cp.CreateNamespace(t)
	client := env.cp.Client().AutoscalingV1alpha1().CronFederatedHPAs(ns)
	fhpaRef := autoscalingv2.CrossVersionObjectReference{APIVersion: "autoscaling.karmada.io/v1alpha1", Kind: "FederatedHPA", Name: "web"}
	hpaRef := autoscalingv2.CrossVersionObjectReference{APIVersion: "autoscaling/v2", Kind: "HorizontalPodAutoscaler", Name: "web"}
	withTZ := func(r autoscalingv1alpha1.CronFederatedHPARule, tz string) autoscalingv1alpha1.CronFederatedHPARule {
		r.TimeZone = ptr.To(tz)
		return r
	}
	withMaxDelay := func(r autoscalingv1alpha1.CronFederatedHPARule, s int32) autoscalingv1alpha1.CronFederatedHPARule {
		r.MaxDelaySeconds = ptr.To(s)
		return r
	}
	tests := []struct {
		name string
		obj  *autoscalingv1alpha1.CronFederatedHPA
		want string
	}{
		{name: "deployment", obj: cronFHPA("deployment", deploymentRef(), replicasRule("up", "30 8 * * 1-5", 10), replicasRule("down", "@daily", 0))},
		{name: "federatedhpa", obj: cronFHPA("federatedhpa", fhpaRef, boundsRule("up", ptr.To[int32](2), ptr.To[int32](10)))},
		{name: "hpa", obj: cronFHPA("hpa", hpaRef, boundsRule("night", ptr.To[int32](1), nil))},
		{name: "time zone and delay", obj: cronFHPA("tz", deploymentRef(), withMaxDelay(withTZ(replicasRule("up", "0 * * * *", 1), "Asia/Shanghai"), 600))},
		{
			name: "invalid cron format",
			obj:  cronFHPA("bad-format", deploymentRef(), replicasRule("up", "x", 1)),
			want: denial(cronWebhook, `spec.rules[0].schedule: Invalid value: "x": invalid cron format`),
		},
		{
			name: "never fires",
			obj:  cronFHPA("never", deploymentRef(), replicasRule("up", "0 8 31 2 *", 1)),
			want: denial(cronWebhook, `spec.rules[0].schedule: Invalid value: "0 8 31 2 *": schedule "0 8 31 2 *" never fires: no day matches its day-of-month, month and day-of-week fields`),
		},
		{
			name: "every second",
			obj:  cronFHPA("every-second", deploymentRef(), replicasRule("up", "@everysecond", 1)),
			want: denial(cronWebhook, `spec.rules[0].schedule: Invalid value: "@everysecond": schedule "@everysecond" fires more often than once a minute`),
		},
		{
			name: "errors aggregated",
			obj: cronFHPA("aggregated", deploymentRef(), replicasRule("r", "0 8 * * JAN", 1),
				withTZ(replicasRule("s", "0 9 * * *", 1), "A/B")),
			want: denial(cronWebhook, `[spec.rules[0].schedule: Invalid value: "0 8 * * JAN": invalid cron format: day-of-week field "JAN": JAN is a month name; it only belongs in the month field, spec.rules[1].timeZone: Invalid value: "A/B": unknown time zone A/B]`),
		},
		{
			// Refused by the CRD's schema (the rules are a map keyed by
			// name) before the webhook is asked.
			name: "duplicate rule names",
			obj: cronFHPA("duplicates", deploymentRef(), replicasRule("r", "0 8 * * *", 1),
				replicasRule("r", "0 9 * * *", 1)),
			want: `spec.rules[1]: Duplicate value: {"name":"r"}`,
		},
		{
			name: "federatedhpa bounds missing",
			obj:  cronFHPA("fhpa-nil", fhpaRef, boundsRule("r", nil, nil)),
			want: denial(cronWebhook, "spec.rules[0].targetMinReplicas: Required value: targetMinReplicas and targetMaxReplicas cannot be nil at the same time if you want to scale FederatedHPA"),
		},
		{
			name: "hpa max below min",
			obj:  cronFHPA("hpa-bounds", hpaRef, boundsRule("r", ptr.To[int32](5), ptr.To[int32](4))),
			want: denial(cronWebhook, "spec.rules[0].targetMaxReplicas: Invalid value: 4: targetMaxReplicas should be larger than or equal to targetMinReplicas"),
		},
		{
			name: "targetReplicas missing",
			obj:  cronFHPA("no-replicas", deploymentRef(), boundsRule("r", ptr.To[int32](1), nil)),
			want: denial(cronWebhook, "spec.rules[0].targetReplicas: Required value: targetReplicas cannot be nil if you want to scale Deployment"),
		},
		{
			name: "maxDelaySeconds not below the interval",
			obj:  cronFHPA("delay", deploymentRef(), withMaxDelay(replicasRule("r", "*/5 * * * *", 1), 300)),
			want: denial(cronWebhook, "spec.rules[0].maxDelaySeconds: Invalid value: 300: must be smaller than the shortest interval between two firings of the schedule (5m0s)"),
		},
		{
			name: "apiVersion does not parse",
			obj: cronFHPA("api-version", autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1/x", Kind: "Deployment", Name: "web"},
				replicasRule("r", "0 8 * * *", 1)),
			want: denial(cronWebhook, `spec.scaleTargetRef.apiVersion: Invalid value: "apps/v1/x": unexpected GroupVersion string: apps/v1/x`),
		},
		{
			// Refused by the CRD's schema (CEL) before the webhook is asked.
			name: "karmada group without FederatedHPA",
			obj: cronFHPA("karmada-kind", autoscalingv2.CrossVersionObjectReference{APIVersion: "autoscaling.karmada.io/v1alpha1", Kind: "CronFederatedHPA", Name: "web"},
				replicasRule("r", "0 8 * * *", 1)),
			// In Karmada's words, as the webhook says it.
			want: `spec.scaleTargetRef.kind: Invalid value: invalid scaleTargetRef kind: CronFederatedHPA, only support FederatedHPA`,
		},
		{
			name: "karmada group, kind Test",
			obj: cronFHPA("karmada-test", autoscalingv2.CrossVersionObjectReference{APIVersion: "autoscaling.karmada.io/v1alpha1", Kind: "Test", Name: "web"},
				replicasRule("r", "0 8 * * *", 1)),
			want: "invalid scaleTargetRef kind: Test, only support FederatedHPA",
		},
		{
			name: "schema: targetMinReplicas below 1",
			obj:  cronFHPA("schema-min", fhpaRef, boundsRule("r", ptr.To[int32](0), nil)),
			want: "spec.rules[0].targetMinReplicas: Invalid value: 0: spec.rules[0].targetMinReplicas in body should be greater than or equal to 1",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := client.Create(context.Background(), tc.obj, metav1.CreateOptions{})
			checkErr(t, err, tc.want)
		})
	}
}

// testCronFederatedHPAUpdate: updates are judged too, and an update that
// leaves the spec alone is not.
func testCronFederatedHPAUpdate(t *testing.T, env *webhookEnv) {
	ctx := context.Background()
	ns := env.cp.CreateNamespace(t)
	client := env.cp.Client().AutoscalingV1alpha1().CronFederatedHPAs(ns)
	cron, err := client.Create(ctx, cronFHPA("update", deploymentRef(), replicasRule("up", "0 8 * * *", 3)), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}

	bad := cron.DeepCopy()
	bad.Spec.Rules[0].Schedule = "0 8 30 2 *"
	_, err = client.Update(ctx, bad, metav1.UpdateOptions{})
	checkErr(t, err, denial(cronWebhook, `spec.rules[0].schedule: Invalid value: "0 8 30 2 *": schedule "0 8 30 2 *" never fires`))

	good := cron.DeepCopy()
	good.Spec.Rules[0].Schedule = "0 9 * * *"
	good.Spec.Rules = append(good.Spec.Rules, replicasRule("up", "0 10 * * *", 1))
	_, err = client.Update(ctx, good, metav1.UpdateOptions{})
	checkErr(t, err, `spec.rules[1]: Duplicate value: {"name":"up"}`)

	good.Spec.Rules = good.Spec.Rules[:1]
	cron, err = client.Update(ctx, good, metav1.UpdateOptions{})
	checkErr(t, err, "")
	if err != nil {
		return
	}

	before := env.metric(t, `scaleplane_webhook_admission_requests_total{kind="CronFederatedHPA",verdict="allowed"}`)
	cron.Labels = map[string]string{"team": "web"}
	_, err = client.Update(ctx, cron, metav1.UpdateOptions{})
	checkErr(t, err, "")
	after := env.metric(t, `scaleplane_webhook_admission_requests_total{kind="CronFederatedHPA",verdict="allowed"}`)
	if after != before+1 {
		t.Errorf("a label-only update was counted %v times as allowed, want once", after-before)
	}
}

func testAddonResizer(t *testing.T, env *webhookEnv) {
	ns := env.cp.CreateNamespace(t)
	client := env.cp.Client().ScaleplaneV1alpha1().AddonResizers(ns)
	tests := []struct {
		name   string
		mutate func(s *scaleplanev1alpha1.AddonResizerSpec)
		want   string
	}{
		{name: "valid", mutate: func(*scaleplanev1alpha1.AddonResizerSpec) {}},
		{name: "daemonset with storage", mutate: func(s *scaleplanev1alpha1.AddonResizerSpec) {
			s.TargetRef.Kind = scaleplanev1alpha1.TargetKindDaemonSet
			s.Resources = append(s.Resources, scaleplanev1alpha1.ResourceScaling{
				Name: corev1.ResourceEphemeralStorage, Base: resource.MustParse("1Gi"), ExtraPerUnit: resource.MustParse("0"),
			})
			s.ScaleDownDelay = &metav1.Duration{Duration: 10 * time.Minute}
		}},
		{
			name:   "container name not a DNS label",
			mutate: func(s *scaleplanev1alpha1.AddonResizerSpec) { s.ContainerName = "pod.nanny" },
			want:   denial(arWebhook, `spec.containerName: Invalid value: "pod.nanny": must not contain dots`),
		},
		{
			name:   "target name not a DNS subdomain",
			mutate: func(s *scaleplanev1alpha1.AddonResizerSpec) { s.TargetRef.Name = "Metrics_Server" },
			want:   denial(arWebhook, `spec.targetRef.name: Invalid value: "Metrics_Server": a lowercase RFC 1123 subdomain`),
		},
		{
			name:   "schema: negative base",
			mutate: func(s *scaleplanev1alpha1.AddonResizerSpec) { s.Resources[0].Base = resource.MustParse("-1m") },
			want:   `spec.resources[0].base: Invalid value: "-1m": must be greater than or equal to 0`,
		},
		{
			name: "schema: negative integer extra",
			mutate: func(s *scaleplanev1alpha1.AddonResizerSpec) {
				s.Resources[1].ExtraPerUnit = *resource.NewQuantity(-2, resource.DecimalSI)
			},
			want: "must be greater than or equal to 0",
		},
		{
			name: "schema: negative delay",
			mutate: func(s *scaleplanev1alpha1.AddonResizerSpec) {
				s.ScaleUpDelay = &metav1.Duration{Duration: -time.Second}
			},
			want: `spec.scaleUpDelay: Invalid value: "-1s": must not be negative`,
		},
		{
			name:   "schema: threshold above 100",
			mutate: func(s *scaleplanev1alpha1.AddonResizerSpec) { s.Threshold = 101 },
			want:   "spec.threshold: Invalid value: 101: spec.threshold in body should be less than or equal to 100",
		},
		{name: "in place", mutate: func(s *scaleplanev1alpha1.AddonResizerSpec) { s.UpdateMode = scaleplanev1alpha1.UpdateModeInPlace }},
		{
			// The CRD's rule, so that a cluster without the webhook refuses
			// it too.
			name: "schema: in place with ephemeral-storage",
			mutate: func(s *scaleplanev1alpha1.AddonResizerSpec) {
				s.UpdateMode = scaleplanev1alpha1.UpdateModeInPlace
				s.Resources = append(s.Resources, scaleplanev1alpha1.ResourceScaling{
					Name: corev1.ResourceEphemeralStorage, Base: resource.MustParse("1Gi"), ExtraPerUnit: resource.MustParse("0"),
				})
			},
			want: "ephemeral-storage cannot be resized in place (pods/resize changes cpu and memory only); use updateMode Rollout",
		},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ar := addonResizer(fmt.Sprintf("ar-%d", i))
			tc.mutate(&ar.Spec)
			_, err := client.Create(context.Background(), ar, metav1.CreateOptions{})
			checkErr(t, err, tc.want)
		})
	}

	// Updates are judged too.
	ctx := context.Background()
	ar, err := client.Get(ctx, "ar-0", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ar.Spec.ContainerName = "Nanny"
	_, err = client.Update(ctx, ar, metav1.UpdateOptions{})
	checkErr(t, err, denial(arWebhook, `spec.containerName: Invalid value: "Nanny"`))
}

func testLeaderWorkerSet(t *testing.T, env *webhookEnv) {
	ns := env.cp.CreateNamespace(t)
	client := env.cp.Client().LeaderworkersetV1().LeaderWorkerSets(ns)
	ctx := context.Background()

	created, err := client.Create(ctx, lws("valid", policyWithMetrics(cpuMetric(80))), metav1.CreateOptions{})
	checkErr(t, err, "")
	if err != nil {
		return
	}

	_, err = client.Create(ctx, lws("two-sources", &lwsv1.ScalePolicy{MaxReplicas: 3, Metrics: []autoscalingv2.MetricSpec{
		func() autoscalingv2.MetricSpec { m := cpuMetric(50); m.Pods = podsMetric("qps", "10").Pods; return m }(),
	}}), metav1.CreateOptions{})
	checkErr(t, err, denial(lwsWebhook, `spec.scalePolicy.metrics[0].pods: Forbidden: must not be set when type is "Resource": set only the source of the metric's type`))

	// Updates are judged too, and warnings reach the client.
	bad := created.DeepCopy()
	bad.Spec.ScalePolicy.Behavior = &autoscalingv2.HorizontalPodAutoscalerBehavior{
		ScaleDown: &autoscalingv2.HPAScalingRules{StabilizationWindowSeconds: ptr.To[int32](7200)},
	}
	_, err = client.Update(ctx, bad, metav1.UpdateOptions{})
	checkErr(t, err, denial(lwsWebhook, "spec.scalePolicy.behavior.scaleDown.stabilizationWindowSeconds: Invalid value: 7200: must be between 0 and 3600 seconds"))

	// Removing the policy is not sent to the webhook and always allowed.
	created.Spec.ScalePolicy = nil
	_, err = client.Update(ctx, created, metav1.UpdateOptions{})
	checkErr(t, err, "")
}

// testLeaderWorkerSetNotSent: the matchConditions keep LeaderWorkerSets
// without a scalePolicy away from the webhook.
func testLeaderWorkerSetNotSent(t *testing.T, env *webhookEnv) {
	ns := env.cp.CreateNamespace(t)
	client := env.cp.Client().LeaderworkersetV1().LeaderWorkerSets(ns)
	count := func() float64 {
		var total float64
		for _, verdict := range []string{"allowed", "denied", "error", "bad_request"} {
			total += env.metric(t, fmt.Sprintf(`scaleplane_webhook_admission_requests_total{kind="LeaderWorkerSet",verdict=%q}`, verdict))
		}
		return total
	}
	before := count()
	if _, err := client.Create(context.Background(), lws("plain", nil), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if after := count(); after != before {
		t.Errorf("a LeaderWorkerSet without scalePolicy reached the webhook (%v requests)", after-before)
	}
	if _, err := client.Create(context.Background(), lws("with-policy", policyWithMetrics(cpuMetric(70))), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if after := count(); after != before+1 {
		t.Errorf("a LeaderWorkerSet with scalePolicy made %v webhook requests, want 1", after-before)
	}
}

// testCertificateRotation replaces the certificate files with ones from a
// new CA, trusted by the apiserver alongside the old one during the change,
// and checks that the webhook serves the new one without a restart and keeps
// judging once only the new CA is trusted.
func testCertificateRotation(t *testing.T, env *webhookEnv) {
	ctx := context.Background()
	configs := env.cp.KubeClient().AdmissionregistrationV1().ValidatingWebhookConfigurations()
	newCerts, err := framework.GenerateServingCerts()
	if err != nil {
		t.Fatal(err)
	}
	setCABundle := func(bundle []byte) {
		t.Helper()
		config, err := configs.Get(ctx, env.config.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for i := range config.Webhooks {
			config.Webhooks[i].ClientConfig.CABundle = bundle
		}
		if _, err := configs.Update(ctx, config, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	setCABundle(append(bytes.Clone(env.config.Webhooks[0].ClientConfig.CABundle), newCerts.CACert...))

	if _, _, _, err := newCerts.WriteFiles(env.dir, "webhook"); err != nil {
		t.Fatal(err)
	}
	env.caPEM = newCerts.CACert
	want := leafOf(t, newCerts.Cert)
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 90*time.Second, true, func(context.Context) (bool, error) {
		served, err := env.servedCertificate()
		return err == nil && served.SerialNumber.Cmp(want.SerialNumber) == 0, nil
	})
	if err != nil {
		t.Fatalf("the webhook still serves the old certificate after the files changed: %v", err)
	}

	setCABundle(newCerts.CACert)
	env.waitRegistered(t)
}
