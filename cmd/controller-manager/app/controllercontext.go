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

package app

import (
	"context"
	"fmt"
	"net"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	kubeinformers "k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/scale"
	"k8s.io/client-go/tools/record"
	metricsclientset "k8s.io/metrics/pkg/client/clientset/versioned"
	"k8s.io/utils/clock"

	"github.com/scaleplane/scaleplane/cmd/controller-manager/app/options"
	"github.com/scaleplane/scaleplane/pkg/generated/clientset/versioned"
	"github.com/scaleplane/scaleplane/pkg/generated/informers/externalversions"
)

// ControllerContext is what every controller constructor gets: clients,
// shared informer factories, a scale client, an event recorder factory and a
// clock. Controllers register the informers they need in their constructor;
// the manager starts the factories after the constructors ran.
type ControllerContext struct {
	// KubeClient is the clientset of the built-in APIs.
	KubeClient kubernetes.Interface
	// Client is the generated clientset of scaleplane's and Karmada's APIs.
	Client versioned.Interface
	// DynamicClient reaches any resource, for targets known only at run time.
	DynamicClient dynamic.Interface
	// MetadataClient reads and watches objects as metadata only, for
	// controllers that need to count objects without caching them whole.
	MetadataClient metadata.Interface
	// MetricsClient reads the resource metrics API (metrics.k8s.io).
	MetricsClient metricsclientset.Interface
	// InformerFactory is the shared informer factory of the built-in APIs.
	InformerFactory kubeinformers.SharedInformerFactory
	// ScaleplaneInformerFactory is the shared informer factory of the
	// generated APIs.
	ScaleplaneInformerFactory externalversions.SharedInformerFactory
	// RESTMapper maps kinds to resources through discovery; Reset it when a
	// kind is not found, so that CRDs installed later are picked up.
	RESTMapper meta.ResettableRESTMapper
	// ScaleClient reads and writes the scale subresource of any resource.
	ScaleClient scale.ScalesGetter
	// Unbounded are the same clients with no client-side rate limit; see
	// UnboundedClients for who may use them.
	Unbounded UnboundedClients
	// EventRecorderFor returns a recorder that reports events as component.
	EventRecorderFor func(component string) record.EventRecorder
	// Clock is the time source; tests substitute a fake one.
	Clock clock.WithTicker
	// Options are the controller manager's flags, for per-controller settings.
	Options *options.Options
	// ResyncPeriod is the default resync of the informer factories.
	ResyncPeriod time.Duration

	// restConfig and scaleKinds build a controller's own clients (see
	// ForController).
	restConfig *rest.Config
	scaleKinds scale.ScaleKindResolver
}

// ForController returns the context a controller's constructor gets: the
// same informer factories, mapper and clock, with clients of its own whose
// user agent ends in the controller's name, as kube-controller-manager gives
// each of its controllers, so that the apiserver's audit log tells them
// apart. (What they write is named in managedFields by each controller's
// field manager, "scaleplane-<name>".) Informers list and watch through the
// shared clients.
func (c ControllerContext) ForController(name string) (ControllerContext, error) {
	if c.restConfig == nil {
		return c, nil
	}
	out := c
	clients, err := createClients(c.restConfig, name, c.RESTMapper, c.scaleKinds)
	if err != nil {
		return ControllerContext{}, fmt.Errorf("building the clients of %s: %w", name, err)
	}
	out.KubeClient, out.Client, out.DynamicClient, out.MetadataClient = clients.kube, clients.scaleplane, clients.dynamic, clients.metadata
	out.MetricsClient, out.ScaleClient = clients.metrics, clients.scale
	if out.Unbounded, err = createUnboundedClients(c.restConfig, name, c.RESTMapper, c.scaleKinds); err != nil {
		return ControllerContext{}, err
	}
	return out, nil
}

// clients are the rate-limited clients of one user agent.
type clients struct {
	kube       kubernetes.Interface
	scaleplane versioned.Interface
	dynamic    dynamic.Interface
	metadata   metadata.Interface
	metrics    metricsclientset.Interface
	scale      scale.ScalesGetter
}

// createClients builds the clients with the user agent
// "scaleplane-controller-manager/<version> (...)/<agent>".
func createClients(cfg *rest.Config, agent string, mapper meta.RESTMapper, scaleKinds scale.ScaleKindResolver) (clients, error) {
	cfg = rest.AddUserAgent(rest.CopyConfig(cfg), agent)
	var out clients
	var err error
	if out.kube, err = kubernetes.NewForConfig(cfg); err != nil {
		return clients{}, fmt.Errorf("building the Kubernetes client: %w", err)
	}
	if out.scaleplane, err = versioned.NewForConfig(cfg); err != nil {
		return clients{}, fmt.Errorf("building the scaleplane client: %w", err)
	}
	if out.dynamic, err = dynamic.NewForConfig(cfg); err != nil {
		return clients{}, fmt.Errorf("building the dynamic client: %w", err)
	}
	if out.metadata, err = metadata.NewForConfig(cfg); err != nil {
		return clients{}, fmt.Errorf("building the metadata client: %w", err)
	}
	if out.metrics, err = metricsclientset.NewForConfig(cfg); err != nil {
		return clients{}, fmt.Errorf("building the metrics client: %w", err)
	}
	if out.scale, err = scale.NewForConfig(cfg, mapper, dynamic.LegacyAPIPathResolverFunc, scaleKinds); err != nil {
		return clients{}, fmt.Errorf("building the scale client: %w", err)
	}
	return out, nil
}

// UnboundedClients have no client-side rate limit (--kube-api-qps and
// --kube-api-burst do not apply). They are for a controller that bounds
// its own requests in flight, and whose requests come in bursts that a rate
// limit would only delay: the cron-scaler, whose every rule due at 08:30
// fires at 08:30, with at most one request in flight per sync or status
// writer. The
// apiserver's API Priority and Fairness queues them with the rest of the
// controller manager's requests, and answers 429 when its queues are full
// (client-go waits and retries).
type UnboundedClients struct {
	KubeClient  kubernetes.Interface
	Client      versioned.Interface
	ScaleClient scale.ScalesGetter
}

// CreateControllerContext builds the clients and factories from a REST config.
// Its clients are the manager's own (user agent
// "scaleplane-controller-manager/..."); each controller gets clients of its
// own from ForController.
func CreateControllerContext(ctx context.Context, cfg *rest.Config, opts *options.Options, broadcaster record.EventBroadcaster) (ControllerContext, error) {
	discoveryClient, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return ControllerContext{}, fmt.Errorf("building the discovery client: %w", err)
	}
	mapper := newMappingCache(restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(discoveryClient)))
	scaleKinds := scale.NewDiscoveryScaleKindResolver(discoveryClient)
	shared, err := createClients(cfg, options.ControllerManagerName, mapper, scaleKinds)
	if err != nil {
		return ControllerContext{}, err
	}
	unbounded, err := createUnboundedClients(cfg, options.ControllerManagerName, mapper, scaleKinds)
	if err != nil {
		return ControllerContext{}, err
	}
	watchKube, watchClient, err := createWatchClients(cfg, options.ControllerManagerName)
	if err != nil {
		return ControllerContext{}, err
	}
	// Informers resync rarely: controllers are driven by events and by their
	// own requeue delays, not by periodic relists.
	resync := 12 * time.Hour
	return ControllerContext{
		KubeClient:                shared.kube,
		Client:                    shared.scaleplane,
		DynamicClient:             shared.dynamic,
		MetadataClient:            shared.metadata,
		MetricsClient:             shared.metrics,
		InformerFactory:           kubeinformers.NewSharedInformerFactory(watchKube, resync),
		ScaleplaneInformerFactory: externalversions.NewSharedInformerFactory(watchClient, resync),
		RESTMapper:                mapper,
		ScaleClient:               shared.scale,
		Unbounded:                 unbounded,
		EventRecorderFor: func(component string) record.EventRecorder {
			return broadcaster.NewRecorder(scheme(), eventSource(component))
		},
		Clock:        clock.RealClock{},
		Options:      opts,
		ResyncPeriod: resync,
		restConfig:   cfg,
		scaleKinds:   scaleKinds,
	}, nil
}

// createWatchClients builds the clients the informer factories list and
// watch with, on a connection of their own. Why: client-go sends every
// request of one config over one HTTP/2 connection, whose frames the
// apiserver writes from one loop. In a burst, the cron-scaler's hundreds of
// writes a second share it with the watches, a watch's events wait behind
// their answers, and the apiserver's watch cache closes a watcher that does
// not take its events in time (apiserver_terminated_watchers_total). The
// reflector then watches again from its last resourceVersion, and once that
// has left the watch cache it lists every object again, holding them all
// twice meanwhile (test/bench/README.md: 147 closes and two relists of
// 100,000 CronFederatedHPAs in one burst). A dialer of its own gives the
// config a transport, so a connection, of its own (client-go caches
// transports by dialer).
func createWatchClients(cfg *rest.Config, agent string) (kubernetes.Interface, versioned.Interface, error) {
	watching := rest.AddUserAgent(rest.CopyConfig(cfg), agent)
	if watching.Dial == nil {
		dialer := &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}
		watching.Dial = dialer.DialContext
	}
	kubeClient, err := kubernetes.NewForConfig(watching)
	if err != nil {
		return nil, nil, fmt.Errorf("building the informers' Kubernetes client: %w", err)
	}
	client, err := versioned.NewForConfig(watching)
	if err != nil {
		return nil, nil, fmt.Errorf("building the informers' scaleplane client: %w", err)
	}
	return kubeClient, client, nil
}

// createUnboundedClients builds the UnboundedClients: a negative QPS is
// client-go's way to say no rate limiter.
func createUnboundedClients(cfg *rest.Config, agent string, mapper meta.RESTMapper, scaleKinds scale.ScaleKindResolver) (UnboundedClients, error) {
	unbounded := rest.AddUserAgent(rest.CopyConfig(cfg), agent)
	unbounded.QPS, unbounded.Burst, unbounded.RateLimiter = -1, 0, nil
	kubeClient, err := kubernetes.NewForConfig(unbounded)
	if err != nil {
		return UnboundedClients{}, fmt.Errorf("building the unbounded Kubernetes client: %w", err)
	}
	client, err := versioned.NewForConfig(unbounded)
	if err != nil {
		return UnboundedClients{}, fmt.Errorf("building the unbounded scaleplane client: %w", err)
	}
	scaleClient, err := scale.NewForConfig(unbounded, mapper, dynamic.LegacyAPIPathResolverFunc, scaleKinds)
	if err != nil {
		return UnboundedClients{}, fmt.Errorf("building the unbounded scale client: %w", err)
	}
	patching, err := newPatchScales(unbounded, scaleClient, burstHeadroom)
	if err != nil {
		return UnboundedClients{}, err
	}
	return UnboundedClients{KubeClient: kubeClient, Client: client, ScaleClient: patching}, nil
}

// StartInformers starts every informer registered so far. Factories start
// only informers not yet started, so calling it again after a late
// controller registered more is safe.
func (c ControllerContext) StartInformers(ctx context.Context) {
	c.InformerFactory.Start(ctx.Done())
	c.ScaleplaneInformerFactory.Start(ctx.Done())
}
