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

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
)

// deferredEvents hold the Normal events of firings applied but not yet
// recorded in status. Like the status writes, they wait until the targets of
// a burst are written: an event is a write too, and fifty of them at the
// start of a burst of a thousand firings delay every target after them.
// They are emitted once the status that records their firings is written,
// and dropped if the object goes away or the process dies first (the status
// history is the record; a Normal event only tells it).
type deferredEvents struct {
	mu     sync.Mutex
	events map[cache.ObjectName]objectEvents
}

type objectEvents struct {
	uid      types.UID
	messages []deferredEvent
}

type deferredEvent struct {
	reason, message string
}

func newDeferredEvents() *deferredEvents {
	return &deferredEvents{events: map[cache.ObjectName]objectEvents{}}
}

// maxDeferredEvents bounds the events held per object: while its status
// cannot be written (forbidden, rejected) its firings would otherwise add
// events without end. The oldest are dropped and counted.
const maxDeferredEvents = 10

// add queues an event of the object with that uid; events of an earlier
// object of the same name are dropped.
func (d *deferredEvents) add(key cache.ObjectName, uid types.UID, reason, message string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	e := d.events[key]
	if e.uid != uid {
		e = objectEvents{uid: uid}
	}
	if len(e.messages) == maxDeferredEvents {
		e.messages = e.messages[1:]
		droppedEvents.Inc()
	}
	e.messages = append(e.messages, deferredEvent{reason: reason, message: message})
	d.events[key] = e
}

// take returns and forgets the events queued for the object with that uid.
func (d *deferredEvents) take(key cache.ObjectName, uid types.UID) []deferredEvent {
	d.mu.Lock()
	defer d.mu.Unlock()
	e, ok := d.events[key]
	if !ok {
		return nil
	}
	delete(d.events, key)
	if e.uid != uid {
		return nil
	}
	return e.messages
}

// forget drops the events queued for key.
func (d *deferredEvents) forget(key cache.ObjectName) {
	d.mu.Lock()
	defer d.mu.Unlock()
	delete(d.events, key)
}
