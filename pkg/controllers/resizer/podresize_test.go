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
	"errors"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	kubefake "k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2/ktesting"
)

var testSize = inPlaceSize{
	requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("200m"), corev1.ResourceMemory: resource.MustParse("100Mi")},
}

// runningPod is a pod of the add-on on node-1, its kubelet reporting cpu
// and memory requests as applied.
func runningPod(name, cpu, mem string) *corev1.Pod {
	r := corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(mem)}}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, UID: types.UID("uid-" + name), ResourceVersion: "7", Generation: 1, Labels: map[string]string{addonLabel: addonName}},
		Spec:       corev1.PodSpec{NodeName: "node-1", Containers: []corev1.Container{{Name: containerName, Resources: r}}},
		Status: corev1.PodStatus{
			Phase:             corev1.PodRunning,
			ContainerStatuses: []corev1.ContainerStatus{{Name: containerName, Resources: r.DeepCopy()}},
		},
	}
}

// resized is pod with its spec at the test size, as after a resize the
// kubelet has not applied yet.
func resized(pod *corev1.Pod) *corev1.Pod {
	pod = pod.DeepCopy()
	pod.Generation++
	pod.Spec.Containers[0].Resources.Requests = testSize.requests.DeepCopy()
	return pod
}

func answered(pod *corev1.Pod, typ corev1.PodConditionType, reason string) *corev1.Pod {
	pod = pod.DeepCopy()
	pod.Status.Conditions = append(pod.Status.Conditions, corev1.PodCondition{
		Type: typ, Status: corev1.ConditionTrue, Reason: reason, Message: "node says " + reason, ObservedGeneration: pod.Generation,
	})
	return pod
}

func applied(pod *corev1.Pod) *corev1.Pod {
	pod = pod.DeepCopy()
	pod.Status.ContainerStatuses[0].Resources = pod.Spec.Containers[0].Resources.DeepCopy()
	return pod
}

func TestClassify(t *testing.T) {
	old := runningPod("a", "100m", "50Mi")
	pending := old.DeepCopy()
	pending.Status.Phase = corev1.PodPending
	deleting := old.DeepCopy()
	deleting.DeletionTimestamp = &metav1.Time{}
	noStatusResources := resized(old)
	noStatusResources.Status.ContainerStatuses[0].Resources = nil
	stale := answered(resized(old), corev1.PodResizePending, corev1.PodReasonInfeasible)
	stale.Generation++
	// kwok's pod stages report a running container first and its
	// resources a moment later; a kubelet without in-place resize never.
	unreported := old.DeepCopy()
	unreported.Status.ContainerStatuses[0].Resources = nil
	unreported.Status.ContainerStatuses[0].State.Running = &corev1.ContainerStateRunning{}
	// Only the first running container counts, as in the API server.
	sidecarUnreported := old.DeepCopy()
	sidecarUnreported.Status.ContainerStatuses = append([]corev1.ContainerStatus{{Name: "sidecar", State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}}, sidecarUnreported.Status.ContainerStatuses...)
	notRunningYet := old.DeepCopy()
	notRunningYet.Status.ContainerStatuses[0].Resources = nil
	tests := []struct {
		name string
		pod  *corev1.Pod
		want podState
		skip bool
	}{
		{name: "outdated", pod: old, want: podOutdated},
		{name: "resized, no answer yet", pod: resized(old), want: podResizing},
		{name: "in progress", pod: answered(resized(old), corev1.PodResizeInProgress, ""), want: podResizing},
		{name: "deferred", pod: answered(resized(old), corev1.PodResizePending, corev1.PodReasonDeferred), want: podDeferred},
		{name: "infeasible", pod: answered(resized(old), corev1.PodResizePending, corev1.PodReasonInfeasible), want: podInfeasible},
		{name: "error", pod: answered(resized(old), corev1.PodResizeInProgress, corev1.PodReasonError), want: podError},
		{name: "an answer about an older spec is no answer", pod: stale, want: podResizing},
		{name: "applied", pod: applied(resized(old)), want: podAtSize},
		{name: "a kubelet that reports no resources runs the spec", pod: noStatusResources, want: podAtSize},
		{name: "outdated, its running container reports no resources", pod: unreported, want: podUnreported},
		{name: "outdated, the first running container reports no resources", pod: sidecarUnreported, want: podUnreported},
		{name: "outdated, no container running yet", pod: notRunningYet, want: podOutdated},
		{name: "pending pods are left alone", pod: pending, skip: true},
		{name: "deleted pods are left alone", pod: deleting, skip: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a, ok := classify(tc.pod, containerName, testSize)
			if ok == tc.skip {
				t.Fatalf("classified: %v, want %v", ok, !tc.skip)
			}
			if ok && a.state != tc.want {
				t.Errorf("state %q, want %q", a.state, tc.want)
			}
		})
	}
}

// resizeActions returns the pods/resize patches sent, by pod name, with
// their bodies.
func resizeActions(t *testing.T, kube *kubefake.Clientset) map[string]podResizePatchBody {
	t.Helper()
	out := map[string]podResizePatchBody{}
	for _, a := range kube.Actions() {
		p, ok := a.(clienttesting.PatchAction)
		if !ok {
			continue
		}
		if p.GetSubresource() != "resize" {
			t.Errorf("patched subresource %q of pod %s, want resize", p.GetSubresource(), p.GetName())
		}
		var body podResizePatchBody
		if err := json.Unmarshal(p.GetPatch(), &body); err != nil {
			t.Fatal(err)
		}
		out[p.GetName()] = body
	}
	return out
}

func objects(pods ...*corev1.Pod) []runtime.Object {
	out := make([]runtime.Object, 0, len(pods))
	for _, p := range pods {
		out = append(out, p)
	}
	return out
}

// TestResizePodsPacing: at most maxResizesInFlight pods are mid-resize;
// the next is resized once one is done.
func TestResizePodsPacing(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	pods := []*corev1.Pod{runningPod("a", "100m", "50Mi"), runningPod("b", "100m", "50Mi"), runningPod("c", "100m", "50Mi")}
	kube := kubefake.NewClientset(objects(pods...)...)
	key := cache.ObjectName{Namespace: ns, Name: addonName}
	s, err := resizePods(ctx, kube, newPodMemory(), key, pods, containerName, testSize, nil, t0)
	if err != nil {
		t.Fatal(err)
	}
	got := resizeActions(t, kube)
	if len(got) != maxResizesInFlight || got["a"].Spec.Containers == nil || got["b"].Spec.Containers == nil {
		t.Fatalf("resized %v, want a and b only", got)
	}
	body := got["a"]
	if body.Metadata.ResourceVersion != "7" || body.Spec.Containers[0].Name != containerName ||
		!testSize.shared().Matches(&corev1.ResourceRequirements{Requests: body.Spec.Containers[0].Resources.Requests}) || body.Spec.Containers[0].Resources.Limits != nil {
		t.Errorf("patch of a: %+v", body)
	}
	if n := s.count(podResizing); n != 2 {
		t.Errorf("%d resizing, want 2", n)
	}

	// a is applied, b deferred: one place frees up, c is resized.
	kube.ClearActions()
	pods = []*corev1.Pod{applied(resized(pods[0])), answered(resized(pods[1]), corev1.PodResizePending, corev1.PodReasonDeferred), pods[2]}
	s, err = resizePods(ctx, kube, newPodMemory(), key, pods, containerName, testSize, nil, t0)
	if err != nil {
		t.Fatal(err)
	}
	if got := resizeActions(t, kube); len(got) != 1 || got["c"].Spec.Containers == nil {
		t.Errorf("resized %v, want c", got)
	}
	if s.count(podAtSize) != 1 || s.count(podDeferred) != 1 || s.count(podResizing) != 1 {
		t.Errorf("states %+v", s.answers)
	}

	// Two Deferred: nothing more is resized on their account.
	kube.ClearActions()
	more := runningPod("d", "100m", "50Mi")
	pods = []*corev1.Pod{pods[0], pods[1], answered(resized(pods[2]), corev1.PodResizePending, corev1.PodReasonDeferred), more}
	if _, err := resizePods(ctx, kube, newPodMemory(), key, pods, containerName, testSize, nil, t0); err != nil {
		t.Fatal(err)
	}
	if got := resizeActions(t, kube); len(got) != 0 {
		t.Errorf("resized %v while two pods are Deferred", got)
	}

	// Infeasible ones do not hold the pacing: d goes on.
	pods[1] = answered(resized(pods[1]), corev1.PodResizePending, corev1.PodReasonInfeasible)
	pods[1].Status.Conditions = pods[1].Status.Conditions[1:]
	if _, err := resizePods(ctx, kube, newPodMemory(), key, pods, containerName, testSize, nil, t0); err != nil {
		t.Fatal(err)
	}
	if got := resizeActions(t, kube); len(got) != 1 || got["d"].Spec.Containers == nil {
		t.Errorf("resized %v, want d", got)
	}
}

// TestResizePodsRejected: a refusal of the API server is remembered and
// not sent again at the same size; a new size tries again. A conflict asks
// for another pass; another error is returned.
func TestResizePodsRejected(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	pod := runningPod("a", "100m", "50Mi")
	kube := kubefake.NewClientset(pod)
	invalid := apierrors.NewInvalid(schema.GroupKind{Kind: "Pod"}, "a", field.ErrorList{field.Invalid(field.NewPath("spec"), "Burstable", "Pod QOS Class may not change as a result of resizing")})
	kube.PrependReactor("patch", "pods", func(clienttesting.Action) (bool, runtime.Object, error) { return true, nil, invalid })
	rej := newPodMemory()
	key := cache.ObjectName{Namespace: ns, Name: addonName}
	s, err := resizePods(ctx, kube, rej, key, []*corev1.Pod{pod}, containerName, testSize, nil, t0)
	if err != nil {
		t.Fatal(err)
	}
	if a, ok := s.first(podRejected); !ok || a.message != invalid.Error() {
		t.Fatalf("states %+v, want rejected with the API server's message", s.answers)
	}
	kube.ClearActions()
	s, err = resizePods(ctx, kube, rej, key, []*corev1.Pod{pod}, containerName, testSize, nil, t0)
	if err != nil || len(kube.Actions()) != 0 || s.count(podRejected) != 1 {
		t.Errorf("a refused resize was sent again: %v, %v, %+v", err, kube.Actions(), s.answers)
	}
	bigger := inPlaceSize{requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("300m")}}
	if _, err := resizePods(ctx, kube, rej, key, []*corev1.Pod{pod}, containerName, bigger, nil, t0); err != nil || len(kube.Actions()) != 1 {
		t.Errorf("a new size was not tried: %v, %v", err, kube.Actions())
	}

	conflict := kubefake.NewClientset(pod)
	conflict.PrependReactor("patch", "pods", func(clienttesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewConflict(schema.GroupResource{Resource: "pods"}, "a", errors.New("changed"))
	})
	if s, err := resizePods(ctx, conflict, newPodMemory(), key, []*corev1.Pod{pod}, containerName, testSize, nil, t0); err != nil || s.conflicts != 1 || s.count(podOutdated) != 1 {
		t.Errorf("conflict: %v, %+v", err, s)
	}

	broken := kubefake.NewClientset(pod)
	broken.PrependReactor("patch", "pods", func(clienttesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewServiceUnavailable("etcd is down")
	})
	if _, err := resizePods(ctx, broken, newPodMemory(), key, []*corev1.Pod{pod}, containerName, testSize, nil, t0); !apierrors.IsServiceUnavailable(err) {
		t.Errorf("error %v, want the API server's", err)
	}
}

// TestResizePodsConflictsInARow: the conflicts that set a pod's backoff
// and its report (docs/resizer.md) are counted in a row at one size: a
// new size starts the count over, and so does a resize that went through.
func TestResizePodsConflictsInARow(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	pod := runningPod("a", "100m", "50Mi")
	kube := kubefake.NewClientset(pod)
	conflicting := true
	kube.PrependReactor("patch", "pods", func(clienttesting.Action) (bool, runtime.Object, error) {
		if !conflicting {
			return false, nil, nil
		}
		return true, nil, apierrors.NewConflict(schema.GroupResource{Resource: "pods"}, "a", errors.New("changed"))
	})
	rej := newPodMemory()
	key := cache.ObjectName{Namespace: ns, Name: addonName}
	now := t0
	pass := func(size inPlaceSize) podSurvey {
		t.Helper()
		// Each pass once the pod's backoff is over.
		now = now.Add(maxConflictBackoff)
		s, err := resizePods(ctx, kube, rej, key, []*corev1.Pod{pod}, containerName, size, nil, now)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	for want := 1; want <= 3; want++ {
		if s := pass(testSize); s.conflicts != want {
			t.Errorf("conflicts %d, want %d in a row", s.conflicts, want)
		}
	}
	bigger := inPlaceSize{requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("300m")}}
	if s := pass(bigger); s.conflicts != 1 {
		t.Errorf("conflicts %d at a new size, want the count started over", s.conflicts)
	}
	conflicting = false
	if s := pass(bigger); s.conflicts != 0 || s.count(podResizing) != 1 {
		t.Errorf("the resize that went through: %+v", s)
	}
	conflicting = true
	if s := pass(bigger); s.conflicts != 1 {
		t.Errorf("conflicts %d after a resize went through, want the count started over", s.conflicts)
	}
}

func TestResizePodStripsThePod(t *testing.T) {
	pod := answered(resized(runningPod("a", "100m", "50Mi")), corev1.PodResizePending, corev1.PodReasonDeferred)
	pod.Spec.Containers = append(pod.Spec.Containers, corev1.Container{Name: "sidecar", Image: "sidecar:1"})
	pod.Spec.Containers[0].ResizePolicy = []corev1.ContainerResizePolicy{{ResourceName: corev1.ResourceMemory, RestartPolicy: corev1.RestartContainer}}
	pod.Spec.Containers[0].Image = "addon:1"
	pod.Status.Conditions = append(pod.Status.Conditions, corev1.PodCondition{Type: corev1.PodReady, Status: corev1.ConditionTrue})
	pod.Annotations = map[string]string{"big": "annotation"}
	got := resizePod(pod, containerName).(*corev1.Pod)
	if len(got.Spec.Containers) != 1 || got.Spec.Containers[0].Image != "" || len(got.Spec.Containers[0].ResizePolicy) != 1 {
		t.Errorf("containers %+v, want the one container's resources and resize policy", got.Spec.Containers)
	}
	if len(got.Status.Conditions) != 1 || got.Status.Conditions[0].Type != corev1.PodResizePending || got.Annotations != nil {
		t.Errorf("kept %+v", got)
	}
	want, _ := classify(pod, containerName, testSize)
	if a, _ := classify(got, containerName, testSize); a.state != want.state || a.message != want.message {
		t.Errorf("the stripped pod classifies as %+v, the pod as %+v", a, want)
	}
	// Whether the API server would accept a resize depends on the first
	// running container, which need not be the resizer's.
	unreported := runningPod("b", "100m", "50Mi")
	unreported.Status.ContainerStatuses = append([]corev1.ContainerStatus{{Name: "sidecar", Image: "sidecar:1", State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}}, unreported.Status.ContainerStatuses...)
	stripped := resizePod(unreported, containerName).(*corev1.Pod)
	if a, _ := classify(stripped, containerName, testSize); a.state != podUnreported {
		t.Errorf("the stripped pod classifies as %q, want %q: the sidecar's status was lost", a.state, podUnreported)
	}
	if cs := stripped.Status.ContainerStatuses; len(cs) != 2 || cs[0].Image != "" {
		t.Errorf("container statuses %+v, want both, stripped", cs)
	}
	if again := resizePod(got, containerName).(*corev1.Pod); !equality.Semantic.DeepEqual(again, got) {
		t.Errorf("the transform is not idempotent")
	}
}

// TestResizePodsPendingAtAnOlderSizeHoldTheirPlaces: a pod whose spec
// differs from what its kubelet reports is mid-resize whatever size it was
// sent. Two pods Deferred at the previous size keep holding both places
// when the size changes: they are sent the new size, and no other pod is
// resized on their account.
func TestResizePodsPendingAtAnOlderSizeHoldTheirPlaces(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	previous := func(pod *corev1.Pod) *corev1.Pod {
		pod = pod.DeepCopy()
		pod.Generation++
		pod.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU] = resource.MustParse("150m")
		return answered(pod, corev1.PodResizePending, corev1.PodReasonDeferred)
	}
	pods := []*corev1.Pod{
		runningPod("a", "100m", "50Mi"), runningPod("b", "100m", "50Mi"),
		previous(runningPod("c", "100m", "50Mi")), previous(runningPod("d", "100m", "50Mi")),
	}
	kube := kubefake.NewClientset(objects(pods...)...)
	key := cache.ObjectName{Namespace: ns, Name: addonName}
	if _, err := resizePods(ctx, kube, newPodMemory(), key, pods, containerName, testSize, nil, t0); err != nil {
		t.Fatal(err)
	}
	got := resizeActions(t, kube)
	if _, ok := got["a"]; ok {
		t.Errorf("resized a while c and d are Deferred at the previous size: %v", got)
	}
	if _, ok := got["b"]; ok {
		t.Errorf("resized b while c and d are Deferred at the previous size: %v", got)
	}
	if len(got) != 2 || got["c"].Spec.Containers == nil || got["d"].Spec.Containers == nil {
		t.Errorf("resized %v, want c and d sent the new size (they keep their places)", got)
	}

	// The same with a kubelet that has not answered yet, or that reports
	// its resize in progress: the spec differs from what it reports.
	inProgress := resized(runningPod("c", "100m", "50Mi"))
	inProgress.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU] = resource.MustParse("150m")
	pods = []*corev1.Pod{runningPod("a", "100m", "50Mi"), runningPod("b", "100m", "50Mi"), inProgress,
		answered(inProgress, corev1.PodResizeInProgress, "")}
	pods[3].Name, pods[3].UID = "d", "uid-d"
	kube = kubefake.NewClientset(objects(pods...)...)
	s, err := resizePods(ctx, kube, newPodMemory(), key, pods, containerName, testSize, nil, t0)
	if err != nil {
		t.Fatal(err)
	}
	if got := resizeActions(t, kube); got["a"].Spec.Containers != nil || got["b"].Spec.Containers != nil {
		t.Errorf("resized %v while c and d are mid-resize at the previous size", got)
	}
	if n := s.count(podResizing); n != 2 {
		t.Errorf("%d pods resizing, want c and d: %+v", n, s.answers)
	}
}
