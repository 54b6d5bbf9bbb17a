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
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	autoscalingv1alpha1 "github.com/scaleplane/scaleplane/pkg/apis/autoscaling/v1alpha1"
	"github.com/scaleplane/scaleplane/pkg/generated/clientset/versioned"
	"github.com/scaleplane/scaleplane/test/bench/internal/benchutil"
)

// waitPlanned waits until every CronFederatedHPA's status plans the slot.
func waitPlanned(ctx context.Context, client versioned.Interface, n int, slot time.Time) error {
	_, err := waitStatus(ctx, client, n, "planned", func(h *autoscalingv1alpha1.ExecutionHistory) bool {
		return h.NextExecutionTime != nil && h.NextExecutionTime.Time.Equal(slot)
	}, time.Until(slot))
	return err
}

// waitRecorded waits until every status records the slot as fired, and
// returns when the watch saw the last one.
func waitRecorded(ctx context.Context, client versioned.Interface, n int, slot time.Time) (time.Time, error) {
	return waitStatus(ctx, client, n, "recorded", func(h *autoscalingv1alpha1.ExecutionHistory) bool {
		return h.LastScheduleTime != nil && h.LastScheduleTime.Time.Equal(slot) && len(h.SuccessfulExecutions) > 0
	}, 30*time.Minute)
}

// waitStatus waits until the first history of each of the n
// CronFederatedHPAs satisfies ok, and returns when it saw the last one. It
// lists once and then watches: a list of 100,000 objects every half second
// took whole cores of the apiserver from the writes it measures.
func waitStatus(ctx context.Context, client versioned.Interface, n int, what string, ok func(*autoscalingv1alpha1.ExecutionHistory) bool, timeout time.Duration) (time.Time, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	list, err := client.AutoscalingV1alpha1().CronFederatedHPAs(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return time.Time{}, err
	}
	done := map[string]bool{}
	isDone := func(obj *autoscalingv1alpha1.CronFederatedHPA) bool {
		h := obj.Status.ExecutionHistories
		return len(h) > 0 && ok(&h[0])
	}
	for i := range list.Items {
		if isDone(&list.Items[i]) {
			done[list.Items[i].Name] = true
		}
	}
	if len(done) == n {
		return time.Now(), nil
	}
	finished := make(chan time.Time, 1)
	// Events are handled on one goroutine (see benchutil.Watch).
	err = benchutil.Watch(ctx, list.ResourceVersion, func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
		return client.AutoscalingV1alpha1().CronFederatedHPAs(namespace).Watch(ctx, opts)
	}, func(ev watch.Event, at time.Time) {
		obj, isCron := ev.Object.(*autoscalingv1alpha1.CronFederatedHPA)
		if !isCron || len(done) == n {
			return
		}
		if ev.Type != watch.Deleted && isDone(obj) {
			done[obj.Name] = true
		} else {
			delete(done, obj.Name)
		}
		if len(done) == n {
			finished <- at
		}
	})
	if err != nil {
		return time.Time{}, err
	}
	select {
	case at := <-finished:
		return at, nil
	case <-ctx.Done():
		return time.Time{}, fmt.Errorf("not all %d CronFederatedHPAs %s in %s", n, what, timeout)
	}
}

// watchStatuses runs a watch on the CronFederatedHPAs that only consumes its
// events, until ctx ends: the status limit is measured with the watch the
// controller's status phase is measured with, which costs the apiserver the
// same in both.
func watchStatuses(ctx context.Context, client versioned.Interface) error {
	list, err := client.AutoscalingV1alpha1().CronFederatedHPAs(namespace).List(ctx, metav1.ListOptions{Limit: 1})
	if err != nil {
		return err
	}
	return benchutil.Watch(ctx, list.ResourceVersion, func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
		return client.AutoscalingV1alpha1().CronFederatedHPAs(namespace).Watch(ctx, opts)
	}, func(watch.Event, time.Time) {})
}
