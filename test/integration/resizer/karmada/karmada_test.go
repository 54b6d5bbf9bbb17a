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
	"encoding/json"
	"fmt"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"

	clusterv1alpha1 "github.com/scaleplane/scaleplane/pkg/apis/cluster/v1alpha1"
	policyv1alpha1 "github.com/scaleplane/scaleplane/pkg/apis/policy/v1alpha1"
	scaleplanev1alpha1 "github.com/scaleplane/scaleplane/pkg/apis/scaleplane/v1alpha1"
	workv1alpha2 "github.com/scaleplane/scaleplane/pkg/apis/work/v1alpha2"
	"github.com/scaleplane/scaleplane/test/integration/framework"
)

const waitTimeout = 60 * time.Second

func testdata(t *testing.T) string {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		t.Fatal("no caller")
	}
	return filepath.Join(filepath.Dir(file), "testdata")
}

// setCluster creates or updates a member Cluster and writes its status as
// Karmada's cluster status controller does: a Ready condition and a node
// summary.
func setCluster(t *testing.T, cp *framework.ControlPlane, name string, nodes int32, ready metav1.ConditionStatus) {
	t.Helper()
	ctx := context.Background()
	clusters := cp.Client().ClusterV1alpha1().Clusters()
	c, err := clusters.Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		c, err = clusters.Create(ctx, &clusterv1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
		if err == nil {
			t.Cleanup(func() { _ = clusters.Delete(context.Background(), name, metav1.DeleteOptions{}) })
		}
	}
	if err != nil {
		t.Fatalf("cluster %s: %v", name, err)
	}
	c.Status.Conditions = []metav1.Condition{{Type: "Ready", Status: ready, Reason: "ClusterReady", Message: "cluster is healthy and ready to accept workloads", LastTransitionTime: metav1.Now()}}
	c.Status.NodeSummary = &clusterv1alpha1.NodeSummary{TotalNum: nodes, ReadyNum: nodes}
	if _, err := clusters.UpdateStatus(ctx, c, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("status of cluster %s: %v", name, err)
	}
}

// setPlacement writes the template's ResourceBinding as Karmada's scheduler
// leaves it: named <name>-deployment, spec.clusters the members.
func setPlacement(t *testing.T, cp *framework.ControlPlane, ns, name string, members ...string) {
	t.Helper()
	ctx := context.Background()
	rbs := cp.Client().WorkV1alpha2().ResourceBindings(ns)
	var clusters []workv1alpha2.TargetCluster
	for _, m := range members {
		clusters = append(clusters, workv1alpha2.TargetCluster{Name: m, Replicas: 1})
	}
	rb, err := rbs.Get(ctx, name+"-deployment", metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		_, err = rbs.Create(ctx, &workv1alpha2.ResourceBinding{
			ObjectMeta: metav1.ObjectMeta{Name: name + "-deployment", Namespace: ns},
			Spec: workv1alpha2.ResourceBindingSpec{
				Resource: workv1alpha2.ObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Namespace: ns, Name: name},
				Clusters: clusters,
			},
		}, metav1.CreateOptions{})
	} else if err == nil {
		rb.Spec.Clusters = clusters
		_, err = rbs.Update(ctx, rb, metav1.UpdateOptions{})
	}
	if err != nil {
		t.Fatalf("ResourceBinding: %v", err)
	}
}

// rulesOf returns, per cluster, the plaintext operations of a policy as
// "path=value" strings.
func rulesOf(p *policyv1alpha1.OverridePolicy) map[string][]string {
	out := map[string][]string{}
	for _, r := range p.Spec.OverrideRules {
		if r.TargetCluster == nil || len(r.TargetCluster.ClusterNames) != 1 {
			out["?"] = append(out["?"], "bad target")
			continue
		}
		for _, op := range r.Overriders.Plaintext {
			var v string
			_ = json.Unmarshal(op.Value.Raw, &v)
			out[r.TargetCluster.ClusterNames[0]] = append(out[r.TargetCluster.ClusterNames[0]], string(op.Operator)+" "+op.Path+"="+v)
		}
	}
	return out
}

// want is the rule a member of n nodes gets: cpu 100m + 10m and memory
// 50Mi + 1Mi per node, requests only, on the second container.
func want(n int64) []string {
	cpu := resource.NewMilliQuantity(100+10*n, resource.DecimalSI)
	mem := resource.NewQuantity((50+n)*1024*1024, resource.BinarySI)
	p := "/spec/template/spec/containers/1/resources/requests/"
	return []string{"add " + p + "cpu=" + cpu.String(), "add " + p + "memory=" + mem.String()}
}

func waitRules(t *testing.T, cp *framework.ControlPlane, ns, name string, expect map[string][]string) time.Time {
	t.Helper()
	var last string
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, waitTimeout, true, func(ctx context.Context) (bool, error) {
		p, err := cp.Client().PolicyV1alpha1().OverridePolicies(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			last = err.Error()
			return false, nil
		}
		got := rulesOf(p)
		last = fmt.Sprint(got)
		return last == fmt.Sprint(expect), nil
	})
	if err != nil {
		t.Fatalf("OverridePolicy %s: want rules %v, last seen %s", name, expect, last)
	}
	return time.Now()
}

func writes(t *testing.T, m *framework.Manager) float64 {
	t.Helper()
	v, _, err := m.Metric("resizer_writes_total", `kind="override_policy"`)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func TestKarmadaPerMemberSizes(t *testing.T) {
	cp := framework.Get(t)
	ctx := context.Background()
	if _, err := framework.InstallCRDs(ctx, cp.DynamicClient(), testdata(t), waitTimeout); err != nil {
		t.Fatal(err)
	}
	ns := cp.CreateNamespace(t)
	const name = "metrics-server"

	setCluster(t, cp, "member-small", 3, metav1.ConditionTrue)
	setCluster(t, cp, "member-big", 50, metav1.ConditionTrue)
	labels := map[string]string{"app": name}
	base := corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("50Mi")},
		Limits:   corev1.ResourceList{"example.com/gpu": resource.MustParse("1")},
	}
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: labels},
		Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{
					{Name: "sidecar", Image: "registry.example/sidecar:1"},
					{Name: name, Image: "registry.example/metrics-server:1", Resources: base},
				}},
			},
		},
	}
	d, err := cp.KubeClient().AppsV1().Deployments(ns).Create(ctx, d, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	setPlacement(t, cp, ns, name, "member-small", "member-big")

	m := framework.StartManager(t, cp.KubeconfigPath(), "resizer")
	const delay = 3 * time.Second
	ar := &scaleplanev1alpha1.AddonResizer{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: scaleplanev1alpha1.AddonResizerSpec{
			TargetRef:     scaleplanev1alpha1.TargetReference{Kind: scaleplanev1alpha1.TargetKindDeployment, Name: name},
			ContainerName: name,
			Resources: []scaleplanev1alpha1.ResourceScaling{
				{Name: corev1.ResourceCPU, Base: resource.MustParse("100m"), ExtraPerUnit: resource.MustParse("10m")},
				{Name: corev1.ResourceMemory, Base: resource.MustParse("50Mi"), ExtraPerUnit: resource.MustParse("1Mi")},
			},
			SetLimits:    ptr.To(false),
			ScaleUpDelay: &metav1.Duration{Duration: delay},
		},
	}
	if _, err := cp.Client().ScaleplaneV1alpha1().AddonResizers(ns).Create(ctx, ar, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	policy := name + "-resizer"

	// Two members of 3 and 50 nodes: two sizes in one OverridePolicy.
	waitRules(t, cp, ns, policy, map[string][]string{"member-big": want(50), "member-small": want(3)})
	p, err := cp.Client().PolicyV1alpha1().OverridePolicies(ns).Get(ctx, policy, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if ref := metav1.GetControllerOf(p); ref == nil || ref.Kind != "AddonResizer" || ref.Name != name {
		t.Errorf("OverridePolicy controller: %+v", ref)
	}
	if sel := p.Spec.ResourceSelectors; len(sel) != 1 || sel[0].APIVersion != "apps/v1" || sel[0].Kind != "Deployment" || sel[0].Name != name {
		t.Errorf("resource selectors: %+v", sel)
	}
	// The template is the base, never written.
	now, err := cp.KubeClient().AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if now.Generation != d.Generation || now.Spec.Template.Spec.Containers[1].Resources.Requests.Cpu().String() != "100m" {
		t.Errorf("the template changed: generation %d -> %d, %v", d.Generation, now.Generation, now.Spec.Template.Spec.Containers[1].Resources)
	}
	waitStatus(t, cp, ns, name, func(s *scaleplanev1alpha1.AddonResizerStatus) bool {
		return s.Federation == scaleplanev1alpha1.FederationKarmada && ptr.Deref(s.MemberClusters, 0) == 2 && ptr.Deref(s.SizedClusters, 0) == 2 && len(s.Clusters) == 2 && s.OverridePolicy == policy
	})

	// kubectl get shows the federation's columns.
	checkColumns(t, cp, ns, map[string]any{"CLUSTERS": int64(2), "SIZED": int64(2), "UP-TO-DATE": "True"})

	// Steady state: a Cluster status change that does not touch the count
	// (Karmada rewrites Cluster status for many reasons) writes no policy.
	before := writes(t, m)
	setCluster(t, cp, "member-big", 50, metav1.ConditionTrue)
	time.Sleep(2 * time.Second)
	if after := writes(t, m); after != before {
		t.Errorf("OverridePolicy writes in steady state: %v -> %v", before, after)
	}

	// A member that grows is re-sized after scaleUpDelay, the other kept.
	grown := time.Now()
	setCluster(t, cp, "member-small", 10, metav1.ConditionTrue)
	at := waitRules(t, cp, ns, policy, map[string][]string{"member-big": want(50), "member-small": want(10)})
	// Up to a second early: the pending change's start is kept to the second.
	if took := at.Sub(grown); took < delay-time.Second {
		t.Errorf("re-sized %v after the member grew, before its scaleUpDelay of %v", took, delay)
	}

	// A member whose status goes stale keeps its size (its node summary
	// now says 0: it must not be sized to the base).
	setCluster(t, cp, "member-small", 0, metav1.ConditionFalse)
	waitStatus(t, cp, ns, name, func(s *scaleplanev1alpha1.AddonResizerStatus) bool {
		return len(s.Clusters) == 2 && s.Clusters[1].Name == "member-small" && s.Clusters[1].State == scaleplanev1alpha1.MemberStale
	})
	waitRules(t, cp, ns, policy, map[string][]string{"member-big": want(50), "member-small": want(10)})

	// A member removed from the placement loses its rule.
	setPlacement(t, cp, ns, name, "member-small")
	waitRules(t, cp, ns, policy, map[string][]string{"member-small": want(10)})
	waitStatus(t, cp, ns, name, func(s *scaleplanev1alpha1.AddonResizerStatus) bool {
		return ptr.Deref(s.MemberClusters, 0) == 1 && len(s.Clusters) == 1
	})

	// Someone else's OverridePolicy for the same container is reported, not
	// touched.
	foreign := &policyv1alpha1.OverridePolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "hand-written", Namespace: ns},
		Spec: policyv1alpha1.OverrideSpec{
			ResourceSelectors: []policyv1alpha1.ResourceSelector{{APIVersion: "apps/v1", Kind: "Deployment", Name: name}},
			OverrideRules: []policyv1alpha1.RuleWithCluster{{
				TargetCluster: &policyv1alpha1.ClusterAffinity{ClusterNames: []string{"member-small"}},
				Overriders: policyv1alpha1.Overriders{Plaintext: []policyv1alpha1.PlaintextOverrider{{
					Path: "/spec/template/spec/containers/1/resources/requests/cpu", Operator: "replace", Value: rawJSON(t, "1"),
				}}},
			}},
		},
	}
	foreign, err = cp.Client().PolicyV1alpha1().OverridePolicies(ns).Create(ctx, foreign, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	waitStatus(t, cp, ns, name, func(s *scaleplanev1alpha1.AddonResizerStatus) bool {
		for _, c := range s.Conditions {
			if c.Type == scaleplanev1alpha1.ConditionOverrideExclusive {
				return c.Status == metav1.ConditionFalse && strings.Contains(c.Message, "hand-written")
			}
		}
		return false
	})
	cp.WaitForEvent(t, ns, name, "ForeignOverride", "hand-written", waitTimeout)
	if f, err := cp.Client().PolicyV1alpha1().OverridePolicies(ns).Get(ctx, "hand-written", metav1.GetOptions{}); err != nil || f.ResourceVersion != foreign.ResourceVersion {
		t.Errorf("the foreign policy was touched: %v", err)
	}

	// Deleting the AddonResizer removes its OverridePolicy (this control
	// plane runs no garbage collector: the resizer deletes it itself).
	if err := cp.Client().ScaleplaneV1alpha1().AddonResizers(ns).Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, waitTimeout, true, func(ctx context.Context) (bool, error) {
		_, err := cp.Client().PolicyV1alpha1().OverridePolicies(ns).Get(ctx, policy, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	if err != nil {
		t.Errorf("OverridePolicy %s not deleted with its AddonResizer", policy)
	}
}

func rawJSON(t *testing.T, v any) (r k8sruntime.RawExtension) {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	r.Raw = b
	return r
}

func waitStatus(t *testing.T, cp *framework.ControlPlane, ns, name string, ok func(*scaleplanev1alpha1.AddonResizerStatus) bool) {
	t.Helper()
	var last scaleplanev1alpha1.AddonResizerStatus
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, waitTimeout, true, func(ctx context.Context) (bool, error) {
		ar, err := cp.Client().ScaleplaneV1alpha1().AddonResizers(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		last = ar.Status
		return ok(&ar.Status), nil
	})
	if err != nil {
		b, _ := json.MarshalIndent(last, "", "  ")
		t.Fatalf("AddonResizer status not as expected; last:\n%s", b)
	}
}

// checkColumns reads the AddonResizers of ns as kubectl get does (a Table)
// and checks the named columns of the first row.
func checkColumns(t *testing.T, cp *framework.ControlPlane, ns string, want map[string]any) {
	t.Helper()
	raw, err := cp.Client().ScaleplaneV1alpha1().RESTClient().Get().Namespace(ns).Resource("addonresizers").
		SetHeader("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io").Do(context.Background()).Raw()
	if err != nil {
		t.Fatal(err)
	}
	var table metav1.Table
	if err := json.Unmarshal(raw, &table); err != nil {
		t.Fatal(err)
	}
	if len(table.Rows) != 1 {
		t.Fatalf("table rows: %d", len(table.Rows))
	}
	for i, col := range table.ColumnDefinitions {
		if w, ok := want[col.Name]; ok {
			if got := table.Rows[0].Cells[i]; fmt.Sprint(got) != fmt.Sprint(w) || col.Priority != 0 {
				t.Errorf("column %s: %v (priority %d), want %v in the default view", col.Name, got, col.Priority, w)
			}
			delete(want, col.Name)
		}
	}
	if len(want) > 0 {
		t.Errorf("columns missing: %v", want)
	}
}
