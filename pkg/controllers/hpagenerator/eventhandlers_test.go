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

package hpagenerator

import (
	"testing"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubeinformers "k8s.io/client-go/informers"
	kubefake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2/ktesting"
	"k8s.io/utils/ptr"

	lwsv1 "github.com/scaleplane/scaleplane/pkg/apis/leaderworkerset/v1"
	"github.com/scaleplane/scaleplane/pkg/generated/clientset/versioned/fake"
	"github.com/scaleplane/scaleplane/pkg/generated/informers/externalversions"
)

func keys(names ...string) []cache.ObjectName {
	var out []cache.ObjectName
	for _, n := range names {
		out = append(out, cache.ObjectName{Namespace: ns, Name: n})
	}
	return out
}

func equalKeys(a, b []cache.ObjectName) bool {
	if len(a) != len(b) {
		return false
	}
	seen := map[cache.ObjectName]int{}
	for _, k := range a {
		seen[k]++
	}
	for _, k := range b {
		seen[k]--
	}
	for _, n := range seen {
		if n != 0 {
			return false
		}
	}
	return true
}

func TestHPAEventsEnqueue(t *testing.T) {
	ours := foreignHPA("web", lwsOwner("web", "uid-web"))
	h := newHarness(t)
	for _, tc := range []struct {
		name string
		hpa  *autoscalingv2.HorizontalPodAutoscaler
		want []cache.ObjectName
	}{
		{name: "controlled by a LeaderWorkerSet: it and the same name", hpa: foreignHPA("x", lwsOwner("web", "uid-web")), want: keys("web", "x")},
		{name: "no controller: the same name", hpa: foreignHPA("web"), want: keys("web")},
		{name: "controlled by a Deployment: the same name", hpa: foreignHPA("api", deploymentOwner("api")), want: keys("api")},
		{name: "owned but not controlled by a LeaderWorkerSet: the same name", hpa: foreignHPA("x", func() metav1.OwnerReference {
			r := lwsOwner("web", "uid-web")
			r.Controller = nil
			return r
		}()), want: keys("x")},
		{name: "targets a LeaderWorkerSet too", hpa: targeting(foreignHPA("custom"), "web"), want: keys("custom", "web")},
		{name: "ours, targeting it", hpa: targeting(ours.DeepCopy(), "web"), want: keys("web")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h.c.onHPAAdd(h.ctx, tc.hpa)
			if got := h.queued(); !equalKeys(got, tc.want) {
				t.Errorf("add enqueued %v, want %v", got, tc.want)
			}
			h.c.onHPADelete(h.ctx, tc.hpa)
			if got := h.queued(); !equalKeys(got, tc.want) {
				t.Errorf("delete enqueued %v, want %v", got, tc.want)
			}
			h.c.onHPADelete(h.ctx, cache.DeletedFinalStateUnknown{Key: "default/" + tc.hpa.Name, Obj: tc.hpa})
			if got := h.queued(); !equalKeys(got, tc.want) {
				t.Errorf("delete (tombstone) enqueued %v, want %v", got, tc.want)
			}
		})
	}
}

func TestHPAUpdatesEnqueue(t *testing.T) {
	ours := targeting(foreignHPA("web", lwsOwner("web", "uid-web")), "web")
	ours.Labels = map[string]string{ManagedByLabelKey: ManagedByLabelValue}
	h := newHarness(t)
	for _, tc := range []struct {
		name   string
		change func(*autoscalingv2.HorizontalPodAutoscaler)
		want   []cache.ObjectName
	}{
		{name: "status only", change: func(hpa *autoscalingv2.HorizontalPodAutoscaler) {
			hpa.Status.CurrentReplicas = 9
			hpa.Status.LastScaleTime = &metav1.Time{}
		}},
		{name: "managed fields only", change: func(hpa *autoscalingv2.HorizontalPodAutoscaler) {
			hpa.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "kube-controller-manager"}}
			hpa.Generation++
		}},
		{name: "resync", change: func(hpa *autoscalingv2.HorizontalPodAutoscaler) { hpa.ResourceVersion = "1" }},
		{name: "spec", change: func(hpa *autoscalingv2.HorizontalPodAutoscaler) { hpa.Spec.MaxReplicas = 100 }, want: keys("web")},
		{name: "label", change: func(hpa *autoscalingv2.HorizontalPodAutoscaler) { delete(hpa.Labels, ManagedByLabelKey) }, want: keys("web")},
		{name: "annotation", change: func(hpa *autoscalingv2.HorizontalPodAutoscaler) { hpa.Annotations = map[string]string{"a": "b"} }, want: keys("web")},
		{name: "owner reference removed", change: func(hpa *autoscalingv2.HorizontalPodAutoscaler) { hpa.OwnerReferences = nil }, want: keys("web")},
		{name: "retargeted", change: func(hpa *autoscalingv2.HorizontalPodAutoscaler) { hpa.Spec.ScaleTargetRef.Name = "other" }, want: keys("web", "other")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			updated := ours.DeepCopy()
			updated.ResourceVersion = "2"
			tc.change(updated)
			h.c.onHPAUpdate(h.ctx, ours, updated)
			if got := h.queued(); !equalKeys(got, tc.want) {
				t.Errorf("update enqueued %v, want %v", got, tc.want)
			}
		})
	}
}

func TestLeaderWorkerSetEventsEnqueue(t *testing.T) {
	old := lws("web", policy(nil, 5, cpuMetric(70)))
	h := newHarness(t)
	h.c.onLWSAdd(h.ctx, old)
	if got := h.queued(); !equalKeys(got, keys("web")) {
		t.Errorf("add enqueued %v", got)
	}
	for _, tc := range []struct {
		name   string
		change func(*lwsv1.LeaderWorkerSet)
		want   []cache.ObjectName
	}{
		{name: "status only", change: func(l *lwsv1.LeaderWorkerSet) { l.Status.ReadyReplicas = 3 }},
		{name: "replicas (set by the HPA itself)", change: func(l *lwsv1.LeaderWorkerSet) { l.Spec.Replicas = ptr.To[int32](4) }},
		{name: "resync", change: func(l *lwsv1.LeaderWorkerSet) { l.ResourceVersion = old.ResourceVersion }, want: keys("web")},
		{name: "policy", change: func(l *lwsv1.LeaderWorkerSet) { l.Spec.ScalePolicy.MaxReplicas = 6 }, want: keys("web")},
		{name: "policy removed", change: func(l *lwsv1.LeaderWorkerSet) { l.Spec.ScalePolicy = nil }, want: keys("web")},
		{name: "recreated", change: func(l *lwsv1.LeaderWorkerSet) { l.UID = "uid-web-2" }, want: keys("web")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			updated := old.DeepCopy()
			updated.ResourceVersion = "2"
			tc.change(updated)
			h.c.onLWSUpdate(h.ctx, old, updated)
			if got := h.queued(); !equalKeys(got, tc.want) {
				t.Errorf("update enqueued %v, want %v", got, tc.want)
			}
		})
	}
}

func TestManagedHPAsGauge(t *testing.T) {
	h := newHarness(t)
	ours := foreignHPA("web", lwsOwner("web", "uid-web"))
	h.c.onHPAAdd(h.ctx, ours)
	h.c.onHPAAdd(h.ctx, foreignHPA("api"))
	if got := h.c.managed.len(); got != 1 {
		t.Errorf("managed = %d, want 1", got)
	}
	if got := gaugeValue(t, "hpa_generator_managed_hpas"); got != 1 {
		t.Errorf("hpa_generator_managed_hpas = %v, want 1", got)
	}
	orphaned := ours.DeepCopy()
	orphaned.ResourceVersion = "2"
	orphaned.OwnerReferences = nil
	h.c.onHPAUpdate(h.ctx, ours, orphaned)
	if got := h.c.managed.len(); got != 0 {
		t.Errorf("managed after the owner was removed = %d, want 0", got)
	}
	h.c.onHPAUpdate(h.ctx, orphaned, ours)
	h.c.onHPADelete(h.ctx, cache.DeletedFinalStateUnknown{Key: "default/web", Obj: ours})
	if got := h.c.managed.len(); got != 0 {
		t.Errorf("managed after delete = %d, want 0", got)
	}
	h.queued()
}

func TestScaleTargetIndex(t *testing.T) {
	h := newHarness(t,
		targeting(foreignHPA("a"), "web"),
		func() *autoscalingv2.HorizontalPodAutoscaler {
			o := targeting(foreignHPA("b"), "web")
			o.Spec.ScaleTargetRef.APIVersion = "leaderworkerset.x-k8s.io/v2" // same group, another version
			return o
		}(),
		targeting(foreignHPA("c"), "other"),
		func() *autoscalingv2.HorizontalPodAutoscaler {
			o := targeting(foreignHPA("d"), "web")
			o.Spec.ScaleTargetRef.APIVersion = "a/b/c" // does not parse
			return o
		}(),
	)
	got := h.c.otherTargeting(h.ctx, lws("web", nil), nil)
	if len(got) != 2 || got[0] != "HorizontalPodAutoscaler a" || got[1] != "HorizontalPodAutoscaler b" {
		t.Errorf("HPAs targeting web = %q, want [HorizontalPodAutoscaler a, HorizontalPodAutoscaler b]", got)
	}
	if got := h.c.otherTargeting(h.ctx, lws("web", nil), foreignHPA("a")); len(got) != 1 || got[0] != "HorizontalPodAutoscaler b" {
		t.Errorf("HPAs other than a targeting web = %q, want [HorizontalPodAutoscaler b]", got)
	}
}

// A second controller built on the same shared informers (a restarted
// controller, integration tests) reuses the index instead of failing.
func TestNewControllerTwiceOnOneInformer(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	kube := kubefake.NewSimpleClientset()
	lwsInformer := externalversions.NewSharedInformerFactory(fake.NewSimpleClientset(), 0).Leaderworkerset().V1().LeaderWorkerSets()
	hpaInformer := kubeinformers.NewSharedInformerFactory(kube, 0).Autoscaling().V2().HorizontalPodAutoscalers()
	for i := 0; i < 2; i++ {
		c, err := NewController(ctx, Config{LeaderWorkerSets: lwsInformer, HPAs: hpaInformer, KubeClient: kube, Recorder: record.NewFakeRecorder(10), Workers: 1})
		if err != nil {
			t.Fatalf("NewController #%d: %v", i+1, err)
		}
		if c.Name() != "hpa-generator" {
			t.Errorf("Name() = %q", c.Name())
		}
	}
}
