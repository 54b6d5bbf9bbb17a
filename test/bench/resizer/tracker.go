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

package main

import (
	"context"
	"fmt"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"

	"github.com/scaleplane/scaleplane/test/bench/internal/benchutil"
)

// observation is a value of a target's managed request, as the watch
// delivered it.
type observation struct {
	value int64 // millicores for cpu, bytes for memory
	at    time.Time
}

// tracker follows the target Deployments through a watch and keeps, per
// target, every distinct value its container's managed request took, with
// when the watch delivered it. The watch is started before the controller
// manager and needs no list afterwards: it keeps the apiserver's LIST
// counter to the manager's own.
type tracker struct {
	resources map[string]corev1.ResourceName // target -> managed resource

	mu      sync.Mutex
	history map[string][]observation
	changed chan struct{} // closed and replaced on every new observation
}

func newTracker() *tracker {
	return &tracker{
		resources: map[string]corev1.ResourceName{nodeTarget: corev1.ResourceCPU, containerTarget: corev1.ResourceMemory},
		history:   map[string][]observation{},
		changed:   make(chan struct{}),
	}
}

func (t *tracker) observe(ev watch.Event, at time.Time) {
	d, ok := ev.Object.(*appsv1.Deployment)
	if !ok || (ev.Type != watch.Added && ev.Type != watch.Modified) {
		return
	}
	res, ok := t.resources[d.Name]
	if !ok {
		return
	}
	v, ok := requestOf(d, res)
	if !ok {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	h := t.history[d.Name]
	if len(h) > 0 && h[len(h)-1].value == v {
		return
	}
	t.history[d.Name] = append(h, observation{value: v, at: at})
	close(t.changed)
	t.changed = make(chan struct{})
}

// requestOf returns the addon container's request of res, scaled as the
// resizer compares it: millicores for cpu, bytes for memory.
func requestOf(d *appsv1.Deployment, res corev1.ResourceName) (int64, bool) {
	for _, c := range d.Spec.Template.Spec.Containers {
		if c.Name != addonContainer {
			continue
		}
		q, ok := c.Resources.Requests[res]
		if !ok {
			return 0, false
		}
		if res == corev1.ResourceCPU {
			return q.MilliValue(), true
		}
		return q.Value(), true
	}
	return 0, false
}

// seen returns when the target's request was first seen at want at or
// after since, and how many distinct values it took in between.
func (t *tracker) seen(target string, want int64, since time.Time) (at time.Time, changes int, ok bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, o := range t.history[target] {
		if o.at.Before(since) {
			continue
		}
		changes++
		if o.value == want {
			return o.at, changes, true
		}
	}
	return time.Time{}, changes, false
}

// firstAfter returns the first new value of the target's request seen at
// or after since.
func (t *tracker) firstAfter(target string, since time.Time) (observation, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, o := range t.history[target] {
		if !o.at.Before(since) {
			return o, true
		}
	}
	return observation{}, false
}

// last returns the newest value seen of the target's request.
func (t *tracker) last(target string) (observation, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	h := t.history[target]
	if len(h) == 0 {
		return observation{}, false
	}
	return h[len(h)-1], true
}

// wait returns when the target's request was first seen at want at or
// after since; alive is polled to give up early when the controller
// manager exits.
func (t *tracker) wait(ctx context.Context, target string, want int64, since time.Time, timeout time.Duration, alive func() error) (time.Time, int, error) {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		t.mu.Lock()
		changed := t.changed
		t.mu.Unlock()
		if at, n, ok := t.seen(target, want, since); ok {
			return at, n, nil
		}
		select {
		case <-changed:
		case <-tick.C:
			if err := alive(); err != nil {
				return time.Time{}, 0, err
			}
		case <-deadline.C:
			last, _ := t.last(target)
			return time.Time{}, 0, fmt.Errorf("%s: request not %d after %s (last seen %d)", target, want, timeout, last.value)
		case <-ctx.Done():
			return time.Time{}, 0, ctx.Err()
		}
	}
}

// watchTargets lists the Deployments of the addon namespace once and
// watches them from there with a RetryWatcher (which resumes a closed
// watch with another watch, never a list), until ctx ends.
func watchTargets(ctx context.Context, kube kubernetes.Interface, t *tracker) error {
	deployments := kube.AppsV1().Deployments(addonNamespace)
	l, err := deployments.List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("listing the target Deployments: %w", err)
	}
	now := time.Now()
	for i := range l.Items {
		t.observe(watch.Event{Type: watch.Added, Object: &l.Items[i]}, now)
	}
	if err := benchutil.Watch(ctx, l.ResourceVersion, deployments.Watch, t.observe); err != nil {
		return fmt.Errorf("watching the target Deployments: %w", err)
	}
	return nil
}
