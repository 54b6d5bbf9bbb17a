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

	"k8s.io/apimachinery/pkg/runtime/schema"

	scaleplanev1alpha1 "github.com/scaleplane/scaleplane/pkg/apis/scaleplane/v1alpha1"
	"github.com/scaleplane/scaleplane/pkg/controllers/resizer"
)

// newResizerControllerDescriptor describes the resizer. It waits for the
// AddonResizer CRD; the Deployments, StatefulSets and DaemonSets it resizes
// are built in.
func newResizerControllerDescriptor() *ControllerDescriptor {
	return &ControllerDescriptor{
		name:     resizer.Name,
		summary:  "AddonResizer",
		initFunc: newResizerController,
		requiredResources: []schema.GroupVersionResource{
			scaleplanev1alpha1.SchemeGroupVersion.WithResource("addonresizers"),
		},
	}
}

func newResizerController(ctx context.Context, controllerCtx ControllerContext) (Controller, error) {
	apps := controllerCtx.InformerFactory.Apps().V1()
	return resizer.NewController(ctx, resizer.Config{
		AddonResizers:   controllerCtx.ScaleplaneInformerFactory.Scaleplane().V1alpha1().AddonResizers(),
		Deployments:     apps.Deployments(),
		StatefulSets:    apps.StatefulSets(),
		DaemonSets:      apps.DaemonSets(),
		Client:          controllerCtx.Client,
		KubeClient:      controllerCtx.KubeClient,
		Metadata:        controllerCtx.MetadataClient,
		Metrics:         controllerCtx.MetricsClient,
		Recorder:        controllerCtx.EventRecorderFor(resizer.Name),
		Clock:           controllerCtx.Clock,
		Workers:         controllerCtx.Options.Resizer.ConcurrentSyncs,
		MetricsInterval: controllerCtx.Options.Resizer.MetricsInterval,
	})
}
