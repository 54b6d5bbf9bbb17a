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

package main

import (
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
)

// tracker follows the add-on's pods through one resize, from a watch:
// which are new, which of the old ones are gone, and when every pod first
// ran at the new size.
type tracker struct {
	mu      sync.Mutex
	want    corev1.ResourceList
	initial map[types.UID]bool
	pods    map[types.UID]*corev1.Pod

	created, deleted int
	// firstChange: the first new pod, or the first pod resized in place.
	// atSize: replicas pods, none being deleted, every one Running with
	// the new requests in its spec and in its status (the kubelet's, here
	// kwok's, report). oldGone: no pod of before is left.
	firstChange, atSize, oldGone time.Time
	done                         chan struct{}
}

func newTracker(pods []corev1.Pod, want corev1.ResourceList) *tracker {
	tr := &tracker{want: want, initial: uids(pods), pods: map[types.UID]*corev1.Pod{}, done: make(chan struct{})}
	for i := range pods {
		tr.pods[pods[i].UID] = &pods[i]
	}
	return tr
}

func (tr *tracker) handle(ev watch.Event, at time.Time) {
	pod, ok := ev.Object.(*corev1.Pod)
	if !ok {
		return
	}
	tr.mu.Lock()
	defer tr.mu.Unlock()
	switch ev.Type {
	case watch.Added:
		if !tr.initial[pod.UID] && tr.pods[pod.UID] == nil {
			tr.created++
			tr.first(at)
		}
		tr.pods[pod.UID] = pod
	case watch.Modified:
		if tr.initial[pod.UID] && sameRequests(requests(pod), tr.want) {
			tr.first(at)
		}
		tr.pods[pod.UID] = pod
	case watch.Deleted:
		if tr.pods[pod.UID] != nil && tr.initial[pod.UID] {
			tr.deleted++
		}
		delete(tr.pods, pod.UID)
	}
	if tr.atSize.IsZero() && tr.allAtSize() {
		tr.atSize = at
	}
	old := 0
	for uid := range tr.pods {
		if tr.initial[uid] {
			old++
		}
	}
	if tr.oldGone.IsZero() && old == 0 {
		tr.oldGone = at
	}
	// Done once at size with nothing left to go: in place, the old pods
	// are the pods; by rollout, the old ones are deleted too.
	if !tr.atSize.IsZero() && len(tr.pods) == replicas && (old == 0 || old == replicas) {
		select {
		case <-tr.done:
		default:
			close(tr.done)
		}
	}
}

func (tr *tracker) first(at time.Time) {
	if tr.firstChange.IsZero() {
		tr.firstChange = at
	}
}

// requests are the add-on container's requests in pod's spec.
func requests(pod *corev1.Pod) corev1.ResourceList {
	for _, c := range pod.Spec.Containers {
		if c.Name == container {
			return c.Resources.Requests
		}
	}
	return nil
}

// applied are the requests pod's kubelet reports for the add-on container.
func applied(pod *corev1.Pod) corev1.ResourceList {
	for _, cs := range pod.Status.ContainerStatuses {
		if cs.Name == container && cs.Resources != nil {
			return cs.Resources.Requests
		}
	}
	return nil
}

// allAtSize: replicas pods not being deleted, each Running at the wanted
// requests in spec and status.
func (tr *tracker) allAtSize() bool {
	n := 0
	for _, p := range tr.pods {
		if p.DeletionTimestamp != nil {
			continue
		}
		n++
		if p.Status.Phase != corev1.PodRunning || !sameRequests(requests(p), tr.want) || !sameRequests(applied(p), tr.want) {
			return false
		}
	}
	return n == replicas
}

// describe says where each pod is, for a failure.
func (tr *tracker) describe() string {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	var out []string
	for _, p := range tr.pods {
		out = append(out, fmt.Sprintf("%s (%s, deleting %v, spec %v, status %v)", p.Name, p.Status.Phase, p.DeletionTimestamp != nil,
			list(requests(p)), list(applied(p))))
	}
	sort.Strings(out)
	return strings.Join(out, "; ")
}

// list says cpu and memory of l.
func list(l corev1.ResourceList) string {
	if l == nil {
		return "none"
	}
	cpu, mem := l[corev1.ResourceCPU], l[corev1.ResourceMemory]
	return cpu.String() + "/" + mem.String()
}
