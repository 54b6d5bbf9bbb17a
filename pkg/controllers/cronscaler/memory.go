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
	"crypto/sha256"
	"sync"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
)

// memory is what this process holds of each CronFederatedHPA that its
// status, as the informer's cache shows it, may not say (yet): one
// objectMemory per object, one field per concept of the plan state
// (docs/architecture.md, "The cron-scaler's plan state"), each with its
// type, invariants and ways in and out in a file of its own: the journal
// of its status writes (statusJournal, journal.go), the replan marks
// (replanMarks, replanmarks.go) and the attempts of firings being retried
// (firingAttempts, attempts.go). This file holds only what they share:
// the lock, the object's identity and when its memory is dropped.
//
// Invariants:
//   - One lock for all of it: a conflict hands the replan marks of a dropped
//     plan back from the journal to the marks in one step (discardPlan).
//   - Memory is of one object: another uid under the same name (the object
//     was re-created) drops what was known (see object).
//   - An object with nothing to remember takes no memory (see prune): at
//     100,000 objects most hold nothing between their slots.
//   - Across restarts and leader changes none of it survives: status is the
//     only record, and a new process lists fresh objects.
//
// Not plan state, kept here because it is per object too: whether the
// object was refused (duplicate rule names) at its current generation, and
// whether pending histories the drain could not write were reported.
type memory struct {
	mu      sync.Mutex
	objects map[cache.ObjectName]*objectMemory
}

type objectMemory struct {
	// uid is the object's uid as uidKey holds it: 16 bytes in place, not a
	// string of its own (at 100,000 objects in a burst, 8 MB of strings).
	uid [16]byte
	// journal is this process's journal of its status writes (see
	// statusJournal).
	journal statusJournal
	// marks are the replan marks of the event handlers (see replanMarks).
	marks replanMarks
	// attempts are the attempts of firings being retried, by rule (see
	// firingAttempts); nil while empty: most objects never need them.
	attempts map[string]firingAttempts
	// refused is set, with the generation, once an object with duplicate
	// rule names was reported, so it is reported once per change.
	refusedGeneration int64
	refused           bool
	// abandoned is set once pending histories that could not be written
	// before the controller stopped were reported.
	abandoned bool
}

// uidKey is how the memory holds a uid: the 16 bytes of the UUID the
// apiserver gives, or, for any other uid (a fake clientset's), the first 16
// bytes of its SHA-256, which tells two uids apart as surely.
func uidKey(uid types.UID) [16]byte {
	if b, ok := parseUID(uid); ok {
		return b
	}
	sum := sha256.Sum256([]byte(uid))
	return [16]byte(sum[:16])
}

func newMemory() *memory {
	return &memory{objects: map[cache.ObjectName]*objectMemory{}}
}

// object returns the memory of the object with that uid, creating it if
// create is true; a different uid means the object was re-created, and what
// was known is dropped. Objects with nothing to remember take no memory.
func (m *memory) object(key cache.ObjectName, uid types.UID, create bool) *objectMemory {
	id := uidKey(uid)
	o := m.objects[key]
	if o != nil && o.uid != id {
		delete(m.objects, key)
		o = nil
	}
	if o == nil && create {
		o = &objectMemory{uid: id}
		m.objects[key] = o
	}
	return o
}

// prune drops the object's memory once it holds nothing.
func (m *memory) prune(key cache.ObjectName, o *objectMemory) {
	if o != nil && o.journal.empty() && o.marks.empty() &&
		len(o.attempts) == 0 && !o.refused {
		delete(m.objects, key)
	}
}

func (m *memory) forget(key cache.ObjectName) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.objects, key)
}

// abandon marks the object's pending histories as reported unrecorded and
// says whether they were not reported yet.
func (m *memory) abandon(key cache.ObjectName) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	o := m.objects[key]
	if o == nil || len(o.journal.pending) == 0 || o.abandoned {
		return false
	}
	o.abandoned = true
	return true
}

// refuse records that the object was reported as refused at generation and
// says whether this is news (it was not reported at that generation yet).
func (m *memory) refuse(key cache.ObjectName, uid types.UID, generation int64) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	o := m.object(key, uid, true)
	news := !o.refused || o.refusedGeneration != generation
	o.refused, o.refusedGeneration = true, generation
	return news
}

// accept clears a refusal once the object is valid again.
func (m *memory) accept(key cache.ObjectName, uid types.UID) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if o := m.object(key, uid, false); o != nil {
		o.refused = false
		m.prune(key, o)
	}
}
