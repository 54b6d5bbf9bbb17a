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

// The rendering of a member cluster's workload as Karmada does it, for the
// tests: the template, then the ClusterOverridePolicies, then the
// OverridePolicies of the template's namespace, each list ordered by implicit
// priority and then by name, the rules of each policy whose targetCluster
// matches the member applied in order, and each rule's plaintext overriders
// applied as one JSON patch with github.com/evanphx/json-patch/v5 v5.9.11
// (Karmada's version at v1.18.2 and at f8fdd02df, both read).
//
// Transcribed from karmada-io/karmada at v1.18.2 (0533b555e0) and checked
// unchanged in these parts at f8fdd02df3760fd9521624f284877fa84e7be6ef
// (the newest stored commit, after v1.19.0-rc.0):
//   - pkg/util/overridemanager/overridemanager.go: ApplyOverridePolicies
//     (cluster policies first, then, for a namespaced object, the policies of
//     its namespace), getOverridersFromOverridePolicies (selection, the sort by
//     ResourceMatchSelectorsPriority then name, a policy without resource
//     selectors at PriorityMatchAll, a nil targetCluster matching every
//     cluster, the deprecated spec.targetCluster/spec.overriders used when
//     overrideRules is empty), applyPolicyOverriders (plaintext last, as one
//     patch) and applyJSONPatch (json.Marshal of the ops, DecodePatch,
//     Apply with the default options).
//   - pkg/util/selector.go: ResourceSelectorPriority (apiVersion, kind,
//     namespace; a name decides alone; no name and no label selector match
//     all), ResourceMatchSelectors, ResourceMatchSelectorsPriority and
//     ClusterMatches (exclude, label selector, clusterNames; field selectors
//     are not in scaleplane's copy of the API and are not transcribed).
//   - pkg/controllers/binding/common.go (ensureWork): a failed override is
//     logged and the cluster's Work is not written: the member keeps what it
//     had, it gets nothing new.
//
// Only what the resizer's tests need is transcribed: plaintext overriders.
// Image, command, args, label, annotation and field overriders are refused
// with an error (fieldOverrider is the only other one scaleplane's copy of
// the API has).
//
// The tests of the renderer itself are in render_cases_test.go.

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"

	jsonpatch "github.com/evanphx/json-patch/v5"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"

	clusterv1alpha1 "github.com/scaleplane/scaleplane/pkg/apis/cluster/v1alpha1"
	policyv1alpha1 "github.com/scaleplane/scaleplane/pkg/apis/policy/v1alpha1"
)

// implicitPriority is Karmada's util.ImplicitPriority.
type implicitPriority int

const (
	priorityMisMatch implicitPriority = iota
	priorityMatchAll
	priorityMatchLabelSelector
	priorityMatchName
)

// renderPolicy is an OverridePolicy or a ClusterOverridePolicy (scaleplane
// has no type for the latter; its spec is the same OverrideSpec).
type renderPolicy struct {
	name      string
	namespace string // empty for a ClusterOverridePolicy
	spec      policyv1alpha1.OverrideSpec
}

func fromOverridePolicies(ps []*policyv1alpha1.OverridePolicy) []renderPolicy {
	out := make([]renderPolicy, 0, len(ps))
	for _, p := range ps {
		out = append(out, renderPolicy{name: p.Name, namespace: p.Namespace, spec: p.Spec})
	}
	return out
}

// renderFailure is Karmada's override failing: the member gets nothing new.
type renderFailure struct {
	policy string // namespace/name, or the name of a ClusterOverridePolicy
	err    error
}

func (e *renderFailure) Error() string {
	return fmt.Sprintf("applying override policy %s: %v", e.policy, e.err)
}

// renderMember returns the workload member cluster gets from template:
// clusterPolicies (ClusterOverridePolicies) first, then the policies of the
// template's namespace (others are ignored, as Karmada lists by namespace).
// It also returns the names of the policies applied, in order (one entry
// per matching rule). An error is a *renderFailure.
func renderMember(template runtime.Object, cluster *clusterv1alpha1.Cluster, clusterPolicies, policies []renderPolicy) (*unstructured.Unstructured, []string, error) {
	raw, err := json.Marshal(template)
	if err != nil {
		return nil, nil, err
	}
	obj := &unstructured.Unstructured{}
	if err := obj.UnmarshalJSON(raw); err != nil {
		return nil, nil, err
	}
	var applied []string
	for _, scope := range []struct {
		list       []renderPolicy
		namespaced bool
	}{{clusterPolicies, false}, {policies, true}} {
		if scope.namespaced && obj.GetNamespace() == "" {
			continue
		}
		var list []renderPolicy
		for _, p := range scope.list {
			if scope.namespaced && p.namespace != obj.GetNamespace() {
				continue
			}
			list = append(list, p)
		}
		for _, po := range overridersFor(list, obj, cluster) {
			if err := applyOverriders(obj, po.overriders); err != nil {
				return nil, applied, &renderFailure{policy: po.id, err: err}
			}
			applied = append(applied, po.id)
		}
	}
	return obj, applied, nil
}

type policyOverriders struct {
	id         string
	overriders policyv1alpha1.Overriders
}

// overridersFor is getOverridersFromOverridePolicies.
func overridersFor(policies []renderPolicy, obj *unstructured.Unstructured, cluster *clusterv1alpha1.Cluster) []policyOverriders {
	var matching []renderPolicy
	for _, p := range policies {
		if len(p.spec.ResourceSelectors) == 0 || resourceMatchSelectors(obj, p.spec.ResourceSelectors) {
			matching = append(matching, p)
		}
	}
	prio := func(p renderPolicy) implicitPriority {
		if len(p.spec.ResourceSelectors) == 0 {
			return priorityMatchAll
		}
		return resourceMatchSelectorsPriority(obj, p.spec.ResourceSelectors)
	}
	sort.SliceStable(matching, func(i, j int) bool {
		pi, pj := prio(matching[i]), prio(matching[j])
		if pi != pj {
			return pi < pj
		}
		return matching[i].name < matching[j].name
	})
	var out []policyOverriders
	for _, p := range matching {
		rules := p.spec.OverrideRules
		if len(rules) == 0 {
			rules = []policyv1alpha1.RuleWithCluster{{TargetCluster: p.spec.TargetCluster, Overriders: p.spec.Overriders}}
		}
		id := p.name
		if p.namespace != "" {
			id = p.namespace + "/" + p.name
		}
		for _, r := range rules {
			if r.TargetCluster == nil || clusterMatches(cluster, *r.TargetCluster) {
				out = append(out, policyOverriders{id: id, overriders: r.Overriders})
			}
		}
	}
	return out
}

func resourceSelectorPriority(obj *unstructured.Unstructured, rs policyv1alpha1.ResourceSelector) implicitPriority {
	if obj.GetAPIVersion() != rs.APIVersion || obj.GetKind() != rs.Kind || (rs.Namespace != "" && obj.GetNamespace() != rs.Namespace) {
		return priorityMisMatch
	}
	if rs.Name != "" {
		if rs.Name == obj.GetName() {
			return priorityMatchName
		}
		return priorityMisMatch
	}
	if rs.LabelSelector == nil {
		return priorityMatchAll
	}
	s, err := metav1.LabelSelectorAsSelector(rs.LabelSelector)
	if err != nil {
		return priorityMisMatch
	}
	if s.Matches(labels.Set(obj.GetLabels())) {
		return priorityMatchLabelSelector
	}
	return priorityMisMatch
}

func resourceMatchSelectors(obj *unstructured.Unstructured, selectors []policyv1alpha1.ResourceSelector) bool {
	for _, rs := range selectors {
		if resourceSelectorPriority(obj, rs) > priorityMisMatch {
			return true
		}
	}
	return false
}

func resourceMatchSelectorsPriority(obj *unstructured.Unstructured, selectors []policyv1alpha1.ResourceSelector) implicitPriority {
	var p implicitPriority
	for _, rs := range selectors {
		p = max(p, resourceSelectorPriority(obj, rs))
	}
	return p
}

// clusterMatches is util.ClusterMatches without the field selector.
func clusterMatches(cluster *clusterv1alpha1.Cluster, a policyv1alpha1.ClusterAffinity) bool {
	if slices.Contains(a.ExcludeClusters, cluster.Name) {
		return false
	}
	if a.LabelSelector != nil {
		s, err := metav1.LabelSelectorAsSelector(a.LabelSelector)
		if err != nil || !s.Matches(labels.Set(cluster.GetLabels())) {
			return false
		}
	}
	return len(a.ClusterNames) == 0 || slices.Contains(a.ClusterNames, cluster.Name)
}

// jsonValue marshals as apiextensionsv1.JSON does (Karmada's type of a
// plaintext value): the raw bytes, or null when empty.
type jsonValue []byte

func (v jsonValue) MarshalJSON() ([]byte, error) {
	if len(v) > 0 {
		return v, nil
	}
	return []byte("null"), nil
}

// overrideOption is Karmada's JSON-patch operation.
type overrideOption struct {
	Op    string `json:"op"`
	Path  string `json:"path"`
	Value any    `json:"value,omitempty"`
}

// applyOverriders is applyPolicyOverriders for plaintext overriders.
func applyOverriders(obj *unstructured.Unstructured, o policyv1alpha1.Overriders) error {
	if len(o.FieldOverrider) > 0 {
		return errors.New("fieldOverrider is not transcribed in the test renderer")
	}
	ops := make([]overrideOption, 0, len(o.Plaintext))
	for _, p := range o.Plaintext {
		ops = append(ops, overrideOption{Op: string(p.Operator), Path: p.Path, Value: jsonValue(p.Value.Raw)})
	}
	patchJSON, err := json.Marshal(ops)
	if err != nil {
		return err
	}
	patch, err := jsonpatch.DecodePatch(patchJSON)
	if err != nil {
		return err
	}
	doc, err := obj.MarshalJSON()
	if err != nil {
		return err
	}
	out, err := patch.Apply(doc)
	if err != nil {
		return err
	}
	return obj.UnmarshalJSON(out)
}

// renderedDeployment decodes a rendered Deployment.
func renderedDeployment(obj *unstructured.Unstructured) (*appsv1.Deployment, error) {
	raw, err := obj.MarshalJSON()
	if err != nil {
		return nil, err
	}
	d := &appsv1.Deployment{}
	if err := json.Unmarshal(raw, d); err != nil {
		return nil, err
	}
	return d, nil
}

// asTemplate gives a Deployment read from a clientset its TypeMeta, as
// Karmada's resource template has it.
func asTemplate(d *appsv1.Deployment) *appsv1.Deployment {
	out := d.DeepCopy()
	out.APIVersion, out.Kind = "apps/v1", "Deployment"
	return out
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// resourcesEqual compares requirements by value (quantities by Cmp, nil
// and empty lists alike).
func resourcesEqual(a, b corev1.ResourceRequirements) bool {
	return listEqual(a.Requests, b.Requests) && listEqual(a.Limits, b.Limits)
}

func listEqual(a, b corev1.ResourceList) bool {
	if len(a) != len(b) {
		return false
	}
	for k, q := range a {
		o, ok := b[k]
		if !ok || q.Cmp(o) != 0 {
			return false
		}
	}
	return true
}

// quantityOf returns the quantity in l, or nil.
func quantityOf(l corev1.ResourceList, name corev1.ResourceName) *resource.Quantity {
	if q, ok := l[name]; ok {
		return &q
	}
	return nil
}
