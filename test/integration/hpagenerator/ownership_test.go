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
	"context"
	"testing"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	lwsv1 "github.com/scaleplane/scaleplane/pkg/apis/leaderworkerset/v1"
	"github.com/scaleplane/scaleplane/test/integration/framework"
)

// TestPlainOwnerReferenceIsNotOurs: an HPA that another tool made for a
// LeaderWorkerSet, with a plain (not controller) owner reference to it as
// controllerutil.SetOwnerReference writes, is neither deleted (no policy)
// nor overwritten (a policy): HPAConflict instead. An HPA the generator made
// whose controller flag is cleared by hand is still its own (its field
// manager is in managedFields) and repaired — issue 18, item 1.
func TestPlainOwnerReferenceIsNotOurs(t *testing.T) {
	cp := framework.Get(t)
	ns := cp.CreateNamespace(t)
	ctx := context.Background()
	// -v=5: the generator logs each HPA event it enqueues a LeaderWorkerSet
	// for, the sign awaited below.
	m := framework.StartManager(t, cp.KubeconfigPath(), "hpa-generator", "-v=5")
	// Once the generator made this one, it runs (and serves /metrics).
	llm := createLWS(t, cp, leaderWorkerSet(ns, "llm", &lwsv1.ScalePolicy{MaxReplicas: 4, Metrics: []autoscalingv2.MetricSpec{cpuMetric(60)}}))
	waitHPA(t, cp, ns, "llm", generated(llm, 1, 4, 60))

	tool := createLWS(t, cp, leaderWorkerSet(ns, "tool", nil))
	theirs := &autoscalingv2.HorizontalPodAutoscaler{
		ObjectMeta: metav1.ObjectMeta{Name: "tool", Namespace: ns, OwnerReferences: []metav1.OwnerReference{{
			APIVersion: "leaderworkerset.x-k8s.io/v1", Kind: "LeaderWorkerSet", Name: "tool", UID: tool.UID,
		}}},
		Spec: autoscalingv2.HorizontalPodAutoscalerSpec{
			ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "leaderworkerset.x-k8s.io/v1", Kind: "LeaderWorkerSet", Name: "tool"},
			MinReplicas:    ptr.To[int32](2),
			MaxReplicas:    9,
			Metrics:        []autoscalingv2.MetricSpec{cpuMetric(40)},
		},
	}
	waitIdle(t, m)
	addsBefore := queueAdds(t, m)
	created, err := cp.KubeClient().AutoscalingV2().HorizontalPodAutoscalers(ns).Create(ctx, theirs, metav1.CreateOptions{FieldManager: "some-operator"})
	if err != nil {
		t.Fatal(err)
	}
	before := writes(t, m)
	// No policy: the HPA's event enqueues the LeaderWorkerSet, and once that
	// sync has run the HPA must still be there.
	waitLog(t, m, "HorizontalPodAutoscaler changed, enqueueing", ns+"/tool")
	waitIdle(t, m)
	if adds := queueAdds(t, m); adds <= addsBefore {
		t.Fatalf("the generator logged the tool's HPA but queued nothing (%v adds, %v before)", adds, addsBefore)
	}
	if _, err := cp.KubeClient().AutoscalingV2().HorizontalPodAutoscalers(ns).Get(ctx, "tool", metav1.GetOptions{}); err != nil {
		t.Fatalf("the tool's HPA, with a plain owner reference to a LeaderWorkerSet without a policy: %v", err)
	}

	// A policy: HPAConflict, and the HPA is left as the tool wrote it.
	updateLWS(t, cp, ns, "tool", func(l *lwsv1.LeaderWorkerSet) {
		l.Spec.ScalePolicy = &lwsv1.ScalePolicy{MaxReplicas: 4, Metrics: []autoscalingv2.MetricSpec{cpuMetric(60)}}
	})
	cp.WaitForEvent(t, ns, "tool", "HPAConflict", "not controlled by it", waitTimeout)
	got, err := cp.KubeClient().AutoscalingV2().HorizontalPodAutoscalers(ns).Get(ctx, "tool", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !equality.Semantic.DeepEqual(got.Spec, created.Spec) || !equality.Semantic.DeepEqual(got.OwnerReferences, created.OwnerReferences) {
		t.Errorf("the tool's HPA was changed: spec %+v, owners %+v", got.Spec, got.OwnerReferences)
	}
	if after := writes(t, m); after != before {
		t.Errorf("the generator wrote %v times to an HPA it does not control", after-before)
	}

	// The generator's own HPA, its controller flag cleared by hand: adopted
	// back.
	updateHPA(t, cp, ns, "llm", func(h *autoscalingv2.HorizontalPodAutoscaler) {
		h.OwnerReferences[0].Controller = ptr.To(false)
	})
	waitHPA(t, cp, ns, "llm", generated(llm, 1, 4, 60))
}
