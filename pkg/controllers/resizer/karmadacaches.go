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
	"sync"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	clusterv1alpha1 "github.com/scaleplane/scaleplane/pkg/apis/cluster/v1alpha1"
	policyv1alpha1 "github.com/scaleplane/scaleplane/pkg/apis/policy/v1alpha1"
	scaleplanev1alpha1 "github.com/scaleplane/scaleplane/pkg/apis/scaleplane/v1alpha1"
	workv1alpha2 "github.com/scaleplane/scaleplane/pkg/apis/work/v1alpha2"
	"github.com/scaleplane/scaleplane/pkg/generated/clientset/versioned"
	"github.com/scaleplane/scaleplane/pkg/generated/informers/externalversions"
	clusterlisters "github.com/scaleplane/scaleplane/pkg/generated/listers/cluster/v1alpha1"
	policylisters "github.com/scaleplane/scaleplane/pkg/generated/listers/policy/v1alpha1"
	worklisters "github.com/scaleplane/scaleplane/pkg/generated/listers/work/v1alpha2"
)

// karmadaCaches are the informers of Karmada's Clusters, ResourceBindings
// and OverridePolicies. They start the first time an AddonResizer needs them
// on an API server that serves all three, never on a plain cluster, where
// their lists would fail.
type karmadaCaches struct {
	client versioned.Interface

	mu       sync.Mutex
	ctx      context.Context
	started  bool
	clusters clusterlisters.ClusterLister
	bindings worklisters.ResourceBindingLister
	policies policylisters.OverridePolicyLister
	synced   []cache.InformerSynced
	factory  externalversions.SharedInformerFactory
}

// setContext gives the caches the context they run in (Run's).
func (k *karmadaCaches) setContext(ctx context.Context) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.ctx = ctx
}

// wait blocks until the informers started have stopped.
func (k *karmadaCaches) wait() {
	k.mu.Lock()
	f := k.factory
	k.mu.Unlock()
	if f != nil {
		f.Shutdown()
	}
}

// ready starts the informers if they have not started, and reports whether
// they have synced.
func (c *Controller) karmadaReady() (bool, error) {
	k := c.karmada
	k.mu.Lock()
	defer k.mu.Unlock()
	if !k.started {
		if k.ctx == nil {
			return false, fmt.Errorf("the resizer is not running")
		}
		factory := externalversions.NewSharedInformerFactory(k.client, 0)
		clusters := factory.Cluster().V1alpha1().Clusters()
		bindings := factory.Work().V1alpha2().ResourceBindings()
		policies := factory.Policy().V1alpha1().OverridePolicies()
		if err := c.registerKarmadaHandlers(k.ctx, clusters.Informer(), bindings.Informer(), policies.Informer()); err != nil {
			return false, err
		}
		k.clusters, k.bindings, k.policies = clusters.Lister(), bindings.Lister(), policies.Lister()
		k.synced = []cache.InformerSynced{clusters.Informer().HasSynced, bindings.Informer().HasSynced, policies.Informer().HasSynced}
		k.factory = factory
		factory.Start(k.ctx.Done())
		k.started = true
		klog.FromContext(k.ctx).Info("Karmada's APIs are served: watching Clusters, ResourceBindings and OverridePolicies")
	}
	for _, s := range k.synced {
		if !s() {
			return false, nil
		}
	}
	return true, nil
}

func (c *Controller) registerKarmadaHandlers(ctx context.Context, clusters, bindings, policies cache.SharedIndexInformer) error {
	opts := cache.HandlerOptions{Logger: ptr.To(klog.FromContext(ctx))}
	if _, err := clusters.AddEventHandlerWithOptions(cache.ResourceEventHandlerFuncs{
		AddFunc: c.onCluster,
		UpdateFunc: func(oldObj, newObj any) {
			o, ok1 := oldObj.(*clusterv1alpha1.Cluster)
			n, ok2 := newObj.(*clusterv1alpha1.Cluster)
			if ok1 && ok2 && clusterSizeUnchanged(o, n) {
				return
			}
			c.onCluster(newObj)
		},
		DeleteFunc: c.onCluster,
	}, opts); err != nil {
		return fmt.Errorf("registering the Cluster event handlers: %w", err)
	}
	if _, err := bindings.AddEventHandlerWithOptions(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.onBinding,
		UpdateFunc: func(_, newObj any) { c.onBinding(newObj) },
		DeleteFunc: c.onBinding,
	}, opts); err != nil {
		return fmt.Errorf("registering the ResourceBinding event handlers: %w", err)
	}
	if _, err := policies.AddEventHandlerWithOptions(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.onOverridePolicy,
		UpdateFunc: func(_, newObj any) { c.onOverridePolicy(newObj) },
		DeleteFunc: c.onOverridePolicy,
	}, opts); err != nil {
		return fmt.Errorf("registering the OverridePolicy event handlers: %w", err)
	}
	return nil
}

// clusterSizeUnchanged tells whether what the resizer reads of a Cluster,
// its node summary and Ready condition, is the same. Karmada rewrites a
// Cluster's status for many other reasons.
func clusterSizeUnchanged(o, n *clusterv1alpha1.Cluster) bool {
	oc := meta.FindStatusCondition(o.Status.Conditions, clusterv1alpha1.ClusterConditionReady)
	nc := meta.FindStatusCondition(n.Status.Conditions, clusterv1alpha1.ClusterConditionReady)
	if (oc == nil) != (nc == nil) || oc != nil && (oc.Status != nc.Status || oc.Reason != nc.Reason) {
		return false
	}
	return ptr.Deref(o.Status.NodeSummary, clusterv1alpha1.NodeSummary{}) == ptr.Deref(n.Status.NodeSummary, clusterv1alpha1.NodeSummary{}) &&
		(o.Status.NodeSummary == nil) == (n.Status.NodeSummary == nil)
}

func tombstoned(obj any) any {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		return t.Obj
	}
	return obj
}

func (c *Controller) onCluster(obj any) {
	if cl, ok := tombstoned(obj).(*clusterv1alpha1.Cluster); ok {
		c.enqueueIndexed(indexMember, cl.Name)
	}
}

func (c *Controller) onBinding(obj any) {
	if rb, ok := tombstoned(obj).(*workv1alpha2.ResourceBinding); ok {
		ns := rb.Spec.Resource.Namespace
		if ns == "" {
			ns = rb.Namespace
		}
		c.enqueueByTarget(targetKey(ns, scaleplanev1alpha1.TargetKind(rb.Spec.Resource.Kind), rb.Spec.Resource.Name))
	}
}

// onOverridePolicy enqueues the AddonResizers of the policy's namespace:
// its owner, to put back a change, and the others, which may now share a
// container with someone else's policy.
func (c *Controller) onOverridePolicy(obj any) {
	if p, ok := tombstoned(obj).(*policyv1alpha1.OverridePolicy); ok {
		c.enqueueIndexed(cache.NamespaceIndex, p.Namespace)
	}
}
