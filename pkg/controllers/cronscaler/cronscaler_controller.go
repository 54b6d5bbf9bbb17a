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

// Package cronscaler is the cron-scaler controller: it fires the rules of
// CronFederatedHPAs on their cron schedules, scaling any resource with a scale
// subresource or adjusting the bounds of a FederatedHPA or
// HorizontalPodAutoscaler, and records each firing in status.
//
// All objects share one delaying workqueue: a sync fires what is due and asks
// to be requeued at the earliest next firing, so there is no goroutine or
// timer per rule and the cost grows with firings, not with rules.
//
// Targets first: a sync that writes a target leaves its status write to a
// second queue, whose workers write statuses only while no firing is pending
// or running. When thousands of rules fire in the same second, all target
// writes go out before the status writes that record them, so the time until
// the last target is applied depends on the target writes alone. Until its
// status is written a firing is held in memory (see memory); a process that
// dies in between leaves the firing to its successor, which applies the same
// value once more and records it.
package cronscaler

import (
	"context"
	"fmt"
	"runtime/debug"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/scale"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/flowcontrol"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	autoscalingv1alpha1 "github.com/scaleplane/scaleplane/pkg/apis/autoscaling/v1alpha1"
	"github.com/scaleplane/scaleplane/pkg/generated/clientset/versioned"
	informers "github.com/scaleplane/scaleplane/pkg/generated/informers/externalversions/autoscaling/v1alpha1"
	listers "github.com/scaleplane/scaleplane/pkg/generated/listers/autoscaling/v1alpha1"
)

// Name is the controller's name in --controllers, logs and events.
const Name = "cron-scaler"

// Event reasons.
const (
	reasonScaled          = "Scaled"
	reasonScaleFailed     = "ScaleFailed"
	reasonMissed          = "MissedSchedule"
	reasonSuperseded      = "Superseded"
	reasonInvalidRule     = "InvalidRule"
	reasonDuplicateRules  = "DuplicateRuleNames"
	reasonStatusNotStored = "UpdateStatusFailed"
)

// DefaultDrainTimeout bounds how long Run waits, once its context ends, for
// the syncs in flight to finish before it cancels them: a sync cut between
// the target write and the status write leaves a firing applied but not
// recorded.
const DefaultDrainTimeout = 15 * time.Second

// Normal events are limited to this rate and burst across the controller, so
// that in a burst they do not compete with target writes for the client's
// rate limit and the apiserver; the status of each object records every
// firing all the same. Warning events are not limited.
const (
	normalEventQPS   = 10
	normalEventBurst = 50
)

// A status write waits while firings are pending or running, polling every
// recordPollInterval, but never longer than maxRecordWait, so statuses are
// not starved by firings that never stop coming.
const (
	recordPollInterval = 10 * time.Millisecond
	maxRecordWait      = time.Minute
)

// Controller is the cron-scaler.
type Controller struct {
	client     versioned.Interface
	kubeClient kubernetes.Interface
	scales     scale.ScalesGetter
	mapper     meta.ResettableRESTMapper
	lister     listers.CronFederatedHPALister
	synced     cache.InformerSynced
	recorder   record.EventRecorder
	clock      clock.WithTicker
	queue      workqueue.TypedRateLimitingInterface[cache.ObjectName]
	// records holds the objects whose firings are applied but whose status
	// is not written yet; see recordWorker.
	records workqueue.TypedRateLimitingInterface[cache.ObjectName]
	// firing counts the syncs of queue in progress.
	firing atomic.Int32
	// firingsGate lets one status writer at a time wait for the firings.
	firingsGate sync.Mutex
	workers     int
	// locks keeps a sync and a status write of the same object apart.
	locks *keyLocks
	// normalEvents limits Normal events; see normalEventQPS.
	normalEvents flowcontrol.PassiveRateLimiter
	// deferred holds the Normal events of firings until their status is
	// written.
	deferred *deferredEvents
	// stored says which of scaleplane's added fields the installed CRD
	// keeps; see SetStoredFields.
	stored StoredFields
	// drainTimeout bounds the wait for the syncs in flight when Run stops.
	drainTimeout time.Duration

	schedules *scheduleCache
	memory    *memory
	counts    *watchCounts
}

// NewController builds the cron-scaler and registers its event handlers on
// the CronFederatedHPA informer. mapper maps target kinds to resources for
// the scale client; it is reset when a kind is not found, to pick up CRDs
// installed later. Until SetStoredFields says otherwise, the CRD is assumed
// to store none of scaleplane's added fields, as Karmada's does not.
func NewController(
	ctx context.Context,
	cronInformer informers.CronFederatedHPAInformer,
	client versioned.Interface,
	kubeClient kubernetes.Interface,
	scales scale.ScalesGetter,
	mapper meta.ResettableRESTMapper,
	recorder record.EventRecorder,
	clk clock.WithTicker,
	workers int,
) (*Controller, error) {
	registerMetrics()
	c := &Controller{
		client:       client,
		kubeClient:   kubeClient,
		scales:       scales,
		mapper:       mapper,
		lister:       cronInformer.Lister(),
		synced:       cronInformer.Informer().HasSynced,
		recorder:     recorder,
		clock:        clk,
		workers:      workers,
		drainTimeout: DefaultDrainTimeout,
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(
			failureRateLimiter(),
			workqueue.TypedRateLimitingQueueConfig[cache.ObjectName]{Name: "cron_scaler", Clock: clk},
		),
		records: workqueue.NewTypedRateLimitingQueueWithConfig(
			failureRateLimiter(),
			workqueue.TypedRateLimitingQueueConfig[cache.ObjectName]{Name: "cron_scaler_status", Clock: clk},
		),
		locks:        newKeyLocks(),
		normalEvents: flowcontrol.NewTokenBucketPassiveRateLimiterWithClock(normalEventQPS, normalEventBurst, clk),
		deferred:     newDeferredEvents(),
		schedules:    newScheduleCache(),
		memory:       newMemory(),
		counts:       newWatchCounts(),
	}
	publishStoredFields(c.stored)
	if _, err := cronInformer.Informer().AddEventHandlerWithOptions(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { c.onAdd(ctx, obj) },
		UpdateFunc: func(oldObj, newObj any) { c.onUpdate(ctx, oldObj, newObj) },
		DeleteFunc: func(obj any) { c.onDelete(ctx, obj) },
	}, cache.HandlerOptions{Logger: ptrTo(klog.FromContext(ctx))}); err != nil {
		return nil, fmt.Errorf("registering the CronFederatedHPA event handlers: %w", err)
	}
	return c, nil
}

func ptrTo[T any](v T) *T { return &v }

// maxFailureBackoff bounds the wait before a failed sync or status write is
// retried. The workqueue's default grows to 1000 s: after an outage of a
// minute a status write would wait as long again, and a cron schedule cannot
// wait that long.
const maxFailureBackoff = 30 * time.Second

// failureRateLimiter backs a failing object off exponentially from 5 ms to
// maxFailureBackoff. Unlike the workqueue's default it has no overall token
// bucket (10/s): when an outage fails the syncs of ten thousand objects at
// once, a shared bucket would spread their retries over a quarter of an
// hour after it.
func failureRateLimiter() workqueue.TypedRateLimiter[cache.ObjectName] {
	return workqueue.NewTypedItemExponentialFailureRateLimiter[cache.ObjectName](5*time.Millisecond, maxFailureBackoff)
}

// Name returns the controller's name.
func (c *Controller) Name() string { return Name }

// Run starts the workers and blocks until ctx ends and the workers stopped.
//
// When ctx ends the workers take no more firings, and the syncs in flight
// finish with a context of their own, then the status writes still queued
// are made; the context is cancelled only if all this takes longer than the
// drain timeout: a firing applied but not recorded is applied once more by
// the next leader. The controller manager releases its leader-election lease
// only after Run returned.
func (c *Controller) Run(ctx context.Context) {
	defer c.queue.ShutDown()
	defer c.records.ShutDown()
	logger := klog.FromContext(ctx)
	if !cache.WaitForNamedCacheSyncWithContext(ctx, c.synced) {
		return
	}
	logger.Info("Starting workers", "workers", c.workers)
	workCtx, cancelWork := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelWork()
	var wg, recordWG sync.WaitGroup
	for i := 0; i < c.workers; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			wait.UntilWithContext(ctx, func(ctx context.Context) { c.worker(ctx, workCtx) }, time.Second)
		}()
		recordWG.Add(1)
		go func() {
			defer recordWG.Done()
			// Restarted after a panic until the queue is drained, even once
			// stopping: firings applied are recorded.
			for !c.recordWorker(ctx, workCtx) {
			}
		}()
	}
	<-ctx.Done()
	c.queue.ShutDown()
	stopped := make(chan struct{})
	go func() {
		wg.Wait()
		// No firing is left: the status writers drain their queue.
		c.records.ShutDown()
		recordWG.Wait()
		close(stopped)
	}()
	logger.Info("Stopping: no new syncs, waiting for the syncs in flight", "timeout", c.drainTimeout)
	timer := c.clock.NewTimer(c.drainTimeout)
	defer timer.Stop()
	select {
	case <-stopped:
	case <-timer.C():
		logger.Info("The syncs in flight did not finish in time, cancelling them", "timeout", c.drainTimeout)
		cancelWork()
		<-stopped
	}
	logger.Info("Workers stopped")
}

// worker processes keys until stop ends or the queue shuts down; syncs run
// with work. A panic ends only this call; wait.Until starts the worker again.
func (c *Controller) worker(stop, work context.Context) {
	defer func() {
		if r := recover(); r != nil {
			utilruntime.HandleErrorWithContext(work, fmt.Errorf("%v", r), "Cron-scaler worker panicked", "stack", string(debug.Stack()))
		}
	}()
	for c.processNextWorkItem(stop, work) {
	}
}

func (c *Controller) processNextWorkItem(stop, work context.Context) bool {
	key, quit := c.queue.Get()
	if quit {
		return false
	}
	defer c.queue.Done(key)
	// A queue that is shut down still hands out what it holds: take no new
	// work once stopping.
	if stop.Err() != nil {
		return false
	}

	c.firing.Add(1)
	unlock := c.locks.lock(key)
	requeueAfter, record, err := c.fireRecovered(work, key)
	unlock()
	c.firing.Add(-1)
	if record {
		c.records.Add(key)
	}
	switch {
	case err != nil:
		utilruntime.HandleErrorWithContext(work, err, "Syncing CronFederatedHPA failed, will retry", "cronFederatedHPA", key)
		c.queue.AddRateLimited(key)
		if requeueAfter > 0 {
			// The retry may back off past the next firing: keep it too.
			c.queue.AddAfter(key, requeueAfter)
		}
	case requeueAfter > 0:
		c.queue.Forget(key)
		c.queue.AddAfter(key, requeueAfter)
	default:
		c.queue.Forget(key)
	}
	return true
}

// recordWorker writes the statuses of firings already applied until the
// status queue shuts down and is empty: on stop it drains the queue rather
// than leave firings unrecorded. It waits while firings are pending or
// running (targets first) unless stopping. It returns true once the queue is
// drained, false after a panic, which ends only this call.
func (c *Controller) recordWorker(stop, work context.Context) (drained bool) {
	defer func() {
		if r := recover(); r != nil {
			utilruntime.HandleErrorWithContext(work, fmt.Errorf("%v", r), "Cron-scaler status writer panicked", "stack", string(debug.Stack()))
		}
	}()
	for c.processNextRecord(stop, work) {
	}
	return true
}

func (c *Controller) processNextRecord(stop, work context.Context) bool {
	key, quit := c.records.Get()
	if quit {
		return false
	}
	defer c.records.Done(key)
	c.waitForFirings(stop)

	unlock := c.locks.lock(key)
	err := c.recordRecovered(work, key)
	unlock()
	if err != nil {
		utilruntime.HandleErrorWithContext(work, err, "Recording the firings of a CronFederatedHPA failed, will retry", "cronFederatedHPA", key)
		c.records.AddRateLimited(key)
		return true
	}
	c.records.Forget(key)
	return true
}

// waitForFirings returns once no firing is pending or running, when stop
// ends, or after maxRecordWait. It paces status writes behind target writes
// and schedules nothing, so it runs on the wall clock. Only one status writer
// polls at a time; the others wait for it on firingsGate, then see the
// firings done at once: tens of writers polling would take CPU from the
// target writes they wait for. (A sync taken from the queue in the instant
// before it is counted may overlap one status write: that costs a little
// time, nothing else.)
func (c *Controller) waitForFirings(stop context.Context) {
	// Counted from before the gate: writers queued behind it must not each
	// wait maxRecordWait in turn.
	deadline := time.Now().Add(maxRecordWait)
	c.firingsGate.Lock()
	defer c.firingsGate.Unlock()
	for stop.Err() == nil && (c.queue.Len() > 0 || c.firing.Load() > 0) && time.Now().Before(deadline) {
		time.Sleep(recordPollInterval)
	}
}

// syncRecovered runs sync and turns a panic into an error, so one bad object
// is retried with backoff instead of taking the process down.
func (c *Controller) syncRecovered(ctx context.Context, key cache.ObjectName) (d time.Duration, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("panic while syncing: %v\n%s", r, debug.Stack())
		}
	}()
	return c.sync(ctx, key)
}

// fireRecovered is fireSync with a panic turned into an error.
func (c *Controller) fireRecovered(ctx context.Context, key cache.ObjectName) (d time.Duration, record bool, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("panic while syncing: %v\n%s", r, debug.Stack())
		}
	}()
	return c.fireSync(ctx, key)
}

// recordRecovered is record with a panic turned into an error.
func (c *Controller) recordRecovered(ctx context.Context, key cache.ObjectName) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("panic while recording: %v\n%s", r, debug.Stack())
		}
	}()
	return c.record(ctx, key)
}

// sync is both phases in one: it fires the object's due rules, writes its
// status once, and returns when to sync it again (0: only on change).
func (c *Controller) sync(ctx context.Context, key cache.ObjectName) (time.Duration, error) {
	d, record, err := c.fireSync(ctx, key)
	if err != nil || !record {
		return d, err
	}
	if err := c.record(ctx, key); err != nil {
		return 0, err
	}
	return d, nil
}

// record writes the status of the firings fireSync applied and left in
// memory, if the status is still to be written. A failed write is retried by
// the caller; the firings stay in memory meanwhile, and a sync of the object
// plans from them.
//
// The Normal events of the firings are emitted once their status is written
// (see deferredEvents).
func (c *Controller) record(ctx context.Context, key cache.ObjectName) error {
	obj, err := c.lister.CronFederatedHPAs(key.Namespace).Get(key.Name)
	if apierrors.IsNotFound(err) {
		c.memory.forget(key)
		c.deferred.forget(key)
		return nil
	}
	if err != nil {
		return err
	}
	if status, ok := c.memory.pendingStatus(key, obj); ok {
		if err := c.writeStatus(ctx, obj, status); err != nil {
			return err
		}
	}
	for _, e := range c.deferred.take(key, obj.UID) {
		c.normalEventf(obj, e.reason, "%s", e.message)
	}
	return nil
}

// fireSync fires the object's due rules and returns when to sync it again
// (0: only on change). A sync that wrote (or tried to write) the target
// leaves its status in memory and returns record true: the caller writes it
// with record, after the other firings due (targets first). Any other sync
// writes its status itself.
func (c *Controller) fireSync(ctx context.Context, key cache.ObjectName) (time.Duration, bool, error) {
	logger := klog.LoggerWithValues(klog.FromContext(ctx), "cronFederatedHPA", key)
	ctx = klog.NewContext(ctx, logger)
	obj, err := c.lister.CronFederatedHPAs(key.Namespace).Get(key.Name)
	if apierrors.IsNotFound(err) {
		c.memory.forget(key)
		c.deferred.forget(key)
		return 0, false, nil
	}
	if err != nil {
		return 0, false, err
	}
	base := c.memory.base(key, obj)
	if base == nil {
		// The cache has not caught up with this process's last status
		// write: planning from it could apply a firing twice.
		live, err := c.client.AutoscalingV1alpha1().CronFederatedHPAs(key.Namespace).Get(ctx, key.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			c.memory.forget(key)
			return 0, false, nil
		}
		if err != nil {
			return 0, false, fmt.Errorf("reading %s, whose cached status is older than the one last written: %w", klog.KObj(obj), err)
		}
		logger.V(4).Info("The cache is behind the last status write; planning from the object read from the apiserver")
		obj = live
		c.memory.forgetWritten(key, obj.UID)
		base = obj.Status.DeepCopy()
	}
	if dups := duplicateRuleNames(obj.Spec.Rules); len(dups) > 0 {
		return 0, false, c.refuse(ctx, obj, base, dups)
	}
	c.memory.accept(key, obj.UID)
	now := c.clock.Now()

	replanAll, replanRules := c.memory.takeReplan(key, obj.UID)
	plans := c.plan(obj, base, replanAll, replanRules, now)
	wrote := c.fire(ctx, obj, plans, now)
	record := false
	if wrote {
		// The histories planned here are the only record of the firings
		// until record writes them; the next sync plans from them.
		c.memory.setPending(key, obj.UID, c.plannedStatus(plans).ExecutionHistories)
		record = true
	} else if err := c.updateStatus(ctx, obj, plans); err != nil {
		c.memory.markReplan(key, obj.UID, replanAll, keys(replanRules))
		// Retried with backoff; the next firing is kept all the same.
		d, _ := nextRequeue(plans, c.clock.Now())
		return d, false, err
	}
	d, ok := nextRequeue(plans, c.clock.Now())
	if !ok {
		return 0, record, nil
	}
	logger.V(4).Info("Requeued until the next firing", "after", d)
	return d, record, nil
}

func keys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

// duplicateRuleNames returns the names used by more than one rule.
func duplicateRuleNames(rules []autoscalingv1alpha1.CronFederatedHPARule) []string {
	seen := make(map[string]int, len(rules))
	var dups []string
	for i := range rules {
		seen[rules[i].Name]++
		if seen[rules[i].Name] == 2 {
			dups = append(dups, rules[i].Name)
		}
	}
	return dups
}

// refuse handles an object whose rules share names: a rule's name is the key
// of its history, so such rules would read and overwrite each other's history
// and one of them would never fire. No rule of the object runs; status keeps
// its histories but promises no next execution; a Warning event says why,
// once per change of the object. The CRD and the webhook reject such objects;
// this covers a cluster with neither (Karmada's CRD without its webhook).
func (c *Controller) refuse(ctx context.Context, obj *autoscalingv1alpha1.CronFederatedHPA, base *autoscalingv1alpha1.CronFederatedHPAStatus, dups []string) error {
	if c.memory.refuse(cache.MetaObjectToName(obj), obj.UID, obj.Generation) {
		c.recorder.Eventf(obj, corev1.EventTypeWarning, reasonDuplicateRules,
			"Rule names %q are used by more than one rule; a rule's name is the key of its history, so no rule of this object runs until every rule has a name of its own", dups)
		klog.FromContext(ctx).Info("Refusing a CronFederatedHPA whose rules share names", "names", dups)
	}
	status := base.DeepCopy()
	for i := range status.ExecutionHistories {
		status.ExecutionHistories[i].NextExecutionTime = nil
	}
	return c.writeStatus(ctx, obj, *status)
}

// plan plans every rule of the object from base, its status as this sync
// found it (see memory.base).
func (c *Controller) plan(obj *autoscalingv1alpha1.CronFederatedHPA, base *autoscalingv1alpha1.CronFederatedHPAStatus, replanAll bool, replan map[string]bool, now time.Time) []rulePlan {
	plans := make([]rulePlan, 0, len(obj.Spec.Rules))
	for i := range obj.Spec.Rules {
		rule := &obj.Spec.Rules[i]
		sched, err := c.schedules.get(rule)
		history, found := findHistory(base, rule.Name)
		var start time.Time
		if !found {
			start = ruleStart(obj, base, now)
		}
		plans = append(plans, planRule(rule, history, sched, err, replanAll || replan[rule.Name], start, now))
	}
	return plans
}

// ruleStart is when a rule with no history came to exist, the time its first
// sight plans from (as the CronJob controller plans a new CronJob from its
// creation). It is the object's creation when status has no history at all
// (the object was never synced). Otherwise the rule was added to an existing
// object: the last change of the object's spec or metadata (the newest time
// in its managed fields, status writes aside), which is when the generation
// that added the rule was written, or later. (A rule added while the
// controller watched was marked for a replan by the event handler instead,
// which plans from the moment it was seen.) Never after now, so a clock
// behind the apiserver's cannot make a rule skip its present.
func ruleStart(obj *autoscalingv1alpha1.CronFederatedHPA, base *autoscalingv1alpha1.CronFederatedHPAStatus, now time.Time) time.Time {
	start := obj.CreationTimestamp.Time
	if len(base.ExecutionHistories) > 0 {
		for _, f := range obj.ManagedFields {
			if f.Subresource == "" && f.Time != nil && f.Time.Time.After(start) {
				start = f.Time.Time
			}
		}
	}
	if start.IsZero() || start.After(now) {
		return now
	}
	return start
}

// firing is one rule's due scheduled time and what it sets.
type firing struct {
	plan *rulePlan
	vals values
	// err says why the rule cannot be applied to this target.
	err error
	// won are the fields this firing sets that no later firing sets.
	won values
}

// fire records missed scheduled times and runs the due firings with one
// write to the target. When several due firings set the same field (after
// downtime, say), the latest scheduled one wins and the others are recorded
// as superseded, so the target does not flap through stale values.
//
// A transient failure of the target write (a 5xx, a timeout, a webhook that
// is down) is retried while the firings may still run: each attempt's reason
// is a Warning event, nextExecutionTime keeps naming the firing being
// retried, the missed scheduled times found are recorded all the same, and
// the sync is requeued for the next attempt. The firing is recorded as
// failed, with the last reason, once it is given up (recordMissed).
//
// It reports whether it wrote, or tried to write, the target.
func (c *Controller) fire(ctx context.Context, obj *autoscalingv1alpha1.CronFederatedHPA, plans []rulePlan, now time.Time) bool {
	t, targetErr := parseTarget(obj.Spec.ScaleTargetRef)
	var due []*firing
	for i := range plans {
		p := &plans[i]
		if p.due.IsZero() {
			continue
		}
		f := &firing{plan: p, err: targetErr}
		if f.err == nil {
			f.vals, f.err = ruleValues(t, p.rule)
		}
		due = append(due, f)
	}
	// Oldest first; among equal times, spec order.
	sort.SliceStable(due, func(i, j int) bool { return due[i].plan.due.Before(due[j].plan.due) })
	merged := mergeFirings(due)

	var applyErr error
	wrote := merged != (values{})
	if wrote {
		applyErr = c.apply(ctx, obj.Namespace, t, merged)
	}
	transient := applyErr != nil && !isPermanent(applyErr)
	switch {
	case transient && isUnreachable(applyErr):
		// Every object with a firing due says the same, every few
		// seconds, while the control plane is down; the outage itself
		// is logged once by the manager's API server probe.
		klog.FromContext(ctx).V(4).Info("Target write got no answer from the apiserver, will retry", "target", t.String(), "err", applyErr)
	case transient:
		klog.FromContext(ctx).Info("Target write failed for a transient reason, will retry", "target", t.String(), "err", applyErr)
	}

	for i := range plans {
		c.recordMissed(obj, &plans[i], now)
	}
	retries := map[string]firingRetry{}
	for _, f := range due {
		if transient && f.err == nil {
			retries[f.plan.rule.Name] = c.retryFiring(obj, f.plan, applyErr, now)
			continue
		}
		c.recordFiring(obj, t, f, due, applyErr, now)
	}
	c.memory.setRetries(cache.MetaObjectToName(obj), obj.UID, retries)
	for i := range plans {
		if plans[i].invalid != nil {
			c.recorder.Eventf(obj, corev1.EventTypeWarning, reasonInvalidRule, "Rule %q cannot be scheduled: %v", plans[i].rule.Name, plans[i].invalid)
		}
	}
	return wrote
}

// mergeFirings returns what one write sets for the due firings (oldest
// first): the latest firing setting a field wins it.
func mergeFirings(due []*firing) values {
	var merged values
	var owners [3]*firing
	for _, f := range due {
		if f.err != nil {
			continue
		}
		if f.vals.replicas != nil {
			merged.replicas, owners[0] = f.vals.replicas, f
		}
		if f.vals.min != nil {
			merged.min, owners[1] = f.vals.min, f
		}
		if f.vals.max != nil {
			merged.max, owners[2] = f.vals.max, f
		}
	}
	if owners[0] != nil {
		owners[0].won.replicas = merged.replicas
	}
	if owners[1] != nil {
		owners[1].won.min = merged.min
	}
	if owners[2] != nil {
		owners[2].won.max = merged.max
	}
	return merged
}

// retryFiring leaves the plan's firing to be tried again: nextExecutionTime
// stays its scheduled time (it is still to run), the attempt's reason is a
// Warning event, and the next attempt comes with exponential backoff, never
// later than the firing's deadline, when it is given up.
//
// Attempts the apiserver did not answer at all (see isUnreachable) are
// counted apart: they cost nothing but a failed dial and their events could
// not be delivered, so they are retried every few seconds for the first
// minutes (a restart of the control plane), then at most every 30 s, and
// only the first of them is an event. An answered attempt after them backs
// off from its own count.
func (c *Controller) retryFiring(obj *autoscalingv1alpha1.CronFederatedHPA, p *rulePlan, err error, now time.Time) firingRetry {
	r, ok := c.memory.retryOf(cache.MetaObjectToName(obj), obj.UID, p.rule.Name)
	if !ok || !r.slot.Equal(p.due) {
		r = firingRetry{slot: p.due, first: now}
	}
	r.attempts++
	r.lastErr = err.Error()
	unreachable := isUnreachable(err)
	var backoff time.Duration
	if unreachable {
		r.unanswered++
		backoff = unreachableBackoff(r.unanswered, now.Sub(r.first))
	} else {
		r.answered++
		r.lastAnswer = err.Error()
		backoff = retryBackoff(r.answered)
	}
	p.history.NextExecutionTime = metaTime(p.due)
	p.retryAt = now.Add(backoff)
	if p.retryAt.After(p.deadline) {
		p.retryAt = p.deadline
	}
	if unreachable && r.unanswered > 1 {
		return r
	}
	c.recorder.Eventf(obj, corev1.EventTypeWarning, reasonScaleFailed, "Rule %q (scheduled %s): attempt %d failed, will retry until %s: %v",
		p.rule.Name, p.due.UTC().Format(time.RFC3339), r.attempts, p.deadline.UTC().Format(time.RFC3339), err)
	return r
}

// unreachableBackoff is the wait after the n-th attempt the apiserver did
// not answer, the first of them since the firing's first attempt: as
// retryBackoff, at most maxUnreachableBackoff during the first
// fastUnreachableRetries (how late after a restart of the control plane a
// firing still in time runs), at most maxUnreachableSlowBackoff after.
func unreachableBackoff(n int, since time.Duration) time.Duration {
	if since < fastUnreachableRetries {
		return min(retryBackoff(n), maxUnreachableBackoff)
	}
	return min(retryBackoff(n), maxUnreachableSlowBackoff)
}

// retryBackoff is the wait after attempt n of a firing: 1s doubling, at most
// 5 minutes, so a target that is down for hours costs a few requests.
func retryBackoff(attempts int) time.Duration {
	d := time.Second
	for i := 1; i < attempts && d < maxRetryBackoff; i++ {
		d *= 2
	}
	return min(d, maxRetryBackoff)
}

const (
	maxRetryBackoff           = 5 * time.Minute
	maxUnreachableBackoff     = 4 * time.Second
	maxUnreachableSlowBackoff = 30 * time.Second
	fastUnreachableRetries    = 2 * time.Minute
)

// recordMissed records the plan's missed scheduled times. The first of them
// may be a firing that was being retried and is now too late. If the
// apiserver answered any of its attempts, it failed, and is recorded with the
// reason of its last answered attempt rather than as missed. If none was answered, the
// control plane was down from the scheduled time to the deadline: the firing
// could not be tried, and is recorded as missed, saying so.
func (c *Controller) recordMissed(obj *autoscalingv1alpha1.CronFederatedHPA, p *rulePlan, now time.Time) {
	if p.missed == 0 {
		return
	}
	r, ok := c.memory.retryOf(cache.MetaObjectToName(obj), obj.UID, p.rule.Name)
	if !ok || !r.slot.Equal(p.firstMissed) {
		c.recordMissedRange(obj, p, p.missed, p.firstMissed, now)
		return
	}
	if r.answered == 0 {
		c.recordUnreachable(obj, p, r, now)
	} else {
		msg := fmt.Sprintf("not applied: %d attempts from %s to %s failed, the last with: %s", r.attempts,
			r.first.UTC().Format(time.RFC3339), now.UTC().Format(time.RFC3339), r.lastAnswer)
		recordFailure(&p.history, p.rule, autoscalingv1alpha1.FailedExecution{
			ScheduleTime: metaTime(r.slot), ExecutionTime: metaTime(now), Message: msg,
		})
		c.recorder.Eventf(obj, corev1.EventTypeWarning, reasonScaleFailed, "Rule %q (scheduled %s): gave up: %s", p.rule.Name, r.slot.UTC().Format(time.RFC3339), msg)
		firings.WithLabelValues(resultFailed).Inc()
	}
	if p.missed > 1 {
		c.recordMissedRange(obj, p, p.missed-1, p.secondMissed, now)
	}
}

// recordUnreachable records a firing none of whose attempts reached the
// apiserver as missed.
func (c *Controller) recordUnreachable(obj *autoscalingv1alpha1.CronFederatedHPA, p *rulePlan, r firingRetry, now time.Time) {
	msg := fmt.Sprintf("missed the scheduled time %s: the API server could not be reached from %s to %s, past the time the rule may still run (%d attempts, the last with: %s)",
		r.slot.UTC().Format(time.RFC3339), r.first.UTC().Format(time.RFC3339), now.UTC().Format(time.RFC3339), r.attempts, r.lastErr)
	recordFailure(&p.history, p.rule, autoscalingv1alpha1.FailedExecution{
		ScheduleTime: metaTime(r.slot), ExecutionTime: metaTime(now), Message: msg,
	})
	c.recorder.Eventf(obj, corev1.EventTypeWarning, reasonMissed, "Rule %q %s", p.rule.Name, msg)
	missedFirings.Inc()
	firings.WithLabelValues(resultMissed).Inc()
}

// recordMissedRange records count missed scheduled times from first to the
// plan's lastMissed as one failed execution.
func (c *Controller) recordMissedRange(obj *autoscalingv1alpha1.CronFederatedHPA, p *rulePlan, count int, first, now time.Time) {
	var msg string
	switch {
	case count >= maxCountedMisses:
		msg = fmt.Sprintf("missed at least %d scheduled times from %s to %s", count, first.UTC().Format(time.RFC3339), p.lastMissed.UTC().Format(time.RFC3339))
	case count > 1:
		msg = fmt.Sprintf("missed %d scheduled times from %s to %s", count, first.UTC().Format(time.RFC3339), p.lastMissed.UTC().Format(time.RFC3339))
	default:
		msg = fmt.Sprintf("missed the scheduled time %s", p.lastMissed.UTC().Format(time.RFC3339))
	}
	if d := p.rule.MaxDelaySeconds; d != nil {
		msg += fmt.Sprintf(": found %s late, more than maxDelaySeconds (%d), or superseded by a later scheduled time", now.Sub(p.lastMissed).Round(time.Second), *d)
	} else {
		msg += ": a later scheduled time had already come when it was found (was the controller down?)"
	}
	recordFailure(&p.history, p.rule, autoscalingv1alpha1.FailedExecution{
		ScheduleTime: metaTime(p.lastMissed), ExecutionTime: metaTime(now), Message: msg,
	})
	c.recorder.Eventf(obj, corev1.EventTypeWarning, reasonMissed, "Rule %q %s", p.rule.Name, msg)
	missedFirings.Add(float64(count))
	firings.WithLabelValues(resultMissed).Inc()
}

func (c *Controller) recordFiring(obj *autoscalingv1alpha1.CronFederatedHPA, t target, f *firing, due []*firing, applyErr error, now time.Time) {
	p := f.plan
	scheduled := p.due.UTC().Format(time.RFC3339)
	fail := func(result, reason, msg string) {
		recordFailure(&p.history, p.rule, autoscalingv1alpha1.FailedExecution{
			ScheduleTime: metaTime(p.due), ExecutionTime: metaTime(now), Message: msg,
		})
		c.recorder.Eventf(obj, corev1.EventTypeWarning, reason, "Rule %q (scheduled %s): %s", p.rule.Name, scheduled, msg)
		firings.WithLabelValues(result).Inc()
	}
	switch {
	case f.err != nil:
		firingSkew.Observe(now.Sub(p.due).Seconds())
		fail(resultFailed, reasonScaleFailed, f.err.Error())
	case f.won == (values{}):
		by := latestSetting(f, due)
		fail(resultSuperseded, reasonSuperseded, fmt.Sprintf("not applied: rule %q, scheduled later (%s), sets the same field of %s and was applied instead",
			by.plan.rule.Name, by.plan.due.UTC().Format(time.RFC3339), t))
	case applyErr != nil:
		firingSkew.Observe(now.Sub(p.due).Seconds())
		fail(resultFailed, reasonScaleFailed, applyErr.Error())
	default:
		firingSkew.Observe(now.Sub(p.due).Seconds())
		recordSuccess(&p.history, p.rule, autoscalingv1alpha1.SuccessfulExecution{
			ScheduleTime:       metaTime(p.due),
			ExecutionTime:      metaTime(now),
			AppliedReplicas:    f.won.replicas,
			AppliedMinReplicas: f.won.min,
			AppliedMaxReplicas: f.won.max,
		})
		c.deferred.add(cache.MetaObjectToName(obj), obj.UID, reasonScaled,
			fmt.Sprintf("Rule %q (scheduled %s): set %s of %s", p.rule.Name, scheduled, describe(f.won), t))
		firings.WithLabelValues(resultSuccess).Inc()
	}
}

// normalEventf emits a Normal event if the controller's event rate allows it
// (see normalEventQPS) and counts it as dropped otherwise.
func (c *Controller) normalEventf(obj *autoscalingv1alpha1.CronFederatedHPA, reason, messageFmt string, args ...any) {
	if !c.normalEvents.TryAccept() {
		droppedEvents.Inc()
		return
	}
	c.recorder.Eventf(obj, corev1.EventTypeNormal, reason, messageFmt, args...)
}

// latestSetting returns the last due firing that sets a field f sets.
func latestSetting(f *firing, due []*firing) *firing {
	by := f
	for _, g := range due {
		if g.err == nil && (f.vals.replicas != nil && g.vals.replicas != nil || f.vals.min != nil && g.vals.min != nil || f.vals.max != nil && g.vals.max != nil) {
			by = g
		}
	}
	return by
}

func describe(v values) string {
	s := ""
	add := func(name string, p *int32) {
		if p == nil {
			return
		}
		if s != "" {
			s += ", "
		}
		s += fmt.Sprintf("%s to %d", name, *p)
	}
	add("replicas", v.replicas)
	add("minReplicas", v.min)
	add("maxReplicas", v.max)
	return s
}

// updateStatus writes the planned histories (see plannedStatus) with the
// resourceVersion the sync read: a stale cache makes it conflict instead of
// overwriting newer status. It writes nothing when nothing changed. A failed
// write is retried by the caller; the histories recorded in this sync are in
// memory, so the retry writes them without firing again.
func (c *Controller) updateStatus(ctx context.Context, obj *autoscalingv1alpha1.CronFederatedHPA, plans []rulePlan) error {
	status := c.plannedStatus(plans)
	err := c.writeStatus(ctx, obj, status)
	if err != nil {
		c.memory.setPending(cache.MetaObjectToName(obj), obj.UID, status.ExecutionHistories)
	}
	return err
}

// plannedStatus is the planned histories, in spec order, as the installed
// schema stores them (lastScheduleTime only where it is kept).
func (c *Controller) plannedStatus(plans []rulePlan) autoscalingv1alpha1.CronFederatedHPAStatus {
	status := autoscalingv1alpha1.CronFederatedHPAStatus{}
	for i := range plans {
		h := plans[i].history
		if !c.stored.LastScheduleTime {
			h.LastScheduleTime = nil
		}
		status.ExecutionHistories = append(status.ExecutionHistories, h)
	}
	return status
}

// writeStatus writes status unless the object read already has it, with the
// resourceVersion the sync read: a stale cache makes it conflict instead of
// overwriting newer status. What the apiserver stored is remembered until the
// cache shows it. A failed write is retried by the caller.
func (c *Controller) writeStatus(ctx context.Context, obj *autoscalingv1alpha1.CronFederatedHPA, status autoscalingv1alpha1.CronFederatedHPAStatus) error {
	key := cache.MetaObjectToName(obj)
	if sameStatus(obj.Status, status) {
		c.memory.settled(key, obj.UID)
		return nil
	}
	updated := obj.DeepCopy()
	updated.Status = status
	stored, err := c.client.AutoscalingV1alpha1().CronFederatedHPAs(obj.Namespace).UpdateStatus(ctx, updated, metav1.UpdateOptions{})
	switch {
	case err == nil:
		c.memory.setWritten(key, obj.UID, stored.Status)
		return nil
	case apierrors.IsNotFound(err):
		// Deleted meanwhile: nothing left to record.
		c.memory.forget(key)
		return nil
	case apierrors.IsConflict(err):
		// The cache is behind; the retry reads the newer object.
		return fmt.Errorf("status of %s changed meanwhile, will retry with the newer object: %w", klog.KObj(obj), err)
	}
	if !isUnreachable(err) {
		// While the apiserver gives no answer an event could not be
		// delivered either; the error is logged by the caller.
		c.recorder.Eventf(obj, corev1.EventTypeWarning, reasonStatusNotStored, "Could not record the rules' executions in status, will retry: %v", err)
	}
	return fmt.Errorf("updating the status of %s: %w", klog.KObj(obj), err)
}

// keyLocks are per-object locks: a sync and a status write of the same object
// (from the two queues) must not interleave.
type keyLocks struct {
	mu    sync.Mutex
	locks map[cache.ObjectName]*keyLock
}

type keyLock struct {
	mu   sync.Mutex
	refs int
}

func newKeyLocks() *keyLocks {
	return &keyLocks{locks: map[cache.ObjectName]*keyLock{}}
}

// lock locks key and returns its unlock.
func (l *keyLocks) lock(key cache.ObjectName) func() {
	l.mu.Lock()
	k := l.locks[key]
	if k == nil {
		k = &keyLock{}
		l.locks[key] = k
	}
	k.refs++
	l.mu.Unlock()
	k.mu.Lock()
	return func() {
		k.mu.Unlock()
		l.mu.Lock()
		k.refs--
		if k.refs == 0 {
			delete(l.locks, key)
		}
		l.mu.Unlock()
	}
}
