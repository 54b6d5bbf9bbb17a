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
	"runtime/debug"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/metadata/metadatainformer"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	scaleplanev1alpha1 "github.com/scaleplane/scaleplane/pkg/apis/scaleplane/v1alpha1"
	"github.com/scaleplane/scaleplane/pkg/gcpace"
)

// activePods keeps terminal pods out of the pod informer: they do not count,
// and a cluster running Jobs can hold many of them. A pod that reaches
// Succeeded or Failed leaves the watch as a deletion; the counter also drops
// it on an update to a terminal phase, should one arrive.
const activePods = "status.phase!=" + string(corev1.PodSucceeded) + ",status.phase!=" + string(corev1.PodFailed)

var nodesResource = corev1.SchemeGroupVersion.WithResource("nodes")

// apiServerCounts is the cluster size of source APIServer: node and
// container counts kept from informers, incrementally. The informers cost
// memory (the pod one most), so each starts only when the first AddonResizer
// that needs it is synced, and runs until the controller stops. They are the
// controller's own, not the shared factory's, which starts all it holds at
// once.
type apiServerCounts struct {
	kubeClient     kubernetes.Interface
	metadataClient metadata.Interface

	containers *containerCounter
	nodes      *nodeCounter
	// podInformer and nodeInformer start lazily; onContainersChanged and
	// onNodesChanged are told when a count changes after the initial list.
	podInformer  lazyInformer
	nodeInformer lazyInformer
	// nodeStore is the node informer's cache, once it runs (for tests).
	nodeStore           cache.Store
	onContainersChanged func()
	onNodesChanged      func()
	// releaseGCCap releases the cap on GOGC once the pod list is in
	// (listGCPercent).
	releaseGCCap func()

	mu  sync.Mutex
	ctx context.Context // nil until the controller runs
	wg  sync.WaitGroup
}

func newAPIServerCounts(kubeClient kubernetes.Interface, metadataClient metadata.Interface, onContainersChanged, onNodesChanged func()) *apiServerCounts {
	a := &apiServerCounts{
		kubeClient:          kubeClient,
		metadataClient:      metadataClient,
		containers:          newContainerCounter(),
		nodes:               newNodeCounter(),
		onContainersChanged: onContainersChanged,
		onNodesChanged:      onNodesChanged,
		releaseGCCap:        func() {},
	}
	// Once a count is complete, the AddonResizers waiting for it sync at
	// once rather than at their next retry.
	a.podInformer = lazyInformer{what: "pods", build: a.buildPodReflector, onSynced: func() {
		// The initial list streamed every pod of the cluster through the
		// process (about 250 MB at 150,000 pods) to keep a few bytes of
		// each: collect what it left behind and return it to the OS now,
		// rather than keep it resident until the next forced GC and the
		// scavenger's slow return.
		a.releaseGCCap()
		a.containers.compact()
		debug.FreeOSMemory()
		onContainersChanged()
	}}
	a.nodeInformer = lazyInformer{what: "nodes", build: a.buildNodeInformer, onSynced: onNodesChanged}
	return a
}

// start lets informers be started; they run until ctx ends.
func (a *apiServerCounts) start(ctx context.Context) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.ctx = ctx
}

// wait returns once every started informer has stopped.
func (a *apiServerCounts) wait() { a.wg.Wait() }

// ready starts the informer that mode counts from, if not yet started, and
// reports whether its count is complete: the initial list has gone through
// the counter.
func (a *apiServerCounts) ready(mode scaleplanev1alpha1.ScalingMode) (bool, error) {
	a.mu.Lock()
	ctx := a.ctx
	a.mu.Unlock()
	if mode == scaleplanev1alpha1.ContainerProportional {
		return a.podInformer.ensure(ctx, &a.wg)
	}
	return a.nodeInformer.ensure(ctx, &a.wg)
}

// size returns the cluster size of mode: every node, or the containers of
// every non-terminal pod but those of the target (selector in namespace).
func (a *apiServerCounts) size(mode scaleplanev1alpha1.ScalingMode, namespace string, selector labels.Selector) int64 {
	if mode == scaleplanev1alpha1.ContainerProportional {
		return a.containers.excluding(namespace, selector)
	}
	return a.nodes.count()
}

// buildPodReflector watches the non-terminal pods of every namespace with a
// bare reflector whose store is the container counter itself: no informer
// cache, no event queue, and so no Pod (nor a trimmed copy of one) kept per
// pod; each watch event adjusts the running total.
func (a *apiServerCounts) buildPodReflector() (func(context.Context), cache.InformerSynced, error) {
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			o.FieldSelector = activePods
			return a.kubeClient.CoreV1().Pods(metav1.NamespaceAll).List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.FieldSelector = activePods
			return a.kubeClient.CoreV1().Pods(metav1.NamespaceAll).Watch(ctx, o)
		},
	}
	a.containers.onChange = a.onContainersChanged
	// Keeps a fake clientset (which cannot stream a watch-list) on lists.
	r := cache.NewReflectorWithOptions(cache.ToListWatcherWithWatchListSemantics(lw, a.kubeClient), &corev1.Pod{}, a.containers, cache.ReflectorOptions{Name: "resizer-pods", TypeDescription: "*v1.Pod"})
	// The garbage collector runs tighter until the initial list is in
	// (listGCPercent); onSynced, or the reflector's end, releases the cap.
	a.releaseGCCap = gcpace.Cap(listGCPercent)
	release := a.releaseGCCap
	run := func(ctx context.Context) {
		defer release()
		r.RunWithContext(ctx)
	}
	return run, a.containers.hasSynced, nil
}

// buildNodeInformer watches nodes as metadata only, stripped to their
// identity: counting needs nothing else. (Nodes are few; an informer's cache
// of their names costs little.)
func (a *apiServerCounts) buildNodeInformer() (func(context.Context), cache.InformerSynced, error) {
	informer := metadatainformer.NewFilteredMetadataInformer(a.metadataClient, nodesResource, metav1.NamespaceAll, 0, cache.Indexers{}, nil).Informer()
	if err := informer.SetTransform(transformNode); err != nil {
		return nil, nil, fmt.Errorf("setting the node transform: %w", err)
	}
	reg, err := informer.AddEventHandler(cache.ResourceEventHandlerDetailedFuncs{
		AddFunc: func(obj any, isInInitialList bool) {
			if name, ok := nodeName(obj); ok && a.nodes.add(name) && !isInInitialList {
				a.onNodesChanged()
			}
		},
		DeleteFunc: func(obj any) {
			if name, ok := nodeName(obj); ok && a.nodes.delete(name) {
				a.onNodesChanged()
			}
		},
	})
	if err != nil {
		return nil, nil, fmt.Errorf("registering the node event handler: %w", err)
	}
	a.nodeStore = informer.GetStore()
	return informer.RunWithContext, reg.HasSynced, nil
}

// transformNode keeps a node's name, uid and resourceVersion; labels,
// annotations and managedFields, most of a node's metadata, go.
func transformNode(obj any) (any, error) {
	m, ok := obj.(*metav1.PartialObjectMetadata)
	if !ok {
		return obj, nil
	}
	return &metav1.PartialObjectMetadata{
		TypeMeta: m.TypeMeta,
		ObjectMeta: metav1.ObjectMeta{
			Name:            m.Name,
			UID:             m.UID,
			ResourceVersion: m.ResourceVersion,
		},
	}, nil
}

func nodeName(obj any) (string, bool) {
	if tombstone, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tombstone.Obj
	}
	m, err := meta.Accessor(obj)
	if err != nil {
		return "", false
	}
	return m.GetName(), true
}

// lazyInformer is an informer (or a bare reflector) built and started on
// first use.
type lazyInformer struct {
	what string
	// build returns the informer's run function and its synced check.
	build func() (func(context.Context), cache.InformerSynced, error)
	// onSynced is called once the informer has synced.
	onSynced func()

	mu sync.Mutex
	// synced is nil until the informer is started; then it reports whether
	// the counter has seen the initial list.
	synced cache.InformerSynced
}

// ensure starts the informer in ctx if it is not started, and reports
// whether it has synced. Nothing starts before the controller runs (ctx
// nil).
func (l *lazyInformer) ensure(ctx context.Context, wg *sync.WaitGroup) (bool, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.synced != nil {
		return l.synced(), nil
	}
	if ctx == nil {
		return false, nil
	}
	run, synced, err := l.build()
	if err != nil {
		return false, fmt.Errorf("starting the %s informer: %w", l.what, err)
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer func() {
			if r := recover(); r != nil {
				utilruntime.HandleErrorWithContext(ctx, fmt.Errorf("%v", r), "Resizer informer panicked", "informer", l.what, "stack", string(debug.Stack()))
			}
		}()
		run(ctx)
	}()
	if l.onSynced != nil {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if cache.WaitForCacheSync(ctx.Done(), synced) {
				l.onSynced()
			}
		}()
	}
	l.synced = synced
	klog.FromContext(ctx).Info("Started counting for AddonResizers", "informer", l.what)
	return false, nil
}
