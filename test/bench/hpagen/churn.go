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
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/scaleplane/scaleplane/pkg/generated/clientset/versioned"
)

// churner keeps the HPA statuses changing. The HPA controller writes an
// HPA's status only when it differs from the stored one, and with no metrics
// to read (no pods) every status settles after the first syncs. So churner
// does what a workload's own scaling does: it sets each LeaderWorkerSet's
// replicas through the scale subresource, alternately to 2 and 1, each once
// per period, spread evenly over the period. Both stay inside every HPA's
// [minReplicas, maxReplicas], so the HPA controller does not scale back; it
// reports the new current replicas, a status write. For the generator these
// are LeaderWorkerSet spec updates and HPA status updates, both of which it
// must take without writing.
type churner struct {
	client  versioned.Interface
	n       int
	period  time.Duration
	workers int

	patches  atomic.Int64
	failures atomic.Int64
	lastErr  atomic.Value // error

	cancel context.CancelFunc
	done   sync.WaitGroup
}

func startChurn(ctx context.Context, client versioned.Interface, n int, period time.Duration, workers int) *churner {
	ctx, cancel := context.WithCancel(ctx)
	c := &churner{client: client, n: n, period: period, workers: workers, cancel: cancel}
	next := make(chan patchJob)
	for range workers {
		c.done.Add(1)
		go func() {
			defer c.done.Done()
			for job := range next {
				c.patch(ctx, job)
			}
		}()
	}
	c.done.Add(1)
	go func() {
		defer c.done.Done()
		defer close(next)
		c.schedule(ctx, next)
	}()
	return c
}

type patchJob struct {
	name     string
	replicas int32
}

// schedule hands out one patch every period/n, round after round, until ctx
// ends. If the workers fall behind, the schedule slips rather than bursts.
func (c *churner) schedule(ctx context.Context, next chan<- patchJob) {
	step := c.period / time.Duration(c.n)
	at := time.Now()
	for round := 0; ; round++ {
		replicas := int32(2 - round%2)
		for i := range c.n {
			at = at.Add(step)
			if d := time.Until(at); d > 0 {
				select {
				case <-ctx.Done():
					return
				case <-time.After(d):
				}
			}
			select {
			case <-ctx.Done():
				return
			case next <- patchJob{name: lwsName(i), replicas: replicas}:
			}
		}
	}
}

func (c *churner) patch(ctx context.Context, job patchJob) {
	body := fmt.Appendf(nil, `{"spec":{"replicas":%d}}`, job.replicas)
	err := c.client.LeaderworkersetV1().RESTClient().Patch(types.MergePatchType).
		Namespace(namespace).Resource("leaderworkersets").Name(job.name).SubResource("scale").
		Body(body).Do(ctx).Error()
	switch {
	case err == nil:
		c.patches.Add(1)
	case ctx.Err() != nil:
	default:
		c.failures.Add(1)
		c.lastErr.Store(err)
	}
}

// stop ends the churn and waits for the patches in flight.
func (c *churner) stop() {
	c.cancel()
	c.done.Wait()
}

func (c *churner) err() error {
	if n := c.failures.Load(); n > 0 {
		return fmt.Errorf("%d scale patches failed, the last: %w", n, c.lastErr.Load().(error))
	}
	return nil
}
