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

// The Karmada rendering oracle's invariants of one AddonResizer (checkAR):
// its OverridePolicy, what each member renders, its status, and when a
// member must have converged and to what size.

import (
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	scaleplanev1alpha1 "github.com/scaleplane/scaleplane/pkg/apis/scaleplane/v1alpha1"
	"github.com/scaleplane/scaleplane/pkg/resizeestimate"
)

func (o *oracleRun) checkAR(v *worldView, a *oAR) {
	own := policyNameFor(a.name)
	if !a.exists {
		for _, p := range v.policies {
			if ref := metav1.GetControllerOf(p); ref != nil && ref.Kind == "AddonResizer" && ref.Name == a.name && o.quietSince(a.changed) {
				o.violate("left-behind-addonresizer", fmt.Sprintf("OverridePolicy %s outlived AddonResizer %s (deleted at %v)", p.Name, a.name, a.changed.Sub(t0)))
			}
		}
		return
	}
	ar, err := o.k.client.ScaleplaneV1alpha1().AddonResizers(ns).Get(o.k.ctx, a.name, metav1.GetOptions{})
	o.check1(err)
	st := ar.Status
	if !a.karmada() {
		if v.owner[own] == a.name && o.quietSince(a.changed) {
			o.violate("left-behind-federation-none", fmt.Sprintf("%s: OverridePolicy %s outlived federation None", a.name, own))
		}
		if len(st.Clusters) > 0 {
			o.violate("status-federation-none", fmt.Sprintf("%s: status.clusters %d entries under federation None", a.name, len(st.Clusters)))
		}
		return
	}
	s := a.settings()
	other := o.ars[0]
	if other == a {
		other = o.ars[1]
	}
	ambiguous := other.exists && slices.ContainsFunc(s.managed(), func(n corev1.ResourceName) bool { return slices.Contains(other.settings().managed(), n) })
	viol := func(invariant, detail string) { o.violate(o.tag(invariant, ambiguous), detail) }
	broken := o.brokenForeign(v)
	// The policies of every AddonResizer must apply cleanly to the current
	// template, for every member.
	for _, m := range o.placement {
		if v.clusters[m] == nil {
			continue
		}
		if _, err := v.render(m, broken); err != nil {
			// Not while writes are refused: the resizer cannot follow the
			// template then.
			if f, ok := err.(*renderFailure); ok && strings.TrimPrefix(f.policy, ns+"/") == own && !o.forbid {
				viol("policy-applies", fmt.Sprintf("%s: member %s gets nothing new: %v", a.name, m, err))
			}
		}
	}
	idx := slices.IndexFunc(v.template.Spec.Template.Spec.Containers, func(c corev1.Container) bool { return c.Name == containerName })
	if idx < 0 {
		return
	}
	tmplMain := v.template.Spec.Template.Spec.Containers[idx]
	// Conflicts: another policy whose absence changes what this resizer
	// manages on some member. It must be reported; a policy reported must at
	// least touch a managed path.
	conflicts := o.conflicts(v, a, broken)
	exclusive := meta.FindStatusCondition(st.Conditions, scaleplanev1alpha1.ConditionOverrideExclusive)
	for _, p := range v.policies {
		if p.Name == own && v.owner[own] == a.name {
			continue
		}
		reported := exclusive != nil && exclusive.Status == metav1.ConditionFalse && mentions(exclusive.Message, p.Name)
		// While writes are refused, a resizer's policy written for an older
		// template (a whole limits map, say) can reach what another one
		// manages; each says its policy is not written.
		staleResizer := o.forbid && (v.owner[p.Name] != "" || p.Labels[managedByLabel] == managedByValue)
		if conflicts[p.Name] && !reported && !ambiguous && !staleResizer {
			viol("foreign-unreported", fmt.Sprintf("%s: OverridePolicy %s changes what it manages on some member and is not reported (OverrideExclusive %v)", a.name, p.Name, condString(exclusive)))
		}
		if reported && !canClash(p, idx, tmplMain.Resources, s) {
			viol("foreign-false-report", fmt.Sprintf("%s: OverridePolicy %s reported as overriding its container's resources; its paths cannot meet %v of container %d: %s", a.name, p.Name, s.managed(), idx, opPaths(p)))
		}
	}
	ownExcl := copySet(broken)
	for n := range conflicts {
		ownExcl[n] = true
	}
	resizers := with(ownExcl, own) // what the member gets without this AddonResizer

	statusOf := map[string]*scaleplanev1alpha1.MemberClusterStatus{}
	var listed []string
	for i := range st.Clusters {
		statusOf[st.Clusters[i].Name] = &st.Clusters[i]
		listed = append(listed, st.Clusters[i].Name)
	}
	if !ambiguous && !slices.Equal(listed, o.placement) && !(len(listed) == 0 && len(o.placement) == 0) {
		viol("status-members", fmt.Sprintf("%s: status.clusters %v; placement %v", a.name, listed, o.placement))
	}
	if p := policyByName(v, own); p != nil && v.owner[own] == a.name && !ambiguous && !o.forbid {
		for _, r := range p.Spec.OverrideRules {
			if r.TargetCluster == nil {
				continue
			}
			for _, n := range r.TargetCluster.ClusterNames {
				if !slices.Contains(o.placement, n) {
					viol("left-behind-member", fmt.Sprintf("%s: a rule for %s, which is not in the placement %v", a.name, n, o.placement))
				}
			}
		}
	}
	sized := int32(0)
	for _, m := range st.Clusters {
		if m.State == scaleplanev1alpha1.MemberSized {
			sized++
		}
	}
	if st.SizedClusters != nil && *st.SizedClusters != sized && !ambiguous {
		viol("sized-count", fmt.Sprintf("%s: sizedClusters %d; %d members say Sized", a.name, *st.SizedClusters, sized))
	}
	upToDate := meta.FindStatusCondition(st.Conditions, scaleplanev1alpha1.ConditionUpToDate)
	if upToDate != nil && upToDate.Reason == reasonOverridePolicyFailed && !o.forbid {
		viol("policy-failed-at-rest", fmt.Sprintf("%s: UpToDate %s with no refused write left (the writes went through): %s", a.name, condString(upToDate), upToDate.Message))
	}
	anyCapped := false
	for _, m := range o.placement {
		c := v.clusters[m]
		if c == nil {
			continue
		}
		rendered, err := v.render(m, ownExcl)
		if err != nil {
			continue // reported above, or someone else's
		}
		base, err := v.render(m, resizers)
		if err != nil {
			continue
		}
		rMain, bMain := mainContainer(rendered), mainContainer(base)
		// What this AddonResizer's own policy changes, on top of all the
		// others: container main's resources that it manages, nothing else.
		full, err1 := v.render(m, broken)
		without, err2 := v.render(m, with(broken, own))
		if err1 == nil && err2 == nil && v.owner[own] == a.name && !o.forbid { // refused writes cannot follow the template
			if !sameOutsideMain(full, without) {
				viol("touches-outside", fmt.Sprintf("%s: member %s: its policy changes more than container main's resources (containers now %s; without it %s)", a.name, m, containerSummary(full), containerSummary(without)))
			}
			fm, wm := mainContainer(full), mainContainer(without)
			for _, name := range resourceNames(fm, wm) {
				if o.managedByOther(a, name) {
					continue // a clash between AddonResizers: reported or not, above
				}
				// Where the template has no requests (limits) map the
				// resizer adds it whole, and so wipes what another policy
				// added into it: a clash it must report (checked above),
				// not one it can avoid (JSON patch cannot add a key under a
				// map that is not there).
				wipesReported := func(tmpl corev1.ResourceList) bool {
					return len(tmpl) == 0 && exclusive != nil && exclusive.Status == metav1.ConditionFalse
				}
				if !slices.Contains(s.managed(), name) && !quantityEq(fm.Resources.Requests, wm.Resources.Requests, name) && !wipesReported(tmplMain.Resources.Requests) {
					viol("unmanaged-overridden", fmt.Sprintf("%s: member %s: its policy makes the %s request %s (%s without it); %s is not in spec.resources", a.name, m, name, qs(fm.Resources.Requests, name), qs(wm.Resources.Requests, name), name))
				}
				if (!slices.Contains(s.managed(), name) || !s.setLimits) && !quantityEq(fm.Resources.Limits, wm.Resources.Limits, name) && !wipesReported(tmplMain.Resources.Limits) {
					viol("unmanaged-overridden", fmt.Sprintf("%s: member %s: its policy makes the %s limit %s (%s without it); setLimits %v, spec.resources %v", a.name, m, name, qs(fm.Resources.Limits, name), qs(wm.Resources.Limits, name), s.setLimits, s.managed()))
				}
			}
		}
		ready, nodes := memberReady(c)
		capped := false
		if ready {
			for _, name := range s.managed() {
				est, _ := o.target(s, name, nodes, tmplMain)
				if l, ok := tmplMain.Resources.Limits[name]; ok && !s.setLimits && est.Cmp(l) > 0 && !resizeestimate.WithinThreshold(name, l, est, s.threshold) {
					capped = true
				}
			}
		}
		anyCapped = anyCapped || capped
		sm := statusOf[m]
		if sm == nil {
			continue
		}
		// Status says what is rendered. One thing it cannot say: while
		// writes are refused, a stale rule that adds a whole requests or
		// limits map (written when the template had none) drops the
		// template's values of resources it did not hold; status lists
		// held values, not removed ones, and UpToDate says the policy is
		// not written.
		if o.forbid && sm.State == scaleplanev1alpha1.MemberNotApplied && addsWholeMap(policyByName(v, own), m) {
			continue
		}
		// Nor what another policy it reports (OverrideExclusive False)
		// sets or loses, which depends on Karmada's order of the two.
		foreignReported := exclusive != nil && exclusive.Status == metav1.ConditionFalse
		if foreignReported {
			continue
		}
		for _, name := range s.managed() {
			want := quantityOf(bMain.Resources.Requests, name)
			if sm.Resources != nil && sm.Resources.Requests != nil {
				if q := quantityOf(sm.Resources.Requests, name); q != nil {
					want = q
				}
			}
			if !qEq(want, quantityOf(rMain.Resources.Requests, name)) {
				viol("status-vs-rendered", fmt.Sprintf("%s: member %s: status says %s request %s (state %s); rendered %s", a.name, m, name, qstr(want), sm.State, qs(rMain.Resources.Requests, name)))
			}
			want = quantityOf(bMain.Resources.Limits, name)
			if sm.Resources != nil && sm.Resources.Limits != nil {
				if q := quantityOf(sm.Resources.Limits, name); q != nil {
					want = q
				}
			}
			if !qEq(want, quantityOf(rMain.Resources.Limits, name)) {
				viol("status-vs-rendered", fmt.Sprintf("%s: member %s: status says %s limit %s (state %s); rendered %s", a.name, m, name, qstr(want), sm.State, qs(rMain.Resources.Limits, name)))
			}
		}
		// Sized: held at the recommendation, as rendered.
		if sm.State == scaleplanev1alpha1.MemberSized && ready && !ambiguous {
			for _, name := range s.managed() {
				est, _ := o.target(s, name, nodes, corev1.Container{}) // uncapped
				if got := effectiveRequest(rMain, name); got == nil || !resizeestimate.WithinThreshold(name, *got, est, s.threshold) {
					viol("sized-not-at-estimate", fmt.Sprintf("%s: member %s says Sized; its %s request is rendered %s, the estimate for %d nodes is %s (threshold %d%%)", a.name, m, name, qstr(got), nodes, est.String(), s.threshold))
				}
			}
		}
		// Convergence within the delays; not promised while the AddonResizer
		// reports another policy on the same values (OverrideExclusive
		// False): which one wins is Karmada's order, and the resizer does
		// not fight it.
		if o.mustConverge(a, m, ready, ambiguous) && !foreignReported {
			for _, name := range s.managed() {
				target, _ := o.target(s, name, nodes, tmplMain)
				got := effectiveRequest(rMain, name)
				if got == nil || !resizeestimate.WithinThreshold(name, *got, target, s.threshold) {
					viol("not-converged", fmt.Sprintf("%s: member %s (%d nodes, stable since %v): %s request rendered %s, target %s (threshold %d%%, state %s: %s)", a.name, m, nodes, o.stableSince(m).Sub(t0), name, qstr(got), target.String(), s.threshold, sm.State, sm.Message))
				}
				if s.setLimits {
					got := quantityOf(rMain.Resources.Limits, name)
					if got == nil || !resizeestimate.WithinThreshold(name, *got, target, s.threshold) {
						viol("not-converged", fmt.Sprintf("%s: member %s (%d nodes): %s limit rendered %s, target %s", a.name, m, nodes, name, qstr(got), target.String()))
					}
				}
			}
		}
	}
	if upToDate != nil && upToDate.Status == metav1.ConditionTrue && !ambiguous {
		if anyCapped {
			viol("capped-but-up-to-date", fmt.Sprintf("%s: UpToDate %s although a member is held at the template's limit below its estimate", a.name, condString(upToDate)))
		}
		for _, m := range o.placement {
			if sm := statusOf[m]; sm == nil || sm.State != scaleplanev1alpha1.MemberSized {
				viol("up-to-date-not-sized", fmt.Sprintf("%s: UpToDate %s but member %s is %v", a.name, condString(upToDate), m, stateOf(sm)))
			}
		}
	}
}

// conflicts are the policies, other than a's own and the broken ones, whose
// absence changes what a manages on some member.
func (o *oracleRun) conflicts(v *worldView, a *oAR, broken map[string]bool) map[string]bool {
	own, managed := policyNameFor(a.name), a.settings().managed()
	conflicts := map[string]bool{}
	for _, p := range v.policies {
		if p.Name == own && v.owner[own] == a.name || broken[p.Name] {
			continue
		}
		for _, m := range o.placement {
			if v.clusters[m] == nil {
				continue
			}
			full, err1 := v.render(m, broken)
			without, err2 := v.render(m, with(broken, p.Name))
			if err1 != nil || err2 != nil {
				continue
			}
			if !managedEqual(mainContainer(full), mainContainer(without), managed) {
				conflicts[p.Name] = true
			}
		}
	}
	return conflicts
}

func stateOf(sm *scaleplanev1alpha1.MemberClusterStatus) string {
	if sm == nil {
		return "not in status"
	}
	return string(sm.State)
}

// mustConverge tells whether member m has had long enough since anything
// that bears on its size changed.
func (o *oracleRun) mustConverge(a *oAR, m string, ready, ambiguous bool) bool {
	if !ready || ambiguous || o.forbid || o.foreign[policyNameFor(a.name)] == "taken" && a.name == "ar" {
		return false
	}
	s := a.settings()
	wait := max(s.upDelay, s.downDelay) + 90*time.Second
	return !o.now.Before(o.stableSince(m).Add(wait))
}

func (o *oracleRun) stableSince(m string) time.Time {
	t := o.globalChange
	if c, ok := o.memberChange[m]; ok && c.After(t) {
		t = c
	}
	return t
}

// target is the size the member converges to: the estimate, capped at the
// template's limit when setLimits is false. It says whether it is capped.
func (o *oracleRun) target(s settings, name corev1.ResourceName, nodes int32, tmplMain corev1.Container) (resource.Quantity, bool) {
	var est resource.Quantity
	for _, r := range s.resources {
		if r.Name == name {
			est = resizeestimate.Linear(r, estimatedUnits(s, int64(nodes)))
		}
	}
	if l, ok := tmplMain.Resources.Limits[name]; ok && !s.setLimits && est.Cmp(l) > 0 {
		return l.DeepCopy(), true
	}
	return est, false
}
