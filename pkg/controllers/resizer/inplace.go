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
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	scaleplanev1alpha1 "github.com/scaleplane/scaleplane/pkg/apis/scaleplane/v1alpha1"
	"github.com/scaleplane/scaleplane/pkg/inplaceresize"
)

// Reasons of InPlaceResized.
const (
	reasonAtSize        = "AtSize"
	reasonNoRunningPods = "NoRunningPods"
	reasonResizing      = "Resizing"
	reasonDeferred      = "Deferred"
	reasonInfeasible    = "Infeasible"
	reasonResizeError   = "ResizeError"
	reasonResizeReject  = "ResizeRejected"
	reasonUnreported    = "ResourcesNotReported"
	reasonConflict      = "ResizeConflict"
	reasonNodeNotReady  = "NodeNotReady"
)

// inPlaceWarningReasons are the reasons of InPlaceResized=False that are
// also Warning events, sent when the condition turns to one of them.
var inPlaceWarningReasons = []string{reasonDeferred, reasonInfeasible, reasonResizeError, reasonResizeReject, reasonResizeForbidden, reasonConflict}

// inPlace reports whether ar asks for in-place resizes. All three target
// kinds are resized in place the same way: none of their controllers
// compares its pods' resources with its template (they tell their pods
// apart by the pod-template-hash or controller-revision-hash label), so a
// pod resized in place is neither replaced nor counted out of date.
func inPlace(ar *scaleplanev1alpha1.AddonResizer) bool {
	return ar.Spec.UpdateMode == scaleplanev1alpha1.UpdateModeInPlace
}

// inPlaceResizer resizes the target's pods through pods/resize for the
// AddonResizers with updateMode InPlace: their informers, and what is
// remembered of resizes the API server refused.
type inPlaceResizer struct {
	kubeClient kubernetes.Interface
	recorder   record.EventRecorder
	watches    *podWatches
	memory     *podMemory
	// podsOf returns the running target pods of an AddonResizer, and
	// whether they are known yet: watches.pods, or the tests' own.
	podsOf func(ctx context.Context, key cache.ObjectName, namespace string, selector labels.Selector, container string) ([]*corev1.Pod, bool)
	// nodes watches whether nodes are Ready; notReadyNodes reads it (or
	// the tests' own), and whether it is known yet.
	nodes         *nodeReadiness
	notReadyNodes func(ctx context.Context) (notReadyLookup, bool)
}

func newInPlaceResizer(kubeClient kubernetes.Interface, recorder record.EventRecorder, enqueue func(cache.ObjectName)) *inPlaceResizer {
	ip := &inPlaceResizer{
		kubeClient: kubeClient,
		recorder:   recorder,
		watches:    newPodWatches(kubeClient, enqueue),
		memory:     newPodMemory(),
	}
	ip.podsOf = ip.watches.pods
	// A node turning Ready or not changes which pods may be resized: the
	// InPlace AddonResizers (those with a pod watch) sync.
	ip.nodes = newNodeReadiness(kubeClient, func() {
		for _, key := range ip.watches.keys() {
			enqueue(key)
		}
	})
	ip.notReadyNodes = ip.nodes.lookup
	return ip
}

// start lets the pod and node informers run under ctx; wait returns once
// they all stopped after ctx ended.
func (ip *inPlaceResizer) start(ctx context.Context) {
	ip.watches.start(ctx)
	ip.nodes.start(ctx)
}

func (ip *inPlaceResizer) wait() {
	ip.watches.wait()
	ip.nodes.wait()
}

// forget drops everything kept for key: its AddonResizer was deleted, or
// is back to Rollout.
func (ip *inPlaceResizer) forget(key cache.ObjectName) {
	ip.watches.stop(key)
	ip.memory.forget(key)
	for _, st := range podStates {
		inPlacePods.DeleteLabelValues(key.Namespace, key.Name, string(st))
	}
}

// rollout clears the in-place part of status of an AddonResizer resized
// by rollouts.
func (ip *inPlaceResizer) rollout(ar *scaleplanev1alpha1.AddonResizer, status *scaleplanev1alpha1.AddonResizerStatus) {
	ip.forget(cache.MetaObjectToName(ar))
	status.InPlace = nil
	meta.RemoveStatusCondition(&status.Conditions, scaleplanev1alpha1.ConditionInPlaceResized)
}

// inPlaceView returns the target as the in-place decision sees it: its
// container at the size the pods are held at (status.inPlace), where
// status has one (inplaceresize.HeldView, which kubectl-scaleplane
// shares). The template keeps its own resources in InPlace mode, so
// deciding against it would resize again at every sync. With setLimits
// false the template's limit of a held request is left out: in place each
// running pod's own limit binds, and each pod's size is capped at it
// (inplaceresize.Size.ForPod), whether it is lower than the template's or higher.
// The result is a copy: w is the cache's.
func inPlaceView(w *workload, s settings, status *scaleplanev1alpha1.AddonResizerStatus) *workload {
	view := *w
	view.template = w.template.DeepCopy()
	c := view.container(s.container)
	if c == nil || status.InPlace == nil {
		return &view
	}
	inplaceresize.HeldView(&c.Resources, s.managed(), status.InPlace.Resources, s.setLimits)
	return &view
}

// heldSize is the in-place size of the managed resources of r: requests,
// and limits when the AddonResizer sets them. A resource r does not set is
// left out, so it is not added to the pods.
func heldSize(r corev1.ResourceRequirements, s settings) corev1.ResourceRequirements {
	out := corev1.ResourceRequirements{}
	for _, name := range s.managed() {
		if q, ok := r.Requests[name]; ok {
			if out.Requests == nil {
				out.Requests = corev1.ResourceList{}
			}
			out.Requests[name] = q.DeepCopy()
		}
		if q, ok := r.Limits[name]; ok && s.setLimits {
			if out.Limits == nil {
				out.Limits = corev1.ResourceList{}
			}
			out.Limits[name] = q.DeepCopy()
		}
	}
	return out
}

// applyChanges returns r with the changes applied, as the template patch
// would have applied them.
func applyChanges(r corev1.ResourceRequirements, changes []resourceChange, setLimits bool) corev1.ResourceRequirements {
	out := *r.DeepCopy()
	for _, ch := range changes {
		if out.Requests == nil {
			out.Requests = corev1.ResourceList{}
		}
		out.Requests[ch.name] = ch.to.DeepCopy()
		if setLimits {
			if out.Limits == nil {
				out.Limits = corev1.ResourceList{}
			}
			out.Limits[ch.name] = ch.to.DeepCopy()
		}
	}
	return out
}

// resize decides as Rollout mode does, against the size the pods are held
// at; a decided change becomes the new held size in status, with a Resized
// event that says in place; then the pods are brought to the held size.
func (ip *inPlaceResizer) resize(ctx context.Context, ar *scaleplanev1alpha1.AddonResizer, s settings, w *workload, z sizing, status *scaleplanev1alpha1.AddonResizerStatus, now time.Time) result {
	if status.InPlace == nil || len(status.InPlace.Resources.Requests)+len(status.InPlace.Resources.Limits) == 0 {
		// No held size: a new AddonResizer, or one deleted and created
		// again (a GitOps replace, a Helm reinstall, a restore). Its pods
		// may run at a size the template never had: start from it, or a
		// change postponed by a delay would hold the template's stale size
		// and bring the pods down to it at once.
		held, ok, r := ip.runningSize(ctx, ar, s, w)
		if r != nil {
			return *r
		}
		if ok {
			status.InPlace = &scaleplanev1alpha1.InPlaceStatus{Resources: held}
		}
	}
	view := inPlaceView(w, s, status)
	rs, r, act := planResize(ar, s, view, z, status, now)
	container := view.container(s.container)
	if container == nil {
		return r
	}
	if status.InPlace == nil {
		status.InPlace = &scaleplanev1alpha1.InPlaceStatus{}
	}
	if act {
		status.InPlace.Resources = heldSize(applyChanges(container.Resources, rs.changes, s.setLimits), s)
		r = ip.resized(ctx, ar, s, w, z, rs, status, now)
	} else if len(status.InPlace.Resources.Requests)+len(status.InPlace.Resources.Limits) == 0 {
		// First sync in InPlace mode, within the band: the pods are held at
		// the template's size.
		status.InPlace.Resources = heldSize(container.Resources, s)
	} else {
		// What is held stays what the spec manages: a resource no longer
		// listed, or limits after setLimits turned false, are not the
		// resizer's to set any more (a held limit would go on being sent,
		// and refused, at every pod).
		status.InPlace.Resources = heldSize(status.InPlace.Resources, s)
	}
	pr := ip.resizePods(ctx, ar, s, w, status, now)
	r.requeue = minPositive(r.requeue, pr.requeue)
	r.err = pr.err
	if pr.err != nil {
		r.outcome = outcomeError
	}
	return r
}

// runningSize returns the size (heldSize) of the container in the target's
// running pods, as their specs have it: the size most of them have (a tie
// goes to the size that reached the count first, pods taken by name);
// false when no pod runs. A non-nil result says the pods are not known
// yet, or the selector is not valid.
func (ip *inPlaceResizer) runningSize(ctx context.Context, ar *scaleplanev1alpha1.AddonResizer, s settings, w *workload) (corev1.ResourceRequirements, bool, *result) {
	selector, err := metav1.LabelSelectorAsSelector(w.selector)
	if err != nil {
		return corev1.ResourceRequirements{}, false, &result{outcome: outcomeError, err: fmt.Errorf("the selector of %s is not valid: %w", w, err)}
	}
	pods, synced := ip.podsOf(ctx, cache.MetaObjectToName(ar), w.namespace, selector, s.container)
	if !synced {
		return corev1.ResourceRequirements{}, false, &result{wait: cacheRetry}
	}
	counts := map[string]int{}
	var best corev1.ResourceRequirements
	bestKey, found := "", false
	for _, pod := range pods {
		if pod.DeletionTimestamp != nil || pod.Spec.NodeName == "" || pod.Status.Phase != corev1.PodRunning {
			continue
		}
		for _, c := range pod.Spec.Containers {
			if c.Name != s.container {
				continue
			}
			size := heldSize(c.Resources, s)
			k := resourceListString(size.Requests) + "|" + resourceListString(size.Limits)
			counts[k]++
			if !found || counts[k] > counts[bestKey] {
				best, bestKey, found = size, k, true
			}
		}
	}
	return best, found, nil
}

// resized records an in-place resize: in status, as a Normal event saying
// old -> new, in place, and in the log.
func (ip *inPlaceResizer) resized(ctx context.Context, ar *scaleplanev1alpha1.AddonResizer, s settings, w *workload, z sizing, rs resize, status *scaleplanev1alpha1.AddonResizerStatus, now time.Time) result {
	status.PendingResize = nil
	status.LastChangeTime = ptr.To(metav1.NewTime(now).Rfc3339Copy())
	if len(rs.capped) > 0 {
		cappedCondition(status, s, w, rs, ar.Generation, now)
	} else {
		setCondition(status, scaleplanev1alpha1.ConditionUpToDate, metav1.ConditionTrue, reasonResized,
			fmt.Sprintf("Resized in place for cluster size %d %s", z.size, s.unit()), ar.Generation, now)
	}
	changes := describe(rs.changes, s.setLimits)
	msg := fmt.Sprintf("Resized container %q of %s in place (pods/resize, no rollout; the pod template is unchanged): %s; cluster size %d %s (%s)",
		s.container, w, changes, z.size, s.unit(), s.mode)
	if z.units != z.size {
		msg += fmt.Sprintf(", estimated for %d (%s)", z.units, s.estimator)
	}
	ip.recorder.Event(ar, corev1.EventTypeNormal, eventResized, msg)
	klog.FromContext(ctx).V(2).Info("Resized in place", "target", w.String(), "container", s.container, "clusterSize", z.size, "changes", changes)
	return result{outcome: outcomeResized}
}

// resizePods brings the running pods of the target to status.inPlace's
// size and records where they are: status.inPlace's counts, the
// InPlaceResized condition, and resizer_in_place_pods.
func (ip *inPlaceResizer) resizePods(ctx context.Context, ar *scaleplanev1alpha1.AddonResizer, s settings, w *workload, status *scaleplanev1alpha1.AddonResizerStatus, now time.Time) result {
	key := cache.MetaObjectToName(ar)
	selector, err := metav1.LabelSelectorAsSelector(w.selector)
	if err != nil {
		return result{err: fmt.Errorf("the selector of %s is not valid: %w", w, err)}
	}
	pods, synced := ip.podsOf(ctx, key, w.namespace, selector, s.container)
	if !synced {
		return result{requeue: cacheRetry}
	}
	unready, synced := ip.notReadyNodes(ctx)
	if !synced {
		return result{requeue: cacheRetry}
	}
	size := inPlaceSize{requests: status.InPlace.Resources.Requests, limits: status.InPlace.Resources.Limits}
	survey, err := resizePods(ctx, ip.kubeClient, ip.memory, key, pods, s.container, size, unready, now)
	status.InPlace.Pods = int32(len(survey.answers))
	status.InPlace.AtSize = int32(survey.count(podAtSize))
	for _, st := range podStates {
		inPlacePods.WithLabelValues(ar.Namespace, ar.Name, string(st)).Set(float64(survey.count(st)))
	}
	inPlaceCondition(status, ar, w, s, survey, now)
	if a, n := survey.firstCapped(); n > 0 {
		// The decision sees the template's limits; in place each pod's own
		// bind, and they may be lower.
		setCondition(status, scaleplanev1alpha1.ConditionUpToDate, metav1.ConditionFalse, reasonCappedAtLimit,
			fmt.Sprintf("Requests of container %q of pod %s capped at the pod's own limits (%s; %d of %d pods capped): setLimits is false and a request may not exceed its limit, and in place the limits that bind are each running pod's, not the template's; raise the pods' limits (a rollout, or setLimits: true to size them too)",
				s.container, a.pod.Name, describeCapped(a.capped), n, len(survey.answers)),
			ar.Generation, now)
	}
	return result{err: err, requeue: survey.retry}
}

// inPlaceCondition sets InPlaceResized from the pods' states. The worst
// answer wins, in the order a user must act on it: a refusal, a node that
// will never fit the size, a kubelet error, a node without room for now,
// pods on their way.
func inPlaceCondition(status *scaleplanev1alpha1.AddonResizerStatus, ar *scaleplanev1alpha1.AddonResizer, w *workload, s settings, survey podSurvey, now time.Time) {
	gen := ar.Generation
	set := func(st metav1.ConditionStatus, reason, msg string) {
		setCondition(status, scaleplanev1alpha1.ConditionInPlaceResized, st, reason, msg, gen, now)
	}
	size := describeHeld(status.InPlace.Resources)
	total := len(survey.answers)
	if a, ok := survey.first(podRejected); ok {
		set(metav1.ConditionFalse, reasonResizeReject, fmt.Sprintf("The API server refused to resize pod %s to %s (%d of %d pods refused); not retried at this size: %s",
			a.pod.Name, size, survey.count(podRejected), total, a.message))
		return
	}
	if a, ok := survey.first(podForbidden); ok {
		set(metav1.ConditionFalse, reasonResizeForbidden, fmt.Sprintf("The API server forbade the resize of pod %s to %s (%d of %d pods); tried again with backoff, up to every %s: %s",
			a.pod.Name, size, survey.count(podForbidden), total, maxConflictBackoff, a.message))
		return
	}
	if a, ok := survey.first(podInfeasible); ok {
		set(metav1.ConditionFalse, reasonInfeasible, fmt.Sprintf("The kubelet of node %s cannot resize pod %s to %s (%d of %d pods Infeasible); abandoned at this size, the pod keeps running at its old size: %s",
			a.pod.Spec.NodeName, a.pod.Name, size, survey.count(podInfeasible), total, a.message))
		return
	}
	if a, ok := survey.first(podError); ok {
		set(metav1.ConditionFalse, reasonResizeError, fmt.Sprintf("The kubelet of node %s failed to resize pod %s to %s and retries: %s",
			a.pod.Spec.NodeName, a.pod.Name, size, a.message))
		return
	}
	if a, ok := survey.first(podConflicted); ok {
		set(metav1.ConditionFalse, reasonConflict, fmt.Sprintf("Pod %s changed between every read and its resize to %s (another writer keeps changing it, or the resizer's pod watch lags); tried again with backoff, up to every %s: %s",
			a.pod.Name, size, maxConflictBackoff, a.message))
		return
	}
	if a, ok := survey.first(podDeferred); ok {
		set(metav1.ConditionFalse, reasonDeferred, fmt.Sprintf("The kubelet of node %s deferred the resize of pod %s to %s until the node has room (%d of %d pods Deferred; at most %d pods are resized at a time): %s",
			a.pod.Spec.NodeName, a.pod.Name, size, survey.count(podDeferred), total, maxResizesInFlight, a.message))
		return
	}
	if a, ok := survey.first(podUnreported); ok {
		// No Warning event: kwok's stages, unlike a kubelet, report the
		// resources a moment after the pod runs, and a warning for every
		// pod start would be noise. A node that never reports them keeps
		// this condition.
		set(metav1.ConditionFalse, reasonUnreported, fmt.Sprintf("The kubelet of node %s reports no resources for the running containers of pod %s (%d of %d pods), so the API server would refuse to resize it: the node does not resize in place (a kubelet before 1.33, or InPlacePodVerticalScaling off), or has not reported them yet; it is resized to %s once it does",
			a.pod.Spec.NodeName, a.pod.Name, survey.count(podUnreported), total, size))
		return
	}
	if n := survey.count(podNodeNotReady); n > 0 {
		var waiting []string
		for _, a := range survey.answers {
			if a.state == podNodeNotReady && len(waiting) < 3 {
				waiting = append(waiting, fmt.Sprintf("%s (%s)", a.pod.Name, a.message))
			}
		}
		set(metav1.ConditionFalse, reasonNodeNotReady, fmt.Sprintf("%d of %d running pods wait for their node to be Ready again before they are resized to %s (they hold no place of the pacing: a kubelet that is down never answers; %d of %d pods at size): %s",
			n, total, size, survey.count(podAtSize), total, strings.Join(waiting, "; ")))
		return
	}
	if total == 0 {
		set(metav1.ConditionTrue, reasonNoRunningPods, fmt.Sprintf("%s has no running pods to resize; each is resized to %s once it runs (on a Karmada control plane the pods are in member clusters: use updateMode Rollout)", w, size))
		return
	}
	if atSize := survey.count(podAtSize); atSize < total {
		var waiting []string
		for _, a := range survey.answers {
			if a.state != podAtSize && len(waiting) < 3 {
				waiting = append(waiting, a.pod.Name)
			}
		}
		set(metav1.ConditionFalse, reasonResizing, fmt.Sprintf("%d of %d running pods of %s at %s; resizing in place, at most %d at a time (waiting: %s)",
			atSize, total, w, size, maxResizesInFlight, strings.Join(waiting, ", ")))
		return
	}
	set(metav1.ConditionTrue, reasonAtSize, fmt.Sprintf("All %d running pods of %s run at %s, resized in place", total, w, size))
}

// describeHeld says a held size: "requests cpu=48m,memory=104Mi, limits ...".
func describeHeld(r corev1.ResourceRequirements) string {
	out := "requests " + resourceListString(r.Requests)
	if len(r.Limits) > 0 {
		out += ", limits " + resourceListString(r.Limits)
	}
	return out
}

// warnInPlaceTransition sends a Warning event when InPlaceResized turns
// False for a reason a user must know: the kubelet's or API server's
// answer, or a fallback to rollouts.
func warnInPlaceTransition(recorder record.EventRecorder, ar *scaleplanev1alpha1.AddonResizer, old, status *scaleplanev1alpha1.AddonResizerStatus) {
	cond := meta.FindStatusCondition(status.Conditions, scaleplanev1alpha1.ConditionInPlaceResized)
	if cond == nil || cond.Status != metav1.ConditionFalse || !slices.Contains(inPlaceWarningReasons, cond.Reason) {
		return
	}
	if prev := meta.FindStatusCondition(old.Conditions, scaleplanev1alpha1.ConditionInPlaceResized); prev != nil && prev.Status == cond.Status && prev.Reason == cond.Reason {
		return
	}
	recorder.Event(ar, corev1.EventTypeWarning, cond.Reason, cond.Message)
}
