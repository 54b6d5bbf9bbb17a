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
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"

	"github.com/scaleplane/scaleplane/cmd/kubectl-scaleplane/app"
	policyv1alpha1 "github.com/scaleplane/scaleplane/pkg/apis/policy/v1alpha1"
	scaleplanev1alpha1 "github.com/scaleplane/scaleplane/pkg/apis/scaleplane/v1alpha1"
	"github.com/scaleplane/scaleplane/test/integration/framework"
)

// runPlugin runs `kubectl scaleplane args...` in this process through the
// command the binary's main runs (app.NewCommand with no injected clients),
// so it builds its clients from --kubeconfig as it does for a user.
func runPlugin(t *testing.T, cp *framework.ControlPlane, args ...string) []byte {
	t.Helper()
	var out, errOut bytes.Buffer
	cmd := app.NewCommand(genericiooptions.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut}, nil)
	cmd.SetArgs(append([]string{"--kubeconfig", cp.KubeconfigPath()}, args...))
	cmd.SetOut(&errOut)
	cmd.SetErr(&errOut)
	if err := cmd.ExecuteContext(context.Background()); err != nil {
		t.Fatalf("kubectl scaleplane %s: %v\n%s", strings.Join(args, " "), err, errOut.String())
	}
	return out.Bytes()
}

// explainJSON is `kubectl scaleplane explain addonresizer NAME -o json`,
// with its clusters by name.
func explainJSON(t *testing.T, cp *framework.ControlPlane, ns, name string) (app.Explanation, map[string]app.ClusterExplanation) {
	t.Helper()
	raw := runPlugin(t, cp, "explain", "addonresizer", name, "-n", ns, "-o", "json")
	var e app.Explanation
	if err := json.Unmarshal(raw, &e); err != nil {
		t.Fatalf("decoding %s: %v", raw, err)
	}
	byName := map[string]app.ClusterExplanation{}
	for _, c := range e.Clusters {
		byName[c.Name] = c
	}
	return e, byName
}

// policyResources reads, per cluster, the requests and limits the rules of
// the OverridePolicy ns/name add, from the stored object: the test's own
// reading of the resizer's plaintext operations (one "add" per resource),
// independent of the plugin's.
func policyResources(t *testing.T, cp *framework.ControlPlane, ns, name string) map[string]corev1.ResourceRequirements {
	t.Helper()
	p, err := cp.Client().PolicyV1alpha1().OverridePolicies(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("OverridePolicy %s: %v", name, err)
	}
	out := map[string]corev1.ResourceRequirements{}
	for _, r := range p.Spec.OverrideRules {
		if r.TargetCluster == nil || len(r.TargetCluster.ClusterNames) != 1 {
			t.Fatalf("OverridePolicy %s: a rule not for one cluster: %+v", name, r.TargetCluster)
		}
		rr := corev1.ResourceRequirements{Requests: corev1.ResourceList{}, Limits: corev1.ResourceList{}}
		for _, op := range r.Overriders.Plaintext {
			_, tail, ok := strings.Cut(op.Path, "/resources/")
			field, res, ok2 := strings.Cut(tail, "/")
			var v string
			if !ok || !ok2 || op.Operator != policyv1alpha1.OverriderOpAdd || json.Unmarshal(op.Value.Raw, &v) != nil {
				t.Fatalf("OverridePolicy %s: unexpected operation %s %s %s", name, op.Operator, op.Path, op.Value.Raw)
			}
			list := rr.Requests
			if field == "limits" {
				list = rr.Limits
			}
			list[corev1.ResourceName(res)] = resource.MustParse(v)
		}
		out[r.TargetCluster.ClusterNames[0]] = rr
	}
	return out
}

// sameList reports whether got holds exactly the quantities of want.
func sameList(got, want corev1.ResourceList) bool {
	if len(got) != len(want) {
		return false
	}
	for n, q := range want {
		g, ok := got[n]
		if !ok || g.Cmp(q) != 0 {
			return false
		}
	}
	return true
}

func describe(r *corev1.ResourceRequirements) string {
	if r == nil {
		return "<nil>"
	}
	return fmt.Sprintf("requests %s limits %s", listString(r.Requests), listString(r.Limits))
}

func listString(l corev1.ResourceList) string {
	parts := make([]string, 0, len(l))
	for n, q := range l {
		parts = append(parts, string(n)+"="+q.String())
	}
	sort.Strings(parts)
	return strings.Join(parts, ",")
}

// tableRow returns the fields of the row of the member clusters' table
// whose first column is cluster, and the whole line.
func tableRow(t *testing.T, table, cluster string) ([]string, string) {
	t.Helper()
	_, clusters, ok := strings.Cut(table, "\nMember clusters (Karmada; ")
	if !ok {
		t.Fatalf("explain's table has no member clusters:\n%s", table)
	}
	for _, line := range strings.Split(clusters, "\n") {
		if f := strings.Fields(line); len(f) > 0 && f[0] == cluster {
			return f, line
		}
	}
	t.Fatalf("explain's table has no row for cluster %s:\n%s", cluster, table)
	return nil, ""
}

// TestExplainKarmadaMembers runs the resizer in Karmada mode for members of
// different sizes and checks what `kubectl scaleplane explain addonresizer`
// says about each against the real objects: the count is the Cluster's node
// count, the estimate is what the resizer wrote into the OverridePolicy for
// that cluster, and the size held and the policy's value agree; then a
// member whose new size a delay holds back (the policy not yet written for
// it), and a policy value someone else changed while the resizer is down.
func TestExplainKarmadaMembers(t *testing.T) {
	cp := framework.Get(t)
	ctx := context.Background()
	if _, err := framework.InstallCRDs(ctx, cp.DynamicClient(), testdata(t), waitTimeout); err != nil {
		t.Fatal(err)
	}
	ns := cp.CreateNamespace(t)
	const name = "kube-state-metrics"

	// Names of their own: Clusters are cluster-scoped, and the other
	// test of this package runs on the same control plane.
	nodes := map[string]int32{"explain-small": 3, "explain-mid": 30, "explain-big": 70}
	// Exponential with the default minClusterSize 16: 16, 24, 36, 54, 81.
	buckets := map[string]int64{"explain-small": 16, "explain-mid": 36, "explain-big": 81}
	for c, n := range nodes {
		setCluster(t, cp, c, n, metav1.ConditionTrue)
	}
	labels := map[string]string{"app": name}
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: labels},
		Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{
					Name: name, Image: "registry.example/kube-state-metrics:1",
					Resources: corev1.ResourceRequirements{
						Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("50Mi")},
						Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("50Mi")},
					},
				}}},
			},
		},
	}
	if _, err := cp.KubeClient().AppsV1().Deployments(ns).Create(ctx, d, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	setPlacement(t, cp, ns, name, "explain-small", "explain-mid", "explain-big")

	m := framework.StartManager(t, cp.KubeconfigPath(), "resizer")
	ar := &scaleplanev1alpha1.AddonResizer{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: scaleplanev1alpha1.AddonResizerSpec{
			TargetRef:     scaleplanev1alpha1.TargetReference{Kind: scaleplanev1alpha1.TargetKindDeployment, Name: name},
			ContainerName: name,
			Resources: []scaleplanev1alpha1.ResourceScaling{
				{Name: corev1.ResourceCPU, Base: resource.MustParse("100m"), ExtraPerUnit: resource.MustParse("10m")},
				{Name: corev1.ResourceMemory, Base: resource.MustParse("50Mi"), ExtraPerUnit: resource.MustParse("2Mi")},
			},
			Estimator:    scaleplanev1alpha1.Estimator{Type: scaleplanev1alpha1.ExponentialEstimator},
			SetLimits:    ptr.To(true),
			ScaleUpDelay: &metav1.Duration{},
		},
	}
	if _, err := cp.Client().ScaleplaneV1alpha1().AddonResizers(ns).Create(ctx, ar, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	policy := name + "-resizer"
	waitStatus(t, cp, ns, name, func(s *scaleplanev1alpha1.AddonResizerStatus) bool {
		return ptr.Deref(s.SizedClusters, 0) == 3 && len(s.Clusters) == 3 && s.OverridePolicy == policy
	})
	written := policyResources(t, cp, ns, policy)
	if len(written) != 3 {
		t.Fatalf("OverridePolicy %s has rules for %d clusters, want 3: %v", policy, len(written), written)
	}

	// -o json, per member: the count, the bucket, the estimate against the
	// policy, and what the resizer holds against the policy.
	e, clusters := explainJSON(t, cp, ns, name)
	if e.Federation != string(scaleplanev1alpha1.FederationKarmada) || e.OverridePolicy != policy || len(e.Clusters) != 3 {
		t.Fatalf("explain: federation %q, OverridePolicy %q, %d clusters; want Karmada, %s, 3", e.Federation, e.OverridePolicy, len(e.Clusters), policy)
	}
	estimates := map[string]string{}
	for c, n := range nodes {
		x, ok := clusters[c]
		if !ok {
			t.Errorf("explain lists no cluster %s", c)
			continue
		}
		if x.Nodes == nil || *x.Nodes != n {
			t.Errorf("%s: explain counts %d nodes, its Cluster has %d", c, ptr.Deref(x.Nodes, -1), n)
		}
		if x.Units != buckets[c] {
			t.Errorf("%s: explain computes for %d units, want the bucket %d of %d nodes", c, x.Units, buckets[c], n)
		}
		if x.State != string(scaleplanev1alpha1.MemberSized) || x.PolicyDiffers {
			t.Errorf("%s: state %q (%s), policy differs %v; want Sized, the policy at the size held", c, x.State, x.Message, x.PolicyDiffers)
		}
		est := corev1.ResourceList{}
		for r, v := range x.Estimate {
			q, err := resource.ParseQuantity(v)
			if err != nil {
				t.Fatalf("%s: estimate %s=%q: %v", c, r, v, err)
			}
			est[corev1.ResourceName(r)] = q
		}
		w := written[c]
		// setLimits: the resizer writes the estimate as request and limit.
		if !sameList(est, w.Requests) || !sameList(est, w.Limits) {
			t.Errorf("%s: explain's estimate %v, the OverridePolicy holds %s", c, x.Estimate, describe(&w))
		}
		if x.OverridePolicy == nil || !sameList(x.OverridePolicy.Requests, w.Requests) || !sameList(x.OverridePolicy.Limits, w.Limits) {
			t.Errorf("%s: explain reads %s from the OverridePolicy, it holds %s", c, describe(x.OverridePolicy), describe(&w))
		}
		if x.Held == nil || !sameList(x.Held.Requests, w.Requests) || !sameList(x.Held.Limits, w.Limits) {
			t.Errorf("%s: explain says the resizer holds %s, the OverridePolicy %s", c, describe(x.Held), describe(&w))
		}
		estimates[fmt.Sprint(x.Estimate)] = c
	}
	// Different counts, different sizes: a plugin that read one member for
	// all would not pass.
	if len(estimates) != 3 {
		t.Errorf("three members of different sizes, explain estimates %v", estimates)
	}

	// The table names each cluster with its count and units.
	table := string(runPlugin(t, cp, "explain", "addonresizer", name, "-n", ns))
	if !strings.Contains(table, "Member clusters (Karmada; OverridePolicy "+policy+")") {
		t.Errorf("explain's table does not name OverridePolicy %s:\n%s", policy, table)
	}
	for c, n := range nodes {
		f, line := tableRow(t, table, c)
		if len(f) < 3 || f[1] != fmt.Sprint(n) || f[2] != fmt.Sprint(buckets[c]) || !strings.Contains(line, "Sized") {
			t.Errorf("%s: table row %q, want %d nodes, %d units, Sized", c, line, n, buckets[c])
		}
	}

	// Not yet written: the small member grows while a scale-up delay of an
	// hour holds it back. Explain counts the new size and estimates for
	// it, and says the policy still holds the old size until the delay
	// ends.
	const delay = time.Hour
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := cp.Client().ScaleplaneV1alpha1().AddonResizers(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		cur.Spec.ScaleUpDelay = &metav1.Duration{Duration: delay}
		_, err = cp.Client().ScaleplaneV1alpha1().AddonResizers(ns).Update(ctx, cur, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	setCluster(t, cp, "explain-small", 40, metav1.ConditionTrue)
	waitStatus(t, cp, ns, name, func(s *scaleplanev1alpha1.AddonResizerStatus) bool {
		for _, c := range s.Clusters {
			if c.Name == "explain-small" {
				return c.State == scaleplanev1alpha1.MemberPostponed && ptr.Deref(c.Nodes, 0) == 40
			}
		}
		return false
	})
	if now := policyResources(t, cp, ns, policy); !sameList(now["explain-small"].Requests, written["explain-small"].Requests) {
		t.Fatalf("the delay did not hold the policy: explain-small %s, was %s", describe(ptr.To(now["explain-small"])), describe(ptr.To(written["explain-small"])))
	}
	_, clusters = explainJSON(t, cp, ns, name)
	small := clusters["explain-small"]
	old := written["explain-small"]
	if small.Nodes == nil || *small.Nodes != 40 || small.Units != 54 {
		t.Errorf("explain-small grew to 40 nodes: explain counts %d, %d units; want 40, 54", ptr.Deref(small.Nodes, -1), small.Units)
	}
	if cpu := resource.MustParse(small.Estimate["cpu"]); cpu.Cmp(resource.MustParse("640m")) != 0 {
		t.Errorf("explain-small: estimate cpu %s for 54 units, want 640m", small.Estimate["cpu"])
	}
	if small.OverridePolicy == nil || !sameList(small.OverridePolicy.Requests, old.Requests) || small.Held == nil || !sameList(small.Held.Requests, old.Requests) {
		t.Errorf("explain-small: the policy and the size held should still be %s; explain reads %s and holds %s", describe(&old), describe(small.OverridePolicy), describe(small.Held))
	}
	if small.PolicyDiffers {
		t.Errorf("explain-small: explain says the policy differs from the size held, both are %s", describe(&old))
	}
	if small.State != string(scaleplanev1alpha1.MemberPostponed) || small.Pending == nil || small.Pending.Direction != string(scaleplanev1alpha1.ResizeUp) ||
		small.Pending.Until.Sub(small.Pending.Since) != delay {
		t.Errorf("explain-small: state %q, pending %+v; want Postponed, Up for %v", small.State, small.Pending, delay)
	}
	table = string(runPlugin(t, cp, "explain", "addonresizer", name, "-n", ns))
	if _, line := tableRow(t, table, "explain-small"); !strings.Contains(line, "Postponed") || !strings.Contains(line, "Up pending since "+small.Pending.Since.Format(time.RFC3339)) ||
		!strings.Contains(line, "until "+small.Pending.Until.Format(time.RFC3339)) {
		t.Errorf("explain-small's row does not say the scale-up is pending and until when: %q", line)
	}

	// Changed by someone else: with the resizer stopped (it would put its
	// value back), someone replaces the big member's cpu in the policy.
	// Explain reads the edited value, next to the size the resizer holds,
	// and says they differ.
	m.Stop(15 * time.Second)
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		p, err := cp.Client().PolicyV1alpha1().OverridePolicies(ns).Get(ctx, policy, metav1.GetOptions{})
		if err != nil {
			return err
		}
		edited := false
		for i, r := range p.Spec.OverrideRules {
			if r.TargetCluster == nil || len(r.TargetCluster.ClusterNames) != 1 || r.TargetCluster.ClusterNames[0] != "explain-big" {
				continue
			}
			for j, op := range r.Overriders.Plaintext {
				if strings.HasSuffix(op.Path, "/resources/requests/cpu") {
					p.Spec.OverrideRules[i].Overriders.Plaintext[j].Operator = policyv1alpha1.OverriderOpReplace
					p.Spec.OverrideRules[i].Overriders.Plaintext[j].Value = rawJSON(t, "2")
					edited = true
				}
			}
		}
		if !edited {
			return fmt.Errorf("no cpu request for explain-big in %s", policy)
		}
		_, err = cp.Client().PolicyV1alpha1().OverridePolicies(ns).Update(ctx, p, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	e, clusters = explainJSON(t, cp, ns, name)
	big := clusters["explain-big"]
	if !big.PolicyDiffers || clusters["explain-mid"].PolicyDiffers {
		t.Errorf("explain says the policy differs from the size held: explain-big %v (edited), explain-mid %v (not)", big.PolicyDiffers, clusters["explain-mid"].PolicyDiffers)
	}
	if !strings.Contains(e.Next, "does not set the size held for explain-big,") {
		t.Errorf("explain's next step does not name explain-big, whose policy was edited: %q", e.Next)
	}
	if big.OverridePolicy == nil || big.OverridePolicy.Requests.Cpu().Cmp(resource.MustParse("2")) != 0 {
		t.Errorf("explain-big: explain reads %s from the edited policy, want requests cpu 2", describe(big.OverridePolicy))
	}
	if big.Held == nil || !sameList(big.Held.Requests, written["explain-big"].Requests) {
		t.Errorf("explain-big: the size held is %s, want the resizer's %s", describe(big.Held), describe(ptr.To(written["explain-big"])))
	}
	table = string(runPlugin(t, cp, "explain", "addonresizer", name, "-n", ns))
	if _, line := tableRow(t, table, "explain-big"); !strings.Contains(line, "requests cpu=2,") || !strings.Contains(line, "the OverridePolicy does not set the size held") {
		t.Errorf("explain-big's row does not show the edited policy value and that it differs: %q", line)
	}
	if _, line := tableRow(t, table, "explain-mid"); strings.Contains(line, "does not set the size held") {
		t.Errorf("explain-mid's policy was not edited, its row says it differs: %q", line)
	}
}
