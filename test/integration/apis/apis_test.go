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

// Package apis checks the CRDs as a user meets them through a real
// kube-apiserver: kubectl explain shows the field documentation, kubectl get
// shows the printer columns, and the schema alone rejects the worst input.
package apis

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	autoscalingv1alpha1 "github.com/scaleplane/scaleplane/pkg/apis/autoscaling/v1alpha1"
	leaderworkersetv1 "github.com/scaleplane/scaleplane/pkg/apis/leaderworkerset/v1"
	scaleplanev1alpha1 "github.com/scaleplane/scaleplane/pkg/apis/scaleplane/v1alpha1"
	"github.com/scaleplane/scaleplane/test/integration/framework"
)

func TestMain(m *testing.M) {
	framework.Main(m, framework.Options{})
}

// kubectl runs the project's kubectl against the test control plane.
func kubectl(t *testing.T, args ...string) string {
	t.Helper()
	bin, err := framework.Binary("kubectl")
	if err != nil {
		t.Fatal(err)
	}
	cp := framework.Get(t)
	cmd := exec.Command(bin, append([]string{"--kubeconfig", cp.KubeconfigPath()}, args...)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

func TestExplainShowsFieldDocumentation(t *testing.T) {
	out := kubectl(t, "explain", "cronfederatedhpa.spec.rules")
	for _, want := range []string{
		"GROUP:      autoscaling.karmada.io",
		"KIND:       CronFederatedHPA",
		"Rules are the cron rules.",
		"schedule\t<string> -required-",
		"maxDelaySeconds\t<integer>",
		"TimeZone is the IANA name of the time zone",
		"failedHistoryLimit\t<integer>",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("kubectl explain cronfederatedhpa.spec.rules does not show %q:\n%s", want, out)
		}
	}
	out = kubectl(t, "explain", "addonresizer.spec.scalingMode")
	if !strings.Contains(out, "ContainerProportional") {
		t.Errorf("kubectl explain addonresizer.spec.scalingMode does not document the modes:\n%s", out)
	}
}

func TestPrinterColumns(t *testing.T) {
	cp := framework.Get(t)
	ns := cp.CreateNamespace(t)
	ctx := context.Background()
	cron := &autoscalingv1alpha1.CronFederatedHPA{
		ObjectMeta: metav1.ObjectMeta{Name: "web-peak", Namespace: ns},
		Spec: autoscalingv1alpha1.CronFederatedHPASpec{
			ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"},
			Rules:          []autoscalingv1alpha1.CronFederatedHPARule{{Name: "up", Schedule: "30 8 * * *", TargetReplicas: ptr.To[int32](10)}},
		},
	}
	if _, err := cp.Client().AutoscalingV1alpha1().CronFederatedHPAs(ns).Create(ctx, cron, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating a CronFederatedHPA: %v", err)
	}
	out := kubectl(t, "get", "cronfhpa", "-n", ns)
	for _, want := range []string{"REFERENCE-KIND", "REFERENCE-NAME", "NEXT-EXECUTION", "LAST-SCHEDULE", "web-peak", "Deployment", "web"} {
		if !strings.Contains(out, want) {
			t.Errorf("kubectl get cronfhpa does not show %q:\n%s", want, out)
		}
	}
	resizer := &scaleplanev1alpha1.AddonResizer{
		ObjectMeta: metav1.ObjectMeta{Name: "metrics-server", Namespace: ns},
		Spec: scaleplanev1alpha1.AddonResizerSpec{
			TargetRef:     scaleplanev1alpha1.TargetReference{Kind: scaleplanev1alpha1.TargetKindDeployment, Name: "metrics-server"},
			ContainerName: "metrics-server",
			Resources: []scaleplanev1alpha1.ResourceScaling{{
				Name: corev1.ResourceCPU, Base: resource.MustParse("40m"), ExtraPerUnit: resource.MustParse("500u"),
			}},
		},
	}
	if _, err := cp.Client().ScaleplaneV1alpha1().AddonResizers(ns).Create(ctx, resizer, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating an AddonResizer: %v", err)
	}
	out = kubectl(t, "get", "addonresizers", "-n", ns)
	for _, want := range []string{"TARGET-KIND", "MODE", "CLUSTER-SIZE", "UP-TO-DATE", "LAST-CHANGE", "metrics-server"} {
		if !strings.Contains(out, want) {
			t.Errorf("kubectl get addonresizers does not show %q:\n%s", want, out)
		}
	}
}

// TestLeaderWorkerSetTemplateMetadata: every real LeaderWorkerSet labels its
// pod templates. kubectl validates strictly, so a schema without the
// templates' metadata rejects it ("unknown field"), and Go clients would see
// the labels silently pruned; both must keep them, as upstream LWS's CRD does.
func TestLeaderWorkerSetTemplateMetadata(t *testing.T) {
	cp := framework.Get(t)
	ns := cp.CreateNamespace(t)
	manifest := `apiVersion: leaderworkerset.x-k8s.io/v1
kind: LeaderWorkerSet
metadata:
  name: vllm
  namespace: ` + ns + `
spec:
  replicas: 2
  leaderWorkerTemplate:
    size: 2
    leaderTemplate:
      metadata:
        labels: {role: leader, app: vllm}
        annotations: {example.com/leader: "yes"}
      spec:
        containers: [{name: leader, image: registry.example/vllm:1}]
    workerTemplate:
      metadata:
        labels: {role: worker, app: vllm}
        annotations: {example.com/worker: "yes"}
      spec:
        containers: [{name: worker, image: registry.example/vllm:1}]
`
	path := filepath.Join(t.TempDir(), "lws.yaml")
	if err := os.WriteFile(path, []byte(manifest), 0o600); err != nil {
		t.Fatal(err)
	}
	kubectl(t, "create", "--validate=strict", "-f", path)

	got, err := cp.Client().LeaderworkersetV1().LeaderWorkerSets(ns).Get(context.Background(), "vllm", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	tmpl := got.Spec.LeaderWorkerTemplate
	if tmpl.LeaderTemplate == nil {
		t.Fatal("the leader template was dropped")
	}
	checks := []struct{ what, got, want string }{
		{"leader label role", tmpl.LeaderTemplate.Labels["role"], "leader"},
		{"leader annotation", tmpl.LeaderTemplate.Annotations["example.com/leader"], "yes"},
		{"worker label role", tmpl.WorkerTemplate.Labels["role"], "worker"},
		{"worker label app", tmpl.WorkerTemplate.Labels["app"], "vllm"},
		{"worker annotation", tmpl.WorkerTemplate.Annotations["example.com/worker"], "yes"},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s: stored %q, want %q", c.what, c.got, c.want)
		}
	}
}

// TestSchemaDefaultsAndRules checks what the CRDs do without any webhook:
// Karmada's defaults are applied, and the bounds and CEL rules reject bad
// input with a message naming the field.
func TestSchemaDefaultsAndRules(t *testing.T) {
	cp := framework.Get(t)
	ns := cp.CreateNamespace(t)
	ctx := context.Background()

	cron := &autoscalingv1alpha1.CronFederatedHPA{
		ObjectMeta: metav1.ObjectMeta{Name: "defaults", Namespace: ns},
		Spec: autoscalingv1alpha1.CronFederatedHPASpec{
			ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"},
			Rules:          []autoscalingv1alpha1.CronFederatedHPARule{{Name: "up", Schedule: "30 8 * * *", TargetReplicas: ptr.To[int32](3)}},
		},
	}
	got, err := cp.Client().AutoscalingV1alpha1().CronFederatedHPAs(ns).Create(ctx, cron, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating a CronFederatedHPA: %v", err)
	}
	rule := got.Spec.Rules[0]
	if rule.Suspend == nil || *rule.Suspend || ptr.Deref(rule.SuccessfulHistoryLimit, 0) != 3 || ptr.Deref(rule.FailedHistoryLimit, 0) != 3 {
		t.Errorf("defaults not applied: suspend=%v successfulHistoryLimit=%v failedHistoryLimit=%v",
			rule.Suspend, rule.SuccessfulHistoryLimit, rule.FailedHistoryLimit)
	}

	bad := []struct {
		name   string
		create func() error
		want   string
	}{
		{
			name: "rule name too long",
			create: func() error {
				c := cron.DeepCopy()
				c.Name = "long-name"
				c.Spec.Rules[0].Name = strings.Repeat("r", 33)
				_, err := cp.Client().AutoscalingV1alpha1().CronFederatedHPAs(ns).Create(ctx, c, metav1.CreateOptions{})
				return err
			},
			want: "spec.rules[0].name: Too long",
		},
		{
			// Issue 12, item 8: Karmada's webhook's words, with the kind.
			name: "karmada group, kind Test",
			create: func() error {
				c := cron.DeepCopy()
				c.Name = "karmada-test"
				c.Spec.ScaleTargetRef = autoscalingv2.CrossVersionObjectReference{APIVersion: "autoscaling.karmada.io/v1alpha1", Kind: "Test", Name: "web"}
				_, err := cp.Client().AutoscalingV1alpha1().CronFederatedHPAs(ns).Create(ctx, c, metav1.CreateOptions{})
				return err
			},
			want: "spec.scaleTargetRef.kind: Invalid value: invalid scaleTargetRef kind: Test, only support FederatedHPA",
		},
		{
			// Issue 12, item 5: a rule's name is the key of its history.
			name: "duplicate rule names",
			create: func() error {
				c := cron.DeepCopy()
				c.Name = "duplicates"
				c.Spec.Rules = append(c.Spec.Rules, c.Spec.Rules[0])
				_, err := cp.Client().AutoscalingV1alpha1().CronFederatedHPAs(ns).Create(ctx, c, metav1.CreateOptions{})
				return err
			},
			want: `spec.rules[1]: Duplicate value: {"name":"up"}`,
		},
		{
			name: "successfulHistoryLimit 0",
			create: func() error {
				c := cron.DeepCopy()
				c.Name = "no-history"
				c.Spec.Rules[0].SuccessfulHistoryLimit = ptr.To[int32](0)
				_, err := cp.Client().AutoscalingV1alpha1().CronFederatedHPAs(ns).Create(ctx, c, metav1.CreateOptions{})
				return err
			},
			want: "spec.rules[0].successfulHistoryLimit: Invalid value: 0",
		},
		{
			name: "FederatedHPA max below min",
			create: func() error {
				f := &autoscalingv1alpha1.FederatedHPA{
					ObjectMeta: metav1.ObjectMeta{Name: "inverted", Namespace: ns},
					Spec: autoscalingv1alpha1.FederatedHPASpec{
						ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"},
						MinReplicas:    ptr.To[int32](5),
						MaxReplicas:    2,
					},
				}
				_, err := cp.Client().AutoscalingV1alpha1().FederatedHPAs(ns).Create(ctx, f, metav1.CreateOptions{})
				return err
			},
			want: "maxReplicas must be greater than or equal to minReplicas",
		},
		{
			name: "LeaderWorkerSet scalePolicy max below min",
			create: func() error {
				l := &leaderworkersetv1.LeaderWorkerSet{
					ObjectMeta: metav1.ObjectMeta{Name: "inverted", Namespace: ns},
					Spec: leaderworkersetv1.LeaderWorkerSetSpec{
						LeaderWorkerTemplate: leaderworkersetv1.LeaderWorkerTemplate{WorkerTemplate: podTemplate()},
						ScalePolicy:          &leaderworkersetv1.ScalePolicy{MinReplicas: ptr.To[int32](4), MaxReplicas: 2},
					},
				}
				_, err := cp.Client().LeaderworkersetV1().LeaderWorkerSets(ns).Create(ctx, l, metav1.CreateOptions{})
				return err
			},
			want: "maxReplicas must be greater than or equal to minReplicas",
		},
	}
	for _, tc := range bad {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.create()
			if err == nil {
				t.Fatalf("the apiserver accepted it; want a rejection containing %q", tc.want)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("rejection %q does not contain %q", err, tc.want)
			}
		})
	}
}

func podTemplate() corev1.PodTemplateSpec {
	return corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "lws"}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "main", Image: "registry.example/app:1"}}},
	}
}
