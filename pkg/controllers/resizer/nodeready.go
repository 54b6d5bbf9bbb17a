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
	"sync"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/scaleplane/scaleplane/pkg/inplaceresize"
)

// notReadyLookup returns the Ready condition of a node that is known not to
// be Ready (its Ready condition False or Unknown), and false for any other
// node: Ready, without a Ready condition yet, or not known (the API
// server answers a resize of a pod on a node it does not know itself).
type notReadyLookup func(node string) (corev1.NodeCondition, bool)

// nodeReadiness watches whether nodes are Ready, for in-place resizes: a
// pod on a node that is not Ready stays Running and accepts a resize that
// its kubelet never answers, so it must neither be sent one nor hold a
// place of the pacing. The node counter watches nodes as metadata, which
// has no conditions, so this is a watch of its own, of whole Nodes,
// stripped on arrival (readyNode) to the name and the Ready condition:
// about 200 bytes a node in the cache, 1 MB at 5,000 nodes. It starts when the first
// InPlace AddonResizer syncs; a change of a node's readiness syncs the
// InPlace AddonResizers.
type nodeReadiness struct {
	client   kubernetes.Interface
	onChange func()

	mu sync.Mutex
	// base is the context the informer runs under; nil until start.
	base     context.Context
	informer cache.SharedIndexInformer
	synced   cache.InformerSynced
	wg       sync.WaitGroup
}

func newNodeReadiness(client kubernetes.Interface, onChange func()) *nodeReadiness {
	return &nodeReadiness{client: client, onChange: onChange}
}

// start lets the informer run, under ctx, once it is needed.
func (n *nodeReadiness) start(ctx context.Context) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.base = ctx
}

// wait returns once the informer, if started, has stopped.
func (n *nodeReadiness) wait() { n.wg.Wait() }

// lookup starts the informer on first use and, once it has synced, returns
// the nodes that are not Ready.
func (n *nodeReadiness) lookup(ctx context.Context) (notReadyLookup, bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.base == nil {
		return nil, false
	}
	if n.informer == nil {
		n.startLocked(ctx)
	}
	if !n.synced() {
		return nil, false
	}
	store := n.informer.GetStore()
	return func(name string) (corev1.NodeCondition, bool) {
		obj, ok, err := store.GetByKey(name)
		if err != nil || !ok {
			return corev1.NodeCondition{}, false
		}
		node, ok := obj.(*nodeReadyState)
		if !ok {
			return corev1.NodeCondition{}, false
		}
		return node.notReady()
	}, true
}

func (n *nodeReadiness) startLocked(ctx context.Context) {
	logger := klog.FromContext(ctx)
	logger.V(2).Info("Watching whether nodes are Ready, for in-place resizes")
	nodes := n.client.CoreV1().Nodes()
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			return nodes.List(ctx, opts)
		},
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			return nodes.Watch(ctx, opts)
		},
	}
	informer := cache.NewSharedIndexInformerWithOptions(cache.ToListWatcherWithWatchListSemantics(lw, n.client), &corev1.Node{}, cache.SharedIndexInformerOptions{})
	if err := informer.SetTransform(func(obj any) (any, error) { return readyNode(obj), nil }); err != nil {
		// Only fails on a started informer; this one is not.
		logger.Error(err, "Setting the node transform")
	}
	reg, err := informer.AddEventHandler(cache.ResourceEventHandlerDetailedFuncs{
		AddFunc: func(obj any, isInInitialList bool) {
			if !isInInitialList {
				n.onChange()
			}
		},
		UpdateFunc: func(oldObj, newObj any) {
			oldNode, ok1 := oldObj.(*nodeReadyState)
			newNode, ok2 := newObj.(*nodeReadyState)
			if !ok1 || !ok2 {
				return
			}
			_, was := oldNode.notReady()
			_, is := newNode.notReady()
			if was != is {
				n.onChange()
			}
		},
		DeleteFunc: func(any) { n.onChange() },
	})
	if err != nil {
		logger.Error(err, "Registering the node event handler")
		reg = nil
	}
	n.informer = informer
	n.synced = informer.HasSynced
	if reg != nil {
		n.synced = reg.HasSynced
	}
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		informer.RunWithContext(n.base)
	}()
	// The AddonResizers that waited for the informer sync at once.
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		if cache.WaitForCacheSync(n.base.Done(), n.synced) {
			n.onChange()
		}
	}()
}

// nodeReadyState is what the resizer keeps of a Node: its name, and its
// Ready condition (ready is empty when it has none). It stands in for the
// Node in the informer's cache, as countedPod does for pods.
type nodeReadyState struct {
	name            string
	resourceVersion string
	ready           corev1.ConditionStatus
	reason          string
	since           metav1.Time
}

// GetObjectMeta gives the informer's keying what it reads.
func (n *nodeReadyState) GetObjectMeta() metav1.Object {
	return &metav1.ObjectMeta{Name: n.name, ResourceVersion: n.resourceVersion}
}

// GetObjectKind has no kind to tell: a nodeReadyState never leaves the
// process.
func (n *nodeReadyState) GetObjectKind() schema.ObjectKind { return schema.EmptyObjectKind }

// DeepCopyObject makes nodeReadyState a runtime.Object, as a store requires.
func (n *nodeReadyState) DeepCopyObject() runtime.Object {
	out := *n
	return &out
}

// notReady returns the node's Ready condition if it has one and it is not
// True (inplaceresize.NodeNotReady).
func (n *nodeReadyState) notReady() (corev1.NodeCondition, bool) {
	if !inplaceresize.NodeNotReady(n.ready) {
		return corev1.NodeCondition{}, false
	}
	return corev1.NodeCondition{Type: corev1.NodeReady, Status: n.ready, Reason: n.reason, LastTransitionTime: n.since}, true
}

// readyNode strips a Node to its nodeReadyState. A Node is several KB
// (images, addresses, capacity, labels); this is about 200 bytes. Anything
// else (already stripped, a tombstone) passes unchanged, so the transform
// is idempotent.
func readyNode(obj any) any {
	node, ok := obj.(*corev1.Node)
	if !ok {
		return obj
	}
	out := &nodeReadyState{name: node.Name, resourceVersion: node.ResourceVersion}
	for _, c := range node.Status.Conditions {
		if c.Type == corev1.NodeReady {
			out.ready, out.reason, out.since = c.Status, c.Reason, c.LastTransitionTime
		}
	}
	return out
}
