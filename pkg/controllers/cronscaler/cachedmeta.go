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
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// cachedCron is a metav1.Object itself, so that meta.Accessor hands it out
// as it is. The informer asks for the metadata of every object it stores,
// several times per event (the store's key, the namespace index, the
// resourceVersion comparison of an update), and once per object in a
// relist's single transaction: a metadata struct made per call (as an
// ObjectMetaAccessor would) was 36 MB held at once when the watch relisted
// 100,000 objects in the status writes of a burst (test/bench/README.md).
// The getters read what object() would give; the setters keep what
// object() gives consistent with them (nothing in the controller sets
// anything on a cached object). TestCachedObjectRoundTrip checks that
// meta.Accessor takes it as one.

func (c *cachedCron) GetNamespace() string                { return c.namespace }
func (c *cachedCron) SetNamespace(namespace string)       { c.namespace = namespace }
func (c *cachedCron) GetName() string                     { return c.name }
func (c *cachedCron) SetName(name string)                 { c.name = name }
func (c *cachedCron) GetResourceVersion() string          { return c.resourceVersion }
func (c *cachedCron) SetResourceVersion(version string)   { c.resourceVersion = version }
func (c *cachedCron) GetGeneration() int64                { return c.generation }
func (c *cachedCron) SetGeneration(generation int64)      { c.generation = generation }
func (c *cachedCron) GetCreationTimestamp() metav1.Time   { return c.created }
func (c *cachedCron) SetCreationTimestamp(t metav1.Time)  { c.created = t }
func (c *cachedCron) GetGenerateName() string             { return c.restMeta().GenerateName }
func (c *cachedCron) SetGenerateName(name string)         { c.ensureRest().GenerateName = name }
func (c *cachedCron) GetSelfLink() string                 { return c.restMeta().GetSelfLink() }
func (c *cachedCron) SetSelfLink(selfLink string)         { c.ensureRest().SetSelfLink(selfLink) }
func (c *cachedCron) GetDeletionTimestamp() *metav1.Time  { return c.restMeta().DeletionTimestamp }
func (c *cachedCron) SetDeletionTimestamp(t *metav1.Time) { c.ensureRest().DeletionTimestamp = t }
func (c *cachedCron) GetDeletionGracePeriodSeconds() *int64 {
	return c.restMeta().DeletionGracePeriodSeconds
}
func (c *cachedCron) SetDeletionGracePeriodSeconds(s *int64) {
	c.ensureRest().DeletionGracePeriodSeconds = s
}
func (c *cachedCron) GetLabels() map[string]string       { return c.restMeta().Labels }
func (c *cachedCron) SetLabels(labels map[string]string) { c.ensureRest().Labels = labels }
func (c *cachedCron) GetAnnotations() map[string]string  { return c.restMeta().Annotations }
func (c *cachedCron) SetAnnotations(a map[string]string) { c.ensureRest().Annotations = a }
func (c *cachedCron) GetFinalizers() []string            { return c.restMeta().Finalizers }
func (c *cachedCron) SetFinalizers(finalizers []string)  { c.ensureRest().Finalizers = finalizers }
func (c *cachedCron) GetOwnerReferences() []metav1.OwnerReference {
	return c.restMeta().OwnerReferences
}
func (c *cachedCron) SetOwnerReferences(refs []metav1.OwnerReference) {
	c.ensureRest().OwnerReferences = refs
}

// GetUID formats the uid (a string made per call); nothing on the
// informer's path asks for it.
func (c *cachedCron) GetUID() types.UID {
	if c.hasUID {
		return formatUID(c.uid)
	}
	return c.restMeta().UID
}

func (c *cachedCron) SetUID(uid types.UID) {
	c.hasUID = false
	if c.rest != nil {
		c.rest.UID = ""
	}
	if b, ok := parseUID(uid); ok {
		c.uid, c.hasUID = b, true
		return
	}
	if uid != "" {
		c.ensureRest().UID = uid
	}
}

// GetManagedFields gives the kept entries, as object() does.
func (c *cachedCron) GetManagedFields() []metav1.ManagedFieldsEntry {
	return c.managedFields()
}

func (c *cachedCron) SetManagedFields(entries []metav1.ManagedFieldsEntry) {
	c.timeline = timelineEntries(entries)
}

// noRest is the rest of the metadata of an object that has none; only
// read (restMeta's callers copy a field out).
var noRest metav1.ObjectMeta

// restMeta is the rest of the metadata, an empty one when there is none.
func (c *cachedCron) restMeta() *metav1.ObjectMeta {
	if c.rest == nil {
		return &noRest
	}
	return c.rest
}

func (c *cachedCron) ensureRest() *metav1.ObjectMeta {
	if c.rest == nil {
		c.rest = &metav1.ObjectMeta{}
	}
	return c.rest
}
