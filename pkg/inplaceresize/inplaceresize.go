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

// Package inplaceresize tells where one pod is on the way to the size an
// AddonResizer with updateMode InPlace holds its target's pods at: the rule
// the resizer decides by, shared with kubectl-scaleplane so that `explain
// addonresizer` says of each pod what the controller decides.
package inplaceresize

import (
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// MaxInFlight is how many pods of one target may be mid-resize at once
// (resized in the API, not yet applied by their kubelet). A node that
// cannot fit the new size then holds back this many pods in
// PodResizePending, not every replica of the add-on.
const MaxInFlight = 2

// State is where one pod is on the way to the in-place size, as the pod
// alone shows it; the resizer adds the states its memory and the nodes tell
// (rejected, conflicted, forbidden, node_not_ready).
type State string

// The states a pod shows, also values of resizer_in_place_pods' state label.
const (
	// AtSize: the kubelet reports the size applied, or, where it reports no
	// resources at all (it does not resize), the pod's spec is the size.
	AtSize State = "at_size"
	// Outdated: the pod's spec is not the size; it is to be resized.
	Outdated State = "outdated"
	// Resizing: the spec is the size, the kubelet has not applied it yet
	// (no answer, or PodResizeInProgress).
	Resizing State = "resizing"
	// Deferred: PodResizePending, reason Deferred. The kubelet retries by
	// itself when the node has room.
	Deferred State = "deferred"
	// Infeasible: PodResizePending, reason Infeasible. The node will never
	// fit it; abandoned at this size.
	Infeasible State = "infeasible"
	// Error: PodResizeInProgress, reason Error (for example a memory limit
	// below the container's usage). The kubelet retries.
	Error State = "error"
	// Unreported: the pod's spec is not the size, but its kubelet reports
	// no resources for its running containers, so the API server would
	// refuse the resize ("Pod running on node without support for
	// resize"). Its node does not resize in place, or its kubelet has not
	// reported them yet; it is resized once they are reported.
	Unreported State = "unreported"
)

// InFlight reports whether a pod in state s holds a place of the pacing. A
// Deferred pod does: the node has no room, and resizing more pods on its
// account would only make more pending ones. An Infeasible pod does not:
// nothing will change for it, and the others must go on.
func (s State) InFlight() bool {
	return s == Resizing || s == Deferred || s == Error
}

// Size is the size the target's pods are resized to: the managed requests,
// and limits when the AddonResizer sets them.
type Size struct {
	Requests corev1.ResourceList
	Limits   corev1.ResourceList
}

// Key identifies the size (the resizer remembers refusals per size).
func (z Size) Key() string {
	return ResourceListString(z.Requests) + "|" + ResourceListString(z.Limits)
}

// ResourceListString is "cpu=48m,memory=104Mi", names sorted.
func ResourceListString(l corev1.ResourceList) string {
	parts := make([]string, 0, len(l))
	for name, q := range l {
		parts = append(parts, string(name)+"="+q.String())
	}
	sort.Strings(parts)
	return strings.Join(parts, ",")
}

// Capped is a request of the size that a pod's own limit holds back.
type Capped struct {
	Name     corev1.ResourceName
	Estimate resource.Quantity
	Limit    resource.Quantity
}

// ForPod is the size for a pod whose container has spec: each request the
// size names without a limit (limits are not the resizer's) is capped at
// the pod's own limit, which is what binds it in place (the template's may
// differ: limits given in place while setLimits was true, or the template
// edited under an OnDelete update strategy), as the API server refuses a
// request above its limit. capped says which were.
func (z Size) ForPod(spec *corev1.ResourceRequirements) (Size, []Capped) {
	var capped []Capped
	out := z
	for name, q := range z.Requests {
		if _, managed := z.Limits[name]; managed {
			continue
		}
		lim, ok := spec.Limits[name]
		if !ok || q.Cmp(lim) <= 0 {
			continue
		}
		if len(capped) == 0 {
			out.Requests = z.Requests.DeepCopy()
		}
		out.Requests[name] = lim.DeepCopy()
		capped = append(capped, Capped{Name: name, Estimate: q.DeepCopy(), Limit: lim.DeepCopy()})
	}
	sort.Slice(capped, func(i, j int) bool { return capped[i].Name < capped[j].Name })
	return out, capped
}

// Matches reports whether r has every value of the size. Resources the size
// does not name are not the resizer's and are not looked at.
func (z Size) Matches(r *corev1.ResourceRequirements) bool {
	if r == nil {
		return false
	}
	for name, want := range z.Requests {
		if got, ok := r.Requests[name]; !ok || got.Cmp(want) != 0 {
			return false
		}
	}
	for name, want := range z.Limits {
		if got, ok := r.Limits[name]; !ok || got.Cmp(want) != 0 {
			return false
		}
	}
	return true
}

// Answer is one pod's state, and what its kubelet said.
type Answer struct {
	State   State
	Message string
	// MidResize is set on an outdated pod whose kubelet has not applied the
	// size it was sent before (a size older than this one): it holds a
	// place of the pacing, and is sent the new size before any other pod.
	MidResize bool
	// Size is the pod's own size: the size capped at its limits, Capped
	// says which (Size.ForPod).
	Size   Size
	Capped []Capped
	// Spec and Applied are the container's resources in the pod's spec and
	// as its kubelet reports them (nil: not reported).
	Spec    *corev1.ResourceRequirements
	Applied *corev1.ResourceRequirements
}

// Classify tells where pod is on the way to size. Only a running pod bound
// to a node and not being deleted is resized (false otherwise): a pending
// pod may still be rescheduled, and the kubelet answers resizes of running
// ones.
func Classify(pod *corev1.Pod, container string, size Size) (Answer, bool) {
	if pod.DeletionTimestamp != nil || pod.Spec.NodeName == "" || pod.Status.Phase != corev1.PodRunning {
		return Answer{}, false
	}
	var spec *corev1.ResourceRequirements
	for i := range pod.Spec.Containers {
		if pod.Spec.Containers[i].Name == container {
			spec = &pod.Spec.Containers[i].Resources
		}
	}
	if spec == nil {
		// A pod of another template (a rollout that renamed the
		// container): nothing of the resizer's to size.
		return Answer{}, false
	}
	var applied *corev1.ResourceRequirements
	for i := range pod.Status.ContainerStatuses {
		if pod.Status.ContainerStatuses[i].Name == container {
			applied = pod.Status.ContainerStatuses[i].Resources
		}
	}
	a := Answer{Spec: spec, Applied: applied}
	size, a.Capped = size.ForPod(spec)
	a.Size = size
	if !size.Matches(spec) {
		a.State = Outdated
		if !ResourcesReported(pod) {
			// Sent now, the resize would be refused, and a refusal is not
			// retried at this size: wait for the kubelet's status.
			a.State = Unreported
			return a, true
		}
		// Sent an older size its kubelet has not applied yet (pending,
		// in progress, or no answer): mid-resize all the same. Left out of
		// the pacing, every change of size would add two more pods pending
		// at their kubelet. An Infeasible one holds no place, as at this
		// size.
		answer, _, pending := KubeletAnswer(pod)
		a.MidResize = answer != Infeasible && (pending || differs(spec, applied, size))
		return a, true
	}
	if applied == nil {
		// Its kubelet reports no resources: it does not resize in place
		// (the API server refuses resizes of such running pods), so the
		// pod runs at its spec.
		a.State = AtSize
		return a, true
	}
	if size.Matches(applied) {
		a.State = AtSize
		return a, true
	}
	a.State, a.Message, _ = KubeletAnswer(pod)
	return a, true
}

// KubeletAnswer is what the pod's resize conditions say of its current
// spec: Infeasible, Deferred, Error, or Resizing (no answer, or in
// progress); and whether one of them says the resize is pending or in
// progress at its kubelet.
func KubeletAnswer(pod *corev1.Pod) (state State, message string, pending bool) {
	state = Resizing
	for _, cond := range pod.Status.Conditions {
		if cond.Status != corev1.ConditionTrue || cond.Type != corev1.PodResizePending && cond.Type != corev1.PodResizeInProgress {
			continue
		}
		// A condition the kubelet wrote about an older spec is no answer
		// to this resize.
		if cond.ObservedGeneration != 0 && pod.Generation != 0 && cond.ObservedGeneration < pod.Generation {
			continue
		}
		switch {
		case cond.Type == corev1.PodResizePending && cond.Reason == corev1.PodReasonInfeasible:
			return Infeasible, cond.Message, false
		case cond.Type == corev1.PodResizePending && cond.Reason == corev1.PodReasonDeferred:
			state, message = Deferred, cond.Message
		case cond.Type == corev1.PodResizeInProgress && cond.Reason == corev1.PodReasonError:
			state, message = Error, cond.Message
		}
		pending = true
	}
	return state, message, pending
}

// differs reports whether the kubelet reports values of the size's
// resources other than the spec's: the spec was resized and the kubelet
// has not applied it yet. A value missing on either side is not compared.
func differs(spec, applied *corev1.ResourceRequirements, size Size) bool {
	if applied == nil {
		return false
	}
	for name := range size.Requests {
		want, ok1 := spec.Requests[name]
		got, ok2 := applied.Requests[name]
		if ok1 && ok2 && want.Cmp(got) != 0 {
			return true
		}
	}
	for name := range size.Limits {
		want, ok1 := spec.Limits[name]
		got, ok2 := applied.Limits[name]
		if ok1 && ok2 && want.Cmp(got) != 0 {
			return true
		}
	}
	return false
}

// ResourcesReported reports whether the API server accepts a resize of pod
// as far as its kubelet is concerned: as kube-apiserver's
// isPodResizeRequestSupported decides it (Kubernetes 1.33 to 1.37), the
// first running container in status.containerStatuses reports its
// resources, or no container runs yet.
func ResourcesReported(pod *corev1.Pod) bool {
	for _, cs := range pod.Status.ContainerStatuses {
		if cs.State.Running != nil {
			return cs.Resources != nil
		}
	}
	return true
}

// NodeNotReady reports whether a node whose Ready condition has status
// ready (empty: it has none) is known not to be Ready: a pod not at the size
// on it is neither sent a resize nor holds a place of the pacing, as its
// kubelet would never answer. A node without a Ready condition yet is not.
func NodeNotReady(ready corev1.ConditionStatus) bool {
	return ready != "" && ready != corev1.ConditionTrue
}

// HeldView puts the size the pods are held at (held, status.inPlace's
// resources) over r, the template container's resources, for the managed
// resources: the in-place decision compares the estimate with it, not with
// the template, which keeps its own resources in InPlace mode (deciding
// against it would resize again at every sync). With setLimits false the
// template's limit of a held request is left out: in place each running
// pod's own limit binds, and each pod's size is capped at it
// (Size.ForPod). r is changed; pass a copy.
func HeldView(r *corev1.ResourceRequirements, managed []corev1.ResourceName, held corev1.ResourceRequirements, setLimits bool) {
	for _, name := range managed {
		if q, ok := held.Requests[name]; ok {
			if r.Requests == nil {
				r.Requests = corev1.ResourceList{}
			}
			r.Requests[name] = q.DeepCopy()
			if !setLimits {
				delete(r.Limits, name)
			}
		}
		if q, ok := held.Limits[name]; ok && setLimits {
			if r.Limits == nil {
				r.Limits = corev1.ResourceList{}
			}
			r.Limits[name] = q.DeepCopy()
		}
	}
}
