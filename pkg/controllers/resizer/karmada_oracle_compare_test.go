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

// The Karmada rendering oracle's helpers: comparing quantities, containers
// and rendered Deployments, summaries for messages, and reading
// OverridePolicies' paths.

import (
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	clusterv1alpha1 "github.com/scaleplane/scaleplane/pkg/apis/cluster/v1alpha1"
	policyv1alpha1 "github.com/scaleplane/scaleplane/pkg/apis/policy/v1alpha1"
)

func memberReady(c *clusterv1alpha1.Cluster) (bool, int32) {
	r := meta.FindStatusCondition(c.Status.Conditions, clusterv1alpha1.ClusterConditionReady)
	if r == nil || r.Status != metav1.ConditionTrue || c.Status.NodeSummary == nil {
		return false, 0
	}
	return true, c.Status.NodeSummary.TotalNum
}

// effectiveRequest is the request the pods run with: the limit when only
// the limit is set (Kubernetes defaults it so).
func effectiveRequest(c *corev1.Container, name corev1.ResourceName) *resource.Quantity {
	if q := quantityOf(c.Resources.Requests, name); q != nil {
		return q
	}
	return quantityOf(c.Resources.Limits, name)
}

func managedEqual(a, b *corev1.Container, names []corev1.ResourceName) bool {
	if a == nil || b == nil {
		return a == b
	}
	for _, n := range names {
		if !quantityEq(a.Resources.Requests, b.Resources.Requests, n) || !quantityEq(a.Resources.Limits, b.Resources.Limits, n) {
			return false
		}
	}
	return true
}

func quantityEq(a, b corev1.ResourceList, name corev1.ResourceName) bool {
	return qEq(quantityOf(a, name), quantityOf(b, name))
}

func qEq(a, b *resource.Quantity) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return a.Cmp(*b) == 0
}

func qstr(q *resource.Quantity) string {
	if q == nil {
		return "<none>"
	}
	return q.String()
}

func qs(l corev1.ResourceList, name corev1.ResourceName) string { return qstr(quantityOf(l, name)) }

// sameOutsideMain tells whether two renders differ in container main's
// resources at most.
func sameOutsideMain(a, b *appsv1.Deployment) bool {
	strip := func(d *appsv1.Deployment) string {
		c := d.DeepCopy()
		if m := mainContainer(c); m != nil {
			m.Resources = corev1.ResourceRequirements{}
		}
		return string(must(json.Marshal(c)))
	}
	return strip(a) == strip(b)
}

func containerSummary(d *appsv1.Deployment) string {
	var parts []string
	for _, c := range d.Spec.Template.Spec.Containers {
		parts = append(parts, fmt.Sprintf("%s%v/%v", c.Name, shortList(c.Resources.Requests), shortList(c.Resources.Limits)))
	}
	return strings.Join(parts, " ")
}

func shortList(l corev1.ResourceList) string {
	if l == nil {
		return "-"
	}
	var parts []string
	for _, n := range sortedNames(l) {
		q := l[n]
		parts = append(parts, string(n)+"="+q.String())
	}
	return "{" + strings.Join(parts, ",") + "}"
}

// canClash tells whether a plaintext path of p is a managed resource of
// container idx, or a parent of one.
// canClash tells whether p's paths can meet what the AddonResizer writes in
// the container: a managed request or limit, or, where the template has no
// requests (limits) map, that map, which the resizer then adds whole and
// so wipes, or is wiped by, any value another policy adds into it.
func canClash(p *policyv1alpha1.OverridePolicy, idx int, tmpl corev1.ResourceRequirements, s settings) bool {
	base := containerPath(idx) + "/resources"
	var managed []string
	for _, n := range s.managed() {
		managed = append(managed, base+"/requests/"+escapePointer(string(n)), base+"/limits/"+escapePointer(string(n)))
	}
	if len(tmpl.Requests) == 0 {
		managed = append(managed, base+"/requests")
	}
	if len(tmpl.Limits) == 0 && s.setLimits {
		managed = append(managed, base+"/limits")
	}
	for _, path := range opPathList(p) {
		path = strings.TrimSuffix(path, "/")
		for _, m := range managed {
			if path == m || strings.HasPrefix(m, path+"/") || strings.HasPrefix(path, m+"/") {
				return true
			}
		}
	}
	return false
}

// addsWholeMap tells whether p's rule for member m adds a whole requests
// or limits map.
func addsWholeMap(p *policyv1alpha1.OverridePolicy, m string) bool {
	if p == nil {
		return false
	}
	for _, r := range p.Spec.OverrideRules {
		if r.TargetCluster == nil || !slices.Contains(r.TargetCluster.ClusterNames, m) {
			continue
		}
		for _, op := range r.Overriders.Plaintext {
			if strings.HasSuffix(op.Path, "/resources/requests") || strings.HasSuffix(op.Path, "/resources/limits") {
				return true
			}
		}
	}
	return false
}

func opPathList(p *policyv1alpha1.OverridePolicy) []string {
	rules := p.Spec.OverrideRules
	if len(rules) == 0 {
		rules = []policyv1alpha1.RuleWithCluster{{Overriders: p.Spec.Overriders}}
	}
	var out []string
	for _, r := range rules {
		for _, op := range r.Overriders.Plaintext {
			out = append(out, op.Path)
		}
	}
	return out
}

func opPaths(p *policyv1alpha1.OverridePolicy) string { return strings.Join(opPathList(p), " ") }

func mentions(msg, name string) bool {
	return regexp.MustCompile(`(^|[^A-Za-z0-9.-])` + regexp.QuoteMeta(name) + `($|[^A-Za-z0-9.-])`).MatchString(msg)
}

func condString(c *metav1.Condition) string {
	if c == nil {
		return "<none>"
	}
	return string(c.Status) + "/" + c.Reason
}

func policyByName(v *worldView, name string) *policyv1alpha1.OverridePolicy {
	for _, p := range v.policies {
		if p.Name == name {
			return p
		}
	}
	return nil
}

func copySet(m map[string]bool) map[string]bool {
	out := make(map[string]bool, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

func with(m map[string]bool, name string) map[string]bool {
	out := copySet(m)
	out[name] = true
	return out
}
