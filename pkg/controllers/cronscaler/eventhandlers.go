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
	"context"
	"sync"

	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	autoscalingv1alpha1 "github.com/scaleplane/scaleplane/pkg/apis/autoscaling/v1alpha1"
)

func (c *Controller) onAdd(ctx context.Context, obj any) {
	cron, ok := cronOf(obj)
	if !ok {
		return
	}
	c.counts.add(len(cron.Spec.Rules))
	c.targets.add(cron, 1)
	key := cache.MetaObjectToName(cron)
	c.markFirstSight(ctx, key, cron)
	c.queue.Add(key)
}

// markFirstSight marks every rule of an object seen for the first time that
// was edited while the watch delivered nothing (see firstSightReplan).
func (c *Controller) markFirstSight(ctx context.Context, key cache.ObjectName, cron *autoscalingv1alpha1.CronFederatedHPA) {
	if at := firstSightReplan(cron, c.start, c.clock.Now()); !at.IsZero() {
		klog.FromContext(ctx).V(2).Info("Rules re-planned after a change made before the object was seen", "cronFederatedHPA", klog.KObj(cron), "changed", at)
		c.memory.markReplan(key, cron.UID, true, nil, at)
	}
}

// onUpdate enqueues the object and marks the rules whose plan a spec change
// invalidates: all of them when the target changed (a firing planned for the
// old target must not land on the new one), a rule whose schedule or time
// zone changed, a rule that was resumed (what it skipped while suspended is
// not replayed), and a rule that was added (it exists from the moment it is
// added); each from when the change was made (see changeMade). Updates of status alone (the controller's own writes) also enqueue:
// that sync is cheap, writes nothing, and lets the in-process memory drop
// what the cache has caught up with.
func (c *Controller) onUpdate(ctx context.Context, oldObj, newObj any) {
	oldCron, ok1 := cronOf(oldObj)
	newCron, ok2 := cronOf(newObj)
	if !ok1 || !ok2 {
		return
	}
	if oldCron.ResourceVersion == newCron.ResourceVersion {
		// A periodic resync: the requeue-after delays already drive firings.
		return
	}
	key := cache.MetaObjectToName(newCron)
	c.counts.update(len(oldCron.Spec.Rules), len(newCron.Spec.Rules))
	c.targets.add(oldCron, -1)
	c.targets.add(newCron, 1)
	if oldCron.UID == newCron.UID && !sameStatus(oldCron.Status, newCron.Status) {
		c.writers.saw(key, newCron)
	}
	if oldCron.UID == newCron.UID {
		all, rules := replanned(oldCron, newCron)
		if all || len(rules) > 0 {
			at := changeMade(newCron, c.clock.Now())
			klog.FromContext(ctx).V(2).Info("Rules re-planned after a spec change", "cronFederatedHPA", klog.KObj(newCron), "all", all, "rules", rules, "changed", at)
			c.memory.markReplan(key, newCron.UID, all, rules, at)
		}
	} else {
		// Re-created under its name while the watch delivered nothing.
		c.markFirstSight(ctx, key, newCron)
	}
	c.queue.Add(key)
}

func (c *Controller) onDelete(ctx context.Context, obj any) {
	if tombstone, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tombstone.Obj
	}
	cron, ok := cronOf(obj)
	if !ok {
		return
	}
	key := cache.MetaObjectToName(cron)
	c.counts.remove(len(cron.Spec.Rules))
	c.targets.add(cron, -1)
	c.memory.forget(key)
	c.deferred.forget(key)
	c.writers.forget(key)
	c.autoscalers.clear(key)
	// The sync finds it gone and drops whatever is left.
	c.queue.Add(key)
}

// watchCounts keeps the watched objects and rules gauges up to date from
// the event handlers, without listing and without a count per object (at
// 100,000 objects a map of them is megabytes): the informer hands every
// handler the object as it last handed it, a deleted one included (in its
// tombstone), so sums of the differences stay exact.
type watchCounts struct {
	mu             sync.Mutex
	objects, rules int
}

func newWatchCounts() *watchCounts {
	return &watchCounts{}
}

func (w *watchCounts) add(rules int) {
	w.change(1, rules)
}

func (w *watchCounts) update(oldRules, newRules int) {
	w.change(0, newRules-oldRules)
}

func (w *watchCounts) remove(rules int) {
	w.change(-1, -rules)
}

func (w *watchCounts) change(objects, rules int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.objects += objects
	w.rules += rules
	watchedObjects.Set(float64(w.objects))
	watchedRules.Set(float64(w.rules))
}
