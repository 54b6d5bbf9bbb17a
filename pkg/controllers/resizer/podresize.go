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
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/resourceversion"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/scaleplane/scaleplane/pkg/inplaceresize"
)

// maxResizesInFlight is how many pods of one target may be mid-resize at
// once (inplaceresize.MaxInFlight).
const maxResizesInFlight = inplaceresize.MaxInFlight

const (
	// maxResizeConflicts is how many conflicts in a row one pod's resize
	// meets before the resizer reports it (InPlaceResized False, reason
	// ResizeConflict, a Warning event). One conflict is ordinary: the
	// kubelet wrote the pod's status after the cache showed it. Five in a
	// row mean another writer keeps changing the pod, or the pod watch
	// lags far behind.
	maxResizeConflicts = 5
	// maxConflictBackoff caps the wait before the next attempt at a pod
	// whose resizes conflict, or are forbidden: it doubles from cacheRetry
	// with each failure in a row.
	maxConflictBackoff = 5 * time.Minute
)

// retryBackoff is how long a pod's next resize waits after n failures in
// a row (conflicts, or refusals that may pass): 1 s, 2 s, 4 s, ... up to
// maxConflictBackoff.
func retryBackoff(n int) time.Duration {
	d := cacheRetry
	for i := 1; i < n && d < maxConflictBackoff; i++ {
		d *= 2
	}
	return min(d, maxConflictBackoff)
}

// podState is where one pod is on the way to the in-place size.
type podState string

// The states, also the values of resizer_in_place_pods' state label.
const (
	// The states a pod shows by itself (see inplaceresize): at_size,
	// outdated, resizing, deferred, infeasible, error, unreported.
	podAtSize     = podState(inplaceresize.AtSize)
	podOutdated   = podState(inplaceresize.Outdated)
	podResizing   = podState(inplaceresize.Resizing)
	podDeferred   = podState(inplaceresize.Deferred)
	podInfeasible = podState(inplaceresize.Infeasible)
	podError      = podState(inplaceresize.Error)
	podUnreported = podState(inplaceresize.Unreported)
	// The states the resizer adds from its memory and the nodes.
	//
	// podRejected: the API server refused the resize (422, 403, 400);
	// abandoned at this size.
	podRejected podState = "rejected"
	// podConflicted: its resize met maxResizeConflicts conflicts or more in
	// a row (the pod changed between each read and the patch); still
	// tried, with backoff.
	podConflicted podState = "conflicted"
	// podForbidden: the API server answered its resize 403 Forbidden for a
	// reason that may pass (RBAC not granted yet, a ResourceQuota without
	// room); tried again with backoff.
	podForbidden podState = "forbidden"
	// podNodeNotReady: not at the size, on a node whose Ready condition is
	// not True. Its kubelet would not answer (a DaemonSet's pod stays
	// Running on a dead node); neither sent a resize nor holding a place,
	// it is resized once its node is Ready again.
	podNodeNotReady podState = "node_not_ready"
)

var podStates = []podState{podAtSize, podOutdated, podResizing, podDeferred, podInfeasible, podError, podRejected, podUnreported, podConflicted, podForbidden, podNodeNotReady}

// inFlight reports whether a pod in state s holds a place of the pacing
// (inplaceresize.State.InFlight; a rejected pod does not either).
func (s podState) inFlight() bool {
	return inplaceresize.State(s).InFlight()
}

// inPlaceSize is the size the target's pods are resized to: the managed
// requests, and limits when the AddonResizer sets them.
type inPlaceSize struct {
	requests corev1.ResourceList
	limits   corev1.ResourceList
}

func (z inPlaceSize) shared() inplaceresize.Size {
	return inplaceresize.Size{Requests: z.requests, Limits: z.limits}
}

func sizeOf(z inplaceresize.Size) inPlaceSize {
	return inPlaceSize{requests: z.Requests, limits: z.Limits}
}

// key identifies the size in the memory of rejected resizes.
func (z inPlaceSize) key() string { return z.shared().Key() }

func resourceListString(l corev1.ResourceList) string { return inplaceresize.ResourceListString(l) }

func cappedOf(c []inplaceresize.Capped) []cappedResource {
	var out []cappedResource
	for _, x := range c {
		out = append(out, cappedResource{name: x.Name, estimate: x.Estimate, limit: x.Limit})
	}
	return out
}

// podAnswer is one pod's state, and what its kubelet said.
type podAnswer struct {
	pod     *corev1.Pod
	state   podState
	message string
	// midResize is set on an outdated pod whose kubelet has not applied
	// the size it was sent before (a size older than this one): it holds a
	// place of the pacing, and is sent the new size before any other pod.
	midResize bool
	// size is the pod's own size: the size capped at its limits, capped
	// says which (inplaceresize.Size.ForPod).
	size   inPlaceSize
	capped []cappedResource
}

// classify tells where pod is on the way to size, by the rule
// kubectl-scaleplane shares (inplaceresize.Classify); false for a pod not
// to be resized (not running, not bound, being deleted, without the
// container).
func classify(pod *corev1.Pod, container string, size inPlaceSize) (podAnswer, bool) {
	a, ok := inplaceresize.Classify(pod, container, size.shared())
	if !ok {
		return podAnswer{}, false
	}
	return podAnswer{pod: pod, state: podState(a.State), message: a.Message, midResize: a.MidResize, size: sizeOf(a.Size), capped: cappedOf(a.Capped)}, true
}

// podMemory remembers, per AddonResizer and pod, what the pod informer
// cannot tell yet or at all: the pods whose resize to a size the API server
// refused, so that the same request is not sent again at every sync (it
// would be refused again; a new size tries again); each pod's conflicts in
// a row at a size, which set its backoff; and the pod as the resizer's
// last resize of it left it, until the informer shows that write.
type podMemory struct {
	mu       sync.Mutex
	m        map[cache.ObjectName]map[types.UID]rejection
	backoffs map[cache.ObjectName]map[types.UID]podBackoff
	written  map[cache.ObjectName]map[types.UID]*corev1.Pod
}

// rejection is the API server's refusal of a resize to size.
type rejection struct {
	size    string
	message string
}

// podBackoff gates the next resize of a pod whose resizes to size failed
// in a row, with a conflict or a refusal that may pass: none is sent before
// notBefore, on the controller's clock, whatever syncs come earlier (every
// change of the cluster size syncs). A resize that goes through, or a new
// size, ends it.
type podBackoff struct {
	size      string
	attempts  int
	notBefore time.Time
	// forbidden says the last attempt was refused with 403 Forbidden
	// (message), not a conflict.
	forbidden bool
	message   string
}

func newPodMemory() *podMemory {
	return &podMemory{
		m:        map[cache.ObjectName]map[types.UID]rejection{},
		backoffs: map[cache.ObjectName]map[types.UID]podBackoff{},
		written:  map[cache.ObjectName]map[types.UID]*corev1.Pod{},
	}
}

// wrote remembers pod as the API server answered its resize (stripped as
// the informer strips it), until the informer shows it.
func (r *podMemory) wrote(key cache.ObjectName, pod *corev1.Pod) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.written[key] == nil {
		r.written[key] = map[types.UID]*corev1.Pod{}
	}
	r.written[key][pod.UID] = pod
}

// latest returns the pod as the resizer's last resize left it while the
// cached pod is older than that write (its resourceVersion is smaller; the
// API server's resource versions compare as integers since Kubernetes
// 1.35), and the cached pod otherwise. The pod cache lags behind the
// resizer's own resizes: the sync that its status write triggers right
// after them would see the resized pods as outdated, send resizes bound to
// conflict, and give their places to two more pods.
func (r *podMemory) latest(key cache.ObjectName, cached *corev1.Pod) *corev1.Pod {
	r.mu.Lock()
	defer r.mu.Unlock()
	w, ok := r.written[key][cached.UID]
	if !ok {
		return cached
	}
	if cmp, err := resourceversion.CompareResourceVersion(cached.ResourceVersion, w.ResourceVersion); err == nil && cmp < 0 {
		return w
	}
	// Caught up (or not comparable: the cache is then the truth).
	delete(r.written[key], cached.UID)
	return cached
}

// failed counts a failed resize of uid to size at now (a conflict, or a
// 403 when forbidden) and returns the pod's backoff: attempts in a row at
// that size, and when the next may be sent.
func (r *podMemory) failed(key cache.ObjectName, uid types.UID, size string, now time.Time, forbidden bool, message string) podBackoff {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.backoffs[key] == nil {
		r.backoffs[key] = map[types.UID]podBackoff{}
	}
	b := r.backoffs[key][uid]
	if b.size != size {
		b = podBackoff{size: size}
	}
	b.attempts++
	b.notBefore = now.Add(retryBackoff(b.attempts))
	b.forbidden, b.message = forbidden, message
	r.backoffs[key][uid] = b
	return b
}

// backoff returns the backoff of uid's resizes to size, if any.
func (r *podMemory) backoff(key cache.ObjectName, uid types.UID, size string) (podBackoff, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	b, ok := r.backoffs[key][uid]
	return b, ok && b.size == size
}

// resized ends the backoff of uid: its resize went through.
func (r *podMemory) resized(key cache.ObjectName, uid types.UID) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.backoffs[key], uid)
}

func (r *podMemory) get(key cache.ObjectName, uid types.UID, size string) (string, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	rej, ok := r.m[key][uid]
	if !ok || rej.size != size {
		return "", false
	}
	return rej.message, true
}

func (r *podMemory) add(key cache.ObjectName, uid types.UID, size, message string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.m[key] == nil {
		r.m[key] = map[types.UID]rejection{}
	}
	r.m[key][uid] = rejection{size: size, message: message}
}

// keep drops what is remembered about pods of key no longer seen.
func (r *podMemory) keep(key cache.ObjectName, seen map[types.UID]bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for uid := range r.m[key] {
		if !seen[uid] {
			delete(r.m[key], uid)
		}
	}
	for uid := range r.backoffs[key] {
		if !seen[uid] {
			delete(r.backoffs[key], uid)
		}
	}
	for uid := range r.written[key] {
		if !seen[uid] {
			delete(r.written[key], uid)
		}
	}
}

func (r *podMemory) forget(key cache.ObjectName) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.m, key)
	delete(r.backoffs, key)
	delete(r.written, key)
}

// podSurvey is the target's running pods by state after a pass.
type podSurvey struct {
	answers []podAnswer
	// conflicts is set when a pod changed since the cache showed it: the
	// most conflicts in a row of one pod's resize at this size.
	conflicts int
	// retry is when the first pod held back by its backoff may be resized
	// again; zero if none is.
	retry time.Duration
}

func (s podSurvey) count(state podState) int {
	n := 0
	for _, a := range s.answers {
		if a.state == state {
			n++
		}
	}
	return n
}

// firstCapped returns the first pod whose size its own limits cap, and
// how many are.
func (s podSurvey) firstCapped() (podAnswer, int) {
	var first podAnswer
	n := 0
	for _, a := range s.answers {
		if len(a.capped) > 0 {
			if n == 0 {
				first = a
			}
			n++
		}
	}
	return first, n
}

func (s podSurvey) first(state podState) (podAnswer, bool) {
	for _, a := range s.answers {
		if a.state == state {
			return a, true
		}
	}
	return podAnswer{}, false
}

// resizePods brings the target's running pods to size, maxResizesInFlight
// at a time: it classifies each, and sends one pods/resize patch to each
// outdated pod while fewer than maxResizesInFlight are mid-resize. A pod
// not at size on a node that is not Ready (unready) is left out: its
// kubelet would never answer, and it would hold a place for good. A patch
// the API server refuses for good (invalid, or more than the node's
// allocatable) is remembered and not sent again at this size. A conflict
// (the pod changed since the cache showed it) or a 403 that may pass (RBAC,
// a ResourceQuota) holds the pod's next attempt back until its backoff
// ends at now + 1 s, 2 s, 4 s, ... on the controller's clock, however
// often it is synced before; conflicts are reported once they have
// happened maxResizeConflicts times in a row, a 403 at once. Any other
// error is returned, to be retried with backoff.
func resizePods(ctx context.Context, client kubernetes.Interface, rej *podMemory, key cache.ObjectName, pods []*corev1.Pod, container string, size inPlaceSize, unready notReadyLookup, now time.Time) (podSurvey, error) {
	logger := klog.FromContext(ctx)
	var s podSurvey
	seen := map[types.UID]bool{}
	inFlight := 0
	for _, pod := range pods {
		pod = rej.latest(key, pod)
		a, ok := classify(pod, container, size)
		if !ok {
			continue
		}
		seen[pod.UID] = true
		if a.state == podOutdated {
			if msg, ok := rej.get(key, pod.UID, a.size.key()); ok {
				a.state, a.message = podRejected, msg
			} else if b, ok := rej.backoff(key, pod.UID, a.size.key()); ok {
				a.state, a.message = b.state()
			}
		}
		if a.state != podAtSize && unready != nil {
			if cond, ok := unready(pod.Spec.NodeName); ok {
				a.state, a.midResize = podNodeNotReady, false
				a.message = fmt.Sprintf("node %s Ready %s since %s", pod.Spec.NodeName, cond.Status, cond.LastTransitionTime.UTC().Format(time.RFC3339))
				if cond.Reason != "" {
					a.message += ", " + cond.Reason
				}
			}
		}
		if a.state.inFlight() || a.midResize {
			inFlight++
		}
		s.answers = append(s.answers, a)
	}
	rej.keep(key, seen)
	for i := range s.answers {
		a := &s.answers[i]
		// A pod mid-resize at an older size holds its place already: it is
		// sent the new size whatever the pacing.
		if !a.state.toResize() || !a.midResize && inFlight >= maxResizesInFlight {
			continue
		}
		sizeKey := a.size.key()
		if b, ok := rej.backoff(key, a.pod.UID, sizeKey); ok && now.Before(b.notBefore) {
			s.retry = minPositive(s.retry, b.notBefore.Sub(now))
			continue
		}
		answer, err := patchPodResize(ctx, client, a.pod, container, a.size)
		switch {
		case err == nil:
			logger.V(2).Info("Resized pod in place", "pod", klog.KObj(a.pod), "node", a.pod.Spec.NodeName, "container", container)
			rej.resized(key, a.pod.UID)
			if answer != nil {
				rej.wrote(key, resizePod(answer, container).(*corev1.Pod))
			}
			if !a.midResize {
				inFlight++
			}
			a.state, a.message, a.midResize = podResizing, "", false
		case apierrors.IsNotFound(err):
			// Deleted meanwhile; its informer event will follow.
		case apierrors.IsConflict(err):
			b := rej.failed(key, a.pod.UID, sizeKey, now, false, err.Error())
			s.conflicts = max(s.conflicts, b.attempts)
			s.retry = minPositive(s.retry, b.notBefore.Sub(now))
			logger.V(4).Info("The pod changed since the cache showed it, resizing it later", "pod", klog.KObj(a.pod), "conflicts", b.attempts)
			a.state, a.message = b.state()
		case apierrors.IsForbidden(err) && !nodeRefusal(err):
			// RBAC's answer, or a ResourceQuota's: both may pass (the
			// permission is granted, the quota gets room).
			msg := "forbidden (if by RBAC, grant the controller manager patch on pods/resize in namespace " + a.pod.Namespace +
				"; if by a ResourceQuota, give it room): " + err.Error()
			b := rej.failed(key, a.pod.UID, sizeKey, now, true, msg)
			s.retry = minPositive(s.retry, b.notBefore.Sub(now))
			a.state, a.message = b.state()
		case apierrors.IsInvalid(err) || apierrors.IsForbidden(err) || apierrors.IsBadRequest(err):
			msg := err.Error()
			rej.add(key, a.pod.UID, sizeKey, msg)
			a.state, a.message = podRejected, msg
		default:
			return s, fmt.Errorf("resizing pod %s in place: %w", klog.KObj(a.pod), err)
		}
	}
	return s, nil
}

// toResize reports whether a pod in state s is to be sent the size (when
// the pacing and its backoff allow).
func (s podState) toResize() bool {
	return s == podOutdated || s == podConflicted || s == podForbidden
}

// state is the state and message of a pod held back by b.
func (b podBackoff) state() (podState, string) {
	switch {
	case b.forbidden:
		return podForbidden, b.message
	case b.attempts >= maxResizeConflicts:
		return podConflicted, fmt.Sprintf("%d conflicts in a row, the last: %s", b.attempts, b.message)
	}
	return podOutdated, ""
}

// nodeRefusal reports whether a 403 is the PodResizeValidator admission
// plugin's refusal for the pod's node (kube-apiserver 1.37,
// plugin/pkg/admission/podresize): more than its allocatable (cause
// NodeCapacity) or not Linux (UnsupportedPlatform). The same size would be
// refused again, so it is not retried at that size.
func nodeRefusal(err error) bool {
	var status apierrors.APIStatus
	if !errors.As(err, &status) || status.Status().Details == nil {
		return false
	}
	for _, c := range status.Status().Details.Causes {
		if c.Type == "NodeCapacity" || c.Type == "UnsupportedPlatform" {
			return true
		}
	}
	return false
}

// patchPodResize sends one strategic merge patch of pods/resize that sets
// the managed requests and limits of the one container, by name; other
// resources, and the other containers, are left as they are. The
// resourceVersion makes it conditional on the pod the decision was made
// from.
func patchPodResize(ctx context.Context, client kubernetes.Interface, pod *corev1.Pod, container string, size inPlaceSize) (*corev1.Pod, error) {
	body := podResizePatchBody{
		Metadata: patchMetadata{ResourceVersion: pod.ResourceVersion},
		Spec: patchPodSpec{Containers: []patchContainer{{
			Name:      container,
			Resources: patchResources{Requests: size.requests, Limits: size.limits},
		}}},
	}
	raw, err := json.Marshal(body)
	if err != nil {
		return nil, fmt.Errorf("encoding the resize of pod %s: %w", klog.KObj(pod), err)
	}
	writes.WithLabelValues(writePodResize).Inc()
	return client.CoreV1().Pods(pod.Namespace).Patch(ctx, pod.Name, types.StrategicMergePatchType, raw,
		metav1.PatchOptions{FieldManager: fieldManager}, "resize")
}

// podResizePatchBody is the pods/resize patch, spelled out so that it
// cannot carry more than the one container's managed resources.
type podResizePatchBody struct {
	Metadata patchMetadata `json:"metadata"`
	Spec     patchPodSpec  `json:"spec"`
}
