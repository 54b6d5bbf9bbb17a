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

// Package hpagenerator is the hpa-generator controller: it keeps an
// autoscaling/v2 HorizontalPodAutoscaler for every LeaderWorkerSet whose
// spec.scalePolicy has metrics (LWS KEP-213), and deletes it when the policy
// goes away.
//
// The HPA is named after the LeaderWorkerSet, controlled by it, and built
// from constants and the policy alone. The generator owns its spec, its
// managed-by label and its controller owner reference: a change to those is
// put back, anything else (other labels, annotations, status) is left alone.
// What it compares accounts for the apiserver's defaults, so a steady state
// writes nothing. It never writes to an HPA the LeaderWorkerSet does not
// control, and does not create one when another HPA already scales the
// LeaderWorkerSet: it says so in a Warning event instead of fighting.
package hpagenerator

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/scaleplane/scaleplane/pkg/scaletarget"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	autoscalingv2informers "k8s.io/client-go/informers/autoscaling/v2"
	"k8s.io/client-go/kubernetes"
	autoscalingv2listers "k8s.io/client-go/listers/autoscaling/v2"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"

	lwsv1 "github.com/scaleplane/scaleplane/pkg/apis/leaderworkerset/v1"
	lwsinformers "github.com/scaleplane/scaleplane/pkg/generated/informers/externalversions/leaderworkerset/v1"
	lwslisters "github.com/scaleplane/scaleplane/pkg/generated/listers/leaderworkerset/v1"
	"github.com/scaleplane/scaleplane/pkg/workloop"
)

// Name is the controller's name in --controllers, logs and events.
const Name = "hpa-generator"

// Event reasons, on the LeaderWorkerSet.
const (
	reasonCreated        = "HPACreated"
	reasonUpdated        = "HPAUpdated"
	reasonDeleted        = "HPADeleted"
	reasonConflict       = "HPAConflict"
	reasonTargetConflict = "HPATargetConflict"
	reasonRejected       = "HPARejected"
	// reasonToleranceIgnored: the API server drops behavior's tolerance.
	reasonToleranceIgnored = "HPAToleranceIgnored"
)

// Controller is the hpa-generator.
type Controller struct {
	kubeClient kubernetes.Interface
	lwsLister  lwslisters.LeaderWorkerSetLister
	hpaLister  autoscalingv2listers.HorizontalPodAutoscalerLister
	hpaIndexer cache.Indexer
	synced     []cache.InformerSynced
	recorder   record.EventRecorder
	queue      workqueue.TypedRateLimitingInterface[cache.ObjectName]
	workers    int
	managed    *managedSet
	tolerance  *toleranceSupport
}

// Config is what the hpa-generator is built from.
type Config struct {
	// LeaderWorkerSets and HPAs are the informers it registers its event
	// handlers on; the HPA informer is shared (the cron-scaler indexes it
	// too).
	LeaderWorkerSets lwsinformers.LeaderWorkerSetInformer
	HPAs             autoscalingv2informers.HorizontalPodAutoscalerInformer
	// KubeClient writes the HPAs, as field manager scaleplane-hpa-generator.
	KubeClient kubernetes.Interface
	Recorder   record.EventRecorder
	// Workers is the number of LeaderWorkerSets synced at once.
	Workers int
}

// NewController builds the hpa-generator: it adds a scale target index to the
// HPA informer and registers its event handlers on both informers.
func NewController(ctx context.Context, cfg Config) (*Controller, error) {
	lwsInformer, hpaInformer := cfg.LeaderWorkerSets, cfg.HPAs
	registerMetrics()
	if err := scaletarget.AddIndex(hpaInformer.Informer()); err != nil {
		return nil, fmt.Errorf("indexing HorizontalPodAutoscalers: %w", err)
	}
	c := &Controller{
		kubeClient: cfg.KubeClient,
		lwsLister:  lwsInformer.Lister(),
		hpaLister:  hpaInformer.Lister(),
		hpaIndexer: hpaInformer.Informer().GetIndexer(),
		synced:     []cache.InformerSynced{lwsInformer.Informer().HasSynced, hpaInformer.Informer().HasSynced},
		recorder:   cfg.Recorder,
		workers:    cfg.Workers,
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.DefaultTypedControllerRateLimiter[cache.ObjectName](),
			workqueue.TypedRateLimitingQueueConfig[cache.ObjectName]{Name: "hpa_generator"},
		),
		managed:   newManagedSet(),
		tolerance: newToleranceSupport(),
	}
	options := cache.HandlerOptions{Logger: ptrTo(klog.FromContext(ctx))}
	if _, err := lwsInformer.Informer().AddEventHandlerWithOptions(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { c.onLWSAdd(ctx, obj) },
		UpdateFunc: func(oldObj, newObj any) { c.onLWSUpdate(ctx, oldObj, newObj) },
	}, options); err != nil {
		return nil, fmt.Errorf("registering the LeaderWorkerSet event handlers: %w", err)
	}
	if _, err := hpaInformer.Informer().AddEventHandlerWithOptions(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { c.onHPAAdd(ctx, obj) },
		UpdateFunc: func(oldObj, newObj any) { c.onHPAUpdate(ctx, oldObj, newObj) },
		DeleteFunc: func(obj any) { c.onHPADelete(ctx, obj) },
	}, options); err != nil {
		return nil, fmt.Errorf("registering the HorizontalPodAutoscaler event handlers: %w", err)
	}
	return c, nil
}

func ptrTo[T any](v T) *T { return &v }

// Name returns the controller's name.
func (c *Controller) Name() string { return Name }

// Run starts the workers and blocks until ctx ends.
func (c *Controller) Run(ctx context.Context) {
	defer c.queue.ShutDown()
	if !cache.WaitForNamedCacheSyncWithContext(ctx, c.synced...) {
		return
	}
	workloop.Run(ctx, c.queue, c.workers, Name, c.syncKey)
}

// syncKey is sync in the work loop's terms: nothing is requeued after a
// delay, only on events or, after an error, with backoff.
func (c *Controller) syncKey(ctx context.Context, key cache.ObjectName) (time.Duration, error) {
	return 0, c.sync(ctx, key)
}

// sync brings the HPA of one LeaderWorkerSet in line with its scale policy.
// It reads both objects from the informer caches; an error means retry with
// backoff (the cache may be behind), nil means done until the next event.
func (c *Controller) sync(ctx context.Context, key cache.ObjectName) error {
	logger := klog.LoggerWithValues(klog.FromContext(ctx), "leaderWorkerSet", key)
	ctx = klog.NewContext(ctx, logger)

	lws, err := c.lwsLister.LeaderWorkerSets(key.Namespace).Get(key.Name)
	if apierrors.IsNotFound(err) {
		// The garbage collector deletes its HPA through the owner
		// reference; deleting it here could race with a new
		// LeaderWorkerSet of the same name.
		logger.V(4).Info("LeaderWorkerSet is gone; its HorizontalPodAutoscaler is left to the garbage collector")
		return nil
	}
	if err != nil {
		return fmt.Errorf("reading LeaderWorkerSet %s from the cache: %w", key, err)
	}
	if lws.DeletionTimestamp != nil {
		// Being deleted: the garbage collector takes the HPA with it, and
		// creating one now would only delay the deletion.
		return nil
	}

	hpa, err := c.hpaLister.HorizontalPodAutoscalers(key.Namespace).Get(key.Name)
	if apierrors.IsNotFound(err) {
		hpa = nil
	} else if err != nil {
		return fmt.Errorf("reading HorizontalPodAutoscaler %s from the cache: %w", key, err)
	}

	if hpa != nil && !isOurs(hpa, lws) {
		c.leaveForeign(ctx, lws, hpa)
		return nil
	}
	if !wantsHPA(lws) {
		if hpa == nil {
			return nil
		}
		return c.deleteHPA(ctx, lws, hpa)
	}
	if others := c.otherTargeting(ctx, lws, hpa); len(others) > 0 {
		c.warnTargetConflict(lws, hpa, others)
		if hpa == nil {
			return nil
		}
		// Ours exists already: keep maintaining it. Deleting it would
		// hand the target to an autoscaler the user may not have meant
		// to keep, and leaving it stale would make two wrong ones.
	}

	desired := desiredHPA(lws)
	if hpa == nil {
		return c.createHPA(ctx, lws, desired)
	}
	if hasTolerance(desired) && !c.tolerance.honoured() {
		// Compare with what the server keeps, or every sync would find
		// the dropped field missing and write it again.
		c.warnToleranceIgnored(ctx, lws)
		desired = withoutTolerance(desired)
	}
	return c.updateHPA(ctx, lws, hpa, desired)
}

// warnToleranceIgnored tells a LeaderWorkerSet, once, that the API server
// drops the tolerance its policy sets.
func (c *Controller) warnToleranceIgnored(ctx context.Context, lws *lwsv1.LeaderWorkerSet) {
	if !c.tolerance.tell(lws.UID) {
		return
	}
	klog.FromContext(ctx).Info("The API server does not keep behavior tolerance of HorizontalPodAutoscalers; the LeaderWorkerSet's is not applied")
	c.recorder.Eventf(lws, corev1.EventTypeWarning, reasonToleranceIgnored,
		"The API server does not store spec.behavior.scaleUp/scaleDown.tolerance of HorizontalPodAutoscalers (feature gate HPAConfigurableTolerance off, or a server that predates it): HorizontalPodAutoscaler %s uses the HPA controller's global tolerance; enable the gate on kube-apiserver and kube-controller-manager, or remove tolerance from spec.scalePolicy.behavior",
		lws.Name)
}

// leaveForeign explains why the LeaderWorkerSet's HPA name is taken, when
// that matters: the LeaderWorkerSet wants an HPA. The HPA event handler
// enqueues the LeaderWorkerSet again when that HPA changes or goes away.
func (c *Controller) leaveForeign(ctx context.Context, lws *lwsv1.LeaderWorkerSet, hpa *autoscalingv2.HorizontalPodAutoscaler) {
	if !wantsHPA(lws) {
		return
	}
	ref := metav1.GetControllerOfNoCopy(hpa)
	if ref != nil && isLWSRef(ref.APIVersion, ref.Kind) && ref.Name == lws.Name {
		// Left by an earlier LeaderWorkerSet of this name (deleted and
		// created again): the garbage collector is about to delete it,
		// and its delete event brings us back.
		klog.FromContext(ctx).V(2).Info("HorizontalPodAutoscaler belongs to an earlier LeaderWorkerSet of the same name, waiting for the garbage collector", "hpa", klog.KObj(hpa), "ownerUID", ref.UID)
		return
	}
	controller := "no controller"
	switch {
	case ref != nil:
		controller = fmt.Sprintf("controller %s %s", ref.Kind, ref.Name)
	case hasOwnerReference(hpa, lws):
		// A plain owner reference, as other tools write: owned, but
		// not controlled, and not made by the generator.
		controller = "an owner reference to this LeaderWorkerSet but no controller (not controlled by it, and not made by the hpa-generator)"
	}
	conflicts.WithLabelValues(conflictName).Inc()
	c.recorder.Eventf(lws, corev1.EventTypeWarning, reasonConflict,
		"HorizontalPodAutoscaler %s already exists with %s, not this LeaderWorkerSet: leaving it alone and not applying spec.scalePolicy; delete that HorizontalPodAutoscaler to let the hpa-generator create its own",
		hpa.Name, controller)
}

// otherTargeting returns the names of the HPAs, other than ours, that scale
// the LeaderWorkerSet.
func (c *Controller) otherTargeting(ctx context.Context, lws *lwsv1.LeaderWorkerSet, ours *autoscalingv2.HorizontalPodAutoscaler) []string {
	objs, err := c.hpaIndexer.ByIndex(scaletarget.Index, scaletarget.Key(lws.Namespace, lwsGroup, lwsKind, lws.Name))
	if err != nil {
		// Only possible if the index is missing, which NewController
		// prevents.
		utilruntime.HandleErrorWithContext(ctx, err, "Looking up the HorizontalPodAutoscalers that target a LeaderWorkerSet failed", "leaderWorkerSet", klog.KObj(lws))
		return nil
	}
	var names []string
	for _, obj := range objs {
		hpa, ok := obj.(*autoscalingv2.HorizontalPodAutoscaler)
		if !ok || ours != nil && hpa.Name == ours.Name {
			continue
		}
		names = append(names, hpa.Name)
	}
	sort.Strings(names)
	return names
}

func (c *Controller) warnTargetConflict(lws *lwsv1.LeaderWorkerSet, ours *autoscalingv2.HorizontalPodAutoscaler, others []string) {
	conflicts.WithLabelValues(conflictTarget).Inc()
	list := strings.Join(others, ", ")
	if ours == nil {
		c.recorder.Eventf(lws, corev1.EventTypeWarning, reasonTargetConflict,
			"HorizontalPodAutoscaler %s already scales this LeaderWorkerSet: not creating another one for spec.scalePolicy, two autoscalers would fight over its replicas; delete it, or remove spec.scalePolicy",
			list)
		return
	}
	c.recorder.Eventf(lws, corev1.EventTypeWarning, reasonTargetConflict,
		"HorizontalPodAutoscaler %s also scales this LeaderWorkerSet and fights with %s, the one spec.scalePolicy asks for, over its replicas; delete it",
		list, ours.Name)
}
