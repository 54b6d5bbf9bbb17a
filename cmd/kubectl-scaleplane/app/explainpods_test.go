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

package app

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"

	policyv1alpha1 "github.com/scaleplane/scaleplane/pkg/apis/policy/v1alpha1"
	scaleplanev1alpha1 "github.com/scaleplane/scaleplane/pkg/apis/scaleplane/v1alpha1"
)

func resources(cpu, memory, cpuLimit string) corev1.ResourceRequirements {
	r := corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(memory)}}
	if cpuLimit != "" {
		r.Limits = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpuLimit)}
	}
	return r
}

// apiPod is a pod of Deployment api on node, running its container api
// with spec resources and applied what its kubelet reports (nil: none).
func apiPod(name, node string, spec corev1.ResourceRequirements, applied *corev1.ResourceRequirements, conds ...corev1.PodCondition) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, Labels: map[string]string{"app": "api"}},
		Spec:       corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "api", Resources: spec}}},
		Status: corev1.PodStatus{
			Phase:      corev1.PodRunning,
			Conditions: conds,
			ContainerStatuses: []corev1.ContainerStatus{{
				Name: "api", State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}, Resources: applied,
			}},
		},
	}
}

func node(name string, ready corev1.ConditionStatus, since time.Time) *corev1.Node {
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{
			Type: corev1.NodeReady, Status: ready, Reason: "KubeletNotReady", LastTransitionTime: metav1.NewTime(since),
		}}},
	}
}

// 20 nodes, Exponential from 16: bucket 24, cpu 52m and memory 88Mi, held
// in place (setLimits false); the template still says 40m/88Mi, which the
// in-place decision does not look at. Seven pods, by name: a at the size; b
// resized, its kubelet not done (holds a place); c deferred by its kubelet
// (holds the second place); d not at size on a NotReady node (no place); e
// to be resized, but the two places are taken (paced), and its own cpu
// limit of 50m caps the 52m; f refused by the API server, as the
// controller's condition says; g not running yet.
func TestExplainAddonResizerPodsInPlace(t *testing.T) {
	now := time.Date(2026, 11, 27, 8, 0, 0, 0, time.UTC)
	ar := resizer("api-a", "api", scaleplanev1alpha1.AddonResizerStatus{
		ClusterSize: ptr.To[int32](20),
		InPlace: &scaleplanev1alpha1.InPlaceStatus{
			Resources: resources("52m", "88Mi", ""), Pods: 6, AtSize: 1,
		},
		Conditions: []metav1.Condition{
			{Type: scaleplanev1alpha1.ConditionUpToDate, Status: metav1.ConditionTrue, Reason: "Resized", Message: "Resized in place for cluster size 20 nodes"},
			{Type: scaleplanev1alpha1.ConditionInPlaceResized, Status: metav1.ConditionFalse, Reason: "ResizeRejected",
				Message: "The API server refused to resize pod api-f to requests cpu=52m,memory=88Mi (1 of 6 pods refused); not retried at this size: Pod QoS Class may not change as a result of resizing"},
		},
	})
	ar.Spec.UpdateMode = scaleplanev1alpha1.UpdateModeInPlace
	ar.Spec.SetLimits = ptr.To(false)
	d := apiDeployment("40m", "88Mi")
	d.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"app": "api"}}
	d.Spec.Template.Spec.Containers[0].Resources = resources("40m", "88Mi", "")
	old, size := resources("40m", "88Mi", ""), resources("52m", "88Mi", "")
	pending := apiPod("api-g", "", old, nil)
	pending.Status = corev1.PodStatus{Phase: corev1.PodPending}
	kube := []runtime.Object{
		d,
		node("node-1", corev1.ConditionTrue, now.Add(-time.Hour)), node("node-2", corev1.ConditionTrue, now.Add(-time.Hour)),
		node("node-3", corev1.ConditionFalse, now.Add(-30*time.Minute)),
		apiPod("api-a", "node-1", size, &size),
		apiPod("api-b", "node-1", size, &old, corev1.PodCondition{Type: corev1.PodResizeInProgress, Status: corev1.ConditionTrue}),
		apiPod("api-c", "node-2", size, &old, corev1.PodCondition{Type: corev1.PodResizePending, Status: corev1.ConditionTrue, Reason: corev1.PodReasonDeferred, Message: "Node didn't have enough resource: cpu"}),
		apiPod("api-d", "node-3", old, &old),
		apiPod("api-e", "node-1", resources("40m", "88Mi", "50m"), ptr.To(resources("40m", "88Mi", "50m"))),
		apiPod("api-f", "node-2", old, &old),
		pending,
	}
	golden(t, "explain-in-place.txt", run(t, now, kube, []runtime.Object{ar}, "explain", "addonresizer", "api-a"))
	golden(t, "explain-in-place.json", run(t, now, kube, []runtime.Object{ar}, "explain", "addonresizer", "api-a", "-o", "json"))
}

// Karmada mode: three member clusters. member1 (10 nodes, bucket 16) is
// held at its estimate by the OverridePolicy's rule (one operation per
// resource); member2 (30 nodes, bucket 36) has a scale-up pending for 5 of
// its 10 minutes and the policy still holds its older size (one operation
// with the whole map, the form for a template without requests); member3's
// Cluster is missing; someone replaced member4's cpu in the policy, which
// no longer sets the size held.
func TestExplainAddonResizerMemberClusters(t *testing.T) {
	now := time.Date(2026, 11, 27, 8, 0, 0, 0, time.UTC)
	held1, held2 := resources("48m", "72Mi", ""), resources("52m", "88Mi", "")
	ar := resizer("api-a", "api", scaleplanev1alpha1.AddonResizerStatus{
		Federation: scaleplanev1alpha1.FederationKarmada, MemberClusters: ptr.To[int32](4), SizedClusters: ptr.To[int32](2),
		OverridePolicy: "api-a-resizer",
		Clusters: []scaleplanev1alpha1.MemberClusterStatus{
			{Name: "member1", Nodes: ptr.To[int32](10), Resources: &held1, State: scaleplanev1alpha1.MemberSized, Message: "held at the recommendation for 10 nodes"},
			{Name: "member2", Nodes: ptr.To[int32](30), Resources: &held2, State: scaleplanev1alpha1.MemberPostponed,
				PendingResize: &scaleplanev1alpha1.PendingResize{Direction: scaleplanev1alpha1.ResizeUp, Since: metav1.NewTime(now.Add(-5 * time.Minute))},
				Message:       "scale-up to cpu=58m,memory=112Mi held by scaleUpDelay"},
			{Name: "member3", State: scaleplanev1alpha1.MemberUnknown, Message: "Cluster member3 not found"},
			{Name: "member4", Nodes: ptr.To[int32](5), Resources: &held1, State: scaleplanev1alpha1.MemberSized, Message: "held at the recommendation for 5 nodes"},
		},
		Conditions: []metav1.Condition{{Type: scaleplanev1alpha1.ConditionFederation, Status: metav1.ConditionTrue, Reason: "Karmada", Message: "sized per member cluster"}},
	})
	ar.Spec.Federation = scaleplanev1alpha1.FederationKarmada
	raw := func(s string) runtime.RawExtension { return runtime.RawExtension{Raw: []byte(s)} }
	policy := &policyv1alpha1.OverridePolicy{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "api-a-resizer"},
		Spec: policyv1alpha1.OverrideSpec{OverrideRules: []policyv1alpha1.RuleWithCluster{
			{TargetCluster: &policyv1alpha1.ClusterAffinity{ClusterNames: []string{"member1"}}, Overriders: policyv1alpha1.Overriders{Plaintext: []policyv1alpha1.PlaintextOverrider{
				{Path: "/spec/template/spec/containers/0/resources/requests/cpu", Operator: policyv1alpha1.OverriderOpAdd, Value: raw(`"48m"`)},
				{Path: "/spec/template/spec/containers/0/resources/requests/memory", Operator: policyv1alpha1.OverriderOpAdd, Value: raw(`"72Mi"`)},
			}}},
			{TargetCluster: &policyv1alpha1.ClusterAffinity{ClusterNames: []string{"member2"}}, Overriders: policyv1alpha1.Overriders{Plaintext: []policyv1alpha1.PlaintextOverrider{
				{Path: "/spec/template/spec/containers/0/resources/requests", Operator: policyv1alpha1.OverriderOpAdd, Value: raw(`{"cpu":"52m","memory":"88Mi"}`)},
			}}},
			{TargetCluster: &policyv1alpha1.ClusterAffinity{ClusterNames: []string{"member4"}}, Overriders: policyv1alpha1.Overriders{Plaintext: []policyv1alpha1.PlaintextOverrider{
				{Path: "/spec/template/spec/containers/0/resources/requests/cpu", Operator: policyv1alpha1.OverriderOpReplace, Value: raw(`"100m"`)},
				{Path: "/spec/template/spec/containers/0/resources/requests/memory", Operator: policyv1alpha1.OverriderOpAdd, Value: raw(`"72Mi"`)},
			}}},
		}},
	}
	kube := []runtime.Object{apiWithContainers("api")}
	golden(t, "explain-karmada.txt", run(t, now, kube, []runtime.Object{ar, policy}, "explain", "addonresizer", "api-a"))
	golden(t, "explain-karmada.json", run(t, now, kube, []runtime.Object{ar, policy}, "explain", "addonresizer", "api-a", "-o", "json"))
}

// apiWithContainers is Deployment default/api with the containers named.
func apiWithContainers(containers ...string) *appsv1.Deployment {
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "api"}}
	for _, c := range containers {
		d.Spec.Template.Spec.Containers = append(d.Spec.Template.Spec.Containers, corev1.Container{Name: c})
	}
	return d
}

// The rules address the container by its index: one written before a
// container was added in front of it (a refused write kept it) sets another
// container's resources, not the AddonResizer's (the Karmada rendering
// oracle found explain saying the member ran the size held).
func TestExplainMemberClusterRuleAtAnotherIndex(t *testing.T) {
	now := time.Date(2026, 11, 27, 8, 0, 0, 0, time.UTC)
	held := resources("48m", "72Mi", "")
	ar := resizer("api-a", "api", scaleplanev1alpha1.AddonResizerStatus{
		Federation: scaleplanev1alpha1.FederationKarmada, MemberClusters: ptr.To[int32](1), SizedClusters: ptr.To[int32](1),
		OverridePolicy: "api-a-resizer",
		Clusters:       []scaleplanev1alpha1.MemberClusterStatus{{Name: "member1", Nodes: ptr.To[int32](10), Resources: &held, State: scaleplanev1alpha1.MemberSized}},
	})
	ar.Spec.Federation = scaleplanev1alpha1.FederationKarmada
	policy := &policyv1alpha1.OverridePolicy{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "api-a-resizer"},
		Spec: policyv1alpha1.OverrideSpec{OverrideRules: []policyv1alpha1.RuleWithCluster{
			{TargetCluster: &policyv1alpha1.ClusterAffinity{ClusterNames: []string{"member1"}}, Overriders: policyv1alpha1.Overriders{Plaintext: []policyv1alpha1.PlaintextOverrider{
				{Path: "/spec/template/spec/containers/0/resources/requests/cpu", Operator: policyv1alpha1.OverriderOpAdd, Value: runtime.RawExtension{Raw: []byte(`"48m"`)}},
				{Path: "/spec/template/spec/containers/0/resources/requests/memory", Operator: policyv1alpha1.OverriderOpAdd, Value: runtime.RawExtension{Raw: []byte(`"72Mi"`)}},
			}}},
		}},
	}
	explain := func(containers ...string) ClusterExplanation {
		var e Explanation
		out := run(t, now, []runtime.Object{apiWithContainers(containers...)}, []runtime.Object{ar, policy}, "explain", "addonresizer", "api-a", "-o", "json")
		if err := json.Unmarshal([]byte(out), &e); err != nil || len(e.Clusters) != 1 {
			t.Fatalf("explain -o json: %v\n%s", err, out)
		}
		return e.Clusters[0]
	}
	if m := explain("api", "sidecar"); m.PolicyDiffers || !sameRequirements(m.OverridePolicy, &held) {
		t.Errorf("container api at index 0: OverridePolicy %s, differs %v; want %s", describeResources(m.OverridePolicy), m.PolicyDiffers, describeResources(&held))
	}
	if m := explain("sidecar", "api"); !m.PolicyDiffers || m.OverridePolicy != nil {
		t.Errorf("container api moved to index 1: OverridePolicy %s, differs %v; want none (the rule sets the sidecar's), differing", describeResources(m.OverridePolicy), m.PolicyDiffers)
	}
}

func TestNamesPod(t *testing.T) {
	for _, c := range []struct {
		msg, pod string
		want     bool
	}{
		{"refused to resize pod api-f to x", "api-f", true},
		{"refused to resize pod api-f", "api-f", true},
		{"refused to resize pod api-f2 to x", "api-f", false},
		{"pod api-f2 and pod api-f, both", "api-f", true},
		{"no pod here", "api-f", false},
	} {
		if got := namesPod(c.msg, c.pod); got != c.want {
			t.Errorf("namesPod(%q, %q) = %v; want %v", c.msg, c.pod, got, c.want)
		}
	}
}

// A pod the controller's InPlaceResized condition names as forbidden or
// conflicted holds no place of the pacing: the controller takes a place
// only for a resize that goes through, and that pod's next attempt waits
// for its backoff (podresize.go, resizePods). So with one pod mid-resize
// the next outdated pod is resized at the next sync, not paced.
func TestExplainAddonResizerPodsBackoffHoldsNoPlace(t *testing.T) {
	now := time.Date(2026, 11, 27, 8, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		reason, state, message string
	}{
		{"ResizeForbidden", "forbidden", "The API server forbade the resize of pod api-b to requests cpu=52m,memory=88Mi (1 of 3 pods); tried again with backoff, up to every 5m0s: forbidden: exceeded quota"},
		{"ResizeConflict", "conflicted", "The resize of pod api-b to requests cpu=52m,memory=88Mi met 5 conflicts in a row; tried again with backoff, up to every 5m0s"},
	} {
		t.Run(c.state, func(t *testing.T) {
			ar := resizer("api-a", "api", scaleplanev1alpha1.AddonResizerStatus{
				ClusterSize: ptr.To[int32](20),
				InPlace:     &scaleplanev1alpha1.InPlaceStatus{Resources: resources("52m", "88Mi", ""), Pods: 3},
				Conditions: []metav1.Condition{{Type: scaleplanev1alpha1.ConditionInPlaceResized, Status: metav1.ConditionFalse,
					Reason: c.reason, Message: c.message}},
			})
			ar.Spec.UpdateMode = scaleplanev1alpha1.UpdateModeInPlace
			ar.Spec.SetLimits = ptr.To(false)
			d := apiDeployment("40m", "88Mi")
			d.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"app": "api"}}
			old, size := resources("40m", "88Mi", ""), resources("52m", "88Mi", "")
			kube := []runtime.Object{
				d, node("node-1", corev1.ConditionTrue, now.Add(-time.Hour)),
				apiPod("api-a", "node-1", size, &old, corev1.PodCondition{Type: corev1.PodResizeInProgress, Status: corev1.ConditionTrue}),
				apiPod("api-b", "node-1", old, &old),
				apiPod("api-c", "node-1", old, &old),
			}
			var e Explanation
			if err := json.Unmarshal([]byte(run(t, now, kube, []runtime.Object{ar}, "explain", "addonresizer", "api-a", "-o", "json")), &e); err != nil {
				t.Fatal(err)
			}
			want := map[string]struct {
				state string
				paced bool
			}{"api-a": {"resizing", false}, "api-b": {c.state, false}, "api-c": {"outdated", false}}
			for _, p := range e.Pods {
				w := want[p.Name]
				if p.State != w.state || p.Paced != w.paced {
					t.Errorf("pod %s: state %s, paced %v (%s); want state %s, paced %v", p.Name, p.State, p.Paced, p.Next, w.state, w.paced)
				}
			}
			if got := e.Pods[2].Next; !strings.HasPrefix(got, "resized at the next sync") {
				t.Errorf("pod api-c: next %q; want it resized at the next sync", got)
			}
			if got := e.Pods[1].Next; !strings.Contains(got, "holds no place") {
				t.Errorf("pod api-b: next %q; want it to say it holds no place", got)
			}
		})
	}
}

// Without an OverridePolicy (its write refused), explain does not say the
// members are held by one: it says none holds them, and why (issue 35,
// defect 7).
func TestExplainKarmadaWithoutOverridePolicy(t *testing.T) {
	now := time.Date(2026, 11, 27, 8, 0, 0, 0, time.UTC)
	held := resources("48m", "72Mi", "")
	ar := resizer("api-a", "api", scaleplanev1alpha1.AddonResizerStatus{
		Federation: scaleplanev1alpha1.FederationKarmada, MemberClusters: ptr.To[int32](2), SizedClusters: ptr.To[int32](0),
		Clusters: []scaleplanev1alpha1.MemberClusterStatus{
			{Name: "member1", Nodes: ptr.To[int32](10), Resources: &held, State: scaleplanev1alpha1.MemberSized, Message: "Sized for 10 nodes; not applied"},
			{Name: "member2", Nodes: ptr.To[int32](10), Resources: &held, State: scaleplanev1alpha1.MemberSized, Message: "Sized for 10 nodes; not applied"},
		},
		Conditions: []metav1.Condition{{Type: scaleplanev1alpha1.ConditionUpToDate, Status: metav1.ConditionFalse, Reason: "OverridePolicyFailed", Message: "forbidden"}},
	})
	ar.Spec.Federation = scaleplanev1alpha1.FederationKarmada
	kube := []runtime.Object{&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "api"}}}
	out := run(t, now, kube, []runtime.Object{ar}, "explain", "addonresizer", "api-a")
	if strings.Contains(out, "by OverridePolicy <none>") || !strings.Contains(out, "no OverridePolicy holds a size") || !strings.Contains(out, "OverridePolicyFailed: forbidden") {
		t.Errorf("explain without an OverridePolicy:\n%s", out)
	}
}
