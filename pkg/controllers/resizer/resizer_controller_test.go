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
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clienttesting "k8s.io/client-go/testing"
	metricsv1beta1 "k8s.io/metrics/pkg/apis/metrics/v1beta1"

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

func TestSetLimitsFalseLeavesLimits(t *testing.T) {
	h := newHarness(t, addonResizer("ar", withSetLimits(false)),
		deployment(addonName, resources("cpu=100m", "memory=100Mi", "limit:memory=1Gi")))
	h.setNodes(10)
	h.syncAt(t0, "ar")
	p := decodePatch(t, h.patches()[0])
	if l := p.Spec.Template.Spec.Containers[0].Resources.Limits; l != nil {
		t.Errorf("patch sets limits %v", l)
	}
	got := h.deploymentResources(addonName)
	mustQuantity(t, got.Requests, corev1.ResourceCPU, "200m")
	mustQuantity(t, got.Requests, corev1.ResourceMemory, "200Mi")
	mustQuantity(t, got.Limits, corev1.ResourceMemory, "1Gi")
	if _, ok := got.Limits[corev1.ResourceCPU]; ok || len(got.Limits) != 1 {
		t.Errorf("limits %v; want memory 1Gi only", got.Limits)
	}
	if r := h.get("ar").Status.Recommendation; r == nil || r.Limits != nil {
		t.Errorf("recommendation %+v; want requests only", r)
	}
}

func TestUnmanagedResourcesKept(t *testing.T) {
	h := newHarness(t, addonResizer("ar"),
		deployment(addonName, resources("cpu=100m", "ephemeral-storage=1Gi", "nvidia.com/gpu=1", "limit:nvidia.com/gpu=1", "limit:ephemeral-storage=2Gi")))
	h.setNodes(10)
	h.syncAt(t0, "ar")
	p := decodePatch(t, h.patches()[0])
	res := p.Spec.Template.Spec.Containers[0].Resources
	if len(res.Requests) != 2 || len(res.Limits) != 2 {
		t.Errorf("patch %+v; want cpu and memory only", res)
	}
	got := h.deploymentResources(addonName)
	mustQuantity(t, got.Requests, corev1.ResourceCPU, "200m")
	mustQuantity(t, got.Requests, corev1.ResourceEphemeralStorage, "1Gi")
	mustQuantity(t, got.Requests, "nvidia.com/gpu", "1")
	mustQuantity(t, got.Limits, "nvidia.com/gpu", "1")
	mustQuantity(t, got.Limits, corev1.ResourceEphemeralStorage, "2Gi")
	mustQuantity(t, got.Limits, corev1.ResourceMemory, "200Mi")
	d, _ := h.kube.AppsV1().Deployments(ns).Get(h.ctx, addonName, metav1.GetOptions{})
	if sidecar := d.Spec.Template.Spec.Containers[0]; sidecar.Name != "sidecar" || len(sidecar.Resources.Requests) != 1 || len(sidecar.Resources.Limits) != 0 {
		t.Errorf("sidecar changed: %+v", sidecar)
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

func TestScaleUpDelay(t *testing.T) {
	h := newHarness(t, addonResizer("ar", withDelays(5*time.Minute, time.Hour)),
		deployment(addonName, resources("cpu=150m", "memory=150Mi", "limit:cpu=150m", "limit:memory=150Mi")))
	h.setNodes(10)
	if d := h.syncAt(t0, "ar"); d != 5*time.Minute {
		t.Errorf("requeue after %v; want the delay, 5m", d)
	}
	ar := h.get("ar")
	if p := ar.Status.PendingResize; p == nil || p.Direction != scaleplanev1alpha1.ResizeUp || !p.Since.Time.Equal(t0) {
		t.Errorf("pendingResize %+v; want Up since %v", p, t0)
	}
	c := h.condition("ar", scaleplanev1alpha1.ConditionUpToDate)
	if c == nil || c.Status != metav1.ConditionFalse || c.Reason != reasonPostponed || !strings.Contains(c.Message, "until 2024-05-01T09:05:00Z") {
		t.Errorf("UpToDate %+v; want Postponed until 09:05", c)
	}
	_, status := h.writes()
	if d := h.syncAt(t0.Add(4*time.Minute), "ar"); d != time.Minute {
		t.Errorf("requeue after %v; want the rest of the delay, 1m", d)
	}
	if target, s := h.writes(); target != 0 || s != status {
		t.Errorf("while postponed: %d target writes, %d more status writes", target, s-status)
	}
	h.syncAt(t0.Add(5*time.Minute), "ar")
	if target, _ := h.writes(); target != 1 {
		t.Fatalf("%d target writes after the delay; want 1", target)
	}
	mustQuantity(t, h.deploymentResources(addonName).Requests, corev1.ResourceCPU, "200m")
	if p := h.get("ar").Status.PendingResize; p != nil {
		t.Errorf("pendingResize %+v after the resize", p)
	}
	h.expectEvents("Normal Resized")
}

func TestScaleDownDelay(t *testing.T) {
	h := newHarness(t, addonResizer("ar", withDelays(0, 10*time.Minute)),
		deployment(addonName, resources("cpu=300m", "memory=300Mi", "limit:cpu=300m", "limit:memory=300Mi")))
	h.setNodes(10)
	if d := h.syncAt(t0, "ar"); d != 10*time.Minute {
		t.Errorf("requeue after %v; want 10m", d)
	}
	if p := h.get("ar").Status.PendingResize; p == nil || p.Direction != scaleplanev1alpha1.ResizeDown {
		t.Errorf("pendingResize %+v; want Down", p)
	}
	// Back within the band before the delay: the pending cut is dropped.
	h.setNodes(20)
	h.syncAt(t0.Add(3*time.Minute), "ar")
	if p := h.get("ar").Status.PendingResize; p != nil {
		t.Errorf("pendingResize %+v back within the band", p)
	}
	h.expectCondition("ar", scaleplanev1alpha1.ConditionUpToDate, metav1.ConditionTrue, reasonWithinThreshold)
	// Below again: the clock starts over.
	h.setNodes(10)
	if d := h.syncAt(t0.Add(4*time.Minute), "ar"); d != 10*time.Minute {
		t.Errorf("requeue after %v; want a fresh 10m", d)
	}
	h.syncAt(t0.Add(13*time.Minute), "ar")
	if target, _ := h.writes(); target != 0 {
		t.Errorf("cut applied before its delay")
	}
	h.syncAt(t0.Add(14*time.Minute), "ar")
	if target, _ := h.writes(); target != 1 {
		t.Errorf("cut not applied after its delay")
	}
	mustQuantity(t, h.deploymentResources(addonName).Limits, corev1.ResourceMemory, "200Mi")
}

// A raise that turns into a cut restarts the clock with the other delay.
func TestDirectionChangeResetsPending(t *testing.T) {
	h := newHarness(t, addonResizer("ar", withDelays(5*time.Minute, 5*time.Minute)),
		deployment(addonName, resources("cpu=200m", "memory=200Mi", "limit:cpu=200m", "limit:memory=200Mi")))
	h.setNodes(20)
	h.syncAt(t0, "ar")
	h.setNodes(5)
	h.syncAt(t0.Add(4*time.Minute), "ar")
	p := h.get("ar").Status.PendingResize
	if p == nil || p.Direction != scaleplanev1alpha1.ResizeDown || !p.Since.Time.Equal(t0.Add(4*time.Minute)) {
		t.Errorf("pendingResize %+v; want Down since 09:04", p)
	}
	h.syncAt(t0.Add(6*time.Minute), "ar")
	if target, _ := h.writes(); target != 0 {
		t.Errorf("applied on the old direction's clock")
	}
}

// pendingResize is in status: a new process applies the change at since +
// delay, not at its own start + delay.
func TestDelaySurvivesRestart(t *testing.T) {
	h := newHarness(t, addonResizer("ar", withDelays(5*time.Minute, 0)),
		deployment(addonName, resources("cpu=100m", "memory=100Mi", "limit:cpu=100m", "limit:memory=100Mi")))
	h.setNodes(10)
	h.syncAt(t0, "ar")
	h.expectCondition("ar", scaleplanev1alpha1.ConditionUpToDate, metav1.ConditionFalse, reasonPostponed)

	h.newController() // restart at 09:03
	if d := h.syncAt(t0.Add(3*time.Minute), "ar"); d != 2*time.Minute {
		t.Errorf("after a restart: requeue after %v; want 2m (since + delay)", d)
	}
	if p := h.get("ar").Status.PendingResize; p == nil || !p.Since.Time.Equal(t0) {
		t.Errorf("pendingResize %+v; want since kept at %v", p, t0)
	}
	h.syncAt(t0.Add(5*time.Minute), "ar")
	if target, _ := h.writes(); target != 1 {
		t.Errorf("%d target writes at since + delay; want 1", target)
	}
}

// A cluster that moves back and forth across a bucket edge, with a
// scale-up delay, does not flap the add-on.
func TestOscillationAcrossBucketEdge(t *testing.T) {
	// The estimate at bucket 1369: cpu 100m + 13690m, memory 100Mi + 13690Mi.
	h := newHarness(t, addonResizer("ar", withExponential(16), withDelays(10*time.Minute, 10*time.Minute)),
		deployment(addonName, resources("cpu=13790m", "memory=13790Mi", "limit:cpu=13790m", "limit:memory=13790Mi")))
	for i := range 30 {
		h.setNodes(1369 + i%2) // 1369 → bucket 1369; 1370 → bucket 2053
		h.syncAt(t0.Add(time.Duration(i)*time.Minute), "ar")
	}
	if target, _ := h.writes(); target != 0 {
		t.Errorf("%d target writes while oscillating; want 0", target)
	}
	h.expectEvents()
	// Staying above for the whole delay does resize, to bucket 2053.
	h.setNodes(1370)
	for i := 30; i <= 40; i++ {
		h.syncAt(t0.Add(time.Duration(i)*time.Minute), "ar")
	}
	if target, _ := h.writes(); target != 1 {
		t.Errorf("%d target writes after staying above; want 1", target)
	}
	mustQuantity(t, h.deploymentResources(addonName).Requests, corev1.ResourceCPU, "20630m")
}

func TestConflictRereadsAndRetries(t *testing.T) {
	h := newHarness(t, addonResizer("ar"), deployment(addonName, resources("cpu=100m", "memory=100Mi", "limit:cpu=100m", "limit:memory=100Mi")))
	h.setNodes(10)
	conflicts := 1
	h.kube.PrependReactor("patch", "deployments", func(clienttesting.Action) (bool, runtime.Object, error) {
		if conflicts > 0 {
			conflicts--
			return true, nil, apierrors.NewConflict(deploymentsResource, addonName, nil)
		}
		return false, nil, nil
	})
	h.syncAt(t0, "ar")
	var verbs []string
	for _, a := range h.kube.Actions() {
		if a.GetResource().Resource == "deployments" && a.GetVerb() != "list" {
			verbs = append(verbs, a.GetVerb())
		}
	}
	if strings.Join(verbs, ",") != "patch,get,patch" {
		t.Errorf("actions %v; want patch, get (from the API, not the cache), patch", verbs)
	}
	mustQuantity(t, h.deploymentResources(addonName).Requests, corev1.ResourceCPU, "200m")
	h.expectCondition("ar", scaleplanev1alpha1.ConditionUpToDate, metav1.ConditionTrue, reasonResized)
}

// After a conflict the decision is made again from the fresh object: if it
// is now within the band, nothing is written.
func TestConflictRecomputes(t *testing.T) {
	h := newHarness(t, addonResizer("ar"), deployment(addonName, resources("cpu=100m", "memory=100Mi", "limit:cpu=100m", "limit:memory=100Mi")))
	h.setNodes(10)
	h.kube.PrependReactor("patch", "deployments", func(clienttesting.Action) (bool, runtime.Object, error) {
		// Another writer set the estimate first. (The tracker, not the
		// clientset: the fake holds its lock while a reactor runs.)
		updated := deployment(addonName, resources("cpu=200m", "memory=200Mi", "limit:cpu=200m", "limit:memory=200Mi"))
		updated.ResourceVersion = "8"
		h.check(h.kube.Tracker().Update(deploymentsResource.WithVersion("v1"), updated, ns))
		return true, nil, apierrors.NewConflict(deploymentsResource, addonName, nil)
	})
	h.syncAt(t0, "ar")
	if n := len(h.patches()); n != 1 {
		t.Errorf("%d patches; want the one that conflicted", n)
	}
	h.expectCondition("ar", scaleplanev1alpha1.ConditionUpToDate, metav1.ConditionTrue, reasonWithinThreshold)
	h.expectEvents()
}

func TestConflictGivesUpAfterAFewTries(t *testing.T) {
	h := newHarness(t, addonResizer("ar"), deployment(addonName, resources()))
	h.setNodes(10)
	h.kube.PrependReactor("patch", "deployments", func(clienttesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewConflict(deploymentsResource, addonName, nil)
	})
	if _, err := h.trySyncAt(t0, "ar"); err == nil {
		t.Errorf("no error after repeated conflicts")
	}
	if n := len(h.patches()); n != maxPatchAttempts {
		t.Errorf("%d patches; want %d", n, maxPatchAttempts)
	}
}

func TestForbidden(t *testing.T) {
	h := newHarness(t, addonResizer("ar"), deployment(addonName, resources()))
	h.setNodes(10)
	h.kube.PrependReactor("patch", "deployments", func(clienttesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(deploymentsResource, addonName, nil)
	})
	if _, err := h.trySyncAt(t0, "ar"); err == nil {
		t.Errorf("no error: a forbidden patch is retried with backoff")
	}
	h.expectCondition("ar", scaleplanev1alpha1.ConditionUpToDate, metav1.ConditionFalse, reasonResizeForbidden)
	h.expectEvents("Warning ResizeForbidden")
	if _, err := h.trySyncAt(t0.Add(time.Minute), "ar"); err == nil {
		t.Errorf("no error on retry")
	}
	h.expectEvents() // once, on the transition
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

func TestMetricsSource(t *testing.T) {
	h := newHarness(t, addonResizer("containers", withSource(scaleplanev1alpha1.SourceMetrics), withMode(scaleplanev1alpha1.ContainerProportional)),
		deployment(addonName, resources()))
	addon := map[string]string{addonLabel: addonName}
	h.addMetrics(podMetrics(ns, "addon-1", addon, 2))
	h.addMetrics(podMetrics(ns, "dns", nil, 1))
	h.addMetrics(podMetrics("apps", "web", addon, 3))

	if d := h.syncAt(t0, "containers"); d != testInterval {
		t.Errorf("requeue after %v; want the interval", d)
	}
	if s := h.get("containers").Status.ClusterSize; s == nil || *s != 4 {
		t.Errorf("container count %v; want 4 (the target's pod left out)", s)
	}
	h.expectCondition("containers", scaleplanev1alpha1.ConditionMetricsAvailable, metav1.ConditionTrue, reasonMetricsRead)

	// Within the interval the last read serves.
	lists := h.metricsLists()
	if d := h.syncAt(t0.Add(10*time.Second), "containers"); d != 5*time.Second {
		t.Errorf("requeue after %v; want the rest of the interval, 5s", d)
	}
	if h.metricsLists() != lists {
		t.Errorf("read again within the interval")
	}
	h.syncAt(t0.Add(testInterval), "containers")
	if h.metricsLists() != lists+1 {
		t.Errorf("not read again after the interval")
	}
}

// Source Metrics with NodeProportional counts the Node objects, as Addon
// Resizer 1.8's --use-metrics did (the API server's object count), not the
// NodeMetrics metrics-server happened to scrape: a missed kubelet scrape
// drops a node from NodeMetrics and must not cut the add-on — issue 18,
// item 8.
func TestMetricsSourceCountsNodesFromTheAPIServer(t *testing.T) {
	h := newHarness(t, addonResizer("nodes", withSource(scaleplanev1alpha1.SourceMetrics)),
		deployment(addonName, resources("cpu=130m", "memory=130Mi", "limit:cpu=130m", "limit:memory=130Mi")))
	h.setNodes(3)
	// node-2's kubelet missed its scrapes: metrics-server lists two.
	h.addMetrics(nodeMetrics("node-0"))
	h.addMetrics(nodeMetrics("node-1"))
	h.syncAt(t0, "nodes")
	if s := h.get("nodes").Status.ClusterSize; s == nil || *s != 3 {
		t.Errorf("node count %v; want the 3 Node objects", s)
	}
	if target, _ := h.writes(); target != 0 {
		t.Errorf("%d target writes; want none, the add-on is sized for 3 nodes", target)
	}
	if h.metricsLists() != 0 {
		t.Errorf("%d metrics API lists; want none for a node count", h.metricsLists())
	}
	if c := h.condition("nodes", scaleplanev1alpha1.ConditionMetricsAvailable); c != nil {
		t.Errorf("MetricsAvailable %+v; want none, the metrics API is not read", c)
	}
}

// A pod missing from one PodMetrics read (its kubelet's scrape failed) is
// counted from the read before, so the gap does not resize; missing from the
// next read too, it is gone — issue 18, item 8.
func TestMetricsSourceHoldsPodsAcrossAScrapeGap(t *testing.T) {
	// Base 100m + 10m per container: 5 containers are 150m.
	h := newHarness(t, addonResizer("containers", withSource(scaleplanev1alpha1.SourceMetrics), withMode(scaleplanev1alpha1.ContainerProportional)),
		deployment(addonName, resources("cpu=150m", "memory=150Mi", "limit:cpu=150m", "limit:memory=150Mi")))
	h.addMetrics(podMetrics("apps", "web", nil, 2))
	h.addMetrics(podMetrics("apps", "api", nil, 3))
	h.syncAt(t0, "containers")
	if s := h.get("containers").Status.ClusterSize; s == nil || *s != 5 {
		t.Fatalf("container count %v; want 5", s)
	}

	gv := metricsv1beta1.SchemeGroupVersion
	h.check(h.metrics.Tracker().Delete(gv.WithResource("pods"), "apps", "api"))
	h.syncAt(t0.Add(testInterval), "containers")
	if s := h.get("containers").Status.ClusterSize; s == nil || *s != 5 {
		t.Errorf("container count %v after one missed scrape; want 5, held", s)
	}
	if target, _ := h.writes(); target != 0 {
		t.Errorf("%d target writes after one missed scrape; want none", target)
	}

	h.syncAt(t0.Add(2*testInterval), "containers")
	if s := h.get("containers").Status.ClusterSize; s == nil || *s != 2 {
		t.Errorf("container count %v after two reads without the pod; want 2", s)
	}
	if target, _ := h.writes(); target != 1 {
		t.Errorf("%d target writes once the pod is gone; want 1", target)
	}
}

func TestMetricsUnavailable(t *testing.T) {
	h := newHarness(t, addonResizer("ar", withSource(scaleplanev1alpha1.SourceMetrics), withMode(scaleplanev1alpha1.ContainerProportional)),
		deployment(addonName, resources("cpu=100m", "memory=100Mi", "limit:cpu=100m", "limit:memory=100Mi")))
	h.metrics.PrependReactor("list", "pods", func(clienttesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewServiceUnavailable("the server is currently unable to handle the request")
	})
	if d := h.syncAt(t0, "ar"); d != testInterval {
		t.Errorf("requeue after %v; want the interval", d)
	}
	h.expectCondition("ar", scaleplanev1alpha1.ConditionMetricsAvailable, metav1.ConditionFalse, reasonMetricsUnavailable)
	h.expectCondition("ar", scaleplanev1alpha1.ConditionUpToDate, metav1.ConditionFalse, reasonMetricsUnavailable)
	h.expectEvents("Warning MetricsUnavailable")
	if target, _ := h.writes(); target != 0 {
		t.Errorf("%d target writes without a cluster size", target)
	}
	h.syncAt(t0.Add(testInterval), "ar")
	h.expectEvents()
}

// TestMetricsEmptyIsNotSizeZero: right after metrics-server starts the
// metrics API answers with empty lists; that must not size the add-on for an
// empty cluster.
func TestMetricsEmptyIsNotSizeZero(t *testing.T) {
	h := newHarness(t, addonResizer("containers", withSource(scaleplanev1alpha1.SourceMetrics), withMode(scaleplanev1alpha1.ContainerProportional)),
		deployment(addonName, resources("cpu=100m", "memory=100Mi", "limit:cpu=100m", "limit:memory=100Mi")))
	h.syncAt(t0, "containers")
	h.expectCondition("containers", scaleplanev1alpha1.ConditionMetricsAvailable, metav1.ConditionFalse, reasonMetricsUnavailable)
	if s := h.get("containers").Status.ClusterSize; s != nil {
		t.Errorf("cluster size %d from an empty metrics list", *s)
	}
	if target, _ := h.writes(); target != 0 {
		t.Errorf("%d target writes from empty metrics", target)
	}
}

func (h *harness) metricsLists() int {
	n := 0
	for _, a := range h.metrics.Actions() {
		if a.GetVerb() == "list" {
			n++
		}
	}
	return n
}

func TestMetricsAvailableRemovedForAPIServer(t *testing.T) {
	ar := addonResizer("ar")
	ar.Status.Conditions = []metav1.Condition{{Type: scaleplanev1alpha1.ConditionMetricsAvailable, Status: metav1.ConditionTrue, Reason: reasonMetricsRead}}
	h := newHarness(t, ar, deployment(addonName, resources()))
	h.setNodes(1)
	h.syncAt(t0, "ar")
	if c := h.condition("ar", scaleplanev1alpha1.ConditionMetricsAvailable); c != nil {
		t.Errorf("MetricsAvailable kept after switching to APIServer: %+v", c)
	}
}

// A sync that runs before the target's cache shows the resizer's own patch
// waits instead of deciding again from the old resources.
func TestWaitsForOwnPatchInCache(t *testing.T) {
	h := newHarness(t, addonResizer("ar", withDelays(time.Minute, time.Minute)), deployment(addonName, resources("cpu=100m", "memory=100Mi", "limit:cpu=100m", "limit:memory=100Mi")))
	h.setNodes(10)
	h.syncAt(t0, "ar")
	h.syncAt(t0.Add(time.Minute), "ar")
	if target, _ := h.writes(); target != 1 {
		t.Fatalf("%d target writes; want 1", target)
	}
	// The cache goes back to the old object, as if its watch lagged; the
	// resizer wrote generation 2.
	h.c.patched.wrote(targetKey(ns, scaleplanev1alpha1.TargetKindDeployment, addonName), "uid-"+addonName, 2)
	h.check(h.deployIndexer.Update(deployment(addonName, resources("cpu=100m", "memory=100Mi", "limit:cpu=100m", "limit:memory=100Mi"))))
	_, status := h.writes()
	d, err := h.c.syncRecovered(h.ctx, keyOf("ar"))
	if err != nil || d != cacheRetry {
		t.Errorf("sync with a stale cache: %v, %v; want a wait of %v", d, err, cacheRetry)
	}
	if target, s := h.writes(); target != 1 || s != status {
		t.Errorf("wrote with a stale cache")
	}
}

// A container with limits but no requests runs with requests equal to its
// limits (Kubernetes defaults them so): an estimate below them is a cut,
// held back by scaleDownDelay, not a raise applied at once — issue 18,
// item 9.
func TestLimitWithoutRequestIsTheRequest(t *testing.T) {
	for _, setLimits := range []bool{true, false} {
		t.Run(fmt.Sprintf("setLimits %v", setLimits), func(t *testing.T) {
			h := newHarness(t, addonResizer("ar", withDelays(0, 10*time.Minute), withSetLimits(setLimits)),
				deployment(addonName, resources("limit:cpu=300m", "limit:memory=300Mi")))
			h.setNodes(10) // The estimate: cpu 200m, memory 200Mi.
			if d := h.syncAt(t0, "ar"); d != 10*time.Minute {
				t.Errorf("requeue after %v; want scaleDownDelay, 10m", d)
			}
			if target, _ := h.writes(); target != 0 {
				t.Fatalf("%d target writes; want the cut held back", target)
			}
			if p := h.get("ar").Status.PendingResize; p == nil || p.Direction != scaleplanev1alpha1.ResizeDown {
				t.Errorf("pendingResize %+v; want Down", p)
			}
			h.syncAt(t0.Add(10*time.Minute), "ar")
			if target, _ := h.writes(); target != 1 {
				t.Fatalf("%d target writes after scaleDownDelay; want 1", target)
			}
			mustQuantity(t, h.deploymentResources(addonName).Requests, corev1.ResourceCPU, "200m")
		})
	}
}

// With setLimits false the limits are the user's, and the API server
// rejects a request above its limit: an estimate above the limit sizes the
// request to the limit, and the AddonResizer says so in UpToDate
// (CappedAtLimit) and a Warning event, once — issue 18, item 6.
func TestSetLimitsFalseCapsAtTheLimit(t *testing.T) {
	h := newHarness(t, addonResizer("ar", withSetLimits(false)),
		deployment(addonName, resources("cpu=100m", "memory=100Mi", "limit:cpu=150m")))
	h.setNodes(10) // The estimate: cpu 200m, memory 200Mi.
	h.syncAt(t0, "ar")
	got := h.deploymentResources(addonName)
	mustQuantity(t, got.Requests, corev1.ResourceCPU, "150m")
	mustQuantity(t, got.Requests, corev1.ResourceMemory, "200Mi")
	mustQuantity(t, got.Limits, corev1.ResourceCPU, "150m")
	h.expectCondition("ar", scaleplanev1alpha1.ConditionUpToDate, metav1.ConditionFalse, reasonCappedAtLimit)
	if c := h.condition("ar", scaleplanev1alpha1.ConditionUpToDate); c == nil || !strings.Contains(c.Message, "cpu estimate 200m, limit 150m") {
		t.Errorf("UpToDate %+v; want it to name the estimate and the limit", c)
	}
	h.expectEvents("Normal Resized", "Warning CappedAtLimit")
	if r := h.get("ar").Status.Recommendation; r == nil {
		t.Error("no recommendation")
	} else {
		mustQuantity(t, r.Requests, corev1.ResourceCPU, "200m")
	}

	// Steady: no write, no more events.
	h.kube.ClearActions()
	h.syncAt(t0.Add(time.Minute), "ar")
	if target, _ := h.writes(); target != 0 {
		t.Errorf("%d target writes while capped", target)
	}
	h.expectEvents()

	// The user raises the limit: the request follows the estimate.
	d, err := h.kube.AppsV1().Deployments(ns).Get(h.ctx, addonName, metav1.GetOptions{})
	h.check(err)
	containerOf(t, &d.Spec.Template).Resources.Limits[corev1.ResourceCPU] = resource.MustParse("1")
	d.Generation++
	_, err = h.kube.AppsV1().Deployments(ns).Update(h.ctx, d, metav1.UpdateOptions{})
	h.check(err)
	h.refresh()
	h.syncAt(t0.Add(2*time.Minute), "ar")
	mustQuantity(t, h.deploymentResources(addonName).Requests, corev1.ResourceCPU, "200m")
	h.expectCondition("ar", scaleplanev1alpha1.ConditionUpToDate, metav1.ConditionTrue, reasonResized)
}

// Two AddonResizers that size the same resource of one container would undo
// each other's patch forever, each a rollout of the add-on: neither writes,
// both say so in UpToDate (AmbiguousTarget) and a Warning naming the other,
// as the HPA controller does with AmbiguousSelector. Once one goes, the
// other resizes — issue 18, item 7.
func TestTwoAddonResizersOnOneContainer(t *testing.T) {
	h := newHarness(t,
		addonResizer("a"),
		addonResizer("b", withResources(scaling(corev1.ResourceMemory, "50Mi", "20Mi"))),
		deployment(addonName, resources("cpu=100m", "memory=100Mi", "limit:cpu=100m", "limit:memory=100Mi")))
	h.setNodes(10)
	for range 2 {
		h.syncAt(t0, "a")
		h.syncAt(t0, "b")
	}
	if target, _ := h.writes(); target != 0 {
		t.Errorf("%d target writes; want none while two AddonResizers size the container", target)
	}
	for name, other := range map[string]string{"a": "b", "b": "a"} {
		h.expectCondition(name, scaleplanev1alpha1.ConditionUpToDate, metav1.ConditionFalse, reasonAmbiguousTarget)
		if c := h.condition(name, scaleplanev1alpha1.ConditionUpToDate); c == nil || !strings.Contains(c.Message, "AddonResizer "+other+" (memory)") {
			t.Errorf("%s: UpToDate %+v; want it to name %s and the shared resource", name, c, other)
		}
	}
	events := h.expectEvents("Warning AmbiguousTarget", "Warning AmbiguousTarget")
	if len(events) == 2 && (!strings.Contains(events[0], "AddonResizer b") || !strings.Contains(events[1], "AddonResizer a")) {
		t.Errorf("events %q; want each to name the other", events)
	}

	// b is deleted: its delete event enqueues a, which resizes.
	b := h.get("b")
	h.check(h.client.ScaleplaneV1alpha1().AddonResizers(ns).Delete(h.ctx, "b", metav1.DeleteOptions{}))
	h.refresh()
	h.c.onDelete(b)
	h.expectQueued("the other deleted", "a", "b")
	h.syncAt(t0.Add(time.Minute), "a")
	if target, _ := h.writes(); target != 1 {
		t.Errorf("%d target writes after the other was deleted; want 1", target)
	}
	mustQuantity(t, h.deploymentResources(addonName).Requests, corev1.ResourceCPU, "200m")
}

// AddonResizers on different resources, or different containers, of one
// workload do not meet.
func TestAddonResizersOnDifferentResourcesOfOneWorkload(t *testing.T) {
	h := newHarness(t,
		addonResizer("cpu", withResources(scaling(corev1.ResourceCPU, "100m", "10m"))),
		addonResizer("memory", withResources(scaling(corev1.ResourceMemory, "100Mi", "10Mi"))),
		addonResizer("sidecar", withContainer("sidecar")),
		deployment(addonName, resources("cpu=100m", "memory=100Mi", "limit:cpu=100m", "limit:memory=100Mi")))
	h.setNodes(10)
	for _, name := range []string{"cpu", "memory", "sidecar"} {
		h.syncAt(t0, name)
		h.expectCondition(name, scaleplanev1alpha1.ConditionUpToDate, metav1.ConditionTrue, reasonResized)
	}
	got := h.deploymentResources(addonName)
	mustQuantity(t, got.Requests, corev1.ResourceCPU, "200m")
	mustQuantity(t, got.Requests, corev1.ResourceMemory, "200Mi")
}
