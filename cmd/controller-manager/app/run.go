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
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
)

// resourcePollInterval is how often a controller waiting for its CRD asks
// discovery again.
var resourcePollInterval = 10 * time.Second

// shutdownTimeout bounds how long the manager waits, once told to stop, for
// the controllers to finish their work in flight (the cron-scaler drains its
// syncs in at most cronscaler.DefaultDrainTimeout) before it releases its
// lease and exits anyway. It is below Kubernetes' default termination grace
// period of 30 seconds.
var shutdownTimeout = 25 * time.Second

// runUntilStopped runs run(ctx) and returns once it returned, or once
// shutdownTimeout passed after ctx ended, whichever comes first. It reports
// whether run returned.
func runUntilStopped(ctx context.Context, run func(context.Context)) bool {
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer utilruntime.HandleCrash()
		run(ctx)
	}()
	select {
	case <-done:
		return true
	case <-ctx.Done():
	}
	klog.FromContext(ctx).Info("Stopping the controllers, waiting for their work in flight", "timeout", shutdownTimeout)
	timer := time.NewTimer(shutdownTimeout)
	defer timer.Stop()
	select {
	case <-done:
		klog.FromContext(ctx).Info("Controllers stopped")
		return true
	case <-timer.C:
		klog.FromContext(ctx).Info("Controllers did not stop in time; going on with the shutdown", "timeout", shutdownTimeout)
		return false
	}
}

// runControllers starts every enabled controller and blocks until ctx ends
// and all of them have returned. Each controller starts on its own, so one
// that waits for its CRD does not hold back the others.
func runControllers(ctx context.Context, controllerCtx ControllerContext, descriptors map[string]*ControllerDescriptor, enabled []string, checks *healthChecks) {
	logger := klog.FromContext(ctx)
	var wg sync.WaitGroup
	var building sync.Mutex
	for _, name := range KnownControllers(descriptors) {
		d := descriptors[name]
		if !IsControllerEnabled(d, enabled) {
			logger.Info("Controller is disabled", "controller", name)
			continue
		}
		checks.setControllerState(name, nil, "starting")
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer utilruntime.HandleCrash()
			startController(ctx, controllerCtx, d, checks, &building)
		}()
	}
	wg.Wait()
}

// startController waits for the controller's resources, builds it, starts
// and syncs the informers it registered, and runs it until ctx ends.
//
// Building holds the controllers' constructors and their informers' start
// apart: the informer factories are shared, and a constructor registers an
// informer and then configures it (a transform, an index, handlers). Another
// controller's StartInformers in between would start that informer half
// configured, and SetTransform on a started informer fails: the controller
// would never start, while the others run (a CI run of the rbac integration
// test lost the cron-scaler this way). Waiting for the resources and for the
// caches to sync stay outside, so a controller whose CRD is missing holds
// back no other. The constructors make a few requests (discovery, the
// CronFederatedHPA CRD) and wait only while discovery fails: the
// hpa-generator's detection of Karmada retries every resourcePollInterval,
// so after an outage at start-up the others start at most that much later.
func startController(ctx context.Context, controllerCtx ControllerContext, d *ControllerDescriptor, checks *healthChecks, building *sync.Mutex) {
	logger := klog.LoggerWithValues(klog.FromContext(ctx), "controller", d.name)
	ctx = klog.NewContext(ctx, logger)

	if len(d.requiredResources) > 0 {
		checks.setControllerState(d.name, nil, "waiting for its API resources")
		if err := waitForResources(ctx, controllerCtx.KubeClient.Discovery(), d.requiredResources); err != nil {
			return
		}
		// The mapper may have cached discovery from before the CRD appeared.
		controllerCtx.RESTMapper.Reset()
	}
	readDiscoveryAhead(ctx, controllerCtx.RESTMapper)

	controllerCtx, err := controllerCtx.ForController(d.name)
	if err != nil {
		logger.Error(err, "Controller failed to start")
		checks.setControllerState(d.name, err, err.Error())
		return
	}
	controller, err := build(ctx, controllerCtx, d, building)
	if err != nil {
		err = fmt.Errorf("starting controller %s: %w", d.name, err)
		logger.Error(err, "Controller failed to start")
		checks.setControllerState(d.name, err, err.Error())
		return
	}
	// The controller's own caches, not every informer the shared
	// factories started: another controller's that cannot sync (its RBAC
	// missing, say) must not hold this one back.
	checks.setControllerState(d.name, nil, "waiting for informer caches to sync")
	if !cache.WaitForCacheSync(ctx.Done(), controller.HasSynced) {
		return
	}
	checks.setControllerState(d.name, nil, "")
	logger.Info("Started controller")
	controller.Run(ctx)
	logger.Info("Controller stopped")
}

// build runs the controller's constructor and starts the informers it
// registered, holding building (see startController).
func build(ctx context.Context, controllerCtx ControllerContext, d *ControllerDescriptor, building *sync.Mutex) (Controller, error) {
	building.Lock()
	defer building.Unlock()
	controller, err := d.initFunc(ctx, controllerCtx)
	if err != nil {
		return nil, err
	}
	controllerCtx.StartInformers(ctx)
	return controller, nil
}

// waitForResources polls discovery until every resource is served. It says
// once, at info level, what it waits for, and returns only when all are
// there or ctx ends.
func waitForResources(ctx context.Context, client discovery.DiscoveryInterface, resources []schema.GroupVersionResource) error {
	logger := klog.FromContext(ctx)
	announced := false
	return wait.PollUntilContextCancel(ctx, resourcePollInterval, true, func(ctx context.Context) (bool, error) {
		missing, err := missingResources(client, resources)
		if err != nil {
			logger.V(2).Info("Discovery failed, will retry", "err", err)
			return false, nil
		}
		if len(missing) == 0 {
			if announced {
				logger.Info("API resources are now served, starting", "resources", resources)
			}
			return true, nil
		}
		if !announced {
			announced = true
			logger.Info("Waiting for API resources to be served; is the CRD installed?", "missing", missing)
		}
		return false, nil
	})
}

func missingResources(client discovery.DiscoveryInterface, resources []schema.GroupVersionResource) ([]string, error) {
	var missing []string
	for _, gvr := range resources {
		list, err := client.ServerResourcesForGroupVersion(gvr.GroupVersion().String())
		if apierrors.IsNotFound(err) {
			missing = append(missing, gvr.String())
			continue
		}
		if err != nil {
			return nil, err
		}
		found := false
		for _, r := range list.APIResources {
			if r.Name == gvr.Resource {
				found = true
				break
			}
		}
		if !found {
			missing = append(missing, gvr.String())
		}
	}
	return missing, nil
}
