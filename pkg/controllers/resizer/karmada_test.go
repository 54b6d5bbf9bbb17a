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

package resizer

import (
	"errors"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"

	clusterv1alpha1 "github.com/scaleplane/scaleplane/pkg/apis/cluster/v1alpha1"
	policyv1alpha1 "github.com/scaleplane/scaleplane/pkg/apis/policy/v1alpha1"
	scaleplanev1alpha1 "github.com/scaleplane/scaleplane/pkg/apis/scaleplane/v1alpha1"
	workv1alpha2 "github.com/scaleplane/scaleplane/pkg/apis/work/v1alpha2"
	clusterlisters "github.com/scaleplane/scaleplane/pkg/generated/listers/cluster/v1alpha1"
	policylisters "github.com/scaleplane/scaleplane/pkg/generated/listers/policy/v1alpha1"
	worklisters "github.com/scaleplane/scaleplane/pkg/generated/listers/work/v1alpha2"
)

var karmadaGroups = []*metav1.APIResourceList{
	{GroupVersion: "cluster.karmada.io/v1alpha1"}, {GroupVersion: "policy.karmada.io/v1alpha1"}, {GroupVersion: "work.karmada.io/v1alpha2"},
}

// karmadaHarness is a harness on a Karmada control plane: discovery serves
// Karmada's groups, and the Karmada caches are indexers the test refreshes
// from the fake clientset, as the harness does for the others.
type karmadaHarness struct {
	*harness
	clusters, bindings, policies cache.Indexer
}

func newKarmadaHarness(t *testing.T, objects ...any) *karmadaHarness {
	t.Helper()
	h := newHarness(t, deployment(addonName, corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")}}))
	h.kube.Resources = karmadaGroups
	k := &karmadaHarness{harness: h}
	k.clusters = cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	k.bindings = cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	k.policies = cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	kc := h.c.karmada
	kc.started = true
	kc.clusters = clusterlisters.NewClusterLister(k.clusters)
	kc.bindings = worklisters.NewResourceBindingLister(k.bindings)
	kc.policies = policylisters.NewOverridePolicyLister(k.policies)
	return k
}

func (k *karmadaHarness) setClusters(cs ...*clusterv1alpha1.Cluster) {
	objs := make([]any, 0, len(cs))
	for _, c := range cs {
		objs = append(objs, c)
	}
	k.check(k.clusters.Replace(objs, ""))
}

func (k *karmadaHarness) setPlacement(members ...string) {
	if members == nil {
		k.check(k.bindings.Replace(nil, ""))
		return
	}
	rb := &workv1alpha2.ResourceBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "addon-deployment", Namespace: ns},
		Spec:       workv1alpha2.ResourceBindingSpec{Resource: workv1alpha2.ObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Namespace: ns, Name: addonName}},
	}
	for _, m := range members {
		rb.Spec.Clusters = append(rb.Spec.Clusters, workv1alpha2.TargetCluster{Name: m})
	}
	k.check(k.bindings.Replace([]any{rb}, ""))
}

// sync syncs and makes the policy cache catch up with the clientset.
func (k *karmadaHarness) sync(at time.Time) {
	k.t.Helper()
	k.syncAt(at, "ar")
	list, err := k.client.PolicyV1alpha1().OverridePolicies(ns).List(k.ctx, metav1.ListOptions{})
	k.check(err)
	replace(k.t, k.policies, list.Items)
}

// policyWrites counts create, update and delete of OverridePolicies.
func (k *karmadaHarness) policyWrites() int {
	n := 0
	for _, a := range k.client.Actions() {
		if a.GetResource().Resource == "overridepolicies" && a.GetVerb() != "list" && a.GetVerb() != "watch" && a.GetVerb() != "get" {
			n++
		}
	}
	return n
}

func (k *karmadaHarness) policy() *policyv1alpha1.OverridePolicy {
	k.t.Helper()
	p, err := k.client.PolicyV1alpha1().OverridePolicies(ns).Get(k.ctx, "ar-resizer", metav1.GetOptions{})
	if err != nil {
		return nil
	}
	return p
}

func (k *karmadaHarness) templateWrites() int {
	n := 0
	for _, a := range k.kube.Actions() {
		if _, ok := a.(clienttesting.PatchAction); ok {
			n++
		}
	}
	return n
}

func ruleValues(p *policyv1alpha1.OverridePolicy) string {
	var out []string
	for _, r := range p.Spec.OverrideRules {
		for _, op := range r.Overriders.Plaintext {
			out = append(out, r.TargetCluster.ClusterNames[0]+":"+op.Path[strings.LastIndex(op.Path, "/")+1:]+"="+string(op.Value.Raw))
		}
	}
	return strings.Join(out, " ")
}

func TestKarmadaSyncOnePolicyFollowsPlacement(t *testing.T) {
	k := newKarmadaHarness(t)
	k.setNodes(0) // karmada-apiserver has no Nodes
	ar := addonResizer("ar", withSetLimits(false), withResources(scaleplanev1alpha1.ResourceScaling{Name: corev1.ResourceCPU, Base: resource.MustParse("100m"), ExtraPerUnit: resource.MustParse("10m")}))
	_, err := k.client.ScaleplaneV1alpha1().AddonResizers(ns).Create(k.ctx, ar, metav1.CreateOptions{})
	k.check(err)
	k.refresh()
	k.setClusters(member("a", 3, 3, metav1.ConditionTrue), member("b", 50, 50, metav1.ConditionTrue))
	k.setPlacement("a", "b")

	k.sync(t0)
	p := k.policy()
	if p == nil {
		t.Fatal("no OverridePolicy")
	}
	if got := ruleValues(p); got != `a:cpu="130m" b:cpu="600m"` {
		t.Errorf("rules: %s", got)
	}
	st := k.get("ar").Status
	if st.Federation != scaleplanev1alpha1.FederationKarmada || *st.MemberClusters != 2 || *st.SizedClusters != 2 || st.OverridePolicy != "ar-resizer" || st.ClusterSize != nil {
		t.Errorf("status: %+v", st)
	}
	k.expectCondition("ar", scaleplanev1alpha1.ConditionUpToDate, metav1.ConditionTrue, reasonAllClustersSized)

	// Steady state, also after a restart (state from status): no writes.
	writes := k.policyWrites()
	k.sync(t0.Add(time.Minute))
	k.newController()
	k.harness.c.karmada.started = true
	k.harness.c.karmada.clusters = clusterlisters.NewClusterLister(k.clusters)
	k.harness.c.karmada.bindings = worklisters.NewResourceBindingLister(k.bindings)
	k.harness.c.karmada.policies = policylisters.NewOverridePolicyLister(k.policies)
	k.sync(t0.Add(2 * time.Minute))
	if got := k.policyWrites(); got != writes {
		t.Errorf("steady state wrote the OverridePolicy %d times", got-writes)
	}

	// b leaves the placement: its rule goes, a's stays.
	k.setPlacement("a")
	k.sync(t0.Add(3 * time.Minute))
	if got := ruleValues(k.policy()); got != `a:cpu="130m"` {
		t.Errorf("after b left: %s", got)
	}
	if st := k.get("ar").Status; len(st.Clusters) != 1 || *st.MemberClusters != 1 {
		t.Errorf("status after b left: %+v", st.Clusters)
	}
	// No placement at all: the policy is deleted.
	k.setPlacement()
	k.sync(t0.Add(4 * time.Minute))
	if k.policy() != nil {
		t.Error("the OverridePolicy outlived the placement")
	}
	k.expectCondition("ar", scaleplanev1alpha1.ConditionUpToDate, metav1.ConditionTrue, reasonNotScheduled)
	if n := k.templateWrites(); n != 0 {
		t.Errorf("the template was written %d times", n)
	}
}

func TestKarmadaUnsupportedRefused(t *testing.T) {
	for name, opt := range map[string]option{
		"ContainerProportional": withMode(scaleplanev1alpha1.ContainerProportional),
		"InPlace":               func(ar *scaleplanev1alpha1.AddonResizer) { ar.Spec.UpdateMode = scaleplanev1alpha1.UpdateModeInPlace },
	} {
		t.Run(name, func(t *testing.T) {
			k := newKarmadaHarness(t)
			_, err := k.client.ScaleplaneV1alpha1().AddonResizers(ns).Create(k.ctx, addonResizer("ar", opt), metav1.CreateOptions{})
			k.check(err)
			k.refresh()
			k.setClusters(member("a", 3, 3, metav1.ConditionTrue))
			k.setPlacement("a")
			k.sync(t0)
			k.expectCondition("ar", scaleplanev1alpha1.ConditionFederation, metav1.ConditionFalse, reasonUnsupportedOnKarmada)
			k.expectEvents("Warning " + reasonUnsupportedOnKarmada)
			if k.policy() != nil || k.templateWrites() != 0 {
				t.Error("a refused AddonResizer wrote something")
			}
		})
	}
}

func TestFederationNoneOnKarmadaWithoutNodesWritesNothing(t *testing.T) {
	k := newKarmadaHarness(t)
	k.setNodes(0)
	_, err := k.client.ScaleplaneV1alpha1().AddonResizers(ns).Create(k.ctx, addonResizer("ar", func(ar *scaleplanev1alpha1.AddonResizer) {
		ar.Spec.Federation = scaleplanev1alpha1.FederationNone
	}), metav1.CreateOptions{})
	k.check(err)
	k.refresh()
	k.sync(t0)
	k.expectCondition("ar", scaleplanev1alpha1.ConditionFederation, metav1.ConditionFalse, reasonNoNodesOnKarmada)
	k.expectCondition("ar", scaleplanev1alpha1.ConditionUpToDate, metav1.ConditionFalse, reasonNoNodesOnKarmada)
	k.expectEvents("Warning " + reasonNoNodesOnKarmada)
	if n := k.templateWrites(); n != 0 {
		t.Errorf("the template was sized from zero Nodes (%d writes)", n)
	}
	// With Nodes of its own, None sizes the template as on a plain cluster.
	k.setNodes(3)
	k.sync(t0.Add(time.Second))
	k.expectCondition("ar", scaleplanev1alpha1.ConditionFederation, metav1.ConditionTrue, reasonLocal)
	if n := k.templateWrites(); n != 1 {
		t.Errorf("template writes: %d, want 1", n)
	}
}

func TestPlainClusterStatusHasNoFederation(t *testing.T) {
	h := newHarness(t, deployment(addonName, corev1.ResourceRequirements{}))
	h.setNodes(3)
	_, err := h.client.ScaleplaneV1alpha1().AddonResizers(ns).Create(h.ctx, addonResizer("ar"), metav1.CreateOptions{})
	h.check(err)
	h.refresh()
	h.syncAt(t0, "ar")
	st := h.get("ar").Status
	if st.Federation != "" || st.Clusters != nil || st.MemberClusters != nil || h.condition("ar", scaleplanev1alpha1.ConditionFederation) != nil {
		t.Errorf("a plain cluster's status changed: %+v", st)
	}
	if h.c.karmada.started {
		t.Error("Karmada informers started on a plain cluster")
	}
}

func TestKarmadaToNoneDeletesThePolicy(t *testing.T) {
	k := newKarmadaHarness(t)
	k.setNodes(0)
	_, err := k.client.ScaleplaneV1alpha1().AddonResizers(ns).Create(k.ctx, addonResizer("ar", withSetLimits(false)), metav1.CreateOptions{})
	k.check(err)
	k.refresh()
	k.setClusters(member("a", 3, 3, metav1.ConditionTrue))
	k.setPlacement("a")
	k.sync(t0)
	if k.policy() == nil {
		t.Fatal("no OverridePolicy in Karmada mode")
	}
	ar := k.get("ar")
	ar.Spec.Federation = scaleplanev1alpha1.FederationNone
	ar.Generation++
	_, err = k.client.ScaleplaneV1alpha1().AddonResizers(ns).Update(k.ctx, ar, metav1.UpdateOptions{})
	k.check(err)
	k.refresh()
	k.sync(t0.Add(time.Second))
	if k.policy() != nil {
		t.Error("the OverridePolicy outlived the switch to federation None")
	}
	st := k.get("ar").Status
	if st.Federation != scaleplanev1alpha1.FederationNone || st.Clusters != nil || st.MemberClusters != nil || st.OverridePolicy != "" {
		t.Errorf("Karmada status left after the switch: %+v", st)
	}
	// And karmada-apiserver has no Nodes: None refuses to size from them.
	k.expectCondition("ar", scaleplanev1alpha1.ConditionFederation, metav1.ConditionFalse, reasonNoNodesOnKarmada)
}

func TestKarmadaForbiddenPolicyWriteIsReportedThenCleared(t *testing.T) {
	k := newKarmadaHarness(t)
	_, err := k.client.ScaleplaneV1alpha1().AddonResizers(ns).Create(k.ctx, addonResizer("ar", withSetLimits(false)), metav1.CreateOptions{})
	k.check(err)
	k.refresh()
	k.setClusters(member("a", 3, 3, metav1.ConditionTrue))
	k.setPlacement("a")
	forbid := true
	k.client.PrependReactor("create", "overridepolicies", func(clienttesting.Action) (bool, runtime.Object, error) {
		if forbid {
			return true, nil, apierrors.NewForbidden(policyv1alpha1.Resource("overridepolicies"), "ar-resizer", errors.New("RBAC"))
		}
		return false, nil, nil
	})
	if d := k.syncAt(t0, "ar"); d != policyRetry {
		t.Errorf("requeue after a forbidden write: %v, want %v", d, policyRetry)
	}
	k.expectCondition("ar", scaleplanev1alpha1.ConditionUpToDate, metav1.ConditionFalse, reasonOverridePolicyFailed)
	k.expectEvents("Warning " + reasonOverridePolicyFailed)
	forbid = false
	k.sync(t0.Add(policyRetry))
	if k.policy() == nil {
		t.Fatal("no OverridePolicy once the write is allowed")
	}
	k.expectCondition("ar", scaleplanev1alpha1.ConditionUpToDate, metav1.ConditionTrue, reasonAllClustersSized)
}

func TestZeroNodesRereadDiscoveryBeforeSizingToTheBase(t *testing.T) {
	k := newKarmadaHarness(t)
	k.setNodes(0)
	// Discovery was read before Karmada was installed.
	k.kube.Resources = nil
	if apis, _ := k.c.detector.apis(k.ctx); apis.any() {
		t.Fatal("discovery should see a plain cluster")
	}
	k.kube.Resources = karmadaGroups
	_, err := k.client.ScaleplaneV1alpha1().AddonResizers(ns).Create(k.ctx, addonResizer("ar", withSetLimits(false)), metav1.CreateOptions{})
	k.check(err)
	k.refresh()
	k.setClusters(member("a", 3, 3, metav1.ConditionTrue))
	k.setPlacement("a")
	k.sync(t0.Add(time.Second)) // within the discovery interval
	if st := k.get("ar").Status; st.Federation != scaleplanev1alpha1.FederationKarmada {
		t.Errorf("federation %q, want Karmada", st.Federation)
	}
	if k.templateWrites() != 0 || k.policy() == nil {
		t.Errorf("template writes %d, policy %v: want the member sized through the OverridePolicy", k.templateWrites(), k.policy())
	}
}

// A refused delete leaves the OverridePolicy: status names it while it
// exists (explain's summary reads status.overridePolicy), both when the
// container leaves the template and when no member holds a size.
func TestKarmadaRefusedPolicyDeleteKeepsItsNameInStatus(t *testing.T) {
	k := newKarmadaHarness(t)
	_, err := k.client.ScaleplaneV1alpha1().AddonResizers(ns).Create(k.ctx, addonResizer("ar"), metav1.CreateOptions{})
	k.check(err)
	k.refresh()
	k.setClusters(member("a", 3, 3, metav1.ConditionTrue))
	k.setPlacement("a")
	k.sync(t0)
	if k.policy() == nil || k.get("ar").Status.OverridePolicy != "ar-resizer" {
		t.Fatalf("no OverridePolicy written: %+v", k.get("ar").Status)
	}
	k.client.PrependReactor("delete", "overridepolicies", func(clienttesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(policyv1alpha1.Resource("overridepolicies"), "ar-resizer", errors.New("RBAC"))
	})
	d, err := k.kube.AppsV1().Deployments(ns).Get(k.ctx, addonName, metav1.GetOptions{})
	k.check(err)
	d.Spec.Template.Spec.Containers[0].Name = "other"
	_, err = k.kube.AppsV1().Deployments(ns).Update(k.ctx, d, metav1.UpdateOptions{})
	k.check(err)
	k.refresh()
	_, _ = k.trySyncAt(t0.Add(time.Minute), "ar")
	if k.policy() == nil {
		t.Fatal("the refused delete went through")
	}
	if got := k.get("ar").Status.OverridePolicy; got != "ar-resizer" {
		t.Errorf("container gone, delete refused: status.overridePolicy %q while ar-resizer exists", got)
	}
	k.setPlacement()
	k.refresh()
	_, _ = k.trySyncAt(t0.Add(2*time.Minute), "ar")
	if got := k.get("ar").Status.OverridePolicy; got != "ar-resizer" {
		t.Errorf("no member, delete refused: status.overridePolicy %q while ar-resizer exists", got)
	}
}
