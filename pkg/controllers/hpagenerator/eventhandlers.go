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

package hpagenerator

import (
	"context"
	"sync"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/client-go/tools/cache"
	"k8s.io/component-base/metrics"
	"k8s.io/klog/v2"

	autoscalingv1alpha1 "github.com/scaleplane/scaleplane/pkg/apis/autoscaling/v1alpha1"
	lwsv1 "github.com/scaleplane/scaleplane/pkg/apis/leaderworkerset/v1"
)

func (c *Controller) onLWSAdd(ctx context.Context, obj any) {
	lws, ok := obj.(*lwsv1.LeaderWorkerSet)
	if !ok {
		return
	}
	c.queue.Add(cache.MetaObjectToName(lws))
}

// onLWSUpdate enqueues a LeaderWorkerSet whose scale policy changed, or that
// was replaced by a new one of the same name. Its status changes often (every
// group that becomes ready) and says nothing about the HPA, so those updates
// enqueue nothing. Periodic resyncs do enqueue: a cheap sync that writes
// nothing in a steady state, and the slow retry of a create the apiserver
// rejected.
func (c *Controller) onLWSUpdate(ctx context.Context, oldObj, newObj any) {
	oldLWS, ok1 := oldObj.(*lwsv1.LeaderWorkerSet)
	newLWS, ok2 := newObj.(*lwsv1.LeaderWorkerSet)
	if !ok1 || !ok2 {
		return
	}
	resync := oldLWS.ResourceVersion == newLWS.ResourceVersion
	if !resync && oldLWS.UID == newLWS.UID && equality.Semantic.DeepEqual(oldLWS.Spec.ScalePolicy, newLWS.Spec.ScalePolicy) {
		return
	}
	c.queue.Add(cache.MetaObjectToName(newLWS))
}

// A deleted LeaderWorkerSet needs no handler: the garbage collector deletes
// its HPA through the owner reference, and that HPA's delete event enqueues
// the name, in case a new LeaderWorkerSet of that name waits for it.

func (c *Controller) onHPAAdd(ctx context.Context, obj any) {
	if hpa, ok := obj.(*autoscalingv2.HorizontalPodAutoscaler); ok {
		c.onAutoscalerAdd(ctx, hpa, c.managed)
	}
}

func (c *Controller) onHPAUpdate(ctx context.Context, oldObj, newObj any) {
	oldHPA, ok1 := oldObj.(*autoscalingv2.HorizontalPodAutoscaler)
	newHPA, ok2 := newObj.(*autoscalingv2.HorizontalPodAutoscaler)
	if ok1 && ok2 {
		c.onAutoscalerUpdate(ctx, oldHPA, newHPA, c.managed)
	}
}

func (c *Controller) onHPADelete(ctx context.Context, obj any) {
	if tombstone, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tombstone.Obj
	}
	if hpa, ok := obj.(*autoscalingv2.HorizontalPodAutoscaler); ok {
		c.onAutoscalerDelete(ctx, hpa, c.managed)
	}
}

// The FederatedHPA handlers are the HPA ones, on the FederatedHPA seen as an
// HPA.

func (c *Controller) onFederatedHPAAdd(ctx context.Context, obj any) {
	if fhpa, ok := obj.(*autoscalingv1alpha1.FederatedHPA); ok {
		c.onAutoscalerAdd(ctx, fromFederatedHPA(fhpa), c.managedFHPAs)
	}
}

func (c *Controller) onFederatedHPAUpdate(ctx context.Context, oldObj, newObj any) {
	oldF, ok1 := oldObj.(*autoscalingv1alpha1.FederatedHPA)
	newF, ok2 := newObj.(*autoscalingv1alpha1.FederatedHPA)
	if ok1 && ok2 {
		c.onAutoscalerUpdate(ctx, fromFederatedHPA(oldF), fromFederatedHPA(newF), c.managedFHPAs)
	}
}

func (c *Controller) onFederatedHPADelete(ctx context.Context, obj any) {
	if tombstone, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tombstone.Obj
	}
	if fhpa, ok := obj.(*autoscalingv1alpha1.FederatedHPA); ok {
		c.onAutoscalerDelete(ctx, fromFederatedHPA(fhpa), c.managedFHPAs)
	}
}

func (c *Controller) onAutoscalerAdd(ctx context.Context, hpa *autoscalingv2.HorizontalPodAutoscaler, managed *managedSet) {
	managed.set(cache.MetaObjectToName(hpa), isManaged(hpa))
	c.enqueueFor(ctx, managed.kind, hpa)
}

// onAutoscalerUpdate enqueues the LeaderWorkerSets an autoscaler's change
// may matter to, of the old and the new object both (an owner or a target
// may have changed). Only changes to spec, labels, annotations and owner
// references count: the HPA controller (and Karmada's) writes status every
// sync period, and requeueing on that would sync every LeaderWorkerSet every
// 15 seconds for nothing.
func (c *Controller) onAutoscalerUpdate(ctx context.Context, oldHPA, newHPA *autoscalingv2.HorizontalPodAutoscaler, managed *managedSet) {
	if !hpaChanged(oldHPA, newHPA) {
		return
	}
	managed.set(cache.MetaObjectToName(newHPA), isManaged(newHPA))
	c.enqueueFor(ctx, managed.kind, oldHPA)
	c.enqueueFor(ctx, managed.kind, newHPA)
}

func (c *Controller) onAutoscalerDelete(ctx context.Context, hpa *autoscalingv2.HorizontalPodAutoscaler, managed *managedSet) {
	managed.set(cache.MetaObjectToName(hpa), false)
	c.enqueueFor(ctx, managed.kind, hpa)
}

// hpaChanged reports whether anything but status and bookkeeping
// (resourceVersion, managedFields, generation) differs.
func hpaChanged(oldHPA, newHPA *autoscalingv2.HorizontalPodAutoscaler) bool {
	return oldHPA.UID != newHPA.UID ||
		!equality.Semantic.DeepEqual(oldHPA.Spec, newHPA.Spec) ||
		!equality.Semantic.DeepEqual(oldHPA.Labels, newHPA.Labels) ||
		!equality.Semantic.DeepEqual(oldHPA.Annotations, newHPA.Annotations) ||
		!equality.Semantic.DeepEqual(oldHPA.OwnerReferences, newHPA.OwnerReferences)
}

func (c *Controller) enqueueFor(ctx context.Context, kind Output, hpa *autoscalingv2.HorizontalPodAutoscaler) {
	for _, key := range lwsKeysFor(hpa) {
		klog.FromContext(ctx).V(5).Info(string(kind)+" changed, enqueueing", "hpa", klog.KObj(hpa), "leaderWorkerSet", key)
		c.queue.Add(key)
	}
}

// lwsKeysFor returns the LeaderWorkerSets whose sync depends on hpa:
//   - its controlling LeaderWorkerSet, to repair drift or recreate it;
//   - the LeaderWorkerSet of the same name, whichever controls the HPA (none,
//     another LeaderWorkerSet, something else): the HPA blocks it, and when
//     the HPA goes away (or is changed), that one may take the name over;
//   - the LeaderWorkerSet it scales, if any, which it blocks from getting an
//     HPA of its own while it targets it.
func lwsKeysFor(hpa *autoscalingv2.HorizontalPodAutoscaler) []cache.ObjectName {
	keys := []cache.ObjectName{{Namespace: hpa.Namespace, Name: hpa.Name}}
	add := func(name string) {
		for _, k := range keys {
			if k.Name == name {
				return
			}
		}
		keys = append(keys, cache.ObjectName{Namespace: hpa.Namespace, Name: name})
	}
	if name, ok := controllingLWS(hpa); ok {
		add(name)
	}
	if target, ok := lwsTarget(hpa); ok {
		add(target)
	}
	return keys
}

// isManaged reports whether the HPA counts in the managed HPAs gauge: a
// LeaderWorkerSet controls it.
func isManaged(hpa *autoscalingv2.HorizontalPodAutoscaler) bool {
	_, ok := controllingLWS(hpa)
	return ok
}

// managedSet keeps a managed autoscalers gauge up to date from the event
// handlers of its kind, without listing.
type managedSet struct {
	kind  Output
	mu    sync.Mutex
	names map[cache.ObjectName]struct{}
	gauge *metrics.Gauge
}

func newManagedSet(kind Output, gauge *metrics.Gauge) *managedSet {
	return &managedSet{kind: kind, names: map[cache.ObjectName]struct{}{}, gauge: gauge}
}

func (m *managedSet) set(key cache.ObjectName, managed bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if managed {
		m.names[key] = struct{}{}
	} else {
		delete(m.names, key)
	}
	m.gauge.Set(float64(len(m.names)))
}

func (m *managedSet) len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.names)
}
