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

// The harness's helpers for the tests of updateMode InPlace
// (inplace_sync_test.go, inplace_errors_test.go): the add-on's pods and the
// Nodes they run on, the kubelet's answers, the resizes and workload writes
// a sync made, and an API server that applies pods/resize as a real one
// does.

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"

	scaleplanev1alpha1 "github.com/scaleplane/scaleplane/pkg/apis/scaleplane/v1alpha1"
)

func withInPlace() option {
	return func(ar *scaleplanev1alpha1.AddonResizer) { ar.Spec.UpdateMode = scaleplanev1alpha1.UpdateModeInPlace }
}

// addonPod is a running pod of the add-on made from podTemplate(r), its
// kubelet reporting r applied.
func addonPod(name string, r corev1.ResourceRequirements) *corev1.Pod {
	tmpl := podTemplate(r)
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, UID: types.UID("uid-" + name), ResourceVersion: "1", Generation: 1, Labels: tmpl.Labels},
		Spec:       tmpl.Spec,
		Status:     corev1.PodStatus{Phase: corev1.PodRunning},
	}
	p.Spec.NodeName = "node-0"
	for _, c := range p.Spec.Containers {
		p.Status.ContainerStatuses = append(p.Status.ContainerStatuses, corev1.ContainerStatus{Name: c.Name, Resources: c.Resources.DeepCopy()})
	}
	return p
}

// podsFromClientset makes the in-place resizer read the target's pods from
// the fake clientset, as the informer would show them: a test chooses what
// the kubelet answered by updating them there.
func (h *harness) podsFromClientset() {
	h.c.inPlace.podsOf = func(ctx context.Context, _ cache.ObjectName, namespace string, selector labels.Selector, container string) ([]*corev1.Pod, bool) {
		list, err := h.kube.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: selector.String()})
		h.check(err)
		var out []*corev1.Pod
		for i := range list.Items {
			out = append(out, resizePod(&list.Items[i], container).(*corev1.Pod))
		}
		return out, true
	}
	h.nodesFromClientset()
}

// nodesFromClientset makes the in-place resizer read whether nodes are
// Ready from the fake clientset's Nodes (a pod's node that is not there
// counts as Ready, as for the node watch).
func (h *harness) nodesFromClientset() {
	h.c.inPlace.notReadyNodes = func(ctx context.Context) (notReadyLookup, bool) {
		return func(name string) (corev1.NodeCondition, bool) {
			n, err := h.kube.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return corev1.NodeCondition{}, false
			}
			return readyNode(n).(*nodeReadyState).notReady()
		}, true
	}
}

// kubeletAnswers updates the named pods as their kubelet would: apply
// applies the spec's resources in status; a reason sets PodResizePending.
func (h *harness) kubeletAnswers(reason string, names ...string) {
	h.t.Helper()
	for _, name := range names {
		p, err := h.kube.CoreV1().Pods(ns).Get(h.ctx, name, metav1.GetOptions{})
		h.check(err)
		p.Status.Conditions = nil
		if reason == "apply" {
			for i := range p.Status.ContainerStatuses {
				p.Status.ContainerStatuses[i].Resources = p.Spec.Containers[i].Resources.DeepCopy()
			}
		} else {
			p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodResizePending, Status: corev1.ConditionTrue, Reason: reason, Message: "node-0 says " + reason}}
		}
		_, err = h.kube.CoreV1().Pods(ns).UpdateStatus(h.ctx, p, metav1.UpdateOptions{})
		h.check(err)
	}
}

// podResizes returns the names of the pods resized through pods/resize
// since the last call, and fails on any write to a pod that is not one.
func (h *harness) podResizes() []string {
	h.t.Helper()
	var out []string
	for _, a := range h.kube.Actions() {
		if a.GetResource().Resource != "pods" || !isWrite(a) || a.GetSubresource() == "status" {
			continue
		}
		p, ok := a.(clienttesting.PatchAction)
		if !ok || p.GetSubresource() != "resize" {
			h.t.Errorf("wrote a pod other than through pods/resize: %v", a)
			continue
		}
		out = append(out, p.GetName())
	}
	h.kube.ClearActions()
	return out
}

// workloadWrites counts the writes to Deployments, StatefulSets and
// DaemonSets since the actions were last cleared.
func (h *harness) workloadWrites() int {
	n := 0
	for _, a := range h.kube.Actions() {
		switch a.GetResource().Resource {
		case "deployments", "statefulsets", "daemonsets":
			if isWrite(a) {
				n++
			}
		}
	}
	return n
}

func (h *harness) podRequests(name string) corev1.ResourceList {
	h.t.Helper()
	p, err := h.kube.CoreV1().Pods(ns).Get(h.ctx, name, metav1.GetOptions{})
	h.check(err)
	for _, c := range p.Spec.Containers {
		if c.Name == containerName {
			return c.Resources.Requests
		}
	}
	return nil
}

// apiServerResizes makes pods/resize patches behave as on the API server:
// conditional on the resourceVersion they carry (409 Conflict when the pod
// changed since), and a resize that changes the spec gives the pod a new
// resourceVersion and generation. The fake clientset does neither.
func (h *harness) apiServerResizes() {
	rv := 100
	h.kube.PrependReactor("patch", "pods", func(a clienttesting.Action) (bool, runtime.Object, error) {
		p := a.(clienttesting.PatchAction)
		if p.GetSubresource() != "resize" {
			return false, nil, nil
		}
		obj, err := h.kube.Tracker().Get(corev1.SchemeGroupVersion.WithResource("pods"), p.GetNamespace(), p.GetName())
		if err != nil {
			return true, nil, err
		}
		pod := obj.(*corev1.Pod)
		var body podResizePatchBody
		if err := json.Unmarshal(p.GetPatch(), &body); err != nil {
			return true, nil, err
		}
		if body.Metadata.ResourceVersion != "" && body.Metadata.ResourceVersion != pod.ResourceVersion {
			return true, nil, apierrors.NewConflict(schema.GroupResource{Resource: "pods"}, pod.Name, errors.New("the object has been modified"))
		}
		pod = pod.DeepCopy()
		for i := range pod.Spec.Containers {
			c := &pod.Spec.Containers[i]
			for _, pc := range body.Spec.Containers {
				if pc.Name != c.Name {
					continue
				}
				for name, q := range pc.Resources.Requests {
					c.Resources.Requests[name] = q
				}
				for name, q := range pc.Resources.Limits {
					if c.Resources.Limits == nil {
						c.Resources.Limits = corev1.ResourceList{}
					}
					c.Resources.Limits[name] = q
				}
			}
		}
		rv++
		pod.ResourceVersion = strconv.Itoa(rv)
		pod.Generation++
		if err := h.kube.Tracker().Update(corev1.SchemeGroupVersion.WithResource("pods"), pod, pod.Namespace); err != nil {
			return true, nil, err
		}
		return true, pod, nil
	})
}

// podsFromSnapshot makes the in-place resizer read the target's pods from
// a snapshot of the fake clientset that catchUp takes: a pod informer that
// lags behind the API server until the test lets it catch up.
func (h *harness) podsFromSnapshot() (catchUp func()) {
	var snapshot []*corev1.Pod
	catchUp = func() {
		list, err := h.kube.CoreV1().Pods(ns).List(h.ctx, metav1.ListOptions{})
		h.check(err)
		snapshot = nil
		for i := range list.Items {
			snapshot = append(snapshot, resizePod(&list.Items[i], containerName).(*corev1.Pod))
		}
	}
	catchUp()
	h.c.inPlace.podsOf = func(context.Context, cache.ObjectName, string, labels.Selector, string) ([]*corev1.Pod, bool) {
		return snapshot, true
	}
	h.nodesFromClientset()
	return catchUp
}

// node is a Node whose Ready condition has status ready.
func node(name string, ready corev1.ConditionStatus) *corev1.Node {
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID("uid-" + name), ResourceVersion: "1"},
		Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{
			Type: corev1.NodeReady, Status: ready, Reason: "NodeStatusUnknown", Message: "Kubelet stopped posting node status.",
			LastTransitionTime: metav1.NewTime(t0.Add(-time.Hour)),
		}}},
	}
}

// onNode is pod bound to nodeName.
func onNode(pod *corev1.Pod, nodeName string) *corev1.Pod {
	pod.Spec.NodeName = nodeName
	return pod
}
