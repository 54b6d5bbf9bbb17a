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

// Package recorder keeps what the reliability tests watch happen: every
// change of a Deployment's spec.replicas and every state of the
// leader-election Lease, in order, with the time the test saw it. Its
// watches resume across kube-apiserver and etcd restarts, so an outage
// hides nothing from them.
package recorder

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

// WatchStats counts how a recording watch got through the outages.
type WatchStats struct {
	mu         sync.Mutex
	reconnects int // watch ended (apiserver gone, timeout) and was resumed from the last resourceVersion
	relists    int // resourceVersion too old (410): listed again; writes in between are seen as one change
}

// Get returns how many times the watch was resumed, and how many times it
// had to list again.
func (s *WatchStats) Get() (reconnects, relists int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.reconnects, s.relists
}

// recordWatch lists, then watches from the list's resourceVersion, handing
// every object seen to handle with the time it was seen, until ctx ends. A
// watch that ends is resumed from the last resourceVersion seen, so an
// apiserver restart loses nothing; a resourceVersion the apiserver no longer
// has (410 Gone) makes it list again, which stats counts.
func recordWatch(ctx context.Context, stats *WatchStats,
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

// TargetWrite is one change of a Deployment's spec.replicas, as the test's
// watch saw it.
type TargetWrite struct {
	At              time.Time
	Replicas        int32
	ResourceVersion string
}

// WriteLog records, per Deployment, every change of spec.replicas in order.
type WriteLog struct {
	mu      sync.Mutex
	current map[string]int32
	writes  map[string][]TargetWrite
	// seen is the resourceVersion each Deployment was last seen at.
	seen map[string]string
}

// RecordDeploymentWrites watches the Deployments of ns until ctx ends.
// The value a Deployment has when first seen is its starting point, not a
// write.
func RecordDeploymentWrites(ctx context.Context, client kubernetes.Interface, ns string, stats *WatchStats) *WriteLog {
	log := &WriteLog{current: map[string]int32{}, writes: map[string][]TargetWrite{}, seen: map[string]string{}}
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
			log.seen[d.Name] = d.ResourceVersion
			if seen && old != replicas {
				log.writes[d.Name] = append(log.writes[d.Name], TargetWrite{At: at, Replicas: replicas, ResourceVersion: d.ResourceVersion})
			}
		})
	return log
}

// CaughtUp says whether the watch has seen every Deployment of list at the
// resourceVersion it has there: once nothing writes them any more, the log
// holds every write.
func (l *WriteLog) CaughtUp(list []appsv1.Deployment) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for i := range list {
		if l.seen[list[i].Name] != list[i].ResourceVersion {
			return false
		}
	}
	return true
}

// Snapshot returns the writes seen so far, per Deployment name.
func (l *WriteLog) Snapshot() map[string][]TargetWrite {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make(map[string][]TargetWrite, len(l.writes))
	for k, v := range l.writes {
		out[k] = append([]TargetWrite(nil), v...)
	}
	return out
}

// LeaseRecord is one state of the leader-election Lease, as the test's
// watch saw it.
type LeaseRecord struct {
	At          time.Time
	Holder      string
	AcquireTime time.Time
	RenewTime   time.Time
	Transitions int32
}

// LeaseLog records every state of one Lease in order.
type LeaseLog struct {
	mu      sync.Mutex
	records []LeaseRecord
}

// RecordLease watches the Lease ns/name until ctx ends.
func RecordLease(ctx context.Context, client kubernetes.Interface, ns, name string, stats *WatchStats) *LeaseLog {
	log := &LeaseLog{}
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
			r := LeaseRecord{At: at, Holder: ptr.Deref(lease.Spec.HolderIdentity, ""), Transitions: ptr.Deref(lease.Spec.LeaseTransitions, 0)}
			if lease.Spec.AcquireTime != nil {
				r.AcquireTime = lease.Spec.AcquireTime.Time
			}
			if lease.Spec.RenewTime != nil {
				r.RenewTime = lease.Spec.RenewTime.Time
			}
			log.mu.Lock()
			defer log.mu.Unlock()
			log.records = append(log.records, r)
		})
	return log
}

// Snapshot returns the states seen so far, oldest first.
func (l *LeaseLog) Snapshot() []LeaseRecord {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]LeaseRecord(nil), l.records...)
}

// Latest is the last state seen, and whether there is one.
func (l *LeaseLog) Latest() (LeaseRecord, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.records) == 0 {
		return LeaseRecord{}, false
	}
	return l.records[len(l.records)-1], true
}
