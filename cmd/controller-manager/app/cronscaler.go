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

	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"k8s.io/apimachinery/pkg/runtime/schema"

	autoscalingv1alpha1 "github.com/scaleplane/scaleplane/pkg/apis/autoscaling/v1alpha1"
	"github.com/scaleplane/scaleplane/pkg/controllers/cronscaler"
)

// newCronScalerControllerDescriptor describes the cron-scaler. Its alias is
// the name karmada-controller-manager gives the same controller, so existing
// --controllers flags keep working.
func newCronScalerControllerDescriptor() *ControllerDescriptor {
	return &ControllerDescriptor{
		name:     cronscaler.Name,
		summary:  "CronFederatedHPA",
		aliases:  []string{"cronFederatedHorizontalPodAutoscaler"},
		initFunc: newCronScalerController,
		requiredResources: []schema.GroupVersionResource{
			autoscalingv1alpha1.SchemeGroupVersion.WithResource("cronfederatedhpas"),
		},
	}
}

// newCronScalerController builds the cron-scaler. Its writes (targets and
// statuses) go through the unbounded clients: they are at most one per sync
// and one per status writer in flight, --concurrent-cron-scaler-syncs each
// (the status writers wait while targets are written), and when a thousand rules
// fire at once a client-side rate limit would only spread the firings over
// seconds. Its informer lists and watches through the shared factory. It
// reads the installed CronFederatedHPA CRD first: on a Karmada control plane
// the CRD is Karmada's, which stores neither of scaleplane's added fields.
func newCronScalerController(ctx context.Context, controllerCtx ControllerContext) (Controller, error) {
	return cronscaler.NewController(ctx, cronscaler.Config{
		Informer:   controllerCtx.ScaleplaneInformerFactory.Autoscaling().V1alpha1().CronFederatedHPAs(),
		Client:     controllerCtx.Unbounded.Client,
		KubeClient: controllerCtx.Unbounded.KubeClient,
		Scales:     controllerCtx.Unbounded.ScaleClient,
		Metadata:   controllerCtx.MetadataClient,
		Mapper:     controllerCtx.RESTMapper,
		Recorder:   controllerCtx.EventRecorderFor(cronscaler.Name),
		Clock:      controllerCtx.Clock,
		Workers:    controllerCtx.Options.CronScaler.ConcurrentSyncs,
		Stored:     readCronSchema(ctx, controllerCtx.DynamicClient),
		// Shared with the hpa-generator when it runs.
		HPAs:          controllerCtx.InformerFactory.Autoscaling().V2().HorizontalPodAutoscalers().Informer(),
		FederatedHPAs: federatedHPAInformer(ctx, controllerCtx),
	})
}

// federatedHPAInformer returns the FederatedHPA informer if the API server
// serves FederatedHPAs (Karmada's, or scaleplane's CRD): an informer of a
// resource that is not served would fail to list forever.
func federatedHPAInformer(ctx context.Context, controllerCtx ControllerContext) cache.SharedIndexInformer {
	gv := autoscalingv1alpha1.SchemeGroupVersion
	resources, err := controllerCtx.KubeClient.Discovery().ServerResourcesForGroupVersion(gv.String())
	if err == nil {
		for _, r := range resources.APIResources {
			if r.Name == "federatedhpas" {
				return controllerCtx.ScaleplaneInformerFactory.Autoscaling().V1alpha1().FederatedHPAs().Informer()
			}
		}
	}
	klog.FromContext(ctx).Info("FederatedHPAs are not served: a CronFederatedHPA scaling a workload that a FederatedHPA also scales is not reported", "groupVersion", gv.String())
	return nil
}
