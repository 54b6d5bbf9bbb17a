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
	"encoding/json"
	"fmt"
	"reflect"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"

	policyv1alpha1 "github.com/scaleplane/scaleplane/pkg/apis/policy/v1alpha1"
	scaleplanev1alpha1 "github.com/scaleplane/scaleplane/pkg/apis/scaleplane/v1alpha1"
	"github.com/scaleplane/scaleplane/pkg/resourceoverride"
)

// managedByLabel marks the OverridePolicies the resizer writes.
const (
	managedByLabel = "app.kubernetes.io/managed-by"
	managedByValue = "scaleplane-resizer"
)

// overridePolicyName is the name of the OverridePolicy an AddonResizer owns.
func overridePolicyName(ar *scaleplanev1alpha1.AddonResizer) string {
	return policyNameFor(ar.Name)
}

func policyNameFor(addonResizer string) string { return addonResizer + "-resizer" }

// containerIndex returns the index of the named container in the pod
// template, or -1. Karmada's plaintext overriders are JSON patches: they
// address a container by its index, not its name, so the index is computed
// from the template every sync and the rules follow it when the template's
// containers move.
func containerIndex(tmpl *corev1.PodTemplateSpec, name string) int {
	for i := range tmpl.Spec.Containers {
		if tmpl.Spec.Containers[i].Name == name {
			return i
		}
	}
	return -1
}

// containerPath is the JSON pointer of the i-th container of an apps/v1
// workload's pod template (Deployment, StatefulSet and DaemonSet alike).
func containerPath(i int) string { return resourceoverride.ContainerPath(i) }

// escapePointer escapes a JSON pointer token (RFC 6901).
func escapePointer(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
}

// overrideOps returns the plaintext overriders that put held over the
// template's container i. They are JSON-patch "add" operations: on an
// object member, add sets it whether or not it is there (RFC 6902 4.1),
// where replace would fail on a resource the template does not set. A
// member of a map the template does not have at all cannot be added (its
// parent must exist), so then the whole requests or limits map is added,
// holding the managed resources only. Karmada applies plaintext last in a
// rule, as one patch (overridemanager.go, applyPolicyOverriders, v1.18.2).
// The resources object itself is always there: the API server serializes a
// container's resources even when empty.
func overrideOps(tmpl corev1.ResourceRequirements, i int, held *corev1.ResourceRequirements) []policyv1alpha1.PlaintextOverrider {
	var ops []policyv1alpha1.PlaintextOverrider
	for _, part := range []struct {
		field    string
		template corev1.ResourceList
		held     corev1.ResourceList
	}{
		{"requests", tmpl.Requests, held.Requests},
		{"limits", tmpl.Limits, held.Limits},
	} {
		if len(part.held) == 0 {
			continue
		}
		path := containerPath(i) + "/resources/" + part.field
		if len(part.template) == 0 {
			ops = append(ops, plaintextAdd(path, quantityStrings(part.held)))
			continue
		}
		for _, name := range sortedNames(part.held) {
			q := part.held[name]
			ops = append(ops, plaintextAdd(path+"/"+escapePointer(string(name)), q.String()))
		}
	}
	return ops
}

func plaintextAdd(path string, value any) policyv1alpha1.PlaintextOverrider {
	raw, _ := json.Marshal(value) // strings and maps of strings always marshal
	return policyv1alpha1.PlaintextOverrider{Path: path, Operator: policyv1alpha1.OverriderOpAdd, Value: runtime.RawExtension{Raw: raw}}
}

func quantityStrings(l corev1.ResourceList) map[string]string {
	out := make(map[string]string, len(l))
	for name, q := range l {
		out[string(name)] = q.String()
	}
	return out
}

func sortedNames(l corev1.ResourceList) []corev1.ResourceName {
	names := make([]corev1.ResourceName, 0, len(l))
	for name := range l {
		names = append(names, name)
	}
	sort.Slice(names, func(a, b int) bool { return names[a] < names[b] })
	return names
}

// desiredOverridePolicy is the OverridePolicy that holds each member at its
// size: one rule per member cluster that holds a size of its own, in name
// order, targeting it by clusterNames. A member without one runs the
// template. Nil when no member holds a size: there is nothing to override.
// The selector's namespace is set, not left empty: karmada-webhook's
// mutating OverridePolicy webhook would default it to the policy's
// (pkg/webhook/overridepolicy/mutating.go, v1.18.2), and the stored spec
// must equal the one written, or every sync would write again.
func desiredOverridePolicy(ar *scaleplanev1alpha1.AddonResizer, w *workload, index int, members []scaleplanev1alpha1.MemberClusterStatus) *policyv1alpha1.OverridePolicy {
	base := w.template.Spec.Containers[index].Resources
	var rules []policyv1alpha1.RuleWithCluster
	for _, m := range members {
		if m.Resources == nil {
			continue
		}
		ops := overrideOps(base, index, m.Resources)
		if len(ops) == 0 {
			continue
		}
		rules = append(rules, policyv1alpha1.RuleWithCluster{
			TargetCluster: &policyv1alpha1.ClusterAffinity{ClusterNames: []string{m.Name}},
			Overriders:    policyv1alpha1.Overriders{Plaintext: ops},
		})
	}
	if len(rules) == 0 {
		return nil
	}
	sort.SliceStable(rules, func(a, b int) bool {
		return rules[a].TargetCluster.ClusterNames[0] < rules[b].TargetCluster.ClusterNames[0]
	})
	return &policyv1alpha1.OverridePolicy{
		ObjectMeta: metav1.ObjectMeta{
			Name:      overridePolicyName(ar),
			Namespace: ar.Namespace,
			Labels:    map[string]string{managedByLabel: managedByValue},
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion:         scaleplanev1alpha1.SchemeGroupVersion.String(),
				Kind:               "AddonResizer",
				Name:               ar.Name,
				UID:                ar.UID,
				Controller:         ptr.To(true),
				BlockOwnerDeletion: ptr.To(true),
			}},
		},
		Spec: policyv1alpha1.OverrideSpec{
			ResourceSelectors: []policyv1alpha1.ResourceSelector{{
				APIVersion: "apps/v1",
				Kind:       string(w.kind),
				Namespace:  w.namespace,
				Name:       w.name,
			}},
			OverrideRules: rules,
		},
	}
}

// specEqual compares two OverrideSpecs as the API server stores them: both
// are turned into JSON and back into plain values, so that a value written
// as "48m" and read back compares equal however its bytes were spaced.
func specEqual(a, b policyv1alpha1.OverrideSpec) bool {
	return reflect.DeepEqual(plainJSON(a), plainJSON(b))
}

func plainJSON(v any) any {
	raw, err := json.Marshal(v)
	if err != nil {
		return nil
	}
	var out any
	if err := json.Unmarshal(raw, &out); err != nil {
		return nil
	}
	return out
}

// needsUpdate tells whether the stored policy differs from the desired one
// in what the resizer owns: the spec, its label and its controller.
func needsUpdate(stored, desired *policyv1alpha1.OverridePolicy) bool {
	return !specEqual(stored.Spec, desired.Spec) ||
		stored.Labels[managedByLabel] != managedByValue ||
		!reflect.DeepEqual(plainJSON(stored.OwnerReferences), plainJSON(desired.OwnerReferences))
}

// foreignOverride tells whether p, an OverridePolicy the AddonResizer does
// not own, overrides what the AddonResizer's rules set (mine, from
// overriddenPaths): one of its resource selectors matches w (or it has
// none, which Karmada takes as all resources of the namespace;
// overridemanager.go, getOverridersFromOverridePolicies, v1.18.2), and a
// rule's plaintext path is one of mine, inside one (a whole map mine adds
// would wipe it, or it would add into it), or a parent that replaces
// one. Two policies that set different resources of one container do not
// meet. Its clusters are not looked at: a rule for any member is a
// conflict worth reporting.
func foreignOverride(p *policyv1alpha1.OverridePolicy, w *workload, templateLabels map[string]string, mine []string) bool {
	if !selectsWorkload(p.Spec.ResourceSelectors, w, templateLabels) {
		return false
	}
	rules := p.Spec.OverrideRules
	if len(rules) == 0 {
		rules = []policyv1alpha1.RuleWithCluster{{Overriders: p.Spec.Overriders}}
	}
	for _, r := range rules {
		for _, op := range r.Overriders.Plaintext {
			path := strings.TrimSuffix(op.Path, "/")
			for _, target := range mine {
				if path == target || strings.HasPrefix(path, target+"/") || strings.HasPrefix(target, path+"/") {
					return true
				}
			}
		}
	}
	return false
}

// overriddenPaths are the JSON pointers the AddonResizer's rules write in
// container i, whatever the members' sizes: each managed request (and
// limit, with setLimits), or the whole requests or limits map when the
// template has none (overrideOps).
func overriddenPaths(tmpl corev1.ResourceRequirements, i int, s settings) []string {
	var out []string
	for _, part := range []struct {
		field    string
		template corev1.ResourceList
		managed  bool
	}{
		{"requests", tmpl.Requests, true},
		{"limits", tmpl.Limits, s.setLimits},
	} {
		if !part.managed {
			continue
		}
		path := containerPath(i) + "/resources/" + part.field
		if len(part.template) == 0 {
			out = append(out, path)
			continue
		}
		for _, name := range s.managed() {
			out = append(out, path+"/"+escapePointer(string(name)))
		}
	}
	return out
}

// rulesByCluster returns the plaintext overriders p's rules set for each
// member cluster, in order; empty when p is nil. One pass over the rules,
// not one per member: a policy has a rule per member.
func rulesByCluster(p *policyv1alpha1.OverridePolicy) map[string][]policyv1alpha1.PlaintextOverrider {
	out := map[string][]policyv1alpha1.PlaintextOverrider{}
	if p == nil {
		return out
	}
	for _, r := range p.Spec.OverrideRules {
		if r.TargetCluster == nil {
			continue
		}
		for _, name := range r.TargetCluster.ClusterNames {
			out[name] = append(out[name], r.Overriders.Plaintext...)
		}
	}
	return out
}

// heldOfRule reads back what a rule's operations set in container i: the
// managed requests and limits, one by one or as a whole map (overrideOps).
// Nil when it sets none. explain reads the policy with the same reader.
func heldOfRule(ops []policyv1alpha1.PlaintextOverrider, i int) *corev1.ResourceRequirements {
	return resourceoverride.Read(ops, i)
}

// sameRule compares two rules' overriders as the API server stores them.
func sameRule(a, b []policyv1alpha1.PlaintextOverrider) bool {
	if len(a) == 0 || len(b) == 0 {
		return len(a) == len(b)
	}
	return reflect.DeepEqual(plainJSON(a), plainJSON(b))
}

// selectsWorkload applies Karmada's resource selector match
// (pkg/util/selector.go, ResourceMatches, v1.18.2): apiVersion and kind
// equal, namespace empty or equal, name equal if set, else the label
// selector (nil matches all).
func selectsWorkload(selectors []policyv1alpha1.ResourceSelector, w *workload, templateLabels map[string]string) bool {
	if len(selectors) == 0 {
		return true
	}
	for _, rs := range selectors {
		if rs.APIVersion != "apps/v1" || rs.Kind != string(w.kind) {
			continue
		}
		if rs.Namespace != "" && rs.Namespace != w.namespace {
			continue
		}
		if rs.Name != "" {
			if rs.Name == w.name {
				return true
			}
			continue
		}
		if rs.LabelSelector == nil {
			return true
		}
		sel, err := metav1.LabelSelectorAsSelector(rs.LabelSelector)
		if err == nil && sel.Matches(labels.Set(templateLabels)) {
			return true
		}
	}
	return false
}

// describeForeign names the foreign policies, for the condition.
func describeForeign(names []string) string {
	return fmt.Sprintf("OverridePolicy %s also overrides the container's resources; Karmada applies OverridePolicies of equal priority in name order, the last one wins. The resizer leaves it alone",
		strings.Join(names, ", "))
}
