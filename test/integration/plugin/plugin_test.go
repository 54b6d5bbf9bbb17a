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

package plugin

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/scaleplane/scaleplane/cmd/kubectl-scaleplane/app"
	autoscalingv1alpha1 "github.com/scaleplane/scaleplane/pkg/apis/autoscaling/v1alpha1"
	"github.com/scaleplane/scaleplane/pkg/generated/clientset/versioned"
	"github.com/scaleplane/scaleplane/test/integration/framework"
)

// applyExamples creates every object of artifacts/examples/<dir> in ns, as
// make local-up applies them.
func applyExamples(t *testing.T, cp *framework.ControlPlane, ns string, dirs ...string) {
	t.Helper()
	ctx := context.Background()
	root, err := framework.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	disc, err := discovery.NewDiscoveryClientForConfig(cp.Config())
	if err != nil {
		t.Fatal(err)
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(disc))
	for _, dir := range dirs {
		files, err := filepath.Glob(filepath.Join(root, "artifacts", "examples", dir, "*.yaml"))
		if err != nil || len(files) == 0 {
			t.Fatalf("no examples in %s: %v", dir, err)
		}
		for _, file := range files {
			objs, err := framework.DecodeManifests(file)
			if err != nil {
				t.Fatal(err)
			}
			for _, obj := range objs {
				gvk := obj.GroupVersionKind()
				mapping, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
				if err != nil {
					t.Fatalf("%s: %s: %v", file, gvk, err)
				}
				if _, err := cp.DynamicClient().Resource(mapping.Resource).Namespace(ns).Create(ctx, obj, metav1.CreateOptions{}); err != nil {
					t.Fatalf("%s: creating %s %s: %v", filepath.Base(file), gvk.Kind, obj.GetName(), err)
				}
			}
		}
	}
}

// kubectlScaleplane runs `kubectl scaleplane args...` the way a user does:
// kubectl finds kubectl-scaleplane (built from the working tree) on PATH.
func kubectlScaleplane(t *testing.T, cp *framework.ControlPlane, args ...string) []byte {
	t.Helper()
	return kubectlScaleplaneAs(t, readerKubeconfig(t, cp), args...)
}

// kubectlScaleplaneAs is kubectlScaleplane with the kubeconfig given.
func kubectlScaleplaneAs(t *testing.T, kubeconfig string, args ...string) []byte {
	t.Helper()
	plugin, err := framework.Binary("kubectl-scaleplane")
	if err != nil {
		t.Fatal(err)
	}
	kubectl, err := framework.Binary("kubectl")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(kubectl, append([]string{"scaleplane", "--kubeconfig", kubeconfig}, args...)...)
	cmd.Env = append(os.Environ(), "PATH="+filepath.Dir(plugin)+string(os.PathListSeparator)+os.Getenv("PATH"))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("kubectl scaleplane %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return out
}

// The plugin runs as this service account, bound to the shipped
// scaleplane:kubectl-plugin ClusterRole alone: every command these tests run
// shows that the role is enough.
const readerNamespace, readerName = "scaleplane-plugin", "reader"

var (
	readerOnce sync.Once
	readerErr  error
)

// readerKubeconfig returns a kubeconfig of the plugin's reader, made once per
// control plane: artifacts/deploy/kubectl-plugin/rbac.yaml applied as a
// cluster admin would, and a ClusterRoleBinding to the service account.
func readerKubeconfig(t *testing.T, cp *framework.ControlPlane) string {
	t.Helper()
	readerOnce.Do(func() { readerErr = bindReader(cp) })
	if readerErr != nil {
		t.Fatal(readerErr)
	}
	return cp.ServiceAccountKubeconfig(t, readerNamespace, readerName)
}

func bindReader(cp *framework.ControlPlane) error {
	ctx := context.Background()
	root, err := framework.RepoRoot()
	if err != nil {
		return err
	}
	kubectl, err := framework.Binary("kubectl")
	if err != nil {
		return err
	}
	if out, err := exec.Command(kubectl, "--kubeconfig", cp.KubeconfigPath(), "apply", "-f", filepath.Join(root, "artifacts/deploy/kubectl-plugin/rbac.yaml")).CombinedOutput(); err != nil {
		return fmt.Errorf("kubectl apply -f artifacts/deploy/kubectl-plugin/rbac.yaml: %w\n%s", err, out)
	}
	kube := cp.KubeClient()
	if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: readerNamespace}}, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("creating namespace %s: %w", readerNamespace, err)
	}
	if _, err := kube.CoreV1().ServiceAccounts(readerNamespace).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: readerName}}, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("creating service account %s/%s: %w", readerNamespace, readerName, err)
	}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "scaleplane-plugin-reader"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "scaleplane:kubectl-plugin"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: readerNamespace, Name: readerName}},
	}
	if _, err := kube.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("binding scaleplane:kubectl-plugin: %w", err)
	}
	return nil
}

// TestReaderRoleGrantsNoMore: the role the plugin runs with in these tests
// reads, and does nothing else.
func TestReaderRoleGrantsNoMore(t *testing.T) {
	cp := framework.Get(t)
	ns := cp.CreateNamespace(t)
	cfg, err := clientcmd.BuildConfigFromFlags("", readerKubeconfig(t, cp))
	if err != nil {
		t.Fatal(err)
	}
	kube := kubernetes.NewForConfigOrDie(cfg)
	ctx := context.Background()
	refused := map[string]error{
		"list Secrets":      func() error { _, err := kube.CoreV1().Secrets(ns).List(ctx, metav1.ListOptions{}); return err }(),
		"delete Deployment": kube.AppsV1().Deployments(ns).Delete(ctx, "web", metav1.DeleteOptions{}),
		"create ConfigMap": func() error {
			_, err := kube.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "x"}}, metav1.CreateOptions{})
			return err
		}(),
		"create CronFederatedHPA": func() error {
			_, err := versioned.NewForConfigOrDie(cfg).AutoscalingV1alpha1().CronFederatedHPAs(ns).Create(ctx, &autoscalingv1alpha1.CronFederatedHPA{ObjectMeta: metav1.ObjectMeta{Name: "x"}}, metav1.CreateOptions{})
			return err
		}(),
	}
	for what, err := range refused {
		if !apierrors.IsForbidden(err) {
			t.Errorf("%s as the plugin's reader: got %v, want forbidden", what, err)
		}
	}
}

func decode[T any](t *testing.T, data []byte) T {
	t.Helper()
	var v T
	if err := json.Unmarshal(data, &v); err != nil {
		t.Fatalf("decoding %s: %v", data, err)
	}
	return v
}

// TestNextOnTheExamples previews the cron examples: every rule is there,
// valid and scheduled in the future within a week, at the wall time its
// schedule names in its own zone; the table form lists them too.
func TestNextOnTheExamples(t *testing.T) {
	cp := framework.Get(t)
	ns := cp.CreateNamespace(t)
	applyExamples(t, cp, ns, "cronfederatedhpa")
	start := time.Now()
	list := decode[app.FiringList](t, kubectlScaleplane(t, cp, "next", "-n", ns, "--count", "2", "-o", "json"))

	crons, err := cp.Client().AutoscalingV1alpha1().CronFederatedHPAs(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{}
	for _, c := range crons.Items {
		for _, r := range c.Spec.Rules {
			want[c.Name+"/"+r.Name] = true
		}
	}
	seen := map[string]int{}
	for _, f := range list.Items {
		key := f.CronFederatedHPA + "/" + f.Rule
		if !want[key] {
			t.Errorf("next lists %s, which is no rule of the examples", key)
		}
		if f.State != app.StateScheduled || f.Time == nil {
			t.Errorf("%s: state %s (%s), want Scheduled with a time", key, f.State, f.Message)
			continue
		}
		if f.Time.Before(start.Add(-time.Minute)) || f.Time.After(start.Add(8*24*time.Hour)) {
			t.Errorf("%s: next firing %s is not within the coming week", key, f.Time)
		}
		seen[key]++
	}
	for key := range want {
		if seen[key] != 2 {
			t.Errorf("%s: %d firings listed, want 2 (--count 2)", key, seen[key])
		}
	}
	// The time-zone example: Shanghai's 08:30 on a weekday, in Shanghai.
	shanghai, _ := time.LoadLocation("Asia/Shanghai")
	for _, f := range list.Items {
		if f.CronFederatedHPA == "web-global-cronfhpa" && f.Rule == "shanghai-up" {
			local := f.Time.In(shanghai)
			if local.Hour() != 8 || local.Minute() != 30 || local.Weekday() == time.Saturday || local.Weekday() == time.Sunday {
				t.Errorf("shanghai-up fires at %s in Asia/Shanghai, want 08:30 on a weekday", local)
			}
			if f.TimeZone != "Asia/Shanghai" || f.LocalTime != local.Format(time.RFC3339) {
				t.Errorf("shanghai-up: zone %q, local time %q; want Asia/Shanghai, %s", f.TimeZone, f.LocalTime, local.Format(time.RFC3339))
			}
		}
	}
	table := string(kubectlScaleplane(t, cp, "next", "-n", ns))
	for key := range want {
		cron, rule, _ := strings.Cut(key, "/")
		if !strings.Contains(table, cron) || !strings.Contains(table, rule) {
			t.Errorf("the table does not list %s:\n%s", key, table)
		}
	}
}

// TestWhoScalesOnTheExamples asks who scales the examples' workloads: the
// FederatedHPA and the CronFederatedHPA that moves its bounds; the HPA and
// its CronFederatedHPA; the LeaderWorkerSet's scalePolicy and its rules.
func TestWhoScalesOnTheExamples(t *testing.T) {
	cp := framework.Get(t)
	ns := cp.CreateNamespace(t)
	applyExamples(t, cp, ns, "cronfederatedhpa", "leaderworkerset")
	type item struct{ kind, name, via string }
	cases := map[string][]item{
		"deployment/nginx-federated": {{"CronFederatedHPA", "nginx-fhpa-cronfhpa", "FederatedHPA/nginx-fhpa"}, {"FederatedHPA", "nginx-fhpa", ""}},
		"deployment/api":             {{"CronFederatedHPA", "api-cronhpa", "HorizontalPodAutoscaler/api"}, {"HorizontalPodAutoscaler", "api", ""}},
		"deployment/nginx":           {{"CronFederatedHPA", "nginx-cronfhpa", ""}},
		"lws/vllm":                   {{"CronFederatedHPA", "vllm-business-hours", ""}, {"LeaderWorkerSet", "vllm", ""}},
	}
	for target, want := range cases {
		list := decode[app.ScalerList](t, kubectlScaleplane(t, cp, "who-scales", target, "-n", ns, "-o", "json"))
		var got []item
		for _, s := range list.Items {
			got = append(got, item{s.Kind, s.Name, s.Via})
			if s.Kind == "CronFederatedHPA" && s.NextFiring == nil {
				t.Errorf("%s: %s has no next firing", target, s.Name)
			}
		}
		if len(got) != len(want) {
			t.Errorf("who-scales %s = %v; want %v", target, got, want)
			continue
		}
		for i := range want {
			if got[i] != want[i] {
				t.Errorf("who-scales %s = %v; want %v", target, got, want)
				break
			}
		}
		if len(list.Warnings) != 0 {
			t.Errorf("who-scales %s warns on the examples: %v", target, list.Warnings)
		}
	}
}

// TestExplainOnTheExamples runs the resizer on the AddonResizer examples and
// checks that explain's estimate, computed from the count in status, is the
// recommendation the controller recorded.
func TestExplainOnTheExamples(t *testing.T) {
	cp := framework.Get(t)
	ns := cp.CreateNamespace(t)
	applyExamples(t, cp, ns, "addonresizer")
	framework.StartManager(t, cp.KubeconfigPath(), "resizer")
	ctx := context.Background()
	for _, name := range []string{"collector", "metrics-server"} {
		err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
			ar, err := cp.Client().ScaleplaneV1alpha1().AddonResizers(ns).Get(ctx, name, metav1.GetOptions{})
			return err == nil && ar.Status.ClusterSize != nil && ar.Status.Recommendation != nil, nil
		})
		if err != nil {
			t.Fatalf("AddonResizer %s: no count and recommendation in status: %v", name, err)
		}
		ar, err := cp.Client().ScaleplaneV1alpha1().AddonResizers(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		e := decode[app.Explanation](t, kubectlScaleplane(t, cp, "explain", "addonresizer", name, "-n", ns, "-o", "json"))
		if e.ClusterSize == nil || *e.ClusterSize != *ar.Status.ClusterSize {
			t.Errorf("%s: explain's count %v, status %d", name, e.ClusterSize, *ar.Status.ClusterSize)
		}
		if len(e.Resources) != len(ar.Spec.Resources) {
			t.Fatalf("%s: explain lists %d resources, the spec %d", name, len(e.Resources), len(ar.Spec.Resources))
		}
		for _, r := range e.Resources {
			want := ar.Status.Recommendation.Requests[corev1.ResourceName(r.Name)]
			got := resource.MustParse(r.Estimate)
			if got.Cmp(want) != 0 {
				t.Errorf("%s: explain estimates %s %s; the controller recommends %s", name, r.Name, r.Estimate, want.String())
			}
			if !strings.Contains(r.Arithmetic, " x ") {
				t.Errorf("%s: %s: no arithmetic: %q", name, r.Name, r.Arithmetic)
			}
		}
		if e.Next == "" {
			t.Errorf("%s: explain says nothing about what comes next", name)
		}
	}
}
