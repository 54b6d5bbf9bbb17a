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
	"slices"
	"sync"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
)

// podWatches keeps, for each AddonResizer with updateMode InPlace, an
// informer on its target's pods only: the target's namespace and label
// selector, so the API server filters and a cluster of 150,000 pods costs
// the informer the add-on's few. Its pods are stripped (resizePod) to what
// an in-place resize reads. A pod event enqueues the AddonResizer, so that a
// pod created later (scale-up, eviction, rollout restart) is resized as soon
// as it runs, and the kubelet's answer to a resize is read when it comes.
type podWatches struct {
	client  kubernetes.Interface
	enqueue func(cache.ObjectName)

	mu sync.Mutex
	// base is the context the informers run under: Run's, so that they
	// stop with the controller. Nil until start.
	base    context.Context
	watches map[cache.ObjectName]*podWatch
	wg      sync.WaitGroup
}

// podWatch is one AddonResizer's informer, and what it was built for: a
// change of namespace, selector or container builds a new one.
type podWatch struct {
	namespace string
	selector  string
	container string
	informer  cache.SharedIndexInformer
	cancel    context.CancelFunc
}

func newPodWatches(client kubernetes.Interface, enqueue func(cache.ObjectName)) *podWatches {
	return &podWatches{client: client, enqueue: enqueue, watches: map[cache.ObjectName]*podWatch{}}
}

// start lets informers run, under ctx.
func (p *podWatches) start(ctx context.Context) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.base = ctx
}

// wait returns when every informer started has stopped; ctx of start must
// have ended.
func (p *podWatches) wait() { p.wg.Wait() }

// pods returns the running target pods of key, stripped, and whether the
// informer has synced. An informer is started on first use, and replaced
// when the namespace, selector or container changed.
func (p *podWatches) pods(ctx context.Context, key cache.ObjectName, namespace string, selector labels.Selector, container string) ([]*corev1.Pod, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.base == nil {
		return nil, false
	}
	sel := selector.String()
	w := p.watches[key]
	if w != nil && (w.namespace != namespace || w.selector != sel || w.container != container) {
		w.cancel()
		delete(p.watches, key)
		w = nil
	}
	if w == nil {
		w = p.startLocked(ctx, key, namespace, sel, container)
		p.watches[key] = w
	}
	if !w.informer.HasSynced() {
		return nil, false
	}
	var out []*corev1.Pod
	for _, obj := range w.informer.GetStore().List() {
		pod, ok := obj.(*corev1.Pod)
		// The API server filtered by the selector; checked again because a
		// label change of a pod reaches the cache as an update first.
		if ok && selector.Matches(labels.Set(pod.Labels)) {
			out = append(out, pod)
		}
	}
	slices.SortFunc(out, func(a, b *corev1.Pod) int {
		if a.Name < b.Name {
			return -1
		}
		if a.Name > b.Name {
			return 1
		}
		return 0
	})
	return out, true
}

func (p *podWatches) startLocked(ctx context.Context, key cache.ObjectName, namespace, sel, container string) *podWatch {
	logger := klog.FromContext(ctx)
	logger.V(2).Info("Watching the target's pods for in-place resizes", "namespace", namespace, "selector", sel)
	pods := p.client.CoreV1().Pods(namespace)
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			opts.LabelSelector = sel
			return pods.List(ctx, opts)
		},
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			opts.LabelSelector = sel
			return pods.Watch(ctx, opts)
		},
	}
	// The client says whether it serves lists as watch streams (a fake
	// clientset does not).
	informer := cache.NewSharedIndexInformerWithOptions(cache.ToListWatcherWithWatchListSemantics(lw, p.client), &corev1.Pod{}, cache.SharedIndexInformerOptions{})
	transform := func(obj any) (any, error) { return resizePod(obj, container), nil }
	if err := informer.SetTransform(transform); err != nil {
		// Only fails on a started informer; this one is not.
		logger.Error(err, "Setting the pod transform")
	}
	enqueue := func(any) { p.enqueue(key) }
	if _, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    enqueue,
		UpdateFunc: func(_, obj any) { enqueue(obj) },
		DeleteFunc: enqueue,
	}); err != nil {
		logger.Error(err, "Registering the pod event handler")
	}
	runCtx, cancel := context.WithCancel(p.base)
	p.wg.Add(2)
	go func() {
		defer p.wg.Done()
		informer.RunWithContext(runCtx)
	}()
	// A sync after the cache has synced: the handlers' adds of the first
	// list may each be synced while HasSynced is still false (they run as
	// the list is popped), and pods that are already running send no
	// further events, so the last of those syncs would otherwise be the last.
	go func() {
		defer p.wg.Done()
		if cache.WaitForCacheSync(runCtx.Done(), informer.HasSynced) {
			p.enqueue(key)
		}
	}()
	return &podWatch{namespace: namespace, selector: sel, container: container, informer: informer, cancel: cancel}
}

// stop ends the informer of key, if any: its AddonResizer was deleted or
// went back to Rollout.
func (p *podWatches) stop(key cache.ObjectName) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if w := p.watches[key]; w != nil {
		w.cancel()
		delete(p.watches, key)
	}
}

// keys returns the AddonResizers that have an informer.
func (p *podWatches) keys() []cache.ObjectName {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]cache.ObjectName, 0, len(p.watches))
	for key := range p.watches {
		out = append(out, key)
	}
	return out
}

// watching reports whether key has an informer, for tests.
func (p *podWatches) watching(key cache.ObjectName) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	_, ok := p.watches[key]
	return ok
}

// resizePod strips a Pod to what an in-place resize of container reads:
// identity and labels, node, phase, the one container's resources and
// resize policy, the containers' status resources and whether they run,
// and the two resize conditions. A full Pod is about 10 KB; this is a few
// hundred bytes. Anything else (a tombstone) passes unchanged, so the
// transform is idempotent.
func resizePod(obj any, container string) any {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return obj
	}
	out := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name:              pod.Name,
			Namespace:         pod.Namespace,
			UID:               pod.UID,
			ResourceVersion:   pod.ResourceVersion,
			Generation:        pod.Generation,
			Labels:            pod.Labels,
			DeletionTimestamp: pod.DeletionTimestamp,
		},
		Spec: corev1.PodSpec{NodeName: pod.Spec.NodeName},
		Status: corev1.PodStatus{
			Phase:              pod.Status.Phase,
			ObservedGeneration: pod.Status.ObservedGeneration,
		},
	}
	for _, c := range pod.Spec.Containers {
		if c.Name == container {
			out.Spec.Containers = []corev1.Container{{Name: c.Name, Resources: c.Resources, ResizePolicy: c.ResizePolicy}}
		}
	}
	// Every container's status, in order, with whether it runs and the
	// resources it reports: the API server accepts a resize only when the
	// first running one reports them (resourcesReported). The rest only
	// for the one container.
	for _, cs := range pod.Status.ContainerStatuses {
		kept := corev1.ContainerStatus{Name: cs.Name, Resources: cs.Resources, State: corev1.ContainerState{Running: cs.State.Running}}
		if cs.Name == container {
			kept.AllocatedResources, kept.RestartCount = cs.AllocatedResources, cs.RestartCount
		}
		out.Status.ContainerStatuses = append(out.Status.ContainerStatuses, kept)
	}
	for _, cond := range pod.Status.Conditions {
		if cond.Type == corev1.PodResizePending || cond.Type == corev1.PodResizeInProgress {
			out.Status.Conditions = append(out.Status.Conditions, corev1.PodCondition{
				Type: cond.Type, Status: cond.Status, Reason: cond.Reason, Message: cond.Message, ObservedGeneration: cond.ObservedGeneration,
			})
		}
	}
	return out
}
