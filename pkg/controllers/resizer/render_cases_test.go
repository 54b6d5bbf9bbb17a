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

// The tests of the Karmada renderer itself (render_test.go): the template
// alone, the order and targets of policies, cluster affinity, the JSON patch
// semantics and the shape of the resizer's own OverridePolicy, with their
// fixtures.

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	clusterv1alpha1 "github.com/scaleplane/scaleplane/pkg/apis/cluster/v1alpha1"
	policyv1alpha1 "github.com/scaleplane/scaleplane/pkg/apis/policy/v1alpha1"
)

// Tests of the renderer itself.

func renderTemplate() *appsv1.Deployment {
	d := deployment(addonName, resources("cpu=100m", "memory=100Mi", "limit:cpu=1"))
	d.Labels = map[string]string{"team": "obs"}
	return asTemplate(d)
}

func op(verb policyv1alpha1.OverriderOperator, path string, value any) policyv1alpha1.PlaintextOverrider {
	o := policyv1alpha1.PlaintextOverrider{Path: path, Operator: verb}
	if value != nil {
		raw, _ := json.Marshal(value)
		o.Value = runtime.RawExtension{Raw: raw}
	}
	return o
}

func byName(name string) []policyv1alpha1.ResourceSelector {
	return []policyv1alpha1.ResourceSelector{{APIVersion: "apps/v1", Kind: "Deployment", Namespace: ns, Name: name}}
}

func byLabel(k, v string) []policyv1alpha1.ResourceSelector {
	return []policyv1alpha1.ResourceSelector{{APIVersion: "apps/v1", Kind: "Deployment", LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{k: v}}}}
}

func rule(clusters []string, ops ...policyv1alpha1.PlaintextOverrider) policyv1alpha1.RuleWithCluster {
	r := policyv1alpha1.RuleWithCluster{Overriders: policyv1alpha1.Overriders{Plaintext: ops}}
	if clusters != nil {
		r.TargetCluster = &policyv1alpha1.ClusterAffinity{ClusterNames: clusters}
	}
	return r
}

func nsPolicy(name string, sel []policyv1alpha1.ResourceSelector, rules ...policyv1alpha1.RuleWithCluster) renderPolicy {
	return renderPolicy{name: name, namespace: ns, spec: policyv1alpha1.OverrideSpec{ResourceSelectors: sel, OverrideRules: rules}}
}

const mainCPU = "/spec/template/spec/containers/1/resources/requests/cpu"

// mainOf returns container "main" of a rendered Deployment.
func mainOf(t *testing.T, obj *unstructured.Unstructured) corev1.Container {
	t.Helper()
	d, err := renderedDeployment(obj)
	if err != nil {
		t.Fatal(err)
	}
	return *containerOf(t, &d.Spec.Template)
}

func renderOK(t *testing.T, cluster string, cops, ops []renderPolicy) (corev1.Container, []string) {
	t.Helper()
	obj, applied, err := renderMember(renderTemplate(), &clusterv1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: cluster}}, cops, ops)
	if err != nil {
		t.Fatalf("render for %s: %v", cluster, err)
	}
	return mainOf(t, obj), applied
}

func TestRenderNoPolicyIsTheTemplate(t *testing.T) {
	obj, applied, err := renderMember(renderTemplate(), &clusterv1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: "a"}}, nil, nil)
	if err != nil || len(applied) != 0 {
		t.Fatalf("render: %v, applied %v", err, applied)
	}
	d, err := renderedDeployment(obj)
	if err != nil {
		t.Fatal(err)
	}
	want := renderTemplate()
	if got, _ := json.Marshal(d); string(got) != string(must(json.Marshal(want))) {
		t.Errorf("rendered\n%s\nwant the template\n%s", got, must(json.Marshal(want)))
	}
}

func TestRenderOrderAndTargets(t *testing.T) {
	cop := []renderPolicy{{name: "platform", spec: policyv1alpha1.OverrideSpec{OverrideRules: []policyv1alpha1.RuleWithCluster{rule(nil, op("replace", mainCPU, "1"))}}}}
	ops := []renderPolicy{
		// By name (highest priority), named "a-..." and "z-...": name order.
		nsPolicy("z-name", byName(addonName), rule([]string{"big"}, op("add", mainCPU, "600m"))),
		nsPolicy("a-name", byName(addonName), rule([]string{"big", "small"}, op("add", mainCPU, "300m"))),
		// By label: before every by-name policy, whatever its name.
		nsPolicy("zz-label", byLabel("team", "obs"), rule(nil, op("add", mainCPU, "200m"))),
		// No selector: matches all, the lowest priority.
		nsPolicy("zzz-all", nil, rule(nil, op("add", mainCPU, "150m"))),
		// A label that does not match, and another namespace: never applied.
		nsPolicy("b-miss", byLabel("team", "other"), rule(nil, op("add", mainCPU, "7"))),
		{name: "elsewhere", namespace: "other", spec: policyv1alpha1.OverrideSpec{OverrideRules: []policyv1alpha1.RuleWithCluster{rule(nil, op("add", mainCPU, "8"))}}},
	}
	for cluster, want := range map[string]struct {
		cpu     string
		applied string
	}{
		"big":   {"600m", "platform kube-system/zzz-all kube-system/zz-label kube-system/a-name kube-system/z-name"},
		"small": {"300m", "platform kube-system/zzz-all kube-system/zz-label kube-system/a-name"},
		"other": {"200m", "platform kube-system/zzz-all kube-system/zz-label"},
	} {
		c, applied := renderOK(t, cluster, cop, ops)
		mustQuantity(t, c.Resources.Requests, corev1.ResourceCPU, want.cpu)
		if got := strings.Join(applied, " "); got != want.applied {
			t.Errorf("%s: applied %s; want %s", cluster, got, want.applied)
		}
	}
	// Without the namespace's policies the ClusterOverridePolicy holds.
	c, _ := renderOK(t, "big", cop, nil)
	mustQuantity(t, c.Resources.Requests, corev1.ResourceCPU, "1")
}

func TestRenderClusterAffinity(t *testing.T) {
	ex := nsPolicy("ex", byName(addonName), policyv1alpha1.RuleWithCluster{
		TargetCluster: &policyv1alpha1.ClusterAffinity{ExcludeClusters: []string{"b"}},
		Overriders:    policyv1alpha1.Overriders{Plaintext: []policyv1alpha1.PlaintextOverrider{op("add", mainCPU, "300m")}},
	})
	c, _ := renderOK(t, "a", nil, []renderPolicy{ex})
	mustQuantity(t, c.Resources.Requests, corev1.ResourceCPU, "300m")
	c, _ = renderOK(t, "b", nil, []renderPolicy{ex})
	mustQuantity(t, c.Resources.Requests, corev1.ResourceCPU, "100m")

	// The deprecated spec.targetCluster / spec.overriders, used when
	// overrideRules is empty.
	old := renderPolicy{name: "old", namespace: ns, spec: policyv1alpha1.OverrideSpec{
		TargetCluster: &policyv1alpha1.ClusterAffinity{ClusterNames: []string{"a"}},
		Overriders:    policyv1alpha1.Overriders{Plaintext: []policyv1alpha1.PlaintextOverrider{op("add", mainCPU, "400m")}},
	}}
	c, _ = renderOK(t, "a", nil, []renderPolicy{old})
	mustQuantity(t, c.Resources.Requests, corev1.ResourceCPU, "400m")
	c, _ = renderOK(t, "b", nil, []renderPolicy{old})
	mustQuantity(t, c.Resources.Requests, corev1.ResourceCPU, "100m")
}

func TestRenderJSONPatchSemantics(t *testing.T) {
	base := "/spec/template/spec/containers/1/resources"
	for name, tc := range map[string]struct {
		ops     []policyv1alpha1.PlaintextOverrider
		wantErr bool
		check   func(corev1.Container)
	}{
		"add sets a present member": {ops: []policyv1alpha1.PlaintextOverrider{op("add", base+"/requests/cpu", "48m")}, check: func(c corev1.Container) {
			mustQuantity(t, c.Resources.Requests, corev1.ResourceCPU, "48m")
			mustQuantity(t, c.Resources.Requests, corev1.ResourceMemory, "100Mi")
		}},
		"add sets a missing member": {ops: []policyv1alpha1.PlaintextOverrider{op("add", base+"/limits/memory", "1Gi")}, check: func(c corev1.Container) {
			mustQuantity(t, c.Resources.Limits, corev1.ResourceMemory, "1Gi")
			mustQuantity(t, c.Resources.Limits, corev1.ResourceCPU, "1")
		}},
		"replace of a missing member fails":   {ops: []policyv1alpha1.PlaintextOverrider{op("replace", base+"/limits/memory", "1Gi")}, wantErr: true},
		"add under a missing map fails":       {ops: []policyv1alpha1.PlaintextOverrider{op("add", "/spec/template/spec/containers/0/resources/limits/cpu", "1")}, wantErr: true},
		"an index out of range fails":         {ops: []policyv1alpha1.PlaintextOverrider{op("add", "/spec/template/spec/containers/2/resources/requests/cpu", "1")}, wantErr: true},
		"remove of a missing member fails":    {ops: []policyv1alpha1.PlaintextOverrider{op("remove", base+"/limits/memory", nil)}, wantErr: true},
		"one failing op fails the whole rule": {ops: []policyv1alpha1.PlaintextOverrider{op("add", base+"/requests/cpu", "48m"), op("replace", base+"/limits/memory", "1Gi")}, wantErr: true},
		"a whole map replaces the old one": {ops: []policyv1alpha1.PlaintextOverrider{op("add", base+"/requests", map[string]string{"cpu": "48m"})}, check: func(c corev1.Container) {
			mustQuantity(t, c.Resources.Requests, corev1.ResourceCPU, "48m")
			if _, ok := c.Resources.Requests[corev1.ResourceMemory]; ok {
				t.Error("memory survived a whole-map add")
			}
		}},
		"remove drops a member": {ops: []policyv1alpha1.PlaintextOverrider{op("remove", base+"/limits/cpu", nil)}, check: func(c corev1.Container) {
			if _, ok := c.Resources.Limits[corev1.ResourceCPU]; ok {
				t.Error("limit not removed")
			}
		}},
		"an escaped pointer token": {ops: []policyv1alpha1.PlaintextOverrider{op("add", base+"/limits/nvidia.com~1gpu", "1")}, check: func(c corev1.Container) {
			mustQuantity(t, c.Resources.Limits, "nvidia.com/gpu", "1")
		}},
	} {
		t.Run(name, func(t *testing.T) {
			p := nsPolicy("p", byName(addonName), rule([]string{"a"}, tc.ops...))
			obj, _, err := renderMember(renderTemplate(), &clusterv1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: "a"}}, nil, []renderPolicy{p})
			if tc.wantErr {
				var f *renderFailure
				if !errors.As(err, &f) || f.policy != ns+"/p" {
					t.Fatalf("err %v; want a failure of policy p", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			tc.check(mainOf(t, obj))
		})
	}
}

// TestRenderResizerPolicyShape applies an OverridePolicy of the shape the
// resizer writes (docs/resizer.md, "The OverridePolicy": one rule per
// member, "add" per resource where the template has the map, the whole map
// where it has none) to templates with and without the requests map: each
// member gets its size, the rest of the template flows unchanged.
func TestRenderResizerPolicyShape(t *testing.T) {
	reqs := "/spec/template/spec/containers/1/resources/requests"
	for name, tc := range map[string]struct {
		tmpl       corev1.ResourceRequirements
		big, small []policyv1alpha1.PlaintextOverrider
	}{
		"with requests": {
			tmpl:  resources("cpu=100m", "limit:nvidia.com/gpu=1"),
			big:   []policyv1alpha1.PlaintextOverrider{op("add", reqs+"/cpu", "600m"), op("add", reqs+"/memory", "100Mi")},
			small: []policyv1alpha1.PlaintextOverrider{op("add", reqs+"/cpu", "130m"), op("add", reqs+"/memory", "53Mi")},
		},
		"without requests": {
			tmpl:  resources("limit:nvidia.com/gpu=1"),
			big:   []policyv1alpha1.PlaintextOverrider{op("add", reqs, map[string]string{"cpu": "600m", "memory": "100Mi"})},
			small: []policyv1alpha1.PlaintextOverrider{op("add", reqs, map[string]string{"cpu": "130m", "memory": "53Mi"})},
		},
	} {
		t.Run(name, func(t *testing.T) {
			d := asTemplate(deployment(addonName, tc.tmpl))
			p := nsPolicy("ar-resizer", byName(addonName), rule([]string{"big"}, tc.big...), rule([]string{"small"}, tc.small...))
			for cluster, held := range map[string]corev1.ResourceRequirements{
				"big":   resources("cpu=600m", "memory=100Mi"),
				"small": resources("cpu=130m", "memory=53Mi"),
				"other": {},
			} {
				obj, _, err := renderMember(d, &clusterv1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: cluster}}, nil, []renderPolicy{p})
				if err != nil {
					t.Fatalf("%s: %v", cluster, err)
				}
				rd, err := renderedDeployment(obj)
				if err != nil {
					t.Fatal(err)
				}
				want := tc.tmpl.DeepCopy()
				for k, q := range held.Requests {
					if want.Requests == nil {
						want.Requests = corev1.ResourceList{}
					}
					want.Requests[k] = q
				}
				if c := containerOf(t, &rd.Spec.Template); !resourcesEqual(c.Resources, *want) {
					t.Errorf("%s: %v; want %v", cluster, c.Resources, *want)
				}
				if side := rd.Spec.Template.Spec.Containers[0]; !resourcesEqual(side.Resources, resources("cpu=5m")) {
					t.Errorf("%s: the sidecar changed: %v", cluster, side.Resources)
				}
			}
		})
	}
}
