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
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/discovery/fake"
	clienttesting "k8s.io/client-go/testing"
	testingclock "k8s.io/utils/clock/testing"

	policyv1alpha1 "github.com/scaleplane/scaleplane/pkg/apis/policy/v1alpha1"
	scaleplanev1alpha1 "github.com/scaleplane/scaleplane/pkg/apis/scaleplane/v1alpha1"
)

func policyWorkload(containers ...corev1.Container) *workload {
	return &workload{
		kind: scaleplanev1alpha1.TargetKindDeployment, namespace: "ns", name: "metrics-server",
		template: &corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: containers}},
	}
}

func held(cpu, mem string) *corev1.ResourceRequirements {
	return &corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(mem)}}
}

func TestDesiredOverridePolicyOneRulePerMember(t *testing.T) {
	ar := &scaleplanev1alpha1.AddonResizer{ObjectMeta: metav1.ObjectMeta{Name: "ms", Namespace: "ns", UID: "u1"}}
	w := policyWorkload(
		corev1.Container{Name: "sidecar"},
		corev1.Container{Name: "main", Resources: memberBase},
	)
	members := []scaleplanev1alpha1.MemberClusterStatus{
		{Name: "small", Resources: held("130m", "53Mi")},
		{Name: "big", Resources: held("600m", "100Mi")},
		{Name: "new"}, // runs the template: no rule
	}
	p := desiredOverridePolicy(ar, w, 1, members)
	got, _ := json.Marshal(p.Spec)
	// The JSON Karmada reads (override_types.go, v1.18.2): rules in cluster
	// name order, per-key add operations on the second container, the
	// template's unmanaged gpu limit not touched.
	want := `{"resourceSelectors":[{"apiVersion":"apps/v1","kind":"Deployment","namespace":"ns","name":"metrics-server"}],"overrideRules":[` +
		`{"targetCluster":{"clusterNames":["big"]},"overriders":{"plaintext":[{"path":"/spec/template/spec/containers/1/resources/requests/cpu","operator":"add","value":"600m"},{"path":"/spec/template/spec/containers/1/resources/requests/memory","operator":"add","value":"100Mi"}]}},` +
		`{"targetCluster":{"clusterNames":["small"]},"overriders":{"plaintext":[{"path":"/spec/template/spec/containers/1/resources/requests/cpu","operator":"add","value":"130m"},{"path":"/spec/template/spec/containers/1/resources/requests/memory","operator":"add","value":"53Mi"}]}}],` +
		`"overriders":{}}`
	if string(got) != want {
		t.Errorf("spec:\n got %s\nwant %s", got, want)
	}
	if ref := metav1.GetControllerOf(p); ref == nil || ref.UID != "u1" || ref.Kind != "AddonResizer" || p.Name != "ms-resizer" {
		t.Errorf("owner: %+v name %s", ref, p.Name)
	}
	if desiredOverridePolicy(ar, w, 1, members[2:]) != nil {
		t.Error("no member with a size of its own must give no policy")
	}
}

func TestOverrideOpsAddWholeMapWhenTemplateHasNone(t *testing.T) {
	h := &corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("130m")},
		Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("130m")},
	}
	// The template has a gpu limit but no requests: requests is added as a
	// map, the cpu limit as a key next to the gpu.
	ops := overrideOps(corev1.ResourceRequirements{Limits: corev1.ResourceList{"example.com/gpu": resource.MustParse("1")}}, 0, h)
	got, _ := json.Marshal(ops)
	want := `[{"path":"/spec/template/spec/containers/0/resources/requests","operator":"add","value":{"cpu":"130m"}},{"path":"/spec/template/spec/containers/0/resources/limits/cpu","operator":"add","value":"130m"}]`
	if string(got) != want {
		t.Errorf("ops:\n got %s\nwant %s", got, want)
	}
}

func TestSpecEqualAsStored(t *testing.T) {
	a := policyv1alpha1.OverrideSpec{OverrideRules: []policyv1alpha1.RuleWithCluster{{Overriders: policyv1alpha1.Overriders{Plaintext: []policyv1alpha1.PlaintextOverrider{
		{Path: "/p", Operator: "add", Value: runtime.RawExtension{Raw: []byte(`{"cpu":"1","memory":"2"}`)}},
	}}}}}
	b := *a.DeepCopy()
	// The API server hands it back re-encoded.
	b.OverrideRules[0].Overriders.Plaintext[0].Value.Raw = []byte(`{ "memory": "2", "cpu": "1" }`)
	if !specEqual(a, b) {
		t.Error("the same value, spaced and ordered differently, must compare equal")
	}
	b.OverrideRules[0].Overriders.Plaintext[0].Value.Raw = []byte(`{"cpu":"2","memory":"2"}`)
	if specEqual(a, b) {
		t.Error("a different value must not compare equal")
	}
}

func TestForeignOverride(t *testing.T) {
	w := policyWorkload(corev1.Container{Name: "a"}, corev1.Container{Name: "main"})
	rule := func(path string) policyv1alpha1.OverrideSpec {
		return policyv1alpha1.OverrideSpec{OverrideRules: []policyv1alpha1.RuleWithCluster{{Overriders: policyv1alpha1.Overriders{Plaintext: []policyv1alpha1.PlaintextOverrider{{Path: path, Operator: "replace"}}}}}}
	}
	byName := []policyv1alpha1.ResourceSelector{{APIVersion: "apps/v1", Kind: "Deployment", Name: "metrics-server"}}
	for name, tc := range map[string]struct {
		spec policyv1alpha1.OverrideSpec
		sel  []policyv1alpha1.ResourceSelector
		want bool
	}{
		"same container's cpu":    {rule("/spec/template/spec/containers/1/resources/requests/cpu"), byName, true},
		"whole containers list":   {rule("/spec/template/spec/containers"), byName, true},
		"other container":         {rule("/spec/template/spec/containers/0/resources/requests/cpu"), byName, false},
		"image of same container": {rule("/spec/template/spec/containers/1/image"), byName, false},
		"no selectors: all":       {rule("/spec/template/spec/containers/1/resources"), nil, true},
		"other deployment":        {rule("/spec/template/spec/containers/1/resources"), []policyv1alpha1.ResourceSelector{{APIVersion: "apps/v1", Kind: "Deployment", Name: "x"}}, false},
		"label selector matches":  {rule("/spec/template/spec/containers/1/resources"), []policyv1alpha1.ResourceSelector{{APIVersion: "apps/v1", Kind: "Deployment", LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "ms"}}}}, true},
		"label selector misses":   {rule("/spec/template/spec/containers/1/resources"), []policyv1alpha1.ResourceSelector{{APIVersion: "apps/v1", Kind: "Deployment", LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "no"}}}}, false},
		"deprecated single rule":  {policyv1alpha1.OverrideSpec{Overriders: policyv1alpha1.Overriders{Plaintext: []policyv1alpha1.PlaintextOverrider{{Path: "/spec/template/spec/containers/1/resources/limits"}}}}, byName, true},
	} {
		p := &policyv1alpha1.OverridePolicy{Spec: tc.spec}
		p.Spec.ResourceSelectors = tc.sel
		// The template has no requests or limits map: the resizer adds them whole.
		mine := overriddenPaths(corev1.ResourceRequirements{}, 1, cpuSettings(true))
		if got := foreignOverride(p, w, map[string]string{"app": "ms"}, mine); got != tc.want {
			t.Errorf("%s: got %v, want %v", name, got, tc.want)
		}
	}
}

func cpuSettings(setLimits bool) settings {
	return resolve(&scaleplanev1alpha1.AddonResizerSpec{
		ContainerName: "main",
		Resources:     []scaleplanev1alpha1.ResourceScaling{{Name: corev1.ResourceCPU, Base: resource.MustParse("100m")}},
		SetLimits:     &setLimits,
	})
}

// Two policies that set different resources of one container do not meet
// where the template has the map they write into; where it has not, each
// adds the map whole, and the later one wipes the other's values (issue
// 35, defect 8).
func TestForeignOverrideOfOtherResources(t *testing.T) {
	w := policyWorkload(corev1.Container{Name: "a"}, corev1.Container{Name: "main"})
	other := func(path string) *policyv1alpha1.OverridePolicy {
		return &policyv1alpha1.OverridePolicy{Spec: policyv1alpha1.OverrideSpec{OverrideRules: []policyv1alpha1.RuleWithCluster{{
			Overriders: policyv1alpha1.Overriders{Plaintext: []policyv1alpha1.PlaintextOverrider{{Path: path, Operator: "add"}}}}}}}
	}
	withMaps := resources("cpu=100m", "memory=100Mi", "limit:memory=1Gi")
	for name, tc := range map[string]struct {
		tmpl      corev1.ResourceRequirements
		setLimits bool
		path      string
		want      bool
	}{
		"other's memory request, template has requests": {withMaps, false, "/spec/template/spec/containers/1/resources/requests/memory", false},
		"other's memory limit, limits not managed":      {withMaps, false, "/spec/template/spec/containers/1/resources/limits/memory", false},
		"other's cpu request":                           {withMaps, false, "/spec/template/spec/containers/1/resources/requests/cpu", true},
		"other adds the whole requests map":             {withMaps, false, "/spec/template/spec/containers/1/resources/requests", true},
		"other's memory request, template has none":     {corev1.ResourceRequirements{}, false, "/spec/template/spec/containers/1/resources/requests/memory", true},
		"other's memory limit, resizer adds limits map": {resources("cpu=100m"), true, "/spec/template/spec/containers/1/resources/limits/memory", true},
		"other's cpu limit, limits not managed":         {withMaps, false, "/spec/template/spec/containers/1/resources/limits/cpu", false},
	} {
		mine := overriddenPaths(tc.tmpl, 1, cpuSettings(tc.setLimits))
		if got := foreignOverride(other(tc.path), w, nil, mine); got != tc.want {
			t.Errorf("%s: got %v, want %v (mine %v)", name, got, tc.want, mine)
		}
	}
}

func TestFederationModeAndDetection(t *testing.T) {
	d := &fake.FakeDiscovery{Fake: &clienttesting.Fake{}}
	clk := testingclock.NewFakeClock(t0)
	det := newAPIDetector(d, clk)
	apis, err := det.apis(t.Context())
	if err != nil || apis.any() {
		t.Fatalf("plain cluster: %+v %v", apis, err)
	}
	auto := &scaleplanev1alpha1.AddonResizerSpec{}
	if federationOf(auto, apis) != scaleplanev1alpha1.FederationNone {
		t.Error("Auto on a plain cluster must be None")
	}
	// Karmada is installed: seen after the discovery interval, not before.
	d.Resources = []*metav1.APIResourceList{
		{GroupVersion: "cluster.karmada.io/v1alpha1"}, {GroupVersion: "policy.karmada.io/v1alpha1"}, {GroupVersion: "work.karmada.io/v1alpha2"},
	}
	if apis, _ = det.apis(t.Context()); apis.any() {
		t.Error("discovery must be remembered for its interval")
	}
	clk.Step(discoveryInterval)
	if apis, _ = det.apis(t.Context()); !apis.all() {
		t.Fatalf("Karmada served: %+v", apis)
	}
	if federationOf(auto, apis) != scaleplanev1alpha1.FederationKarmada {
		t.Error("Auto on Karmada must be Karmada")
	}
	if federationOf(&scaleplanev1alpha1.AddonResizerSpec{Federation: scaleplanev1alpha1.FederationNone}, apis) != scaleplanev1alpha1.FederationNone {
		t.Error("an explicit None must stay None")
	}
	if m := (karmadaAPIs{policy: true}).missing(); m != "[cluster.karmada.io/v1alpha1 work.karmada.io/v1alpha2]" {
		t.Errorf("missing: %s", m)
	}
}
