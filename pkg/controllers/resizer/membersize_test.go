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
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	clusterv1alpha1 "github.com/scaleplane/scaleplane/pkg/apis/cluster/v1alpha1"
	scaleplanev1alpha1 "github.com/scaleplane/scaleplane/pkg/apis/scaleplane/v1alpha1"
)

// member returns a Cluster as Karmada's cluster status controller writes it
// (status.conditions Ready, status.nodeSummary; types.go, v1.18.2).
func member(name string, total, ready int32, readyStatus metav1.ConditionStatus) *clusterv1alpha1.Cluster {
	return &clusterv1alpha1.Cluster{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Status: clusterv1alpha1.ClusterStatus{
			Conditions:  []metav1.Condition{{Type: "Ready", Status: readyStatus, Reason: "ClusterReady"}},
			NodeSummary: &clusterv1alpha1.NodeSummary{TotalNum: total, ReadyNum: ready},
		},
	}
}

// memberSettings: cpu 100m + 10m per node, memory 50Mi + 1Mi per node.
func memberSettings(setLimits bool, up, down time.Duration) settings {
	return resolve(&scaleplanev1alpha1.AddonResizerSpec{
		ContainerName: "main",
		Resources: []scaleplanev1alpha1.ResourceScaling{
			{Name: corev1.ResourceCPU, Base: resource.MustParse("100m"), ExtraPerUnit: resource.MustParse("10m")},
			{Name: corev1.ResourceMemory, Base: resource.MustParse("50Mi"), ExtraPerUnit: resource.MustParse("1Mi")},
		},
		SetLimits:      ptr.To(setLimits),
		ScaleUpDelay:   &metav1.Duration{Duration: up},
		ScaleDownDelay: &metav1.Duration{Duration: down},
	})
}

var memberBase = corev1.ResourceRequirements{
	Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("50Mi")},
	Limits:   corev1.ResourceList{"example.com/gpu": resource.MustParse("1")},
}

func TestDecideMemberSizesFromTotalNodes(t *testing.T) {
	s := memberSettings(false, 0, 0)
	for _, tc := range []struct {
		total, ready int32
		cpu, mem     string
	}{
		{3, 3, "130m", "53Mi"},
		// totalNum, not readyNum: 10 NotReady nodes still count.
		{50, 40, "600m", "100Mi"},
	} {
		d := decideMember("m", nil, member("m", tc.total, tc.ready, metav1.ConditionTrue), memberBase, s, t0)
		if !d.changed || d.status.State != scaleplanev1alpha1.MemberSized || *d.status.Nodes != tc.total {
			t.Fatalf("%d nodes: got %+v", tc.total, d.status)
		}
		r := d.status.Resources
		if r.Requests.Cpu().String() != tc.cpu || r.Requests.Memory().String() != tc.mem || r.Limits != nil {
			t.Errorf("%d nodes: held %v, want requests cpu %s memory %s and no limits", tc.total, r, tc.cpu, tc.mem)
		}
	}
}

func TestDecideMemberStaleOrMissingKeepsItsSize(t *testing.T) {
	s := memberSettings(false, 0, 0)
	held := &corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("600m"), corev1.ResourceMemory: resource.MustParse("100Mi")}}
	prev := &scaleplanev1alpha1.MemberClusterStatus{Name: "m", Nodes: ptr.To[int32](50), Resources: held, State: scaleplanev1alpha1.MemberSized}
	for name, tc := range map[string]struct {
		cluster *clusterv1alpha1.Cluster
		state   scaleplanev1alpha1.MemberState
	}{
		// A NotReady member reports the last node summary it had, here 0.
		"not ready":       {member("m", 0, 0, metav1.ConditionFalse), scaleplanev1alpha1.MemberStale},
		"ready unknown":   {member("m", 3, 3, metav1.ConditionUnknown), scaleplanev1alpha1.MemberStale},
		"missing":         {nil, scaleplanev1alpha1.MemberUnknown},
		"no node summary": {&clusterv1alpha1.Cluster{Status: clusterv1alpha1.ClusterStatus{Conditions: []metav1.Condition{{Type: "Ready", Status: metav1.ConditionTrue}}}}, scaleplanev1alpha1.MemberUnknown},
	} {
		d := decideMember("m", prev, tc.cluster, memberBase, s, t0)
		if d.changed || d.status.State != tc.state || d.status.Resources.Requests.Cpu().String() != "600m" || *d.status.Nodes != 50 {
			t.Errorf("%s: got changed=%v %+v, want the held 600m kept, state %s", name, d.changed, d.status, tc.state)
		}
	}
	// A new member that is stale gets no size of its own: it runs the template.
	d := decideMember("n", nil, member("n", 0, 0, metav1.ConditionFalse), memberBase, s, t0)
	if d.status.Resources != nil || d.status.State != scaleplanev1alpha1.MemberStale {
		t.Errorf("new stale member: %+v", d.status)
	}
}

func TestDecideMemberDelaysSurviveInStatus(t *testing.T) {
	s := memberSettings(true, time.Minute, 0)
	d := decideMember("m", nil, member("m", 3, 3, metav1.ConditionTrue), memberBase, s, t0)
	if d.changed || d.status.State != scaleplanev1alpha1.MemberPostponed || d.requeue != time.Minute {
		t.Fatalf("first sight: %+v requeue %v, want postponed a minute", d.status, d.requeue)
	}
	// A restart reads the pending change back from status.
	prev := d.status.DeepCopy()
	d = decideMember("m", prev, member("m", 3, 3, metav1.ConditionTrue), memberBase, s, t0.Add(30*time.Second))
	if d.changed || d.requeue != 30*time.Second {
		t.Fatalf("half way: %+v requeue %v", d.status, d.requeue)
	}
	d = decideMember("m", d.status.DeepCopy(), member("m", 3, 3, metav1.ConditionTrue), memberBase, s, t0.Add(time.Minute))
	if !d.changed || d.status.PendingResize != nil || d.status.Resources.Limits.Cpu().String() != "130m" {
		t.Fatalf("due: %+v", d.status)
	}
	// Steady: nothing changes, nothing to write.
	again := decideMember("m", d.status.DeepCopy(), member("m", 3, 3, metav1.ConditionTrue), memberBase, s, t0.Add(2*time.Minute))
	if again.changed || again.status.LastChangeTime.Time != d.status.LastChangeTime.Time {
		t.Fatalf("steady: %+v", again.status)
	}
}

func TestDecideMemberThresholdBand(t *testing.T) {
	s := memberSettings(false, 0, 0)
	s.threshold = 10
	held := &corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("600m"), corev1.ResourceMemory: resource.MustParse("100Mi")}}
	prev := &scaleplanev1alpha1.MemberClusterStatus{Name: "m", Resources: held}
	// 52 nodes: 620m and 102Mi, within 10% of the held size.
	if d := decideMember("m", prev, member("m", 52, 52, metav1.ConditionTrue), memberBase, s, t0); d.changed {
		t.Errorf("within the band: changed to %v", d.status.Resources)
	}
	// 60 nodes: 700m, out of the band.
	if d := decideMember("m", prev, member("m", 60, 60, metav1.ConditionTrue), memberBase, s, t0); !d.changed || d.status.Resources.Requests.Cpu().String() != "700m" {
		t.Errorf("out of the band: %+v", d.status)
	}
}
