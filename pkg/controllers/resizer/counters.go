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
	"slices"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/cache"
)

// countedPod is what counting needs of a pod: its name and namespace, its
// labels (to leave out the pods of an AddonResizer's own target, by its
// selector), its phase, and the number of its init, regular and ephemeral
// containers. It is a pod on its way into the containerCounter (from a watch
// event, a relist, or metrics.k8s.io); the counter keeps far less of it.
type countedPod struct {
	Namespace  string
	Name       string
	Labels     map[string]string
	Phase      corev1.PodPhase
	Containers int32
}

// GetObjectMeta gives the reflector's keying (namespace/name) what it reads,
// so that a countedPod can stand in for its Pod in the reflector's temporary
// store while it streams the initial list.
func (p *countedPod) GetObjectMeta() metav1.Object {
	return &metav1.ObjectMeta{Namespace: p.Namespace, Name: p.Name}
}

// GetObjectKind has no kind to tell: a countedPod never leaves the process.
func (p *countedPod) GetObjectKind() schema.ObjectKind { return schema.EmptyObjectKind }

// DeepCopyObject makes countedPod a runtime.Object, as a store requires.
func (p *countedPod) DeepCopyObject() runtime.Object {
	out := *p
	out.Labels = maps.Clone(p.Labels)
	return &out
}

// counts reports how many containers the pod adds to the cluster size: none
// once it has succeeded or failed (KEP-5546 counts non-terminal pods only).
func (p *countedPod) counts() int32 {
	if p.Phase == corev1.PodSucceeded || p.Phase == corev1.PodFailed {
		return 0
	}
	return p.Containers
}

func newCountedPod(pod *corev1.Pod) *countedPod {
	return &countedPod{
		Namespace:  pod.Namespace,
		Name:       pod.Name,
		Labels:     pod.Labels,
		Phase:      pod.Status.Phase,
		Containers: int32(len(pod.Spec.InitContainers) + len(pod.Spec.Containers) + len(pod.Spec.EphemeralContainers)),
	}
}

// transformPod turns a Pod into its countedPod. Anything else (a countedPod
// already, a tombstone) passes unchanged, so the transform is idempotent.
func transformPod(obj any) (any, error) {
	if pod, ok := obj.(*corev1.Pod); ok {
		return newCountedPod(pod), nil
	}
	return obj, nil
}

// asCountedPod returns the countedPod of a store operation's object,
// unwrapping a tombstone.
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

// podEntry is all the counter keeps per pod: 16 bytes, beside the pod's name
// as the key of its namespace's map. Pods of one workload have the same
// labels, so they share one interned label set.
type podEntry struct {
	containers int32
	labels     *labelSet
}

// labelSet is an interned, reference-counted set of labels.
type labelSet struct {
	set  labels.Set
	key  string
	refs int
}

// containerCounter counts the containers of the cluster's non-terminal pods.
// It is the pod reflector's store (see apiServerCounts): watch events and
// relists go straight into it, so no Pod and no per-pod object is cached,
// and each event adjusts a running total instead of a recount. It keeps, per
// namespace, each counted pod's container count and labels, so that it can
// leave out the pods of one workload, and so that an event seen twice or an
// update of a pod it never saw cannot skew the total. At 150,000 pods that is
// a few tens of bytes a pod, not the 10 KB a cached Pod costs.
type containerCounter struct {
	mu     sync.RWMutex
	sum    int64
	pods   map[string]map[string]podEntry // namespace, name
	labels map[string]*labelSet           // by labelKey

	// onChange, when set, is told (without the lock) that the total or the
	// labels of a counted pod changed, once the initial list is in.
	onChange func()
	synced   bool

	// canonical holds one label map per distinct label set seen while a
	// list streams into the reflector's temporary store (see transform);
	// Replace empties it.
	canonMu   sync.Mutex
	canonical map[string]map[string]string
}

func newContainerCounter() *containerCounter {
	return &containerCounter{pods: map[string]map[string]podEntry{}, labels: map[string]*labelSet{}}
}

// add counts a new pod. It reports whether the count of any AddonResizer
// may have changed.
func (c *containerCounter) add(p *countedPod) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.setLocked(p)
}

// update replaces what the pod counted with what it counts now: a pod that
// reaches Succeeded or Failed stops counting.
func (c *containerCounter) update(oldPod, newPod *countedPod) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	changed := false
	if oldPod != nil && (oldPod.Namespace != newPod.Namespace || oldPod.Name != newPod.Name) {
		changed = c.deleteLocked(oldPod.Namespace, oldPod.Name)
	}
	return c.setLocked(newPod) || changed
}

// delete stops counting the pod.
func (c *containerCounter) delete(p *countedPod) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.deleteLocked(p.Namespace, p.Name)
}

func (c *containerCounter) setLocked(p *countedPod) bool {
	old, had := c.pods[p.Namespace][p.Name]
	n := p.counts()
	if n == 0 {
		return had && c.deleteLocked(p.Namespace, p.Name)
	}
	if had && old.containers == n && maps.Equal(old.labels.set, p.Labels) {
		return false
	}
	if had {
		c.sum -= int64(old.containers)
		c.release(old.labels)
	}
	pods := c.pods[p.Namespace]
	if pods == nil {
		pods = map[string]podEntry{}
		c.pods[p.Namespace] = pods
	}
	pods[p.Name] = podEntry{containers: n, labels: c.intern(p.Labels)}
	c.sum += int64(n)
	return true
}

func (c *containerCounter) deleteLocked(namespace, name string) bool {
	pods := c.pods[namespace]
	old, ok := pods[name]
	if !ok {
		return false
	}
	c.sum -= int64(old.containers)
	c.release(old.labels)
	delete(pods, name)
	if len(pods) == 0 {
		delete(c.pods, namespace)
	}
	return true
}

// intern returns the shared label set equal to set, taking a reference.
func (c *containerCounter) intern(set map[string]string) *labelSet {
	key := labelKey(set)
	if l, ok := c.labels[key]; ok {
		l.refs++
		return l
	}
	l := &labelSet{set: set, key: key, refs: 1}
	c.labels[key] = l
	return l
}

func (c *containerCounter) release(l *labelSet) {
	if l.refs--; l.refs == 0 {
		delete(c.labels, l.key)
	}
}

// labelKey encodes a label set canonically: sorted, with separators that
// cannot occur in label keys or values.
func labelKey(set map[string]string) string {
	keys := slices.Sorted(maps.Keys(set))
	var b strings.Builder
	for _, k := range keys {
		b.WriteString(k)
		b.WriteByte(0)
		b.WriteString(set[k])
		b.WriteByte(0)
	}
	return b.String()
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
	for _, e := range c.pods[namespace] {
		if selector.Matches(e.labels.set) {
			n -= int64(e.containers)
		}
	}
	return n
}

// compact copies what the counter keeps into fresh, contiguous memory: the
// maps and names built while the initial list streamed in lie scattered
// among that list's garbage, which would keep most of its pages resident.
func (c *containerCounter) compact() {
	c.mu.Lock()
	defer c.mu.Unlock()
	sets := make(map[string]*labelSet, len(c.labels))
	for key, l := range c.labels {
		sets[strings.Clone(key)] = &labelSet{set: maps.Clone(l.set), key: strings.Clone(key), refs: l.refs}
	}
	pods := make(map[string]map[string]podEntry, len(c.pods))
	for ns, byName := range c.pods {
		fresh := make(map[string]podEntry, len(byName))
		for name, e := range byName {
			fresh[strings.Clone(name)] = podEntry{containers: e.containers, labels: sets[e.labels.key]}
		}
		pods[strings.Clone(ns)] = fresh
	}
	c.pods, c.labels = pods, sets
}

// hasSynced reports whether the initial list (a Replace) is in.
func (c *containerCounter) hasSynced() bool {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.synced
}

// The cache.Store methods below let a Reflector feed the counter directly.
// Watch events carry Pods; a relist carries what Transformer made of them.

func (c *containerCounter) apply(obj any, op func(*countedPod) bool) error {
	p, ok := asCountedPod(obj)
	if !ok {
		return nil
	}
	if op(p) {
		c.notify()
	}
	return nil
}

func (c *containerCounter) notify() {
	c.mu.RLock()
	synced, onChange := c.synced, c.onChange
	c.mu.RUnlock()
	if synced && onChange != nil {
		onChange()
	}
}

// Add counts a pod the watch reported.
func (c *containerCounter) Add(obj any) error { return c.apply(obj, c.add) }

// Update counts a pod's new state.
func (c *containerCounter) Update(obj any) error {
	return c.apply(obj, func(p *countedPod) bool { return c.update(nil, p) })
}

// Delete stops counting a pod, also one the watch dropped because it reached
// Succeeded or Failed (it no longer matches the field selector).
func (c *containerCounter) Delete(obj any) error { return c.apply(obj, c.delete) }

// Replace recounts from a full list (the initial one, or a relist after the
// watch expired), and marks the counter synced.
func (c *containerCounter) Replace(list []any, _ string) error {
	fresh := newContainerCounter()
	for _, obj := range list {
		if p, ok := asCountedPod(obj); ok {
			fresh.setLocked(p)
		}
	}
	c.canonMu.Lock()
	c.canonical = nil
	c.canonMu.Unlock()
	c.mu.Lock()
	changed := c.sum != fresh.sum || !c.synced
	c.sum, c.pods, c.labels = fresh.sum, fresh.pods, fresh.labels
	wasSynced := c.synced
	c.synced = true
	c.mu.Unlock()
	// The first list is not a change: syncs wait for it anyway.
	if changed && wasSynced {
		c.notify()
	}
	return nil
}

// Transformer makes the reflector keep countedPods, not Pods, while it
// streams the initial list into its temporary store.
func (c *containerCounter) Transformer() cache.TransformFunc { return c.transform }

// transform is transformPod with the labels of pods with equal labels
// shared. The reflector holds every pod of a list in its temporary store
// until the list ends: a label map per pod (ten labels are about a kilobyte)
// would make that 150 MB at 150,000 pods, above everything else the process
// keeps. Pods of one ReplicaSet, DaemonSet or Job revision have equal
// labels, so a cluster has far fewer label sets than pods.
func (c *containerCounter) transform(obj any) (any, error) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return obj, nil
	}
	p := newCountedPod(pod)
	p.Labels = c.canonicalLabels(p.Labels)
	return p, nil
}

// canonicalLabels returns the one map kept for the label set equal to set.
func (c *containerCounter) canonicalLabels(set map[string]string) map[string]string {
	if len(set) == 0 {
		return nil
	}
	key := labelKey(set)
	c.canonMu.Lock()
	defer c.canonMu.Unlock()
	if have, ok := c.canonical[key]; ok {
		return have
	}
	if c.canonical == nil {
		c.canonical = map[string]map[string]string{}
	}
	c.canonical[key] = set
	return set
}

// Resync has nothing to do: the counter is not an informer's queue.
func (c *containerCounter) Resync() error { return nil }

// List, ListKeys, Get and GetByKey complete cache.Store; the reflector does
// not read its store, and the counter keeps no objects to return.
func (c *containerCounter) List() []any { return nil }

// ListKeys returns nothing; see List.
func (c *containerCounter) ListKeys() []string { return nil }

// Get returns nothing; see List.
func (c *containerCounter) Get(any) (any, bool, error) { return nil, false, nil }

// GetByKey returns nothing; see List.
func (c *containerCounter) GetByKey(string) (any, bool, error) { return nil, false, nil }

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
