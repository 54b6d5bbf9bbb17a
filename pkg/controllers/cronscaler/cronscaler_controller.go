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
	"sync"
	"sync/atomic"
	"time"

	"github.com/scaleplane/scaleplane/pkg/workloop"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/scale"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/flowcontrol"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/scaleplane/scaleplane/pkg/cronplan"
	"github.com/scaleplane/scaleplane/pkg/generated/clientset/versioned"
	informers "github.com/scaleplane/scaleplane/pkg/generated/informers/externalversions/autoscaling/v1alpha1"
)

// Name is the controller's name in --controllers, logs and events.
const Name = "cron-scaler"

// Event reasons.
const (
	reasonScaled             = "Scaled"
	reasonScaleFailed        = "ScaleFailed"
	reasonMissed             = "MissedSchedule"
	reasonSuperseded         = "Superseded"
	reasonInvalidRule        = "InvalidRule"
	reasonDuplicateRules     = "DuplicateRuleNames"
	reasonStatusNotStored    = "UpdateStatusFailed"
	reasonNotReapplied       = "NotReapplied"
	reasonManagedByAnother   = "ManagedByAnotherController"
	reasonAutoscalerConflict = "AutoscalerConflict"
)

// DefaultDrainTimeout bounds how long Run waits, once its context ends, for
// the syncs in flight and the status writes of the firings they applied: the
// shared loop's (see pkg/workloop).
const DefaultDrainTimeout = workloop.DefaultDrainTimeout

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
	metadata   metadata.Interface
	mapper     meta.ResettableRESTMapper
	crons      cronCache
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
	// keeps; see Config.Stored.
	stored StoredFields
	// start is when this process started (see processStart).
	start processStart
	// drainTimeout bounds the wait for the syncs in flight when Run stops.
	drainTimeout time.Duration

	schedules *scheduleCache
	memory    *memory
	counts    *watchCounts
	// writers tells status writes of another controller from this one's.
	writers *statusWriters
	// autoscalers finds the HPAs and FederatedHPAs that scale a target.
	autoscalers *autoscalers
	// targets counts the objects per target (see yieldToOtherObjects).
	targets *targetCounts
}

// FieldManager names the cron-scaler in the managedFields of what it
// writes: its targets (scale subresource, FederatedHPA, HPA) and
// CronFederatedHPA status. A target's entry says whether and when the
// cron-scaler last changed it (see priorWrite).
const FieldManager = cronplan.FieldManager

// Config is what the cron-scaler is built from.
type Config struct {
	// Informer is the CronFederatedHPA informer; the controller registers
	// its event handlers on it.
	Informer informers.CronFederatedHPAInformer
	// Client writes CronFederatedHPA status and FederatedHPAs; KubeClient
	// writes HPAs; Scales writes the scale subresource of other targets.
	Client     versioned.Interface
	KubeClient kubernetes.Interface
	Scales     scale.ScalesGetter
	// Metadata reads the managedFields of scale targets for firings a
	// predecessor may have applied (see priorWrite).
	Metadata metadata.Interface
	// Mapper maps target kinds to resources for the scale client; it is
	// reset when a kind is not found, to pick up CRDs installed later.
	Mapper   meta.ResettableRESTMapper
	Recorder record.EventRecorder
	Clock    clock.WithTicker
	// Workers is the number of syncs, and of status writers, in flight.
	Workers int
	// HPAs and FederatedHPAs, when set, are the autoscaler informers the
	// cron-scaler looks up to warn about a firing that an autoscaler will
	// undo (see autoscalers.go); FederatedHPAs only where its CRD is served.
	HPAs          cache.SharedIndexInformer
	FederatedHPAs cache.SharedIndexInformer
	// Stored says which of scaleplane's added fields the installed CRD
	// keeps (see StoredFieldsFromCRD); the zero value, neither, is Karmada's
	// CRD and always safe.
	Stored StoredFields
}

// NewController builds the cron-scaler and registers its event handlers on
// the CronFederatedHPA informer.
func NewController(ctx context.Context, cfg Config) (*Controller, error) {
	registerMetrics()
	clk := cfg.Clock
	c := &Controller{
		client:       cfg.Client,
		kubeClient:   cfg.KubeClient,
		scales:       cfg.Scales,
		metadata:     cfg.Metadata,
		mapper:       cfg.Mapper,
		crons:        cronCache{indexer: cfg.Informer.Informer().GetIndexer()},
		recorder:     cfg.Recorder,
		clock:        clk,
		workers:      cfg.Workers,
		stored:       cfg.Stored,
		drainTimeout: DefaultDrainTimeout,
		// Construction comes just before the caches sync and Run starts:
		// a firing due before it was this process's predecessor's.
		start: processStart{at: clk.Now()},
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
		writers:      newStatusWriters(),
		autoscalers:  &autoscalers{},
		targets:      newTargetCounts(),
	}
	publishStoredFields(c.stored)
	if err := cfg.Informer.Informer().SetTransform(reuseUnchanged(cfg.Informer.Informer().GetIndexer())); err != nil {
		return nil, fmt.Errorf("setting the CronFederatedHPA cache's transform: %w", err)
	}
	registration, err := cfg.Informer.Informer().AddEventHandlerWithOptions(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { c.onAdd(ctx, obj) },
		UpdateFunc: func(oldObj, newObj any) { c.onUpdate(ctx, oldObj, newObj) },
		DeleteFunc: func(obj any) { c.onDelete(ctx, obj) },
	}, cache.HandlerOptions{Logger: ptrTo(klog.FromContext(ctx))})
	if err != nil {
		return nil, fmt.Errorf("registering the CronFederatedHPA event handlers: %w", err)
	}
	// The handlers' own sync, not the informer's: the first syncs must find
	// every listed object counted by its target (see yieldToOtherObjects).
	synced := []cache.InformerSynced{registration.HasSynced}
	for _, a := range []struct {
		informer cache.SharedIndexInformer
		kind     string
	}{{cfg.HPAs, "HorizontalPodAutoscaler"}, {cfg.FederatedHPAs, "FederatedHPA"}} {
		if a.informer == nil {
			continue
		}
		if err := c.autoscalers.add(a.informer, a.kind); err != nil {
			return nil, err
		}
		synced = append(synced, a.informer.HasSynced)
	}
	c.synced = func() bool {
		for _, s := range synced {
			if !s() {
				return false
			}
		}
		return true
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

// HasSynced says whether the caches the controller reads have synced.
func (c *Controller) HasSynced() bool { return c.synced() }
