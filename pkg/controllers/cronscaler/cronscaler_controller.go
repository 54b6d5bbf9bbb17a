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
package cronscaler

import (
	"context"
	"fmt"
	"runtime/debug"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/scale"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
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
	reasonStatusNotStored = "UpdateStatusFailed"
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
	workers    int

	schedules *scheduleCache
	memory    *memory
	counts    *watchCounts
}

// NewController builds the cron-scaler and registers its event handlers on
// the CronFederatedHPA informer. mapper maps target kinds to resources for
// the scale client; it is reset when a kind is not found, to pick up CRDs
// installed later.
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
		client:     client,
		kubeClient: kubeClient,
		scales:     scales,
		mapper:     mapper,
		lister:     cronInformer.Lister(),
		synced:     cronInformer.Informer().HasSynced,
		recorder:   recorder,
		clock:      clk,
		workers:    workers,
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.DefaultTypedControllerRateLimiter[cache.ObjectName](),
			workqueue.TypedRateLimitingQueueConfig[cache.ObjectName]{Name: "cron_scaler", Clock: clk},
		),
		schedules: newScheduleCache(),
		memory:    newMemory(),
		counts:    newWatchCounts(),
	}
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

// Name returns the controller's name.
func (c *Controller) Name() string { return Name }

// Run starts the workers and blocks until ctx ends.
func (c *Controller) Run(ctx context.Context) {
	defer c.queue.ShutDown()
	logger := klog.FromContext(ctx)
	if !cache.WaitForNamedCacheSyncWithContext(ctx, c.synced) {
		return
	}
	logger.Info("Starting workers", "workers", c.workers)
	done := make(chan struct{})
	for i := 0; i < c.workers; i++ {
		go func() {
			defer func() { done <- struct{}{} }()
			wait.UntilWithContext(ctx, c.worker, time.Second)
		}()
	}
	<-ctx.Done()
	c.queue.ShutDown()
	for i := 0; i < c.workers; i++ {
		<-done
	}
	logger.Info("Workers stopped")
}

// worker processes keys until the queue shuts down. A panic ends only this
// call; wait.Until starts the worker again.
func (c *Controller) worker(ctx context.Context) {
	defer func() {
		if r := recover(); r != nil {
			utilruntime.HandleErrorWithContext(ctx, fmt.Errorf("%v", r), "Cron-scaler worker panicked", "stack", string(debug.Stack()))
		}
	}()
	for c.processNextWorkItem(ctx) {
	}
}

func (c *Controller) processNextWorkItem(ctx context.Context) bool {
	key, quit := c.queue.Get()
	if quit {
		return false
	}
	defer c.queue.Done(key)

	requeueAfter, err := c.syncRecovered(ctx, key)
	switch {
	case err != nil:
		utilruntime.HandleErrorWithContext(ctx, err, "Syncing CronFederatedHPA failed, will retry", "cronFederatedHPA", key)
		c.queue.AddRateLimited(key)
	case requeueAfter > 0:
		c.queue.Forget(key)
		c.queue.AddAfter(key, requeueAfter)
	default:
		c.queue.Forget(key)
	}
	return true
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

// sync fires the object's due rules, writes its status once, and returns
// when to sync it again (0: only on change).
func (c *Controller) sync(ctx context.Context, key cache.ObjectName) (time.Duration, error) {
	logger := klog.LoggerWithValues(klog.FromContext(ctx), "cronFederatedHPA", key)
	ctx = klog.NewContext(ctx, logger)
	obj, err := c.lister.CronFederatedHPAs(key.Namespace).Get(key.Name)
	if apierrors.IsNotFound(err) {
		c.memory.forget(key)
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	now := c.clock.Now()

	replanAll, replanRules := c.memory.takeReplan(key, obj.UID)
	plans := c.plan(obj, replanAll, replanRules, now)
	if err := c.fire(ctx, obj, plans, now); err != nil {
		c.memory.markReplan(key, obj.UID, replanAll, keys(replanRules))
		return 0, err
	}
	if err := c.updateStatus(ctx, obj, plans); err != nil {
		c.memory.markReplan(key, obj.UID, replanAll, keys(replanRules))
		return 0, err
	}
	d, ok := nextRequeue(plans, c.clock.Now())
	if !ok {
		return 0, nil
	}
	logger.V(4).Info("Requeued until the next firing", "after", d)
	return d, nil
}

func keys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

// plan plans every rule of the object, from its status merged with what this
// process recorded and has not seen in the cache yet.
func (c *Controller) plan(obj *autoscalingv1alpha1.CronFederatedHPA, replanAll bool, replan map[string]bool, now time.Time) []rulePlan {
	key := cache.MetaObjectToName(obj)
	histories := c.memory.merge(key, obj.UID, obj.Spec.Rules, &obj.Status)
	plans := make([]rulePlan, 0, len(obj.Spec.Rules))
	for i := range obj.Spec.Rules {
		rule := &obj.Spec.Rules[i]
		sched, err := c.schedules.get(rule)
		plans = append(plans, planRule(rule, histories[rule.Name], sched, err, replanAll || replan[rule.Name], now))
	}
	return plans
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
// as superseded, so the target does not flap through stale values. A
// transient failure returns an error before anything is recorded, so the
// sync is retried while the firing may still run.
func (c *Controller) fire(ctx context.Context, obj *autoscalingv1alpha1.CronFederatedHPA, plans []rulePlan, now time.Time) error {
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

	var applyErr error
	if merged != (values{}) {
		applyErr = c.apply(ctx, obj.Namespace, t, merged)
		if applyErr != nil && !isPermanent(applyErr) {
			return fmt.Errorf("firing rules of %s: %w", klog.KObj(obj), applyErr)
		}
	}

	// Everything below records: the firings are done.
	for i := range plans {
		c.recordMissed(obj, &plans[i], now)
	}
	for _, f := range due {
		c.recordFiring(obj, t, f, due, applyErr, now)
	}
	key := cache.MetaObjectToName(obj)
	for i := range plans {
		if p := &plans[i]; p.missed > 0 || !p.due.IsZero() {
			c.memory.remember(key, obj.UID, p.history)
		}
		if plans[i].invalid != nil {
			c.recorder.Eventf(obj, corev1.EventTypeWarning, reasonInvalidRule, "Rule %q cannot be scheduled: %v", plans[i].rule.Name, plans[i].invalid)
		}
	}
	return nil
}

func (c *Controller) recordMissed(obj *autoscalingv1alpha1.CronFederatedHPA, p *rulePlan, now time.Time) {
	if p.missed == 0 {
		return
	}
	var msg string
	switch {
	case p.missed >= maxCountedMisses:
		msg = fmt.Sprintf("missed at least %d scheduled times from %s to %s", p.missed, p.firstMissed.UTC().Format(time.RFC3339), p.lastMissed.UTC().Format(time.RFC3339))
	case p.missed > 1:
		msg = fmt.Sprintf("missed %d scheduled times from %s to %s", p.missed, p.firstMissed.UTC().Format(time.RFC3339), p.lastMissed.UTC().Format(time.RFC3339))
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
	missedFirings.Add(float64(p.missed))
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
		c.recorder.Eventf(obj, corev1.EventTypeNormal, reasonScaled, "Rule %q (scheduled %s): set %s of %s", p.rule.Name, scheduled, describe(f.won), t)
		firings.WithLabelValues(resultSuccess).Inc()
	}
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

// updateStatus writes the planned histories, in spec order, with the
// resourceVersion the sync read: a stale cache makes it conflict instead of
// overwriting newer status. It writes nothing when nothing changed. A failed
// write is retried by the caller; the histories recorded in this sync are in
// memory, so the retry writes them without firing again.
func (c *Controller) updateStatus(ctx context.Context, obj *autoscalingv1alpha1.CronFederatedHPA, plans []rulePlan) error {
	status := autoscalingv1alpha1.CronFederatedHPAStatus{}
	for i := range plans {
		status.ExecutionHistories = append(status.ExecutionHistories, plans[i].history)
	}
	if equality.Semantic.DeepEqual(normalize(obj.Status), normalize(status)) {
		return nil
	}
	updated := obj.DeepCopy()
	updated.Status = status
	_, err := c.client.AutoscalingV1alpha1().CronFederatedHPAs(obj.Namespace).UpdateStatus(ctx, updated, metav1.UpdateOptions{})
	switch {
	case err == nil:
		return nil
	case apierrors.IsNotFound(err):
		// Deleted meanwhile: nothing left to record.
		return nil
	case apierrors.IsConflict(err):
		// The cache is behind; the retry reads the newer object.
		return fmt.Errorf("status of %s changed meanwhile, will retry with the newer object: %w", klog.KObj(obj), err)
	}
	c.recorder.Eventf(obj, corev1.EventTypeWarning, reasonStatusNotStored, "Could not record the rules' executions in status, will retry: %v", err)
	return fmt.Errorf("updating the status of %s: %w", klog.KObj(obj), err)
}

// normalize makes status comparable after a round trip through JSON: times
// have second precision and empty lists are nil.
func normalize(s autoscalingv1alpha1.CronFederatedHPAStatus) autoscalingv1alpha1.CronFederatedHPAStatus {
	out := *s.DeepCopy()
	if len(out.ExecutionHistories) == 0 {
		out.ExecutionHistories = nil
	}
	for i := range out.ExecutionHistories {
		h := &out.ExecutionHistories[i]
		h.NextExecutionTime = truncate(h.NextExecutionTime)
		h.LastScheduleTime = truncate(h.LastScheduleTime)
		if len(h.SuccessfulExecutions) == 0 {
			h.SuccessfulExecutions = nil
		}
		if len(h.FailedExecutions) == 0 {
			h.FailedExecutions = nil
		}
	}
	return out
}

func truncate(t *metav1.Time) *metav1.Time {
	if t == nil {
		return nil
	}
	return &metav1.Time{Time: t.Time.Truncate(time.Second)}
}
