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
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	kubefake "k8s.io/client-go/kubernetes/fake"
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

// ranController says that the manager ran it.
type ranController struct {
	name string
	ran  chan struct{}
}

func (c ranController) Name() string { return c.name }

func (c ranController) Run(ctx context.Context) {
	close(c.ran)
	<-ctx.Done()
}
