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

// Package rbac proves the shipped RBAC is enough, and no more than needed:
// the real scaleplane-controller-manager runs with the token of its service
// account, bound only by artifacts/deploy/controller-manager/rbac.yaml, and
// must fire a CronFederatedHPA on a Deployment and an HPA, hold its Lease and
// record events; and it must not be able to do what it was not given.
package rbac

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"

	autoscalingv1alpha1 "github.com/scaleplane/scaleplane/pkg/apis/autoscaling/v1alpha1"
	lwsv1 "github.com/scaleplane/scaleplane/pkg/apis/leaderworkerset/v1"
	scaleplanev1alpha1 "github.com/scaleplane/scaleplane/pkg/apis/scaleplane/v1alpha1"
	"github.com/scaleplane/scaleplane/pkg/generated/clientset/versioned"
	"github.com/scaleplane/scaleplane/test/integration/framework"
)

const (
	systemNamespace = "scaleplane-system"
	serviceAccount  = "scaleplane-controller-manager"
)

func TestMain(m *testing.M) {
	// The cron-scaler's ClusterRole is an aggregated one: only
	// kube-controller-manager's clusterrole-aggregation controller fills it.
	// OwnerReferencesPermissionEnforcement is on, as in OpenShift: an owner
	// reference that blocks the owner's deletion needs update on the
	// owner's finalizers, which the hpa-generator's HPAs ask for.
	framework.Main(m, framework.Options{
		KubeControllerManager:            true,
		KubeControllerManagerControllers: []string{"clusterrole-aggregation"},
		ExtraAPIServerArgs:               []string{"--enable-admission-plugins=OwnerReferencesPermissionEnforcement"},
	})
}

func repoPath(t *testing.T, rel string) string {
	t.Helper()
	root, err := framework.RepoRoot()
	if err != nil {
		t.Fatalf("locating the repository: %v", err)
	}
	return filepath.Join(root, rel)
}

func binPath(t *testing.T, name string) string {
	t.Helper()
	path, err := framework.Binary(name)
	if err != nil {
		t.Fatal(err)
	}
	return path
}

// applyManifests applies the shipped namespace, service account and RBAC
// with the admin credentials, exactly as a cluster admin would.
func applyManifests(t *testing.T, cp *framework.ControlPlane) {
	t.Helper()
	for _, f := range []string{
		"artifacts/deploy/webhook/namespace.yaml",
		"artifacts/deploy/controller-manager/serviceaccount.yaml",
		"artifacts/deploy/controller-manager/rbac.yaml",
	} {
		out, err := exec.Command(binPath(t, "kubectl"), "--kubeconfig", cp.KubeconfigPath(), "apply", "-f", repoPath(t, f)).CombinedOutput()
		if err != nil {
			t.Fatalf("kubectl apply -f %s: %v\n%s", f, err, out)
		}
	}
}

// serviceAccountConfig returns a REST config and a kubeconfig file that
// authenticate as the controller manager's service account.
func serviceAccountConfig(t *testing.T, cp *framework.ControlPlane) (*rest.Config, string) {
	t.Helper()
	path := cp.ServiceAccountKubeconfig(t, systemNamespace, serviceAccount)
	cfg, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		t.Fatalf("reading the service account kubeconfig: %v", err)
	}
	return cfg, path
}

// startControllerManager runs the real binary with every controller and
// leader election on, stops it when the test ends, and prints its log if the
// test failed.
func startControllerManager(t *testing.T, kubeconfig string, port int) *framework.Process {
	t.Helper()
	p, err := framework.StartProcess(t.TempDir(), "controller-manager", binPath(t, "scaleplane-controller-manager"), []string{
		"--kubeconfig", kubeconfig,
		"--controllers=*",
		"--leader-elect=true",
		"--leader-elect-resource-namespace=" + systemNamespace,
		"--bind-address=127.0.0.1",
		fmt.Sprintf("--port=%d", port),
		"-v=2",
	})
	if err != nil {
		t.Fatalf("starting scaleplane-controller-manager: %v", err)
	}
	t.Cleanup(func() {
		p.Stop(15 * time.Second)
		if t.Failed() {
			t.Logf("scaleplane-controller-manager log:\n%s", p.Tail(200))
		}
	})
	return p
}

func TestControllerManagerRunsWithShippedRBAC(t *testing.T) {
	cp := framework.Get(t)
	ctx := context.Background()
	applyManifests(t, cp)
	saConfig, saKubeconfig := serviceAccountConfig(t, cp)
	saClient := kubernetes.NewForConfigOrDie(saConfig)

	// Least privilege: the service account cannot read Secrets or write
	// Deployments directly, only their scale subresource.
	if _, err := saClient.CoreV1().Secrets("default").List(ctx, metav1.ListOptions{}); err == nil {
		t.Errorf("the controller manager's service account can list Secrets")
	}
	if err := saClient.AppsV1().Deployments("default").Delete(ctx, "anything", metav1.DeleteOptions{}); err == nil || !strings.Contains(err.Error(), "forbidden") {
		t.Errorf("deleting a Deployment as the service account: got %v, want forbidden", err)
	}

	ns := cp.CreateNamespace(t)
	dep := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](1),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "registry.example/web:1"}}},
			},
		},
	}
	if _, err := cp.KubeClient().AppsV1().Deployments(ns).Create(ctx, dep, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating the Deployment: %v", err)
	}
	hpa := &autoscalingv2.HorizontalPodAutoscaler{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns},
		Spec: autoscalingv2.HorizontalPodAutoscalerSpec{
			ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"},
			MinReplicas:    ptr.To[int32](1),
			MaxReplicas:    5,
		},
	}
	if _, err := cp.KubeClient().AutoscalingV2().HorizontalPodAutoscalers(ns).Create(ctx, hpa, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating the HPA: %v", err)
	}
	for _, c := range []*autoscalingv1alpha1.CronFederatedHPA{
		cronOn(ns, "scale-web", autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"},
			autoscalingv1alpha1.CronFederatedHPARule{Name: "every-minute", Schedule: "* * * * *", TargetReplicas: ptr.To[int32](3)}),
		cronOn(ns, "bound-web", autoscalingv2.CrossVersionObjectReference{APIVersion: "autoscaling/v2", Kind: "HorizontalPodAutoscaler", Name: "web"},
			autoscalingv1alpha1.CronFederatedHPARule{Name: "every-minute", Schedule: "* * * * *", TargetMinReplicas: ptr.To[int32](2), TargetMaxReplicas: ptr.To[int32](9)}),
	} {
		if _, err := cp.Client().AutoscalingV1alpha1().CronFederatedHPAs(ns).Create(ctx, c, metav1.CreateOptions{}); err != nil {
			t.Fatalf("creating CronFederatedHPA %s: %v", c.Name, err)
		}
	}

	port, err := framework.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	manager := startControllerManager(t, saKubeconfig, port)

	// A "* * * * *" rule fires at the next minute boundary: at most ~60 s.
	err = wait.PollUntilContextTimeout(ctx, time.Second, 100*time.Second, true, func(ctx context.Context) (bool, error) {
		d, err := cp.KubeClient().AppsV1().Deployments(ns).Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		h, err := cp.KubeClient().AutoscalingV2().HorizontalPodAutoscalers(ns).Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return ptr.Deref(d.Spec.Replicas, 0) == 3 && ptr.Deref(h.Spec.MinReplicas, 0) == 2 && h.Spec.MaxReplicas == 9, nil
	})
	if err != nil {
		t.Fatalf("the controller manager, running with the shipped RBAC, did not scale the Deployment to 3 and the HPA to 2..9: %v\n%s", err, describeNamespace(cp, ns))
	}

	// Status was written (cronfederatedhpas/status) and a Normal event
	// recorded (events), both as the service account.
	err = wait.PollUntilContextTimeout(ctx, time.Second, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		for _, name := range []string{"scale-web", "bound-web"} {
			c, err := cp.Client().AutoscalingV1alpha1().CronFederatedHPAs(ns).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			if len(c.Status.ExecutionHistories) == 0 || len(c.Status.ExecutionHistories[0].SuccessfulExecutions) == 0 {
				return false, nil
			}
		}
		events, err := cp.KubeClient().CoreV1().Events(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		for _, e := range events.Items {
			if e.Type == corev1.EventTypeNormal && e.InvolvedObject.Kind == "CronFederatedHPA" {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("no successful execution in status or no Normal event on the CronFederatedHPAs: %v\n%s", err, describeNamespace(cp, ns))
	}

	lease, err := cp.KubeClient().CoordinationV1().Leases(systemNamespace).Get(ctx, "scaleplane-controller-manager", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the leader-election Lease was not created in %s: %v", systemNamespace, err)
	}
	if ptr.Deref(lease.Spec.HolderIdentity, "") == "" {
		t.Errorf("the Lease has no holder")
	}

	resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/healthz", port))
	if err != nil {
		t.Fatalf("GET /healthz: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("/healthz answered %d", resp.StatusCode)
	}

	checkHPAGenerator(t, cp, ns)
	checkLeaderWorkerSetAccess(t, saConfig, ns)
	checkResizer(t, cp, ns, dep)

	// Nothing the controllers tried was refused: every informer listed and
	// watched, every write went through.
	if log := manager.Tail(5000); strings.Contains(log, "forbidden") {
		t.Errorf("the controller manager was refused something with the shipped RBAC:\n%s", grepLines(log, "forbidden"))
	}
}

// checkHPAGenerator: with the shipped RBAC the hpa-generator creates the HPA
// of a LeaderWorkerSet with a scalePolicy.
func checkHPAGenerator(t *testing.T, cp *framework.ControlPlane, ns string) {
	t.Helper()
	ctx := context.Background()
	tmpl := corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "llm"}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "llm", Image: "registry.example/llm:1"}}},
	}
	lws := &lwsv1.LeaderWorkerSet{
		ObjectMeta: metav1.ObjectMeta{Name: "llm", Namespace: ns},
		Spec: lwsv1.LeaderWorkerSetSpec{
			Replicas:             ptr.To[int32](1),
			LeaderWorkerTemplate: lwsv1.LeaderWorkerTemplate{WorkerTemplate: tmpl},
			RolloutStrategy:      lwsv1.RolloutStrategy{Type: lwsv1.RollingUpdateStrategyType},
			StartupPolicy:        lwsv1.LeaderCreatedStartupPolicy,
			ScalePolicy: &lwsv1.ScalePolicy{MaxReplicas: 3, Metrics: []autoscalingv2.MetricSpec{{
				Type: autoscalingv2.ResourceMetricSourceType,
				Resource: &autoscalingv2.ResourceMetricSource{Name: corev1.ResourceCPU, Target: autoscalingv2.MetricTarget{
					Type: autoscalingv2.UtilizationMetricType, AverageUtilization: ptr.To[int32](50),
				}},
			}}},
		},
	}
	if _, err := cp.Client().LeaderworkersetV1().LeaderWorkerSets(ns).Create(ctx, lws, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating the LeaderWorkerSet: %v", err)
	}
	var hpa *autoscalingv2.HorizontalPodAutoscaler
	err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		var err error
		hpa, err = cp.KubeClient().AutoscalingV2().HorizontalPodAutoscalers(ns).Get(ctx, "llm", metav1.GetOptions{})
		return err == nil && hpa.Spec.MaxReplicas == 3, nil
	})
	if err != nil {
		t.Errorf("the hpa-generator, running with the shipped RBAC and OwnerReferencesPermissionEnforcement, did not create the LeaderWorkerSet's HPA: %v\n%s", err, describeNamespace(cp, ns))
		return
	}
	if ref := metav1.GetControllerOf(hpa); ref == nil || ref.Name != "llm" || !ptr.Deref(ref.BlockOwnerDeletion, false) {
		t.Errorf("the HPA's controller reference = %+v, want LeaderWorkerSet llm blocking its deletion", ref)
	}
}

// checkLeaderWorkerSetAccess: what the service account may do to
// LeaderWorkerSets is what the controllers need and no more. The
// hpa-generator reads them and updates their finalizers (for
// blockOwnerDeletion); the cron-scaler updates them, for the bounds of their
// scalePolicy (RBAC cannot narrow an update to fields). Neither may create
// or delete one.
func checkLeaderWorkerSetAccess(t *testing.T, saConfig *rest.Config, ns string) {
	t.Helper()
	ctx := context.Background()
	client := versioned.NewForConfigOrDie(saConfig).LeaderworkersetV1().LeaderWorkerSets(ns)
	if err := client.Delete(ctx, "llm", metav1.DeleteOptions{}); err == nil || !strings.Contains(err.Error(), "forbidden") {
		t.Errorf("deleting a LeaderWorkerSet as the service account: got %v, want forbidden", err)
	}
	lws := &lwsv1.LeaderWorkerSet{ObjectMeta: metav1.ObjectMeta{Name: "new", Namespace: ns}}
	if _, err := client.Create(ctx, lws, metav1.CreateOptions{}); err == nil || !strings.Contains(err.Error(), "forbidden") {
		t.Errorf("creating a LeaderWorkerSet as the service account: got %v, want forbidden", err)
	}
}

// checkResizer: with the shipped RBAC the resizer counts nodes and patches
// the Deployment's container.
func checkResizer(t *testing.T, cp *framework.ControlPlane, ns string, dep *appsv1.Deployment) {
	t.Helper()
	ctx := context.Background()
	ar := &scaleplanev1alpha1.AddonResizer{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns},
		Spec: scaleplanev1alpha1.AddonResizerSpec{
			TargetRef:     scaleplanev1alpha1.TargetReference{Kind: scaleplanev1alpha1.TargetKindDeployment, Name: dep.Name},
			ContainerName: dep.Spec.Template.Spec.Containers[0].Name,
			Resources: []scaleplanev1alpha1.ResourceScaling{{
				Name: corev1.ResourceMemory, Base: resource.MustParse("77Mi"), ExtraPerUnit: resource.MustParse("1Mi"),
			}},
		},
	}
	if _, err := cp.Client().ScaleplaneV1alpha1().AddonResizers(ns).Create(ctx, ar, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating the AddonResizer: %v", err)
	}
	err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		nodes, err := cp.KubeClient().CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		d, err := cp.KubeClient().AppsV1().Deployments(ns).Get(ctx, dep.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		want := resource.NewQuantity(int64(77+len(nodes.Items))*1024*1024, resource.BinarySI)
		got := d.Spec.Template.Spec.Containers[0].Resources.Requests[corev1.ResourceMemory]
		return got.Cmp(*want) == 0, nil
	})
	if err != nil {
		t.Errorf("the resizer, running with the shipped RBAC, did not resize the Deployment: %v\n%s", err, describeNamespace(cp, ns))
	}
	err = wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		got, err := cp.Client().ScaleplaneV1alpha1().AddonResizers(ns).Get(ctx, "web", metav1.GetOptions{})
		return err == nil && got.Status.ObservedGeneration == got.Generation, nil
	})
	if err != nil {
		t.Errorf("the resizer did not write the AddonResizer's status: %v\n%s", err, describeNamespace(cp, ns))
	}
}

func grepLines(s, substr string) string {
	var out []string
	for _, line := range strings.Split(s, "\n") {
		if strings.Contains(line, substr) {
			out = append(out, line)
		}
	}
	return strings.Join(out, "\n")
}

func cronOn(ns, name string, ref autoscalingv2.CrossVersionObjectReference, rule autoscalingv1alpha1.CronFederatedHPARule) *autoscalingv1alpha1.CronFederatedHPA {
	return &autoscalingv1alpha1.CronFederatedHPA{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec:       autoscalingv1alpha1.CronFederatedHPASpec{ScaleTargetRef: ref, Rules: []autoscalingv1alpha1.CronFederatedHPARule{rule}},
	}
}

// describeNamespace says what a failed wait saw: the Deployment, the HPAs,
// the CronFederatedHPAs', LeaderWorkerSets' and AddonResizers' statuses and
// the namespace's events, so a failure in CI can be told apart from a slow
// run without a rerun.
func describeNamespace(cp *framework.ControlPlane, ns string) string {
	ctx := context.Background()
	var b strings.Builder
	line := func(format string, args ...any) { fmt.Fprintf(&b, format+"\n", args...) }
	asJSON := func(v any) string { out, _ := json.Marshal(v); return string(out) }
	line("state of namespace %s at %s:", ns, time.Now().UTC().Format(time.RFC3339Nano))
	if d, err := cp.KubeClient().AppsV1().Deployments(ns).Get(ctx, "web", metav1.GetOptions{}); err != nil {
		line("Deployment web: %v", err)
	} else {
		line("Deployment web: replicas %d, resources %s, resourceVersion %s", ptr.Deref(d.Spec.Replicas, -1), asJSON(d.Spec.Template.Spec.Containers[0].Resources), d.ResourceVersion)
	}
	if l, err := cp.KubeClient().AutoscalingV2().HorizontalPodAutoscalers(ns).List(ctx, metav1.ListOptions{}); err != nil {
		line("HPAs: %v", err)
	} else {
		for _, h := range l.Items {
			line("HPA %s: minReplicas %d, maxReplicas %d, owners %s, resourceVersion %s", h.Name, ptr.Deref(h.Spec.MinReplicas, -1), h.Spec.MaxReplicas, asJSON(h.OwnerReferences), h.ResourceVersion)
		}
	}
	if l, err := cp.Client().AutoscalingV1alpha1().CronFederatedHPAs(ns).List(ctx, metav1.ListOptions{}); err != nil {
		line("CronFederatedHPAs: %v", err)
	} else {
		for _, c := range l.Items {
			line("CronFederatedHPA %s (resourceVersion %s, created %s): status %s", c.Name, c.ResourceVersion, c.CreationTimestamp.UTC().Format(time.RFC3339), asJSON(c.Status))
		}
	}
	if l, err := cp.Client().LeaderworkersetV1().LeaderWorkerSets(ns).List(ctx, metav1.ListOptions{}); err != nil {
		line("LeaderWorkerSets: %v", err)
	} else {
		for _, o := range l.Items {
			line("LeaderWorkerSet %s (generation %d, finalizers %v): status %s", o.Name, o.Generation, o.Finalizers, asJSON(o.Status))
		}
	}
	if l, err := cp.Client().ScaleplaneV1alpha1().AddonResizers(ns).List(ctx, metav1.ListOptions{}); err != nil {
		line("AddonResizers: %v", err)
	} else {
		for _, o := range l.Items {
			line("AddonResizer %s (generation %d): status %s", o.Name, o.Generation, asJSON(o.Status))
		}
	}
	events, err := cp.KubeClient().CoreV1().Events(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		line("events: %v", err)
		return b.String()
	}
	for _, e := range events.Items {
		line("event %s %s/%s %s (x%d, last %s): %s", e.Type, e.InvolvedObject.Kind, e.InvolvedObject.Name, e.Reason, e.Count, e.LastTimestamp.UTC().Format(time.RFC3339), e.Message)
	}
	return b.String()
}
