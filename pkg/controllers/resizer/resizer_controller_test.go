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
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	scaleplanev1alpha1 "github.com/scaleplane/scaleplane/pkg/apis/scaleplane/v1alpha1"
)

var deploymentsResource = schema.GroupResource{Group: "apps", Resource: "deployments"}

// At 10 nodes the estimate is cpu 100m + 10 × 10m = 200m and memory
// 100Mi + 10 × 10Mi = 200Mi.
func TestNodeProportionalResizes(t *testing.T) {
	h := newHarness(t, addonResizer("ar"), deployment(addonName, resources("cpu=100m", "memory=100Mi", "limit:cpu=100m", "limit:memory=100Mi")))
	h.setNodes(10)
	if d := h.syncAt(t0, "ar"); d != 0 {
		t.Errorf("requeue after %v; want none", d)
	}

	patches := h.patches()
	if len(patches) != 1 {
		t.Fatalf("%d patches; want 1", len(patches))
	}
	p := decodePatch(t, patches[0])
	if patches[0].GetName() != addonName || patches[0].GetResource().Resource != "deployments" {
		t.Errorf("patched %s %s", patches[0].GetResource(), patches[0].GetName())
	}
	if p.Metadata.ResourceVersion != "7" {
		t.Errorf("patch resourceVersion %q; want the one read, 7", p.Metadata.ResourceVersion)
	}
	if cs := p.Spec.Template.Spec.Containers; len(cs) != 1 || cs[0].Name != containerName {
		t.Fatalf("patch containers %+v; want only %q", cs, containerName)
	}
	got := h.deploymentResources(addonName)
	for _, list := range []corev1.ResourceList{got.Requests, got.Limits} {
		mustQuantity(t, list, corev1.ResourceCPU, "200m")
		mustQuantity(t, list, corev1.ResourceMemory, "200Mi")
	}

	ar := h.get("ar")
	if ar.Status.ClusterSize == nil || *ar.Status.ClusterSize != 10 {
		t.Errorf("status clusterSize %v; want 10", ar.Status.ClusterSize)
	}
	if r := ar.Status.Recommendation; r == nil {
		t.Errorf("no recommendation")
	} else {
		mustQuantity(t, r.Requests, corev1.ResourceCPU, "200m")
		mustQuantity(t, r.Limits, corev1.ResourceMemory, "200Mi")
	}
	if ar.Status.LastChangeTime == nil || !ar.Status.LastChangeTime.Time.Equal(t0) {
		t.Errorf("lastChangeTime %v; want %v", ar.Status.LastChangeTime, t0)
	}
	if ar.Status.ObservedGeneration != 1 || ar.Status.PendingResize != nil {
		t.Errorf("observedGeneration %d, pendingResize %+v", ar.Status.ObservedGeneration, ar.Status.PendingResize)
	}
	h.expectCondition("ar", scaleplanev1alpha1.ConditionTargetFound, metav1.ConditionTrue, reasonFound)
	h.expectCondition("ar", scaleplanev1alpha1.ConditionContainerFound, metav1.ConditionTrue, reasonFound)
	h.expectCondition("ar", scaleplanev1alpha1.ConditionUpToDate, metav1.ConditionTrue, reasonResized)
	if c := h.condition("ar", scaleplanev1alpha1.ConditionMetricsAvailable); c != nil {
		t.Errorf("MetricsAvailable set for source APIServer: %+v", c)
	}
	events := h.expectEvents("Normal Resized")
	want := `Resized container "main" of Deployment kube-system/addon: cpu request 100m -> 200m, limit 100m -> 200m; memory request 100Mi -> 200Mi, limit 100Mi -> 200Mi; cluster size 10 nodes (NodeProportional)`
	if len(events) == 1 && !strings.Contains(events[0], want) {
		t.Errorf("event %q; want it to say %q", events[0], want)
	}

	// Steady state: no write at all.
	target, status := h.writes()
	h.syncAt(t0.Add(time.Minute), "ar")
	if t2, s2 := h.writes(); t2 != target || s2 != status {
		t.Errorf("steady state wrote %d target and %d status writes", t2-target, s2-status)
	}
	h.expectEvents()
}

// KEP-5546: the containers of every non-terminal pod, init and ephemeral
// ones included, but not those of the target's own pods.
func TestContainerProportionalExcludesTargetPods(t *testing.T) {
	h := newHarness(t, addonResizer("ar", withMode(scaleplanev1alpha1.ContainerProportional)), deployment(addonName, resources()))
	addon := map[string]string{addonLabel: addonName}
	withInit := pod("apps", "with-init", corev1.PodRunning, nil, 1)
	withInit.Spec.InitContainers = []corev1.Container{{Name: "init"}}
	withInit.Spec.EphemeralContainers = []corev1.EphemeralContainer{{EphemeralContainerCommon: corev1.EphemeralContainerCommon{Name: "debug"}}}
	h.pods = []*corev1.Pod{
		withInit, // 3
		pod("apps", "a", corev1.PodRunning, nil, 2),                                // 2
		pod("apps", "b", corev1.PodPending, nil, 1),                                // 1
		pod("apps", "done", corev1.PodSucceeded, nil, 4),                           // terminal
		pod("apps", "failed", corev1.PodFailed, nil, 4),                            // terminal
		pod(ns, "addon-1", corev1.PodRunning, addon, 2),                            // the target's
		pod(ns, "addon-2", corev1.PodRunning, addon, 2),                            // the target's
		pod(ns, "dns", corev1.PodRunning, map[string]string{addonLabel: "dns"}, 1), // 1
		pod("apps", "addon-lookalike", corev1.PodRunning, addon, 3),                // 3: other namespace
	}
	h.recount()
	h.syncAt(t0, "ar")
	ar := h.get("ar")
	if ar.Status.ClusterSize == nil || *ar.Status.ClusterSize != 10 {
		t.Fatalf("cluster size %v; want 10", ar.Status.ClusterSize)
	}
	got := h.deploymentResources(addonName)
	mustQuantity(t, got.Requests, corev1.ResourceCPU, "200m")
	mustQuantity(t, got.Limits, corev1.ResourceMemory, "200Mi")
	events := h.expectEvents("Normal Resized")
	if len(events) == 1 && !strings.Contains(events[0], "cluster size 10 containers (ContainerProportional)") {
		t.Errorf("event %q does not give the size and mode", events[0])
	}
}

func TestEachTargetKindIsPatched(t *testing.T) {
	for _, tc := range []struct {
		kind     scaleplanev1alpha1.TargetKind
		resource string
		object   runtime.Object
	}{
		{scaleplanev1alpha1.TargetKindDeployment, "deployments", deployment("t", resources("cpu=1"))},
		{scaleplanev1alpha1.TargetKindStatefulSet, "statefulsets", statefulSet("t", resources("cpu=1"))},
		{scaleplanev1alpha1.TargetKindDaemonSet, "daemonsets", daemonSet("t", resources("cpu=1"))},
	} {
		t.Run(string(tc.kind), func(t *testing.T) {
			h := newHarness(t, addonResizer("ar", withTarget(tc.kind, "t")), tc.object)
			h.setNodes(10)
			h.syncAt(t0, "ar")
			patches := h.patches()
			if len(patches) != 1 {
				t.Fatalf("%d patches; want 1", len(patches))
			}
			if r := patches[0].GetResource(); r.Group != "apps" || r.Resource != tc.resource || patches[0].GetName() != "t" || patches[0].GetNamespace() != ns {
				t.Errorf("patched %v %s/%s", r, patches[0].GetNamespace(), patches[0].GetName())
			}
			p := decodePatch(t, patches[0])
			if p.Metadata.ResourceVersion != "7" {
				t.Errorf("resourceVersion %q; want 7", p.Metadata.ResourceVersion)
			}
			cs := p.Spec.Template.Spec.Containers
			if len(cs) != 1 || cs[0].Name != containerName {
				t.Fatalf("containers %+v", cs)
			}
			mustQuantity(t, cs[0].Resources.Requests, corev1.ResourceCPU, "200m")
			mustQuantity(t, cs[0].Resources.Limits, corev1.ResourceMemory, "200Mi")
			h.expectCondition("ar", scaleplanev1alpha1.ConditionUpToDate, metav1.ConditionTrue, reasonResized)
		})
	}
}

func TestZeroWritesWhenUpToDate(t *testing.T) {
	h := newHarness(t, addonResizer("ar"), deployment(addonName, resources("cpu=200m", "memory=200Mi", "limit:cpu=200m", "limit:memory=200Mi")))
	h.setNodes(10)
	h.syncAt(t0, "ar")
	if target, status := h.writes(); target != 0 || status != 1 {
		t.Errorf("first sync: %d target writes, %d status writes; want 0 and 1", target, status)
	}
	h.expectCondition("ar", scaleplanev1alpha1.ConditionUpToDate, metav1.ConditionTrue, reasonWithinThreshold)
	for i := 1; i <= 5; i++ {
		h.syncAt(t0.Add(time.Duration(i)*time.Minute), "ar")
	}
	if target, status := h.writes(); target != 0 || status != 1 {
		t.Errorf("steady state: %d target writes, %d status writes; want 0 and 1", target, status)
	}
	h.expectEvents()
}

// The threshold band: exactly at ±T% is kept, just outside is changed.
func TestThresholdBand(t *testing.T) {
	for _, tc := range []struct {
		cpu    string
		resize bool
	}{
		{"190m", false}, // q = 0.95
		{"189m", true},  // q = 0.945 → 0.94
		{"210m", false}, // q = 1.05
		{"211m", false}, // q = 1.055 → 1.05
		{"212m", true},  // q = 1.06
	} {
		h := newHarness(t,
			addonResizer("ar", withThreshold(5), withResources(scaling(corev1.ResourceCPU, "100m", "10m"))),
			deployment(addonName, resources("cpu="+tc.cpu, "limit:cpu=200m")))
		h.setNodes(10)
		h.syncAt(t0, "ar")
		if target, _ := h.writes(); (target == 1) != tc.resize {
			t.Errorf("cpu %s vs 200m, T=5%%: %d patches; want resize %v", tc.cpu, target, tc.resize)
		}
	}
}

func TestMissingTarget(t *testing.T) {
	h := newHarness(t, addonResizer("ar"))
	h.setNodes(10)
	if d := h.syncAt(t0, "ar"); d != 0 {
		t.Errorf("requeue %v; want none: creating the target enqueues", d)
	}
	h.expectCondition("ar", scaleplanev1alpha1.ConditionTargetFound, metav1.ConditionFalse, reasonNotFound)
	h.expectCondition("ar", scaleplanev1alpha1.ConditionContainerFound, metav1.ConditionUnknown, reasonTargetNotFound)
	h.expectCondition("ar", scaleplanev1alpha1.ConditionUpToDate, metav1.ConditionFalse, reasonTargetNotFound)
	h.expectEvents("Warning TargetNotFound Deployment kube-system/addon not found")
	if target, _ := h.writes(); target != 0 {
		t.Errorf("%d target writes", target)
	}
	// Found so again: no new event, no write.
	_, status := h.writes()
	h.syncAt(t0.Add(time.Minute), "ar")
	h.expectEvents()
	if _, s := h.writes(); s != status {
		t.Errorf("a repeated sync wrote status")
	}

	// The target appears.
	_, err := h.kube.AppsV1().Deployments(ns).Create(h.ctx, deployment(addonName, resources()), metav1.CreateOptions{})
	h.check(err)
	h.refresh()
	h.syncAt(t0.Add(2*time.Minute), "ar")
	h.expectCondition("ar", scaleplanev1alpha1.ConditionTargetFound, metav1.ConditionTrue, reasonFound)
	h.expectCondition("ar", scaleplanev1alpha1.ConditionUpToDate, metav1.ConditionTrue, reasonResized)
	h.expectEvents("Normal Resized")
}

func TestMissingContainer(t *testing.T) {
	d := deployment(addonName, resources())
	d.Spec.Template.Spec.Containers[1].Name = "renamed"
	h := newHarness(t, addonResizer("ar"), d)
	h.setNodes(10)
	h.syncAt(t0, "ar")
	h.expectCondition("ar", scaleplanev1alpha1.ConditionTargetFound, metav1.ConditionTrue, reasonFound)
	h.expectCondition("ar", scaleplanev1alpha1.ConditionContainerFound, metav1.ConditionFalse, reasonNotFound)
	h.expectCondition("ar", scaleplanev1alpha1.ConditionUpToDate, metav1.ConditionFalse, reasonContainerNotFound)
	events := h.expectEvents("Warning ContainerNotFound")
	if len(events) == 1 && !strings.Contains(events[0], "it has: sidecar, renamed") {
		t.Errorf("event %q does not name the containers there are", events[0])
	}
	if target, _ := h.writes(); target != 0 {
		t.Errorf("%d target writes", target)
	}
	h.syncAt(t0.Add(time.Minute), "ar")
	h.expectEvents()
}

func TestCountsNotSyncedWaits(t *testing.T) {
	h := newHarness(t, addonResizer("ar", withMode(scaleplanev1alpha1.ContainerProportional)), deployment(addonName, resources()))
	h.c.counts.podInformer.synced = func() bool { return false }
	if d := h.syncAt(t0, "ar"); d != cacheRetry {
		t.Errorf("requeue after %v; want %v", d, cacheRetry)
	}
	if target, status := h.writes(); target != 0 || status != 0 {
		t.Errorf("%d target and %d status writes before the count synced", target, status)
	}
}

// Only the cluster size changed, within the band: status is refreshed at
// most every observationInterval.
func TestObservationOnlyStatusIsPaced(t *testing.T) {
	h := newHarness(t, addonResizer("ar", withThreshold(50)), deployment(addonName, resources("cpu=200m", "memory=200Mi", "limit:cpu=200m", "limit:memory=200Mi")))
	h.setNodes(10)
	h.syncAt(t0, "ar")
	h.setNodes(11)
	if d := h.syncAt(t0.Add(2*time.Second), "ar"); d != observationInterval-2*time.Second {
		t.Errorf("requeue after %v; want %v", d, observationInterval-2*time.Second)
	}
	if s := h.get("ar").Status.ClusterSize; s == nil || *s != 10 {
		t.Errorf("cluster size %v written before the interval", s)
	}
	h.syncAt(t0.Add(observationInterval), "ar")
	if s := h.get("ar").Status.ClusterSize; s == nil || *s != 11 {
		t.Errorf("cluster size %v; want 11 after the interval", s)
	}
}
