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

	policyv1alpha1 "github.com/scaleplane/scaleplane/pkg/apis/policy/v1alpha1"
	scaleplanev1alpha1 "github.com/scaleplane/scaleplane/pkg/apis/scaleplane/v1alpha1"
)

// The tests of this file hold what a member cluster renders from the
// template and the AddonResizer's OverridePolicy when the template or the
// AddonResizer's spec changes under a held size (issue 35, defects 1 to 5).

// cpuOnly sizes cpu alone: 100m + 10m per node.
var cpuOnly = withResources(scaleplanev1alpha1.ResourceScaling{Name: corev1.ResourceCPU, Base: resource.MustParse("100m"), ExtraPerUnit: resource.MustParse("10m")})

// createAR creates an AddonResizer and lets the caches see it.
func (k *karmadaHarness) createAR(ar *scaleplanev1alpha1.AddonResizer) {
	k.t.Helper()
	_, err := k.client.ScaleplaneV1alpha1().AddonResizers(ns).Create(k.ctx, ar, metav1.CreateOptions{})
	k.check(err)
	k.refresh()
}

// editAR changes an AddonResizer's spec as a user would (a new generation).
func (k *karmadaHarness) editAR(name string, edit func(*scaleplanev1alpha1.AddonResizer)) {
	k.t.Helper()
	ar := k.get(name)
	edit(ar)
	ar.Generation++
	_, err := k.client.ScaleplaneV1alpha1().AddonResizers(ns).Update(k.ctx, ar, metav1.UpdateOptions{})
	k.check(err)
	k.refresh()
}

// editTemplate changes the template's pod spec.
func (k *karmadaHarness) editTemplate(edit func(*corev1.PodSpec)) {
	k.t.Helper()
	d, err := k.kube.AppsV1().Deployments(ns).Get(k.ctx, addonName, metav1.GetOptions{})
	k.check(err)
	edit(&d.Spec.Template.Spec)
	d.Generation++
	_, err = k.kube.AppsV1().Deployments(ns).Update(k.ctx, d, metav1.UpdateOptions{})
	k.check(err)
	k.refresh()
}

func (k *karmadaHarness) setTemplateResources(r corev1.ResourceRequirements) {
	k.editTemplate(func(spec *corev1.PodSpec) { spec.Containers[1].Resources = r })
}

// memberHeld returns status.clusters[name].resources.
func (k *karmadaHarness) memberHeld(name string) *corev1.ResourceRequirements {
	for _, m := range k.get("ar").Status.Clusters {
		if m.Name == name {
			return m.Resources
		}
	}
	k.t.Fatalf("member %s not in status", name)
	return nil
}

func (k *karmadaHarness) memberState(name string) scaleplanev1alpha1.MemberClusterStatus {
	for _, m := range k.get("ar").Status.Clusters {
		if m.Name == name {
			return m
		}
	}
	k.t.Fatalf("member %s not in status", name)
	return scaleplanev1alpha1.MemberClusterStatus{}
}

// policyPaths lists the plaintext paths of the policy's rules.
func (k *karmadaHarness) policyPaths() []string {
	p := k.policy()
	if p == nil {
		return nil
	}
	var out []string
	for _, r := range p.Spec.OverrideRules {
		for _, op := range r.Overriders.Plaintext {
			out = append(out, op.Path)
		}
	}
	return out
}

// Defect 1: setLimits switched off trims the held limits at once; they no
// longer cap the request, and no message blames the template's limits.
func TestKarmadaSetLimitsOffTrimsHeldLimits(t *testing.T) {
	k := newKarmadaHarness(t)
	k.createAR(addonResizer("ar", cpuOnly))
	k.setClusters(member("a", 50, 50, metav1.ConditionTrue))
	k.setPlacement("a")
	k.sync(t0)
	if got := ruleValues(k.policy()); got != `a:cpu="600m" a:limits={"cpu":"600m"}` {
		t.Fatalf("rules with setLimits: %s", got)
	}
	k.editAR("ar", func(ar *scaleplanev1alpha1.AddonResizer) { ar.Spec.SetLimits = new(bool) })
	k.sync(t0.Add(time.Minute))
	if held := k.memberHeld("a"); held == nil || len(held.Limits) != 0 || held.Requests.Cpu().String() != "600m" {
		t.Errorf("held after setLimits false: %+v, want requests cpu 600m and no limits", held)
	}
	for _, p := range k.policyPaths() {
		if strings.Contains(p, "/limits") {
			t.Errorf("the OverridePolicy still overrides a limit: %s", p)
		}
	}
	k.expectCondition("ar", scaleplanev1alpha1.ConditionUpToDate, metav1.ConditionTrue, reasonAllClustersSized)
	// The member then grows: its request follows, uncapped.
	k.setClusters(member("a", 80, 80, metav1.ConditionTrue))
	k.sync(t0.Add(2 * time.Minute))
	if held := k.memberHeld("a"); held.Requests.Cpu().String() != "900m" {
		t.Errorf("request after growth: %v, want 900m", held.Requests.Cpu())
	}
	if m := k.memberState("a"); strings.Contains(m.Message, "capped") {
		t.Errorf("message blames limits the template does not have: %s", m.Message)
	}
}

// Defect 2: a resource removed from spec.resources leaves the policy at
// once, and no other resource moves when it does.
func TestKarmadaResourceRemovedFromSpecLeavesThePolicy(t *testing.T) {
	k := newKarmadaHarness(t)
	k.createAR(addonResizer("ar", withSetLimits(false)))
	k.setClusters(member("a", 50, 50, metav1.ConditionTrue))
	k.setPlacement("a")
	k.sync(t0)
	if got := ruleValues(k.policy()); got != `a:cpu="600m" a:memory="600Mi"` {
		t.Fatalf("rules: %s", got)
	}
	k.editAR("ar", func(ar *scaleplanev1alpha1.AddonResizer) { ar.Spec.Resources = ar.Spec.Resources[:1] })
	k.sync(t0.Add(time.Minute))
	if got := ruleValues(k.policy()); got != `a:cpu="600m"` {
		t.Errorf("rules after memory left spec.resources: %s, want cpu alone", got)
	}
	if held := k.memberHeld("a"); held == nil || len(held.Requests) != 1 {
		t.Errorf("held after memory left spec.resources: %+v", held)
	}
}

// Defect 3: the template's limit lowered below a member's held request cuts
// the request down to the limit at once, whatever scaleDownDelay says:
// until then Karmada renders a request above its limit, which the member's
// API server refuses, and nothing of the template reaches that member.
func TestKarmadaTemplateLimitBelowHeldRequestCutsAtOnce(t *testing.T) {
	k := newKarmadaHarness(t)
	k.setTemplateResources(resources("cpu=100m", "limit:cpu=2"))
	k.createAR(addonResizer("ar", cpuOnly, withSetLimits(false), withDelays(0, time.Hour)))
	k.setClusters(member("a", 50, 50, metav1.ConditionTrue), member("b", 3, 3, metav1.ConditionFalse))
	k.setPlacement("a", "b")
	k.sync(t0)
	if held := k.memberHeld("a"); held.Requests.Cpu().String() != "600m" {
		t.Fatalf("held: %v", held)
	}
	// b was never sized, a holds 600m; the limit drops to 300m, and b's
	// Cluster is not Ready: its size is not recomputed, but must still
	// render within the limit.
	k.setTemplateResources(resources("cpu=100m", "limit:cpu=300m"))
	k.sync(t0.Add(time.Minute))
	if held := k.memberHeld("a"); held.Requests.Cpu().String() != "300m" {
		t.Errorf("held request after the limit dropped to 300m: %v, want 300m at once", held.Requests.Cpu())
	}
	if got := ruleValues(k.policy()); got != `a:cpu="300m"` {
		t.Errorf("rules: %s", got)
	}
}

// Defect 3, a stale member: its held size is kept, but never above the
// template's limit.
func TestKarmadaStaleMemberHeldWithinTheTemplateLimit(t *testing.T) {
	k := newKarmadaHarness(t)
	k.setTemplateResources(resources("cpu=100m", "limit:cpu=2"))
	k.createAR(addonResizer("ar", cpuOnly, withSetLimits(false), withDelays(0, time.Hour)))
	k.setClusters(member("a", 50, 50, metav1.ConditionTrue))
	k.setPlacement("a")
	k.sync(t0)
	k.setClusters(member("a", 50, 50, metav1.ConditionUnknown))
	k.setTemplateResources(resources("cpu=100m", "limit:cpu=300m"))
	k.sync(t0.Add(time.Minute))
	if held := k.memberHeld("a"); held.Requests.Cpu().String() != "300m" {
		t.Errorf("stale member's held request: %v, want 300m", held.Requests.Cpu())
	}
	if st := k.memberState("a").State; st != scaleplanev1alpha1.MemberStale {
		t.Errorf("state %s, want Stale", st)
	}
}

// Defect 4: the sized container removed from the template: the policy,
// which addresses it by index, goes, so that the new template reaches the
// members; moved: the policy follows its index.
func TestKarmadaContainerRemovedOrMovedInTheTemplate(t *testing.T) {
	k := newKarmadaHarness(t)
	k.createAR(addonResizer("ar", cpuOnly, withSetLimits(false)))
	k.setClusters(member("a", 50, 50, metav1.ConditionTrue))
	k.setPlacement("a")
	k.sync(t0)

	// Moved to the front: the rules now address index 0.
	k.editTemplate(func(spec *corev1.PodSpec) {
		spec.Containers[0], spec.Containers[1] = spec.Containers[1], spec.Containers[0]
	})
	k.sync(t0.Add(time.Minute))
	for _, p := range k.policyPaths() {
		if !strings.HasPrefix(p, containerPath(0)+"/") {
			t.Errorf("after the move, a rule addresses %s", p)
		}
	}
	if held := k.memberHeld("a"); held == nil || held.Requests.Cpu().String() != "600m" {
		t.Errorf("held after the move: %+v", held)
	}

	// Removed: only the sidecar is left.
	k.editTemplate(func(spec *corev1.PodSpec) { spec.Containers = spec.Containers[1:] })
	k.sync(t0.Add(2 * time.Minute))
	k.expectCondition("ar", scaleplanev1alpha1.ConditionUpToDate, metav1.ConditionFalse, reasonContainerNotFound)
	if p := k.policy(); p != nil {
		t.Errorf("the OverridePolicy outlived the container it sizes: %v", k.policyPaths())
	}
	st := k.get("ar").Status
	if st.OverridePolicy != "" || st.SizedClusters == nil || *st.SizedClusters != 0 {
		t.Errorf("status after the container went: overridePolicy %q, sized %v", st.OverridePolicy, st.SizedClusters)
	}

	// Back again: sized again.
	k.editTemplate(func(spec *corev1.PodSpec) {
		spec.Containers = append(spec.Containers, corev1.Container{Name: containerName, Image: "addon", Resources: resources("cpu=100m")})
	})
	k.sync(t0.Add(3 * time.Minute))
	if got := ruleValues(k.policy()); got != `a:cpu="600m"` {
		t.Errorf("rules once the container is back: %s", got)
	}
}

// Defect 5: a member held at the template's limit is capped, not sized, as
// a plain cluster in that state says.
func TestKarmadaMemberCappedAtTheTemplateLimit(t *testing.T) {
	k := newKarmadaHarness(t)
	k.setTemplateResources(resources("cpu=100m", "limit:cpu=300m"))
	k.createAR(addonResizer("ar", cpuOnly, withSetLimits(false)))
	k.setClusters(member("a", 50, 50, metav1.ConditionTrue), member("b", 3, 3, metav1.ConditionTrue))
	k.setPlacement("a", "b")
	k.sync(t0)
	if held := k.memberHeld("a"); held.Requests.Cpu().String() != "300m" {
		t.Errorf("a held at %v, want the limit 300m", held.Requests.Cpu())
	}
	if st := k.memberState("a").State; st != scaleplanev1alpha1.MemberCapped {
		t.Errorf("a's state %s, want Capped", st)
	}
	st := k.get("ar").Status
	if *st.SizedClusters != 1 || *st.MemberClusters != 2 {
		t.Errorf("SIZED %d of %d, want 1 of 2", *st.SizedClusters, *st.MemberClusters)
	}
	k.expectCondition("ar", scaleplanev1alpha1.ConditionUpToDate, metav1.ConditionFalse, reasonCappedAtLimit)
	k.expectEvents("Normal "+eventOverridePolicyWritten, "Normal "+eventResized, "Warning "+reasonCappedAtLimit)
	// At rest: nothing more is written, nor said.
	writes := k.policyWrites()
	k.sync(t0.Add(time.Minute))
	if k.policyWrites() != writes {
		t.Error("a capped member is written again at rest")
	}
	k.expectEvents()
}

// Defect 6: the sync that the resizer's own writes trigger can read the
// policy cache before it shows the resizer's own policy write. A create
// refused with AlreadyExists, or an update refused with a conflict, is no
// failure when the policy read from the API server says what is desired.
func TestKarmadaPolicyCacheBehindOwnWrite(t *testing.T) {
	k := newKarmadaHarness(t)
	k.createAR(addonResizer("ar", cpuOnly, withSetLimits(false)))
	k.setClusters(member("a", 50, 50, metav1.ConditionTrue))
	k.setPlacement("a")
	k.syncAt(t0, "ar") // the policy cache is not refreshed: it is behind
	k.expectEvents("Normal "+eventOverridePolicyWritten, "Normal "+eventResized)
	writes := k.policyWrites()
	k.syncAt(t0.Add(time.Second), "ar")
	k.expectCondition("ar", scaleplanev1alpha1.ConditionUpToDate, metav1.ConditionTrue, reasonAllClustersSized)
	k.expectEvents()
	if got := k.policyWrites() - writes; got != 1 {
		t.Errorf("%d policy writes after the cache was behind, want the one refused create", got)
	}

	// The cache shows the first policy; the member grows and the update
	// goes through; the member grows again before the cache sees it.
	k.sync(t0.Add(2 * time.Second))
	k.setClusters(member("a", 80, 80, metav1.ConditionTrue))
	k.syncAt(t0.Add(3*time.Second), "ar")
	k.events()
	k.client.PrependReactor("update", "overridepolicies", conflictOnStaleVersion(k))
	k.setClusters(member("a", 120, 120, metav1.ConditionTrue))
	k.syncAt(t0.Add(4*time.Second), "ar")
	k.expectCondition("ar", scaleplanev1alpha1.ConditionUpToDate, metav1.ConditionTrue, reasonAllClustersSized)
	if got := ruleValues(k.policy()); got != `a:cpu="1300m"` {
		t.Errorf("rules: %s", got)
	}
	for _, e := range k.events() {
		if strings.HasPrefix(e, "Warning") {
			t.Errorf("warning for a write that went through: %s", e)
		}
	}
}

// conflictOnStaleVersion refuses an update whose resourceVersion is not the
// stored one, as the API server does (the fake tracker does not).
func conflictOnStaleVersion(k *karmadaHarness) func(clienttesting.Action) (bool, runtime.Object, error) {
	return func(a clienttesting.Action) (bool, runtime.Object, error) {
		obj := a.(clienttesting.UpdateAction).GetObject().(*policyv1alpha1.OverridePolicy)
		stored, err := k.client.Tracker().Get(a.GetResource(), obj.Namespace, obj.Name)
		if err != nil {
			return false, nil, nil
		}
		if stored.(*policyv1alpha1.OverridePolicy).ResourceVersion != obj.ResourceVersion {
			return true, nil, apierrors.NewConflict(policyv1alpha1.Resource("overridepolicies"), obj.Name, errors.New("the object has been modified"))
		}
		bumped := obj.DeepCopy()
		bumped.ResourceVersion = obj.ResourceVersion + "1"
		return true, bumped, k.client.Tracker().Update(a.GetResource(), bumped, obj.Namespace)
	}
}

// Defect 7: while the policy cannot be written, no member counts as sized,
// and each says its size is not applied.
func TestKarmadaUnwrittenPolicySizesNoMember(t *testing.T) {
	for name, setup := range map[string]func(k *karmadaHarness){
		"forbidden": func(k *karmadaHarness) {
			k.client.PrependReactor("create", "overridepolicies", func(clienttesting.Action) (bool, runtime.Object, error) {
				return true, nil, apierrors.NewForbidden(policyv1alpha1.Resource("overridepolicies"), "ar-resizer", errors.New("RBAC"))
			})
		},
		"name taken": func(k *karmadaHarness) {
			_, err := k.client.PolicyV1alpha1().OverridePolicies(ns).Create(k.ctx, &policyv1alpha1.OverridePolicy{ObjectMeta: metav1.ObjectMeta{Name: "ar-resizer", Namespace: ns}}, metav1.CreateOptions{})
			k.check(err)
			list, err := k.client.PolicyV1alpha1().OverridePolicies(ns).List(k.ctx, metav1.ListOptions{})
			k.check(err)
			replace(k.t, k.policies, list.Items)
		},
	} {
		t.Run(name, func(t *testing.T) {
			k := newKarmadaHarness(t)
			k.createAR(addonResizer("ar", cpuOnly, withSetLimits(false)))
			k.setClusters(member("a", 50, 50, metav1.ConditionTrue), member("b", 30, 30, metav1.ConditionTrue))
			k.setPlacement("a", "b")
			setup(k)
			k.syncAt(t0, "ar")
			st := k.get("ar").Status
			if st.SizedClusters == nil || *st.SizedClusters != 0 || *st.MemberClusters != 2 {
				t.Errorf("SIZED %v of %v while the policy is not written, want 0 of 2", st.SizedClusters, st.MemberClusters)
			}
			for _, m := range st.Clusters {
				if !strings.Contains(m.Message, "not applied") {
					t.Errorf("member %s says %q", m.Name, m.Message)
				}
			}
		})
	}
}

// Defect 8: two AddonResizers sizing different resources of one container
// are not each other's foreign override; where the template has no
// requests map, they do clash, and both say so.
func TestKarmadaTwoAddonResizersOnOneContainer(t *testing.T) {
	memOnly := withResources(scaleplanev1alpha1.ResourceScaling{Name: corev1.ResourceMemory, Base: resource.MustParse("100Mi"), ExtraPerUnit: resource.MustParse("10Mi")})
	for name, tc := range map[string]struct {
		tmpl      corev1.ResourceRequirements
		exclusive metav1.ConditionStatus
	}{
		"template has requests": {resources("cpu=100m", "memory=100Mi"), metav1.ConditionTrue},
		"template has none":     {corev1.ResourceRequirements{}, metav1.ConditionFalse},
	} {
		t.Run(name, func(t *testing.T) {
			k := newKarmadaHarness(t)
			k.setTemplateResources(tc.tmpl)
			k.createAR(addonResizer("ar", cpuOnly, withSetLimits(false)))
			k.createAR(addonResizer("mem", memOnly, withSetLimits(false)))
			k.setClusters(member("a", 50, 50, metav1.ConditionTrue))
			k.setPlacement("a")
			for range 2 {
				for _, name := range []string{"ar", "mem"} {
					k.syncAt(t0, name)
					list, err := k.client.PolicyV1alpha1().OverridePolicies(ns).List(k.ctx, metav1.ListOptions{})
					k.check(err)
					replace(k.t, k.policies, list.Items)
				}
			}
			for _, name := range []string{"ar", "mem"} {
				if c := k.condition(name, scaleplanev1alpha1.ConditionOverrideExclusive); c == nil || c.Status != tc.exclusive {
					t.Errorf("%s: OverrideExclusive %+v, want %s", name, c, tc.exclusive)
				}
			}
		})
	}
}

// A refused policy write is retried without a status write at rest: the
// condition that says why is not first set from the members and then
// overwritten, which moved its lastTransitionTime at every retry (found by
// the rendering oracle).
func TestKarmadaRefusedPolicyWriteAtRestWritesNoStatus(t *testing.T) {
	k := newKarmadaHarness(t)
	k.createAR(addonResizer("ar", cpuOnly, withSetLimits(false)))
	k.setClusters(member("a", 50, 50, metav1.ConditionTrue))
	k.setPlacement("a")
	k.client.PrependReactor("create", "overridepolicies", func(clienttesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(policyv1alpha1.Resource("overridepolicies"), "ar-resizer", errors.New("RBAC"))
	})
	k.sync(t0)
	if m := k.memberState("a"); m.State != scaleplanev1alpha1.MemberNotApplied || m.Resources != nil {
		t.Errorf("member while the policy is refused: %s %+v, want NotApplied, running the template", m.State, m.Resources)
	}
	_, before := k.writes()
	k.sync(t0.Add(policyRetry))
	k.sync(t0.Add(2 * policyRetry))
	if _, after := k.writes(); after-before != 2 {
		// Two refused creates, no status write.
		t.Errorf("%d writes at rest, want the 2 refused creates", after-before)
	}
}

// While another AddonResizer sizes the same resource, the members keep
// their sizes, but the policy follows the container when it moves (found
// by the rendering oracle: a frozen policy patched the other container).
func TestKarmadaAmbiguousHoldFollowsTheContainer(t *testing.T) {
	k := newKarmadaHarness(t)
	k.createAR(addonResizer("ar", cpuOnly, withSetLimits(false)))
	k.setClusters(member("a", 50, 50, metav1.ConditionTrue))
	k.setPlacement("a")
	k.sync(t0)
	k.createAR(addonResizer("rival", cpuOnly, withSetLimits(false)))
	k.editTemplate(func(spec *corev1.PodSpec) {
		spec.Containers[0], spec.Containers[1] = spec.Containers[1], spec.Containers[0]
	})
	k.sync(t0.Add(time.Minute))
	k.expectCondition("ar", scaleplanev1alpha1.ConditionUpToDate, metav1.ConditionFalse, reasonAmbiguousTarget)
	if got := k.policyPaths(); len(got) != 1 || got[0] != containerPath(0)+"/resources/requests/cpu" {
		t.Errorf("policy paths while held: %v, want the moved container's cpu", got)
	}
	if held := k.memberHeld("a"); held == nil || held.Requests.Cpu().String() != "600m" {
		t.Errorf("held while ambiguous: %+v, want 600m kept", held)
	}
}

// An AddonResizer deleted while its policy could not be deleted, and
// created again: the policy its predecessor left is deleted and replaced,
// rather than its name reported as taken until the garbage collector comes
// (found by the rendering oracle).
func TestKarmadaPolicyLeftByAPredecessorIsReplaced(t *testing.T) {
	k := newKarmadaHarness(t)
	k.createAR(addonResizer("ar", cpuOnly, withSetLimits(false)))
	k.setClusters(member("a", 50, 50, metav1.ConditionTrue))
	k.setPlacement("a")
	k.sync(t0)
	k.check(k.client.ScaleplaneV1alpha1().AddonResizers(ns).Delete(k.ctx, "ar", metav1.DeleteOptions{}))
	again := addonResizer("ar", cpuOnly, withSetLimits(false))
	again.UID = "uid-ar-2"
	k.createAR(again)
	k.sync(t0.Add(time.Minute))
	k.expectCondition("ar", scaleplanev1alpha1.ConditionUpToDate, metav1.ConditionTrue, reasonAllClustersSized)
	if p := k.policy(); p == nil || !metav1.IsControlledBy(p, again) || ruleValues(p) != `a:cpu="600m"` {
		t.Errorf("policy after the AddonResizer came back: %+v", p)
	}
}
