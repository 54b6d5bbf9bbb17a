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

package reliability

import (
	"context"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
)

// watchStats counts how a recording watch got through the outages.
type watchStats struct {
	mu         sync.Mutex
	reconnects int // watch ended (apiserver gone, timeout) and was resumed from the last resourceVersion
	relists    int // resourceVersion too old (410): listed again; writes in between are seen as one change
}

func (s *watchStats) get() (reconnects, relists int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.reconnects, s.relists
}

// recordWatch lists, then watches from the list's resourceVersion, handing
// every object seen to handle with the time it was seen, until ctx ends. A
// watch that ends is resumed from the last resourceVersion seen, so an
// apiserver restart loses nothing; a resourceVersion the apiserver no longer
// has (410 Gone) makes it list again, which stats counts.
func recordWatch(ctx context.Context, stats *watchStats,
	list func(context.Context) (runtime.Object, error),
	watchFrom func(context.Context, string) (watch.Interface, error),
	handle func(obj runtime.Object, at time.Time)) {
	const retry = 200 * time.Millisecond
	pause := func() bool {
		select {
		case <-ctx.Done():
			return false
		case <-time.After(retry):
			return true
		}
	}
	for ctx.Err() == nil {
		l, err := list(ctx)
		if err != nil {
			if !pause() {
				return
			}
			continue
		}
		now := time.Now()
		items, _ := meta.ExtractList(l)
		for _, item := range items {
			handle(item, now)
		}
		la, _ := meta.ListAccessor(l)
		rv := la.GetResourceVersion()
		gone := false
		for ctx.Err() == nil && !gone {
			w, err := watchFrom(ctx, rv)
			if err != nil {
				if apierrors.IsResourceExpired(err) || apierrors.IsGone(err) {
					gone = true
				} else if !pause() {
					return
				}
				continue
			}
			for ev := range w.ResultChan() {
				if ev.Type == watch.Error {
					if err := apierrors.FromObject(ev.Object); apierrors.IsResourceExpired(err) || apierrors.IsGone(err) {
						gone = true
					}
					break
				}
				if a, err := meta.Accessor(ev.Object); err == nil {
					rv = a.GetResourceVersion()
				}
				if ev.Type == watch.Bookmark {
					continue
				}
				handle(ev.Object, time.Now())
			}
			w.Stop()
			stats.mu.Lock()
			if gone {
				stats.relists++
			} else {
				stats.reconnects++
			}
			stats.mu.Unlock()
		}
	}
}

// targetWrite is one change of a Deployment's spec.replicas, as the test's
// watch saw it.
type targetWrite struct {
	at              time.Time
	replicas        int32
	resourceVersion string
}

// writeLog records, per Deployment, every change of spec.replicas in order.
type writeLog struct {
	mu      sync.Mutex
	current map[string]int32
	writes  map[string][]targetWrite
}

func recordDeploymentWrites(ctx context.Context, client kubernetes.Interface, ns string, stats *watchStats) *writeLog {
	log := &writeLog{current: map[string]int32{}, writes: map[string][]targetWrite{}}
	deployments := client.AppsV1().Deployments(ns)
	go recordWatch(ctx, stats,
		func(ctx context.Context) (runtime.Object, error) { return deployments.List(ctx, metav1.ListOptions{}) },
		func(ctx context.Context, rv string) (watch.Interface, error) {
			return deployments.Watch(ctx, metav1.ListOptions{ResourceVersion: rv, AllowWatchBookmarks: true})
		},
		func(obj runtime.Object, at time.Time) {
			d, ok := obj.(*appsv1.Deployment)
			if !ok {
				return
			}
			replicas := ptr.Deref(d.Spec.Replicas, 1)
			log.mu.Lock()
			defer log.mu.Unlock()
			old, seen := log.current[d.Name]
			log.current[d.Name] = replicas
			if seen && old != replicas {
				log.writes[d.Name] = append(log.writes[d.Name], targetWrite{at: at, replicas: replicas, resourceVersion: d.ResourceVersion})
			}
		})
	return log
}

func (l *writeLog) snapshot() map[string][]targetWrite {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make(map[string][]targetWrite, len(l.writes))
	for k, v := range l.writes {
		out[k] = append([]targetWrite(nil), v...)
	}
	return out
}

// leaseRecord is one state of the leader-election Lease, as the test's watch
// saw it.
type leaseRecord struct {
	at          time.Time
	holder      string
	renewTime   time.Time
	transitions int32
}

type leaseLog struct {
	mu      sync.Mutex
	records []leaseRecord
}

func recordLease(ctx context.Context, client kubernetes.Interface, ns, name string, stats *watchStats) *leaseLog {
	log := &leaseLog{}
	leases := client.CoordinationV1().Leases(ns)
	selector := fields.OneTermEqualSelector("metadata.name", name).String()
	go recordWatch(ctx, stats,
		func(ctx context.Context) (runtime.Object, error) {
			return leases.List(ctx, metav1.ListOptions{FieldSelector: selector})
		},
		func(ctx context.Context, rv string) (watch.Interface, error) {
			return leases.Watch(ctx, metav1.ListOptions{FieldSelector: selector, ResourceVersion: rv, AllowWatchBookmarks: true})
		},
		func(obj runtime.Object, at time.Time) {
			lease, ok := obj.(*coordinationv1.Lease)
			if !ok {
				return
			}
			r := leaseRecord{at: at, holder: ptr.Deref(lease.Spec.HolderIdentity, ""), transitions: ptr.Deref(lease.Spec.LeaseTransitions, 0)}
			if lease.Spec.RenewTime != nil {
				r.renewTime = lease.Spec.RenewTime.Time
			}
			log.mu.Lock()
			defer log.mu.Unlock()
			log.records = append(log.records, r)
		})
	return log
}

func (l *leaseLog) snapshot() []leaseRecord {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]leaseRecord(nil), l.records...)
}

// latest is the last state seen, and whether there is one.
func (l *leaseLog) latest() (leaseRecord, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.records) == 0 {
		return leaseRecord{}, false
	}
	return l.records[len(l.records)-1], true
}
