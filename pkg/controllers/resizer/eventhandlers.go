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

	"k8s.io/apimachinery/pkg/api/meta"
	appsinformers "k8s.io/client-go/informers/apps/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	scaleplanev1alpha1 "github.com/scaleplane/scaleplane/pkg/apis/scaleplane/v1alpha1"
	informers "github.com/scaleplane/scaleplane/pkg/generated/informers/externalversions/scaleplane/v1alpha1"
)

// Indexes on the AddonResizer informer.
const (
	// indexTarget maps a workload, "namespace/Kind/name", to the
	// AddonResizers that target it.
	indexTarget = "resizer.scaleplane.io/target"
	// indexSize maps "mode/source" to the AddonResizers sized that way, so
	// that a count change enqueues only those it concerns.
	indexSize = "resizer.scaleplane.io/size"
)

func targetKey(namespace string, kind scaleplanev1alpha1.TargetKind, name string) string {
	return namespace + "/" + string(kind) + "/" + name
}

func sizeKey(mode scaleplanev1alpha1.ScalingMode, source scaleplanev1alpha1.SizeSource) string {
	return string(mode) + "/" + string(source)
}

func indexByTarget(obj any) ([]string, error) {
	ar, ok := obj.(*scaleplanev1alpha1.AddonResizer)
	if !ok {
		return nil, nil
	}
	return []string{targetKeyOf(ar)}, nil
}

func indexBySize(obj any) ([]string, error) {
	ar, ok := obj.(*scaleplanev1alpha1.AddonResizer)
	if !ok {
		return nil, nil
	}
	return []string{sizeKey(modeOf(&ar.Spec), countSource(&ar.Spec))}, nil
}

func (c *Controller) registerHandlers(
	ctx context.Context,
	arInformer informers.AddonResizerInformer,
	deployInformer appsinformers.DeploymentInformer,
	stsInformer appsinformers.StatefulSetInformer,
	dsInformer appsinformers.DaemonSetInformer,
) error {
	opts := cache.HandlerOptions{Logger: ptr.To(klog.FromContext(ctx))}
	if err := arInformer.Informer().AddIndexers(cache.Indexers{indexTarget: indexByTarget, indexSize: indexBySize}); err != nil {
		return fmt.Errorf("adding the AddonResizer indexes: %w", err)
	}
	if _, err := arInformer.Informer().AddEventHandlerWithOptions(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.onAdd,
		UpdateFunc: c.onUpdate,
		DeleteFunc: c.onDelete,
	}, opts); err != nil {
		return fmt.Errorf("registering the AddonResizer event handlers: %w", err)
	}
	for kind, informer := range map[scaleplanev1alpha1.TargetKind]cache.SharedIndexInformer{
		scaleplanev1alpha1.TargetKindDeployment:  deployInformer.Informer(),
		scaleplanev1alpha1.TargetKindStatefulSet: stsInformer.Informer(),
		scaleplanev1alpha1.TargetKindDaemonSet:   dsInformer.Informer(),
	} {
		if _, err := informer.AddEventHandlerWithOptions(cache.ResourceEventHandlerFuncs{
			AddFunc:    func(obj any) { c.onWorkload(kind, obj) },
			UpdateFunc: func(oldObj, newObj any) { c.onWorkloadUpdate(kind, oldObj, newObj) },
			DeleteFunc: func(obj any) { c.onWorkload(kind, obj) },
		}, opts); err != nil {
			return fmt.Errorf("registering the %s event handlers: %w", kind, err)
		}
	}
	return nil
}

// onAdd enqueues a new AddonResizer, and the others of its target, which
// may now share a container with it.
func (c *Controller) onAdd(obj any) {
	if ar, ok := obj.(*scaleplanev1alpha1.AddonResizer); ok {
		c.queue.Add(cache.MetaObjectToName(ar))
		c.enqueueByTarget(targetKeyOf(ar))
	}
}

// onUpdate enqueues every change, so that a spec edit takes effect at once.
// The resizer's own status writes come back here too: that sync is cheap and
// writes nothing. A spec change enqueues the other AddonResizers of the old
// and the new target too: they may have stopped or started sharing a
// container with this one.
func (c *Controller) onUpdate(oldObj, newObj any) {
	oldAR, ok1 := oldObj.(*scaleplanev1alpha1.AddonResizer)
	newAR, ok2 := newObj.(*scaleplanev1alpha1.AddonResizer)
	if !ok1 || !ok2 || oldAR.ResourceVersion == newAR.ResourceVersion {
		// A periodic resync: count changes and requeue delays drive syncs.
		return
	}
	c.queue.Add(cache.MetaObjectToName(newAR))
	if oldAR.Generation != newAR.Generation {
		c.enqueueByTarget(targetKeyOf(oldAR))
		c.enqueueByTarget(targetKeyOf(newAR))
	}
}

// onDelete enqueues a deleted AddonResizer, whose sync finds it gone and
// drops what is kept about it, and the others of its target, which may now
// be the only one on their container.
func (c *Controller) onDelete(obj any) {
	if tombstone, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tombstone.Obj
	}
	if ar, ok := obj.(*scaleplanev1alpha1.AddonResizer); ok {
		c.queue.Add(cache.MetaObjectToName(ar))
		c.enqueueByTarget(targetKeyOf(ar))
	}
}

func targetKeyOf(ar *scaleplanev1alpha1.AddonResizer) string {
	return targetKey(ar.Namespace, ar.Spec.TargetRef.Kind, ar.Spec.TargetRef.Name)
}

// onWorkload enqueues the AddonResizers of a workload that was created or
// deleted.
func (c *Controller) onWorkload(kind scaleplanev1alpha1.TargetKind, obj any) {
	if tombstone, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tombstone.Obj
	}
	m, err := meta.Accessor(obj)
	if err != nil {
		return
	}
	c.enqueueByTarget(targetKey(m.GetNamespace(), kind, m.GetName()))
}

// onWorkloadUpdate enqueues the AddonResizers of a workload whose spec
// changed. Status updates, many during a rollout, leave the generation
// alone and the pod template with it.
func (c *Controller) onWorkloadUpdate(kind scaleplanev1alpha1.TargetKind, oldObj, newObj any) {
	oldMeta, err1 := meta.Accessor(oldObj)
	newMeta, err2 := meta.Accessor(newObj)
	if err1 != nil || err2 != nil || oldMeta.GetGeneration() == newMeta.GetGeneration() {
		return
	}
	c.enqueueByTarget(targetKey(newMeta.GetNamespace(), kind, newMeta.GetName()))
}

func (c *Controller) enqueueByTarget(key string) {
	c.enqueueIndexed(indexTarget, key)
}

// enqueueBySize enqueues the AddonResizers sized by mode from source, after
// a count changed. A burst of pod events costs each one sync: the queue
// holds a key once.
func (c *Controller) enqueueBySize(mode scaleplanev1alpha1.ScalingMode, source scaleplanev1alpha1.SizeSource) {
	c.enqueueIndexed(indexSize, sizeKey(mode, source))
}

func (c *Controller) enqueueIndexed(index, key string) {
	objs, err := c.indexer.ByIndex(index, key)
	if err != nil {
		return
	}
	for _, obj := range objs {
		if ar, ok := obj.(*scaleplanev1alpha1.AddonResizer); ok {
			c.queue.Add(cache.MetaObjectToName(ar))
		}
	}
}
