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

package cronscaler

import (
	"sync"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/tools/cache"

	autoscalingv1alpha1 "github.com/scaleplane/scaleplane/pkg/apis/autoscaling/v1alpha1"
)

// lastAppliedAnnotation is where kubectl apply keeps a copy of the object:
// as large as the spec, and never read here.
const lastAppliedAnnotation = "kubectl.kubernetes.io/last-applied-configuration"

// stripForCache makes the cached form of an object the cache does not hold
// yet (see reuseUnchanged, the informer's transform): it drops what the
// cron-scaler never reads, which at 100,000 objects is much of the cache
// (test/bench/README.md has the heap profiles).
// Kept: spec, status, and of managedFields the entries the object's
// timeline is read from (see keepTimeline); dropped: the other entries, the
// entries' field sets, and kubectl's last-applied copy. The strings every object
// repeats (its kind, namespace, the managers, the target's kind) are shared
// (see interner). Writes stay correct: a status write sends no managedFields
// (the apiserver keeps its own) and the apiserver takes nothing but status
// from it.
func stripForCache(obj any) (any, error) {
	cron, ok := obj.(*autoscalingv1alpha1.CronFederatedHPA)
	if !ok {
		// A tombstone of a deleted object passes as it is.
		return obj, nil
	}
	return cachedOf(strip(cron)), nil
}

// reuseUnchanged is the CronFederatedHPA informer's transform: stripForCache,
// except that an object the cache already holds at the same resourceVersion
// and uid is given back as the cached object itself. Why: when the watch
// falls too far behind the apiserver's watch cache (410 Gone, seen in
// 100,000-object bursts), the informer streams every object again into a
// store of its own, through this transform, and replaces the cache with it
// only at the end; without the reuse, both copies of every object are in
// memory for the whole relist (test/bench/README.md). The same
// resourceVersion is the same stored object, which stripForCache turns into
// the same cached form, and cached objects are never changed, so sharing one
// is safe; the event handlers ignore updates at the same resourceVersion.
// The uid is compared too, for stores that reuse resourceVersions (fakes).
func reuseUnchanged(cached cache.KeyGetter) cache.TransformFunc {
	return func(obj any) (any, error) {
		cron, ok := obj.(*autoscalingv1alpha1.CronFederatedHPA)
		if !ok || cron.ResourceVersion == "" {
			return stripForCache(obj)
		}
		key, err := cache.MetaNamespaceKeyFunc(cron)
		if err != nil {
			return stripForCache(obj)
		}
		if item, exists, err := cached.GetByKey(key); err == nil && exists {
			if c, ok := item.(*cachedCron); ok && c.resourceVersion == cron.ResourceVersion && c.GetUID() == cron.UID {
				return c, nil
			}
		}
		return stripForCache(obj)
	}
}

// strip drops from cron, in place, what the cron-scaler never reads (see
// stripForCache) and returns it.
func strip(cron *autoscalingv1alpha1.CronFederatedHPA) *autoscalingv1alpha1.CronFederatedHPA {
	cron.ManagedFields = keepTimeline(cron.ManagedFields)
	if _, ok := cron.Annotations[lastAppliedAnnotation]; ok {
		delete(cron.Annotations, lastAppliedAnnotation)
		if len(cron.Annotations) == 0 {
			cron.Annotations = nil
		}
	}
	internStrings(cron)
	return cron
}

// cronCache reads the CronFederatedHPA informer's cache, whose objects are
// cachedCrons (see stripForCache), as typed objects, in place of the
// generated lister.
type cronCache struct {
	indexer cache.Indexer
}

// get is the object with that key, or a NotFound error, as a lister's Get.
func (c cronCache) get(key cache.ObjectName) (*autoscalingv1alpha1.CronFederatedHPA, error) {
	item, exists, err := c.indexer.GetByKey(key.String())
	if err != nil {
		return nil, err
	}
	if obj, ok := cronOf(item); exists && ok {
		return obj, nil
	}
	return nil, apierrors.NewNotFound(autoscalingv1alpha1.Resource("cronfederatedhpa"), key.Name)
}

// onTarget lists the objects of namespace whose target is ref, typed; the
// others are not made typed objects (a namespace may hold 100,000).
func (c cronCache) onTarget(namespace string, ref autoscalingv2.CrossVersionObjectReference) []*autoscalingv1alpha1.CronFederatedHPA {
	items, err := c.indexer.ByIndex(cache.NamespaceIndex, namespace)
	if err != nil {
		// No namespace index: every object, filtered below.
		items = c.indexer.List()
	}
	var out []*autoscalingv1alpha1.CronFederatedHPA
	for _, item := range items {
		var ns string
		var target autoscalingv2.CrossVersionObjectReference
		switch o := item.(type) {
		case *cachedCron:
			ns, target = o.namespace, o.spec.ScaleTargetRef
		case *autoscalingv1alpha1.CronFederatedHPA:
			ns, target = o.Namespace, o.Spec.ScaleTargetRef
		default:
			continue
		}
		if ns != namespace || !sameTarget(target, ref) {
			continue
		}
		if obj, ok := cronOf(item); ok {
			out = append(out, obj)
		}
	}
	return out
}

// internStrings shares the strings that repeat across objects.
func internStrings(cron *autoscalingv1alpha1.CronFederatedHPA) {
	cron.APIVersion, cron.Kind = intern(cron.APIVersion), intern(cron.Kind)
	cron.Namespace = intern(cron.Namespace)
	ref := &cron.Spec.ScaleTargetRef
	ref.APIVersion, ref.Kind = intern(ref.APIVersion), intern(ref.Kind)
	for i := range cron.Spec.Rules {
		r := &cron.Spec.Rules[i]
		r.Name, r.Schedule = intern(r.Name), intern(r.Schedule)
		if r.TimeZone != nil {
			r.TimeZone = internPointer(*r.TimeZone)
		}
	}
	for i := range cron.Status.ExecutionHistories {
		h := &cron.Status.ExecutionHistories[i]
		h.RuleName = intern(h.RuleName)
	}
}

// maxInterned bounds the strings shared: the fields interned take few
// distinct values (kinds, namespaces, managers, schedules, rule names such
// as "scale-up"), and a cluster where they do not just shares fewer.
const maxInterned = 4096

// interner holds one copy of each string interned.
var interner = struct {
	sync.Mutex
	m map[string]string
}{m: map[string]string{}}

// zones holds one pointer to each time zone interned: a rule's time zone is
// a pointer, and the cache never writes through it.
var zones = struct {
	sync.Mutex
	m map[string]*string
}{m: map[string]*string{}}

// internPointer returns a pointer to the shared copy of s, shared too when
// there is room.
func internPointer(s string) *string {
	zones.Lock()
	defer zones.Unlock()
	if p, ok := zones.m[s]; ok {
		return p
	}
	p := &s
	if len(zones.m) < maxInterned {
		shared := intern(s)
		p = &shared
		zones.m[s] = p
	}
	return p
}

// intern returns the shared copy of s, making s the shared copy if there is
// none yet and room for it.
func intern(s string) string {
	if s == "" {
		return s
	}
	interner.Lock()
	defer interner.Unlock()
	if shared, ok := interner.m[s]; ok {
		return shared
	}
	if len(interner.m) < maxInterned {
		interner.m[s] = s
	}
	return s
}
