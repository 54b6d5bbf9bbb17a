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
	"errors"
	"fmt"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	kubefake "k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"

	"github.com/scaleplane/scaleplane/pkg/generated/clientset/versioned/fake"
)

// A constructor registers a shared informer and then configures it, as the
// cron-scaler does with its CronFederatedHPA informer's transform. Another
// controller started at the same moment must not start that informer in
// between: SetTransform on a started informer fails, and the controller
// would never start while the others run (how a CI run of the rbac
// integration test lost the cron-scaler). Here "configures" waits until the
// informer has synced, that is until someone started it, or half a second:
// run apart, nobody starts it in that time and both controllers run; run
// together, "starts" starts it, and "configures" fails.
func TestControllersAreBuiltApartFromEachOthersInformerStart(t *testing.T) {
	ctx, cancel := context.WithCancel(klog.NewContext(context.Background(), ktesting.NewLogger(t, ktesting.NewConfig())))
	defer cancel()
	kube := kubefake.NewClientset()
	controllerCtx := fakeControllerContext(kube, kube, fake.NewSimpleClientset())
	const window = 500 * time.Millisecond
	registered := make(chan struct{})
	ran := map[string]chan struct{}{"configures": make(chan struct{}), "starts": make(chan struct{})}
	descriptors := buildControllerDescriptors(
		&ControllerDescriptor{name: "configures", initFunc: func(ctx context.Context, controllerCtx ControllerContext) (Controller, error) {
			informer := controllerCtx.ScaleplaneInformerFactory.Autoscaling().V1alpha1().CronFederatedHPAs().Informer()
			close(registered)
			_ = wait.PollUntilContextTimeout(ctx, 5*time.Millisecond, window, true, func(context.Context) (bool, error) {
				return informer.HasSynced(), nil
			})
			if err := informer.SetTransform(func(obj any) (any, error) { return obj, nil }); err != nil {
				return nil, fmt.Errorf("configuring the informer it registered: %w", err)
			}
			return ranController{name: "configures", ran: ran["configures"]}, nil
		}},
		&ControllerDescriptor{name: "starts", initFunc: func(ctx context.Context, controllerCtx ControllerContext) (Controller, error) {
			// Built apart, this may run first and wait for nothing.
			select {
			case <-registered:
			case <-time.After(window):
			}
			return ranController{name: "starts", ran: ran["starts"]}, nil
		}},
	)
	checks := newHealthChecks()
	done := make(chan struct{})
	go func() {
		defer close(done)
		runControllers(ctx, controllerCtx, descriptors, []string{"*"}, checks)
	}()
	for name, ch := range ran {
		select {
		case <-ch:
		case <-time.After(10 * time.Second):
			t.Errorf("controller %q did not run; health: %v", name, checks.run(nil, name))
		}
	}
	cancel()
	<-done
}

// A controller waits for its own caches only. Another controller's informer
// that cannot list (its RBAC not granted, its API gone) must not hold it
// back: the manager used to wait for every informer the shared factories
// had started, so with --controllers=* a cron-scaler built after a resizer
// whose Deployments were forbidden never ran.
func TestControllerWaitsForItsOwnCachesOnly(t *testing.T) {
	ctx, cancel := context.WithCancel(klog.NewContext(context.Background(), ktesting.NewLogger(t, ktesting.NewConfig())))
	defer cancel()
	kube := kubefake.NewClientset()
	kube.PrependReactor("list", "deployments", func(clienttesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Group: "apps", Resource: "deployments"}, "", errors.New("not granted"))
	})
	controllerCtx := fakeControllerContext(kube, kube, fake.NewSimpleClientset())
	// Started by a controller built before: it never syncs.
	controllerCtx.InformerFactory.Apps().V1().Deployments().Informer()
	controllerCtx.StartInformers(ctx)

	ran := make(chan struct{})
	descriptors := buildControllerDescriptors(&ControllerDescriptor{name: "own", initFunc: func(ctx context.Context, controllerCtx ControllerContext) (Controller, error) {
		informer := controllerCtx.InformerFactory.Autoscaling().V2().HorizontalPodAutoscalers().Informer()
		return ranController{name: "own", ran: ran, synced: informer.HasSynced}, nil
	}})
	checks := newHealthChecks()
	done := make(chan struct{})
	go func() {
		defer close(done)
		runControllers(ctx, controllerCtx, descriptors, []string{"*"}, checks)
	}()
	select {
	case <-ran:
	case <-time.After(10 * time.Second):
		t.Error("the controller did not run while another controller's informer could not sync")
	}
	cancel()
	<-done
}

// ranController says that the manager ran it; synced is its caches' sync,
// none when nil.
type ranController struct {
	name   string
	ran    chan struct{}
	synced cache.InformerSynced
}

func (c ranController) Name() string { return c.name }

func (c ranController) HasSynced() bool { return c.synced == nil || c.synced() }

func (c ranController) Run(ctx context.Context) {
	close(c.ran)
	<-ctx.Done()
}
