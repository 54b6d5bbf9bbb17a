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

// Package resizer is the resizer controller: it sizes one container of an
// add-on (a Deployment, StatefulSet or DaemonSet) in proportion to the
// cluster, as Addon Resizer does, from AddonResizers: per resource, base +
// extraPerUnit × cluster size, where the size is the number of nodes
// (NodeProportional) or of containers of non-terminal pods
// (ContainerProportional, KEP-5546).
//
// The cluster size comes from the API server's objects, counted
// incrementally from informers that start only when an AddonResizer needs
// them (the pod informer keeps a few hundred bytes per pod), or from the
// metrics API, read at an interval. A count change enqueues the
// AddonResizers of its mode; a sync estimates, keeps values within the
// threshold band, holds changes back for the scale-up or scale-down delay
// (the time a change was first wanted is kept in status, so a restart does
// not reset it), and writes one conditional patch of the one container.
// With updateMode InPlace it writes no template: the size is held in status
// and the target's running pods are resized through pods/resize, two at a
// time, pods created later once they run, each kubelet's answer read back
// (inplace.go, podwatch.go, podresize.go). With updateMode Off it only
// recommends: the size is computed and shown, and nothing is written to the
// target, its pods or (on Karmada) an OverridePolicy (recommend.go). A
// resource's minAllowed and maxAllowed bound its estimate before the
// threshold decides. A steady state writes nothing.
package resizer

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	appsinformers "k8s.io/client-go/informers/apps/v1"
	"k8s.io/client-go/kubernetes"
	appslisters "k8s.io/client-go/listers/apps/v1"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	metricsclientset "k8s.io/metrics/pkg/client/clientset/versioned"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"

	scaleplanev1alpha1 "github.com/scaleplane/scaleplane/pkg/apis/scaleplane/v1alpha1"
	"github.com/scaleplane/scaleplane/pkg/generated/clientset/versioned"
	informers "github.com/scaleplane/scaleplane/pkg/generated/informers/externalversions/scaleplane/v1alpha1"
	listers "github.com/scaleplane/scaleplane/pkg/generated/listers/scaleplane/v1alpha1"
	"github.com/scaleplane/scaleplane/pkg/workloop"
)

// Name is the controller's name in --controllers, logs and events.
const Name = "resizer"

// Event reasons besides the Warning ones, which are UpToDate's reasons
// (warningReasons).
const eventResized = reasonResized

const (
	// cacheRetry is how soon an AddonResizer is synced again while the
	// informer it counts from has not synced yet, or the target's cache
	// does not show the resizer's last patch yet.
	cacheRetry = time.Second
	// maxPatchAttempts bounds the re-reads after a conflicting patch.
	maxPatchAttempts = 3
	// defaultMetricsInterval is used when NewController gets no interval;
	// metrics-server scrapes every 15 s.
	defaultMetricsInterval = 15 * time.Second
)

// Controller is the resizer.
type Controller struct {
	client       versioned.Interface
	kubeClient   kubernetes.Interface
	lister       listers.AddonResizerLister
	indexer      cache.Indexer
	deployments  appslisters.DeploymentLister
	statefulSets appslisters.StatefulSetLister
	daemonSets   appslisters.DaemonSetLister
	synced       []cache.InformerSynced
	recorder     record.EventRecorder
	clock        clock.WithTicker
	queue        workqueue.TypedRateLimitingInterface[cache.ObjectName]
	workers      int

	counts       *apiServerCounts
	metrics      *metricsSource
	statusWrites *statusWrites
	patched      *patchedGenerations
	// recommendations exports resizer_recommendation from status.
	recommendations *recommendationSeries
	// inPlace resizes the target's pods through pods/resize for the
	// AddonResizers with updateMode InPlace.
	inPlace *inPlaceResizer
	// detector and karmada serve the Karmada mode (karmada.go).
	detector *apiDetector
	karmada  *karmadaCaches
}

// Config is what the resizer is built from.
type Config struct {
	// AddonResizers, Deployments, StatefulSets and DaemonSets are shared
	// informers it registers its indexes and event handlers on.
	AddonResizers informers.AddonResizerInformer
	Deployments   appsinformers.DeploymentInformer
	StatefulSets  appsinformers.StatefulSetInformer
	DaemonSets    appsinformers.DaemonSetInformer
	// Client writes AddonResizer status; KubeClient patches the targets
	// (field manager scaleplane-resizer) and lists nodes and pods;
	// Metadata counts them as metadata; Metrics reads the metrics API.
	Client     versioned.Interface
	KubeClient kubernetes.Interface
	Metadata   metadata.Interface
	Metrics    metricsclientset.Interface
	Recorder   record.EventRecorder
	Clock      clock.WithTicker
	// Workers is the number of AddonResizers synced at once.
	Workers int
	// MetricsInterval is how often source Metrics reads the metrics API;
	// zero is the default.
	MetricsInterval time.Duration
}

// NewController builds the resizer and registers its indexes and event
// handlers on the shared informers: AddonResizers, and the Deployments,
// StatefulSets and DaemonSets they target. The node and pod informers are
// the resizer's own, started when an AddonResizer first needs them.
func NewController(ctx context.Context, cfg Config) (*Controller, error) {
	arInformer, deployInformer, stsInformer, dsInformer := cfg.AddonResizers, cfg.Deployments, cfg.StatefulSets, cfg.DaemonSets
	client, kubeClient, clk, metricsInterval := cfg.Client, cfg.KubeClient, cfg.Clock, cfg.MetricsInterval
	registerMetrics()
	if metricsInterval <= 0 {
		metricsInterval = defaultMetricsInterval
	}
	c := &Controller{
		client:       client,
		kubeClient:   kubeClient,
		lister:       arInformer.Lister(),
		indexer:      arInformer.Informer().GetIndexer(),
		deployments:  deployInformer.Lister(),
		statefulSets: stsInformer.Lister(),
		daemonSets:   dsInformer.Lister(),
		synced: []cache.InformerSynced{
			arInformer.Informer().HasSynced,
			deployInformer.Informer().HasSynced,
			stsInformer.Informer().HasSynced,
			dsInformer.Informer().HasSynced,
		},
		recorder: cfg.Recorder,
		clock:    clk,
		workers:  cfg.Workers,
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.DefaultTypedControllerRateLimiter[cache.ObjectName](),
			workqueue.TypedRateLimitingQueueConfig[cache.ObjectName]{Name: Name, Clock: clk},
		),
		metrics:         newMetricsSource(cfg.Metrics, clk, metricsInterval),
		statusWrites:    newStatusWrites(),
		patched:         newPatchedGenerations(),
		recommendations: newRecommendationSeries(),
	}
	c.counts = newAPIServerCounts(kubeClient, cfg.Metadata,
		func() { c.enqueueBySize(scaleplanev1alpha1.ContainerProportional, scaleplanev1alpha1.SourceAPIServer) },
		func() { c.enqueueBySize(scaleplanev1alpha1.NodeProportional, scaleplanev1alpha1.SourceAPIServer) },
	)
	c.inPlace = newInPlaceResizer(kubeClient, cfg.Recorder, c.queue.Add)
	if err := c.registerHandlers(ctx, arInformer, deployInformer, stsInformer, dsInformer); err != nil {
		return nil, err
	}
	if err := c.setUpFederation(arInformer.Informer(), kubeClient.Discovery()); err != nil {
		return nil, err
	}
	return c, nil
}

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

// Run starts the workers and blocks until ctx ends; then it stops the
// workers and the informers it started itself.
func (c *Controller) Run(ctx context.Context) {
	defer c.queue.ShutDown()
	if !cache.WaitForNamedCacheSyncWithContext(ctx, c.synced...) {
		return
	}
	countsCtx, stopCounts := context.WithCancel(ctx)
	defer func() {
		stopCounts()
		c.counts.wait()
		c.inPlace.wait()
		c.karmada.wait()
	}()
	c.counts.start(countsCtx)
	c.inPlace.start(countsCtx)
	c.karmada.setContext(countsCtx)

	workloop.Run(ctx, c.queue, c.workers, Name, c.sync)
}

// result is what reconcile decided: the outcome for the decisions metric,
// when to sync again, and an error to retry with backoff.
type result struct {
	outcome string
	requeue time.Duration
	err     error
	// wait, when set, says nothing was decided and nothing is to be
	// written: the informer the size comes from, or the target's cache after
	// a patch, has not caught up yet. Sync again after wait.
	wait time.Duration
}

// sync brings the target's container to the recommendation for the current
// cluster size, writes status once if it changed, and returns when to sync
// again (0: only on change).
func (c *Controller) sync(ctx context.Context, key cache.ObjectName) (time.Duration, error) {
	logger := klog.LoggerWithValues(klog.FromContext(ctx), "addonResizer", key)
	ctx = klog.NewContext(ctx, logger)
	ar, err := c.lister.AddonResizers(key.Namespace).Get(key.Name)
	if apierrors.IsNotFound(err) {
		c.forget(key)
		return 0, c.forgetFederated(ctx, key)
	}
	if err != nil {
		return 0, err
	}
	s := resolve(&ar.Spec)
	status := ar.Status.DeepCopy()
	status.ObservedGeneration = ar.Generation
	if s.source != scaleplanev1alpha1.SourceMetrics {
		meta.RemoveStatusCondition(&status.Conditions, scaleplanev1alpha1.ConditionMetricsAvailable)
	}

	r := c.reconcile(ctx, ar, s, status, c.clock.Now())
	if r.wait > 0 {
		logger.V(4).Info("Waiting for the caches to catch up", "after", r.wait)
		return r.wait, nil
	}
	decisions.WithLabelValues(r.outcome).Inc()
	c.recommendations.observe(key, status)
	after, statusErr := c.updateStatus(ctx, ar, status)
	if err := errors.Join(r.err, statusErr); err != nil {
		return 0, err
	}
	return minPositive(r.requeue, after), nil
}

// forget drops what is kept about a deleted AddonResizer.
func (c *Controller) forget(key cache.ObjectName) {
	clusterSizeGauge.DeleteLabelValues(key.Namespace, key.Name)
	c.recommendations.forget(key)
	c.statusWrites.forget(key)
	c.inPlace.forget(key)
}

// reconcile finds the target and its container, observes the cluster size
// and resizes, recording what it found in status.
func (c *Controller) reconcile(ctx context.Context, ar *scaleplanev1alpha1.AddonResizer, s settings, status *scaleplanev1alpha1.AddonResizerStatus, now time.Time) result {
	if r, done := c.reconcileFederated(ctx, ar, s, status, now); done {
		return r
	}
	counted := true
	if s.source == scaleplanev1alpha1.SourceAPIServer {
		// Started before the target is looked at, so that counting begins
		// the first time such an AddonResizer is seen.
		ok, err := c.counts.ready(s.mode)
		if err != nil {
			return result{outcome: outcomeError, err: err}
		}
		counted = ok
	}
	w, err := c.cachedTarget(ar.Namespace, s.target)
	if err != nil {
		if !isGone(err) {
			return result{outcome: outcomeError, err: fmt.Errorf("reading the target of %s: %w", klog.KObj(ar), err)}
		}
		targetMissing(status, ar, s.target, err, now)
		return result{outcome: outcomeError}
	}
	setCondition(status, scaleplanev1alpha1.ConditionTargetFound, metav1.ConditionTrue, reasonFound, w.String()+" found", ar.Generation, now)
	if w.container(s.container) == nil {
		containerMissing(status, ar, s, w, now)
		return result{outcome: outcomeError}
	}
	setCondition(status, scaleplanev1alpha1.ConditionContainerFound, metav1.ConditionTrue, reasonFound, fmt.Sprintf("Container %q found", s.container), ar.Generation, now)
	if rivals := c.rivals(ar, s); len(rivals) > 0 {
		ambiguousCondition(status, ar, s, w, rivals, now)
		return result{outcome: outcomeError}
	}
	if !counted || c.patched.behind(w) {
		return result{wait: cacheRetry}
	}

	selector, err := metav1.LabelSelectorAsSelector(w.selector)
	if err != nil {
		return result{outcome: outcomeError, err: fmt.Errorf("the selector of %s is not valid: %w", w, err)}
	}
	size, requeue, err := c.observe(ctx, ar, s, selector)
	if err != nil {
		msg := err.Error()
		setCondition(status, scaleplanev1alpha1.ConditionMetricsAvailable, metav1.ConditionFalse, reasonMetricsUnavailable, msg, ar.Generation, now)
		setCondition(status, scaleplanev1alpha1.ConditionUpToDate, metav1.ConditionFalse, reasonMetricsUnavailable,
			"Cluster size unknown, resources left as they are: "+msg, ar.Generation, now)
		return result{outcome: outcomeError, requeue: requeue}
	}
	if s.source == scaleplanev1alpha1.SourceMetrics {
		setCondition(status, scaleplanev1alpha1.ConditionMetricsAvailable, metav1.ConditionTrue, reasonMetricsRead, "The metrics API answered", ar.Generation, now)
	}
	status.ClusterSize = ptr.To(int32(min(size, math.MaxInt32)))
	clusterSizeGauge.WithLabelValues(ar.Namespace, ar.Name).Set(float64(size))

	units := estimatedUnits(s, size)
	expected, hits := boundedEstimate(s.resources, units)
	status.Recommendation = recommendation(expected, s.setLimits)
	boundedCondition(status, s, map[string][]boundHit{"": hits}, ar.Generation, now)
	z := sizing{size: size, units: units, expected: expected}
	var r result
	if recommendOnly(ar) {
		r = c.recommend(ar, s, w, z, status, now)
	} else {
		r = c.resize(ctx, ar, s, w, z, status, now)
	}
	r.requeue = minPositive(r.requeue, requeue)
	return r
}

// observe returns the cluster size, and for source Metrics when to read it
// again; its error says the metrics API failed. The target's own pods
// (selector in the AddonResizer's namespace) are left out of a container
// count.
func (c *Controller) observe(ctx context.Context, ar *scaleplanev1alpha1.AddonResizer, s settings, selector labels.Selector) (int64, time.Duration, error) {
	if s.source != scaleplanev1alpha1.SourceMetrics {
		return c.counts.size(s.mode, ar.Namespace, selector), 0, nil
	}
	size, at, err := c.metrics.size(ctx, ar.Namespace, selector)
	return size, c.metrics.nextRead(at), err
}

// minPositive returns the smaller of the positive durations, 0 if none.
func minPositive(a, b time.Duration) time.Duration {
	switch {
	case a <= 0:
		return max(b, 0)
	case b <= 0:
		return a
	}
	return min(a, b)
}
