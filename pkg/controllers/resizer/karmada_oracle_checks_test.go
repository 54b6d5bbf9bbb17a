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

// The Karmada rendering oracle's checks of the whole world after each step:
// the world view, each member's workload rendered as Karmada renders it,
// check() itself, the requests-within-limits check and other parties'
// broken policies, and how a violation is recorded and tagged.

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	clusterv1alpha1 "github.com/scaleplane/scaleplane/pkg/apis/cluster/v1alpha1"
	policyv1alpha1 "github.com/scaleplane/scaleplane/pkg/apis/policy/v1alpha1"
)

// tag marks an invariant broken while the AddonResizer is AmbiguousTarget
// (frozen by design: it neither resizes nor rewrites its policy), so that
// those are told apart.
func (o *oracleRun) tag(invariant string, ambiguous bool) string {
	if ambiguous {
		return invariant + "(ambiguous)"
	}
	return invariant
}

// ambiguousNow tells whether the two AddonResizers size a resource in
// common.
func (o *oracleRun) ambiguousNow() bool {
	a, b := o.ars[0], o.ars[1]
	return a.exists && b.exists && slices.ContainsFunc(a.settings().managed(), func(n corev1.ResourceName) bool { return slices.Contains(b.settings().managed(), n) })
}

// managedByOther tells whether another AddonResizer in Karmada mode sizes
// resource name.
func (o *oracleRun) managedByOther(a *oAR, name corev1.ResourceName) bool {
	for _, b := range o.ars {
		if b != a && b.karmada() && slices.Contains(b.settings().managed(), name) {
			return true
		}
	}
	return false
}

func resourceNames(cs ...*corev1.Container) []corev1.ResourceName {
	var out []corev1.ResourceName
	for _, c := range cs {
		if c == nil {
			continue
		}
		for _, l := range []corev1.ResourceList{c.Resources.Requests, c.Resources.Limits} {
			for n := range l {
				if !slices.Contains(out, n) {
					out = append(out, n)
				}
			}
		}
	}
	slices.Sort(out)
	return out
}

func (o *oracleRun) violate(invariant, detail string) {
	o.violations = append(o.violations, violation{step: o.step, invariant: invariant, detail: detail})
}

// The checks.

// worldView is what one check reads.
type worldView struct {
	template *appsv1.Deployment
	policies []*policyv1alpha1.OverridePolicy
	owner    map[string]string // policy name -> the AddonResizer (name) that controls it, "" for others
	clusters map[string]*clusterv1alpha1.Cluster
	memo     map[string]renderResult
	broken   map[string]bool
}

type renderResult struct {
	d   *appsv1.Deployment
	err error
}

func (o *oracleRun) view() *worldView {
	d, err := o.k.kube.AppsV1().Deployments(ns).Get(o.k.ctx, addonName, metav1.GetOptions{})
	o.check1(err)
	list, err := o.k.client.PolicyV1alpha1().OverridePolicies(ns).List(o.k.ctx, metav1.ListOptions{})
	o.check1(err)
	v := &worldView{template: asTemplate(d), owner: map[string]string{}, clusters: map[string]*clusterv1alpha1.Cluster{}}
	for i := range list.Items {
		p := &list.Items[i]
		v.policies = append(v.policies, p)
		if ref := metav1.GetControllerOf(p); ref != nil && ref.Kind == "AddonResizer" {
			for _, a := range o.ars {
				if a.exists && ref.Name == a.name && ref.UID == a.uid() {
					v.owner[p.Name] = a.name
				}
			}
		}
	}
	sort.Slice(v.policies, func(i, j int) bool { return v.policies[i].Name < v.policies[j].Name })
	for _, obj := range o.k.clusters.List() {
		c := obj.(*clusterv1alpha1.Cluster)
		v.clusters[c.Name] = c
	}
	return v
}

// render renders member m without the policies in exclude.
func (v *worldView) render(m string, exclude map[string]bool) (*appsv1.Deployment, error) {
	key := m + "|" + strings.Join(trueKeys(exclude), ",")
	if r, ok := v.memo[key]; ok {
		return r.d, r.err
	}
	d, err := v.renderOnce(m, exclude)
	if v.memo == nil {
		v.memo = map[string]renderResult{}
	}
	v.memo[key] = renderResult{d, err}
	return d, err
}

func trueKeys(m map[string]bool) []string {
	var out []string
	for k, v := range m {
		if v {
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out
}

func (v *worldView) renderOnce(m string, exclude map[string]bool) (*appsv1.Deployment, error) {
	var ps []*policyv1alpha1.OverridePolicy
	for _, p := range v.policies {
		if !exclude[p.Name] {
			ps = append(ps, p)
		}
	}
	obj, _, err := renderMember(v.template, v.clusters[m], nil, fromOverridePolicies(ps))
	if err != nil {
		return nil, err
	}
	return renderedDeployment(obj)
}

func mainContainer(d *appsv1.Deployment) *corev1.Container {
	for i := range d.Spec.Template.Spec.Containers {
		if d.Spec.Template.Spec.Containers[i].Name == containerName {
			return &d.Spec.Template.Spec.Containers[i]
		}
	}
	return nil
}

func (o *oracleRun) check() {
	v := o.view()
	o.lastView = v
	if o.step == *oracleDump {
		o.dump(v)
	}
	// The template is never written in Karmada mode, nor by None on an API
	// server without Nodes.
	for _, a := range o.k.kube.Actions() {
		if a.GetVerb() == "patch" {
			o.violate("template-written", fmt.Sprintf("%s %s", a.GetVerb(), a.GetResource().Resource))
		}
	}
	for _, a := range o.ars {
		o.checkAR(v, a)
	}
	o.checkLimits(v)
	// A Warning OverridePolicyFailed with no injected fault is a failure
	// reported for a write that went through, or was never refused.
	if !o.faultFired && !o.forbid {
		for _, e := range o.events {
			if strings.HasPrefix(e, "Warning "+reasonOverridePolicyFailed) {
				o.violate("policy-failed-without-fault", e)
			}
		}
	}
}

// checkLimits: every container a member renders has its requests at most
// its limits (the member's API server refuses anything else, and then no
// template change reaches it), unless the template with the other parties'
// policies alone renders so.
func (o *oracleRun) checkLimits(v *worldView) {
	if o.forbid {
		// The resizers cannot write their policies: one written for an
		// older template stays until they can (UpToDate says why).
		return
	}
	broken := o.brokenForeign(v)
	resizers := copySet(broken)
	for n, owner := range v.owner {
		if owner != "" {
			resizers[n] = true
		}
	}
	for _, m := range o.placement {
		if v.clusters[m] == nil {
			continue
		}
		full, err1 := v.render(m, broken)
		base, err2 := v.render(m, resizers)
		if err1 != nil || err2 != nil {
			continue
		}
		for i, ct := range full.Spec.Template.Spec.Containers {
			for name, l := range ct.Resources.Limits {
				r, ok := ct.Resources.Requests[name]
				if !ok || r.Cmp(l) <= 0 {
					continue
				}
				if i < len(base.Spec.Template.Spec.Containers) {
					b := base.Spec.Template.Spec.Containers[i].Resources
					if br, ok := b.Requests[name]; ok {
						if bl, ok := b.Limits[name]; ok && br.Cmp(bl) > 0 {
							continue // not the resizers' doing
						}
					}
				}
				o.violate(o.tag("request-above-limit", o.ambiguousNow()), fmt.Sprintf("member %s container %s: %s request %s > limit %s (OverridePolicies %v)", m, ct.Name, name, r.String(), l.String(), sortedKeys(v.owner)))
			}
		}
	}
}

// brokenForeign are the policies of others whose own patch fails for a
// member: Karmada renders nothing new there, and that is not the resizer's
// doing. They are left out of the other checks.
func (o *oracleRun) brokenForeign(v *worldView) map[string]bool {
	if v.broken != nil {
		return copySet(v.broken)
	}
	broken := map[string]bool{}
	defer func() { v.broken = copySet(broken) }()
	for range v.policies {
		changed := false
		for _, m := range o.placement {
			if v.clusters[m] == nil {
				continue
			}
			_, err := v.render(m, broken)
			if f, ok := err.(*renderFailure); ok {
				name := strings.TrimPrefix(f.policy, ns+"/")
				if v.owner[name] == "" && !broken[name] {
					broken[name] = true
					changed = true
				}
			}
		}
		if !changed {
			break
		}
	}
	return broken
}
