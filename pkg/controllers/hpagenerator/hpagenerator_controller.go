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
// autoscaling/v2 HorizontalPodAutoscaler (or, on a Karmada control plane,
// an autoscaling.karmada.io/v1alpha1 FederatedHPA) for every LeaderWorkerSet
// whose spec.scalePolicy has metrics (LWS KEP-213), and deletes it when the
// policy goes away. Everything below holds for both kinds; "HPA" stands for
// either.
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
	"sync"
	"time"

	"github.com/scaleplane/scaleplane/pkg/scaletarget"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	autoscalingv2informers "k8s.io/client-go/informers/autoscaling/v2"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"

	lwsv1 "github.com/scaleplane/scaleplane/pkg/apis/leaderworkerset/v1"
	"github.com/scaleplane/scaleplane/pkg/generated/clientset/versioned"
	fhpainformers "github.com/scaleplane/scaleplane/pkg/generated/informers/externalversions/autoscaling/v1alpha1"
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
	// reasonOutputChanged: an autoscaler of the other kind, left by an
	// earlier output, was deleted.
	reasonOutputChanged = "HPAOutputChanged"
	// reasonOutputMismatch: the output kind does not suit the API server
	// (an HPA on Karmada, a FederatedHPA without Karmada).
	reasonOutputMismatch = "HPAOutputMismatch"
	// reasonToleranceIgnored: the API server drops behavior's tolerance.
	reasonToleranceIgnored = "HPAToleranceIgnored"
)

// Controller is the hpa-generator.
type Controller struct {
	lwsLister lwslisters.LeaderWorkerSetLister
	// out is the kind the generator keeps; other the other kind, whose
	// objects it deletes if a LeaderWorkerSet controls one (left by an
	// earlier output) and reports if one scales a LeaderWorkerSet. other is
	// nil where FederatedHPAs are not served.
	out, other autoscalers
	output     Output
	// karmada: the API server is a Karmada control plane.
	karmada      bool
	synced       []cache.InformerSynced
	recorder     record.EventRecorder
	queue        workqueue.TypedRateLimitingInterface[cache.ObjectName]
	workers      int
	managed      *managedSet
	managedFHPAs *managedSet
	tolerance    *toleranceSupport
	mismatch     *onceEach
}

// Config is what the hpa-generator is built from.
type Config struct {
	// LeaderWorkerSets and HPAs are the informers it registers its event
	// handlers on; the HPA informer is shared (the cron-scaler indexes it
	// too).
	LeaderWorkerSets lwsinformers.LeaderWorkerSetInformer
	HPAs             autoscalingv2informers.HorizontalPodAutoscalerInformer
	// FederatedHPAs is the FederatedHPA informer (shared with the
	// cron-scaler): required when Output is FederatedHPA, and nil where
	// FederatedHPAs are not served.
	FederatedHPAs fhpainformers.FederatedHPAInformer
	// KubeClient writes the HPAs, and Client the FederatedHPAs, as field
	// manager scaleplane-hpa-generator.
	KubeClient kubernetes.Interface
	Client     versioned.Interface
	// Output is the kind of autoscaler to keep; empty means
	// HorizontalPodAutoscaler.
	Output Output
	// Karmada tells that the API server is a Karmada control plane: an HPA
	// output there, or a FederatedHPA output elsewhere, is warned about on
	// every LeaderWorkerSet it concerns.
	Karmada  bool
	Recorder record.EventRecorder
	// Workers is the number of LeaderWorkerSets synced at once.
	Workers int
}

// NewController builds the hpa-generator: it adds a scale target index to the
// autoscaler informers and registers its event handlers on every informer.
func NewController(ctx context.Context, cfg Config) (*Controller, error) {
	lwsInformer, hpaInformer := cfg.LeaderWorkerSets, cfg.HPAs
	registerMetrics()
	if cfg.Output == "" {
		cfg.Output = OutputHorizontalPodAutoscaler
	}
	if cfg.Output == OutputFederatedHPA && cfg.FederatedHPAs == nil {
		return nil, fmt.Errorf("output %s needs the FederatedHPA informer: are FederatedHPAs (autoscaling.karmada.io/v1alpha1) served?", cfg.Output)
	}
	if err := scaletarget.AddIndex(hpaInformer.Informer()); err != nil {
		return nil, fmt.Errorf("indexing HorizontalPodAutoscalers: %w", err)
	}
	hpaStore := &hpas{lister: hpaInformer.Lister(), indexer: hpaInformer.Informer().GetIndexer(), client: cfg.KubeClient}
	var fhpaStore autoscalers
	synced := []cache.InformerSynced{lwsInformer.Informer().HasSynced, hpaInformer.Informer().HasSynced}
	if cfg.FederatedHPAs != nil {
		if err := scaletarget.AddIndex(cfg.FederatedHPAs.Informer()); err != nil {
			return nil, fmt.Errorf("indexing FederatedHPAs: %w", err)
		}
		fhpaStore = &federatedHPAs{lister: cfg.FederatedHPAs.Lister(), indexer: cfg.FederatedHPAs.Informer().GetIndexer(), client: cfg.Client}
		synced = append(synced, cfg.FederatedHPAs.Informer().HasSynced)
	}
	c := &Controller{
		lwsLister: lwsInformer.Lister(),
		output:    cfg.Output,
		karmada:   cfg.Karmada,
		synced:    synced,
		recorder:  cfg.Recorder,
		workers:   cfg.Workers,
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.DefaultTypedControllerRateLimiter[cache.ObjectName](),
			workqueue.TypedRateLimitingQueueConfig[cache.ObjectName]{Name: "hpa_generator"},
		),
		managed:      newManagedSet(OutputHorizontalPodAutoscaler, managedHPAs),
		managedFHPAs: newManagedSet(OutputFederatedHPA, managedFederatedHPAs),
		tolerance:    newToleranceSupport(),
		mismatch:     newOnceEach(),
	}
	switch cfg.Output {
	case OutputHorizontalPodAutoscaler:
		c.out, c.other = hpaStore, fhpaStore
	case OutputFederatedHPA:
		c.out, c.other = fhpaStore, hpaStore
	default:
		return nil, fmt.Errorf("unknown output %q: want %s or %s", cfg.Output, OutputHorizontalPodAutoscaler, OutputFederatedHPA)
	}
	setOutputMetric(cfg.Output)
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
	if cfg.FederatedHPAs != nil {
		if _, err := cfg.FederatedHPAs.Informer().AddEventHandlerWithOptions(cache.ResourceEventHandlerFuncs{
			AddFunc:    func(obj any) { c.onFederatedHPAAdd(ctx, obj) },
			UpdateFunc: func(oldObj, newObj any) { c.onFederatedHPAUpdate(ctx, oldObj, newObj) },
			DeleteFunc: func(obj any) { c.onFederatedHPADelete(ctx, obj) },
		}, options); err != nil {
			return nil, fmt.Errorf("registering the FederatedHPA event handlers: %w", err)
		}
	}
	return c, nil
}

func ptrTo[T any](v T) *T { return &v }

// Name returns the controller's name.
func (c *Controller) Name() string { return Name }

// HasSynced says whether the caches the controller reads have synced.
func (c *Controller) HasSynced() bool {
	for _, synced := range c.synced {
		if !synced() {
			return false
		}
	}
	return true
}

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

	if err := c.removeOtherKind(ctx, lws); err != nil {
		return err
	}
	hpa, err := c.out.get(key.Namespace, key.Name)
	if apierrors.IsNotFound(err) {
		hpa = nil
	} else if err != nil {
		return fmt.Errorf("reading %s %s from the cache: %w", c.out.kind(), key, err)
	}

	if hpa != nil && !isOurs(hpa, lws) {
		c.leaveForeign(ctx, lws, hpa)
		return nil
	}
	if !wantsHPA(lws) {
		if hpa == nil {
			return nil
		}
		return c.deleteHPA(ctx, lws, c.out, hpa, corev1.EventTypeNormal, reasonDeleted, whyDeleted(lws))
	}
	if c.output == OutputFederatedHPA {
		if errs := federatedHPARefusals(lws.Spec.ScalePolicy); len(errs) > 0 {
			c.refuse(ctx, lws, refusalMessage(errs))
			return nil
		}
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
	c.warnOutputMismatch(ctx, lws)

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

// removeOtherKind deletes the autoscaler of the other kind that the
// LeaderWorkerSet controls: one left from before the output changed (say, an
// HPA made before the manager ran with --hpa-generator-output=FederatedHPA).
// Two autoscalers would fight over the replicas. Whether or not the policy
// still asks for one, it has no place next to the output.
func (c *Controller) removeOtherKind(ctx context.Context, lws *lwsv1.LeaderWorkerSet) error {
	if c.other == nil {
		return nil
	}
	left, err := c.other.get(lws.Namespace, lws.Name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("reading %s %s from the cache: %w", c.other.kind(), klog.KObj(lws), err)
	}
	if !isOurs(left, lws) {
		// Not this LeaderWorkerSet's: a foreign one that targets it is
		// reported by otherTargeting, and one of the same name that
		// targets something else is none of the generator's business.
		return nil
	}
	return c.deleteHPA(ctx, lws, c.other, left, corev1.EventTypeWarning, reasonOutputChanged,
		fmt.Sprintf("the hpa-generator's output is %s now (--hpa-generator-output), and two autoscalers would fight over the replicas", c.out.kind()))
}

// whyDeleted says why the LeaderWorkerSet no longer wants an autoscaler.
func whyDeleted(lws *lwsv1.LeaderWorkerSet) string {
	if lws.Spec.ScalePolicy != nil {
		return "spec.scalePolicy has no metrics"
	}
	return "spec.scalePolicy was removed"
}

// refuse reports a policy the output kind cannot carry, by field, in a
// Warning event, and leaves the autoscaler as it is: nothing is retried
// until the policy changes (its update event brings the LeaderWorkerSet
// back).
func (c *Controller) refuse(ctx context.Context, lws *lwsv1.LeaderWorkerSet, why string) {
	refusals.WithLabelValues(c.out.kind()).Inc()
	klog.FromContext(ctx).V(2).Info("Scale policy refused", "kind", c.out.kind(), "reason", why)
	c.recorder.Eventf(lws, corev1.EventTypeWarning, reasonRejected,
		"spec.scalePolicy cannot be served by a %s, not writing %s %s: %s; fix spec.scalePolicy, it is tried again on the next change",
		c.out.kind(), c.out.kind(), lws.Name, why)
}

// warnOutputMismatch tells a LeaderWorkerSet, once per process, that its
// autoscaler's kind does not suit the API server: an HPA on a Karmada
// control plane, where no HPA controller runs (and one propagated to member
// clusters would scale each member's copy on its own), or a FederatedHPA on
// a plain cluster, where no Karmada controller acts on it.
func (c *Controller) warnOutputMismatch(ctx context.Context, lws *lwsv1.LeaderWorkerSet) {
	var why string
	switch {
	case c.output == OutputHorizontalPodAutoscaler && c.karmada:
		why = "this API server is a Karmada control plane, where no HPA controller runs, and an HPA propagated to member clusters scales each member's copy on its own, against Karmada's division of the replicas; run with --hpa-generator-output=Auto or FederatedHPA"
	case c.output == OutputFederatedHPA && !c.karmada:
		why = "this API server is not a Karmada control plane (it serves neither policy.karmada.io PropagationPolicies nor cluster.karmada.io Clusters), so no controller acts on a FederatedHPA here; run with --hpa-generator-output=Auto or HorizontalPodAutoscaler"
	default:
		return
	}
	if !c.mismatch.first(lws.UID) {
		return
	}
	klog.FromContext(ctx).Info("The output kind does not suit the API server", "kind", c.out.kind(), "karmada", c.karmada)
	c.recorder.Eventf(lws, corev1.EventTypeWarning, reasonOutputMismatch,
		"The hpa-generator keeps a %s for spec.scalePolicy, but %s", c.out.kind(), why)
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
		klog.FromContext(ctx).V(2).Info("Autoscaler belongs to an earlier LeaderWorkerSet of the same name, waiting for the garbage collector", "kind", c.out.kind(), "hpa", klog.KObj(hpa), "ownerUID", ref.UID)
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
		"%s %s already exists with %s, not this LeaderWorkerSet: leaving it alone and not applying spec.scalePolicy; delete that %s to let the hpa-generator create its own",
		c.out.kind(), hpa.Name, controller, c.out.kind())
}

// otherTargeting returns the autoscalers, of either kind, other than ours,
// that scale the LeaderWorkerSet, as "<kind> <name>". One of the other kind
// that the LeaderWorkerSet controls is left out: removeOtherKind deletes it.
func (c *Controller) otherTargeting(ctx context.Context, lws *lwsv1.LeaderWorkerSet, ours *autoscalingv2.HorizontalPodAutoscaler) []string {
	var names []string
	for _, store := range []autoscalers{c.out, c.other} {
		if store == nil {
			continue
		}
		found, err := store.targeting(lws.Namespace, lws.Name)
		if err != nil {
			// Only possible if the index is missing, which NewController
			// prevents.
			utilruntime.HandleErrorWithContext(ctx, err, "Looking up the autoscalers that target a LeaderWorkerSet failed", "leaderWorkerSet", klog.KObj(lws))
			continue
		}
		for _, hpa := range found {
			if store == c.out && ours != nil && hpa.Name == ours.Name || store == c.other && isOurs(hpa, lws) {
				continue
			}
			names = append(names, store.kind()+" "+hpa.Name)
		}
	}
	sort.Strings(names)
	return names
}

func (c *Controller) warnTargetConflict(lws *lwsv1.LeaderWorkerSet, ours *autoscalingv2.HorizontalPodAutoscaler, others []string) {
	conflicts.WithLabelValues(conflictTarget).Inc()
	list := strings.Join(others, ", ")
	if ours == nil {
		c.recorder.Eventf(lws, corev1.EventTypeWarning, reasonTargetConflict,
			"%s already scales this LeaderWorkerSet: not creating a %s for spec.scalePolicy, two autoscalers would fight over its replicas; delete it, or remove spec.scalePolicy",
			list, c.out.kind())
		return
	}
	c.recorder.Eventf(lws, corev1.EventTypeWarning, reasonTargetConflict,
		"%s also scales this LeaderWorkerSet and fights with %s %s, the one spec.scalePolicy asks for, over its replicas; delete it",
		list, c.out.kind(), ours.Name)
}

// onceEach remembers which LeaderWorkerSets were told something, so that it
// is said once per LeaderWorkerSet and process, not on every sync.
type onceEach struct {
	mu   sync.Mutex
	told map[types.UID]struct{}
}

func newOnceEach() *onceEach { return &onceEach{told: map[types.UID]struct{}{}} }

// first reports whether uid is still to be told, and counts it as told.
func (o *onceEach) first(uid types.UID) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	if _, ok := o.told[uid]; ok {
		return false
	}
	o.told[uid] = struct{}{}
	return true
}
