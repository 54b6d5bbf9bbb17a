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
	"maps"
	"sync"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/cache"
)

// countedPod is all the pod informer keeps of a pod: identity (name,
// namespace, uid, resourceVersion), labels (to leave out the pods of an
// AddonResizer's own target, by its selector), phase, and the number of its
// init, regular and ephemeral containers. A Pod costs about 10 KB in a cache;
// a countedPod a few hundred bytes, most of it the labels, so 150,000 pods
// fit in tens of megabytes. It replaces the Pod in the informer's store (see
// transformPod), so the store, the event handlers and the tombstones of
// deletions all see countedPods.
type countedPod struct {
	metav1.ObjectMeta
	Phase      corev1.PodPhase
	Containers int32
}

// GetObjectKind has no kind to tell: a countedPod never leaves the process.
func (p *countedPod) GetObjectKind() schema.ObjectKind { return schema.EmptyObjectKind }

// DeepCopyObject makes countedPod a runtime.Object, as a store requires.
func (p *countedPod) DeepCopyObject() runtime.Object {
	out := *p
	p.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	return &out
}

// counts reports how many containers the pod adds to the cluster size: none
// once it has succeeded or failed (KEP-5546 counts non-terminal pods only).
func (p *countedPod) counts() int64 {
	if p.Phase == corev1.PodSucceeded || p.Phase == corev1.PodFailed {
		return 0
	}
	return int64(p.Containers)
}

func newCountedPod(pod *corev1.Pod) *countedPod {
	return &countedPod{
		ObjectMeta: metav1.ObjectMeta{
			Name:            pod.Name,
			Namespace:       pod.Namespace,
			UID:             pod.UID,
			ResourceVersion: pod.ResourceVersion,
			Labels:          pod.Labels,
		},
		Phase:      pod.Status.Phase,
		Containers: int32(len(pod.Spec.InitContainers) + len(pod.Spec.Containers) + len(pod.Spec.EphemeralContainers)),
	}
}

// transformPod is the pod informer's transform: it replaces each Pod with
// its countedPod before the informer stores it. Anything else (a countedPod
// already, a tombstone, which holds what the store held) passes unchanged,
// so the transform is idempotent.
func transformPod(obj any) (any, error) {
	if pod, ok := obj.(*corev1.Pod); ok {
		return newCountedPod(pod), nil
	}
	return obj, nil
}

// asCountedPod returns the countedPod of an informer event's object,
// unwrapping the tombstone of a deletion the informer missed.
func asCountedPod(obj any) (*countedPod, bool) {
	if tombstone, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tombstone.Obj
	}
	switch p := obj.(type) {
	case *countedPod:
		return p, true
	case *corev1.Pod:
		return newCountedPod(p), true
	}
	return nil, false
}

// containerCounter keeps the number of containers of the cluster's
// non-terminal pods up to date from pod events, without listing: each event
// replaces what the pod contributed before with what it contributes now. It
// remembers the pods that count, by namespace (the same countedPods the
// informer stores, so it costs a map entry per pod), so that it can leave
// out the pods of one workload and so that an event seen twice, or an update
// whose old object it never saw, cannot skew the total.
type containerCounter struct {
	mu    sync.RWMutex
	sum   int64
	byKey map[string]map[string]*countedPod // namespace, name
}

func newContainerCounter() *containerCounter {
	return &containerCounter{byKey: map[string]map[string]*countedPod{}}
}

// add counts a new pod. It reports whether the count of any AddonResizer
// may have changed.
func (c *containerCounter) add(p *countedPod) bool { return c.set(p) }

// update replaces what the pod counted with what it counts now: a pod that
// reaches Succeeded or Failed stops counting.
func (c *containerCounter) update(oldPod, newPod *countedPod) bool {
	changed := false
	if oldPod != nil && (oldPod.Namespace != newPod.Namespace || oldPod.Name != newPod.Name) {
		changed = c.delete(oldPod)
	}
	return c.set(newPod) || changed
}

// delete stops counting the pod.
func (c *containerCounter) delete(p *countedPod) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	old := c.byKey[p.Namespace][p.Name]
	if old == nil {
		return false
	}
	c.remove(old)
	return true
}

func (c *containerCounter) set(p *countedPod) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	old := c.byKey[p.Namespace][p.Name]
	if old != nil {
		c.remove(old)
	}
	n := p.counts()
	if n > 0 {
		pods := c.byKey[p.Namespace]
		if pods == nil {
			pods = map[string]*countedPod{}
			c.byKey[p.Namespace] = pods
		}
		pods[p.Name] = p
		c.sum += n
	}
	switch {
	case old == nil:
		return n > 0
	case old.counts() != n:
		return true
	default:
		// Same count; a label change can move the pod in or out of a
		// target's selector.
		return n > 0 && !maps.Equal(old.Labels, p.Labels)
	}
}

// remove forgets a counted pod; the caller holds the lock.
func (c *containerCounter) remove(p *countedPod) {
	c.sum -= p.counts()
	pods := c.byKey[p.Namespace]
	delete(pods, p.Name)
	if len(pods) == 0 {
		delete(c.byKey, p.Namespace)
	}
}

// total returns the containers of every non-terminal pod.
func (c *containerCounter) total() int64 {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.sum
}

// excluding returns the total without the pods in namespace that selector
// matches: an add-on's own pods, whose rollout would otherwise change the
// size it is sized by. It costs one pass over that namespace's pods.
func (c *containerCounter) excluding(namespace string, selector labels.Selector) int64 {
	c.mu.RLock()
	defer c.mu.RUnlock()
	n := c.sum
	for _, p := range c.byKey[namespace] {
		if selector.Matches(labels.Set(p.Labels)) {
			n -= p.counts()
		}
	}
	return n
}

// nodeCounter keeps the number of Node objects from node events: every
// node, ready or not, as Addon Resizer counts them.
type nodeCounter struct {
	mu    sync.RWMutex
	names map[string]struct{}
}

func newNodeCounter() *nodeCounter {
	return &nodeCounter{names: map[string]struct{}{}}
}

// add counts a node and reports whether the count changed.
func (c *nodeCounter) add(name string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.names[name]; ok {
		return false
	}
	c.names[name] = struct{}{}
	return true
}

// delete stops counting a node and reports whether the count changed.
func (c *nodeCounter) delete(name string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.names[name]; !ok {
		return false
	}
	delete(c.names, name)
	return true
}

func (c *nodeCounter) count() int64 {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return int64(len(c.names))
}
