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
	"encoding/hex"
	"reflect"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	autoscalingv1alpha1 "github.com/scaleplane/scaleplane/pkg/apis/autoscaling/v1alpha1"
)

// cachedCron is what the informer's cache holds of a CronFederatedHPA: the
// object as stripForCache keeps it, in less memory. A typed object is a
// 384-byte struct of which a CronFederatedHPA uses a few fields, its uid a
// 36-byte string, and each kept managedFields entry a 96-byte struct and a
// time of its own; at 100,000 objects that was a fifth of the cache
// (test/bench/README.md has the heap profiles). Here the metadata every
// object has are fields, the uid is 16 bytes, the timeline's entries hold
// their times, and the rest of the metadata (labels, annotations, owners,
// finalizers, deletion) is kept apart, only when there is any.
//
// Invariant: object() gives back exactly what stripForCache kept
// (TestCachedObjectRoundTrip), so that everything reading the cache
// decides as it did on the typed object. The cache is read through
// cronCache, never through the generated lister, which would not know
// this type.
type cachedCron struct {
	// typeMeta is nil when empty, as a typed client decodes objects.
	typeMeta        *metav1.TypeMeta
	name, namespace string
	resourceVersion string
	generation      int64
	created         metav1.Time
	// uid is the object's uid when it is a UUID as the apiserver writes it
	// (lowercase, hyphenated); any other uid stays in rest.
	uid    [16]byte
	hasUID bool
	// rest is the rest of the metadata, nil when it is all empty (as it is
	// for most objects).
	rest     *metav1.ObjectMeta
	timeline []cachedEntry
	spec     autoscalingv1alpha1.CronFederatedHPASpec
	status   autoscalingv1alpha1.CronFederatedHPAStatus
}

// cachedEntry is a managedFields entry kept for the timeline (see
// keepTimeline, which keeps entries of the object and of its status
// subresource only), its time in place.
type cachedEntry struct {
	manager, operation string
	time               metav1.Time
	status, hasTime    bool
}

// cachedOf is the cached form of obj, an object stripForCache has stripped.
func cachedOf(obj *autoscalingv1alpha1.CronFederatedHPA) *cachedCron {
	c := &cachedCron{
		name: obj.Name, namespace: obj.Namespace,
		resourceVersion: obj.ResourceVersion, generation: obj.Generation, created: obj.CreationTimestamp,
		spec: obj.Spec, status: obj.Status,
	}
	if tm := obj.TypeMeta; tm != (metav1.TypeMeta{}) {
		c.typeMeta = &tm
	}
	rest := obj.ObjectMeta
	rest.Name, rest.Namespace, rest.ResourceVersion, rest.Generation = "", "", "", 0
	rest.CreationTimestamp, rest.ManagedFields = metav1.Time{}, nil
	if uid, ok := parseUID(obj.UID); ok {
		c.uid, c.hasUID = uid, true
		rest.UID = ""
	}
	if !reflect.ValueOf(rest).IsZero() {
		c.rest = &rest
	}
	c.timeline = timelineEntries(obj.ManagedFields)
	return c
}

// object is the typed object c was made from. It shares the spec's and
// status's slices and maps with the cache: as an object from a lister, it
// is read, never changed.
func (c *cachedCron) object() *autoscalingv1alpha1.CronFederatedHPA {
	obj := &autoscalingv1alpha1.CronFederatedHPA{Spec: c.spec, Status: c.status}
	if c.typeMeta != nil {
		obj.TypeMeta = *c.typeMeta
	}
	if c.rest != nil {
		obj.ObjectMeta = *c.rest
	}
	obj.Name, obj.Namespace, obj.ResourceVersion = c.name, c.namespace, c.resourceVersion
	obj.Generation, obj.CreationTimestamp = c.generation, c.created
	if c.hasUID {
		obj.UID = formatUID(c.uid)
	}
	obj.ManagedFields = c.managedFields()
	return obj
}

// timelineEntries are the cached form of the managedFields entries kept.
func timelineEntries(entries []metav1.ManagedFieldsEntry) []cachedEntry {
	if len(entries) == 0 {
		return nil
	}
	out := make([]cachedEntry, len(entries))
	for i, e := range entries {
		// Managers and operations repeat across objects (each decoded
		// object has its own copies): shared, as internStrings shares the
		// rules' strings.
		out[i] = cachedEntry{manager: intern(e.Manager), operation: intern(string(e.Operation)), status: e.Subresource == "status"}
		if e.Time != nil {
			out[i].time, out[i].hasTime = *e.Time, true
		}
	}
	return out
}

// managedFields are the managedFields entries the timeline keeps.
func (c *cachedCron) managedFields() []metav1.ManagedFieldsEntry {
	if len(c.timeline) == 0 {
		return nil
	}
	out := make([]metav1.ManagedFieldsEntry, len(c.timeline))
	for i, e := range c.timeline {
		out[i] = metav1.ManagedFieldsEntry{Manager: e.manager, Operation: metav1.ManagedFieldsOperationType(e.operation)}
		if e.status {
			out[i].Subresource = "status"
		}
		if e.hasTime {
			out[i].Time = &metav1.Time{Time: e.time.Time}
		}
	}
	return out
}

// cronOf is the typed object of what the cache holds: a cachedCron, or a
// typed object put there as it is (the tests' caches).
func cronOf(obj any) (*autoscalingv1alpha1.CronFederatedHPA, bool) {
	switch o := obj.(type) {
	case *cachedCron:
		return o.object(), true
	case *autoscalingv1alpha1.CronFederatedHPA:
		return o, true
	}
	return nil, false
}

// parseUID reads a uid as the apiserver writes it: a lowercase UUID
// (8-4-4-4-12 hexadecimal digits), so that formatUID gives it back. It
// allocates nothing: the per-object memory compares uids this way on every
// sync (see uidKey).
func parseUID(uid types.UID) ([16]byte, bool) {
	var out [16]byte
	if len(uid) != 36 {
		return out, false
	}
	n := 0
	for i := 0; i < 36; {
		if i == 8 || i == 13 || i == 18 || i == 23 {
			if uid[i] != '-' {
				return out, false
			}
			i++
			continue
		}
		hi, ok1 := lowerHex(uid[i])
		lo, ok2 := lowerHex(uid[i+1])
		if !ok1 || !ok2 {
			return out, false
		}
		out[n] = hi<<4 | lo
		n++
		i += 2
	}
	return out, true
}

// lowerHex is the value of a lowercase hexadecimal digit.
func lowerHex(c byte) (byte, bool) {
	switch {
	case '0' <= c && c <= '9':
		return c - '0', true
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10, true
	}
	return 0, false
}

// formatUID writes a uid parseUID read.
func formatUID(b [16]byte) types.UID {
	var buf [36]byte
	hex.Encode(buf[0:8], b[0:4])
	buf[8] = '-'
	hex.Encode(buf[9:13], b[4:6])
	buf[13] = '-'
	hex.Encode(buf[14:18], b[6:8])
	buf[18] = '-'
	hex.Encode(buf[19:23], b[8:10])
	buf[23] = '-'
	hex.Encode(buf[24:36], b[10:16])
	return types.UID(buf[:])
}
