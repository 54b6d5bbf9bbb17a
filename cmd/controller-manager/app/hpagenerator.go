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

	lwsv1 "github.com/scaleplane/scaleplane/pkg/apis/leaderworkerset/v1"
	"github.com/scaleplane/scaleplane/pkg/controllers/hpagenerator"
)

// newHPAGeneratorControllerDescriptor describes the hpa-generator. It needs
// the LeaderWorkerSet CRD: without it the manager waits, and says so once,
// instead of building informers that would fail to list.
func newHPAGeneratorControllerDescriptor() *ControllerDescriptor {
	return &ControllerDescriptor{
		name:     hpagenerator.Name,
		summary:  "LeaderWorkerSet scalePolicy",
		initFunc: newHPAGeneratorController,
		requiredResources: []schema.GroupVersionResource{
			lwsv1.SchemeGroupVersion.WithResource("leaderworkersets"),
		},
	}
}

func newHPAGeneratorController(ctx context.Context, controllerCtx ControllerContext) (Controller, error) {
	return hpagenerator.NewController(ctx, hpagenerator.Config{
		LeaderWorkerSets: controllerCtx.ScaleplaneInformerFactory.Leaderworkerset().V1().LeaderWorkerSets(),
		HPAs:             controllerCtx.InformerFactory.Autoscaling().V2().HorizontalPodAutoscalers(),
		KubeClient:       controllerCtx.KubeClient,
		Recorder:         controllerCtx.EventRecorderFor(hpagenerator.Name),
		Workers:          controllerCtx.Options.HPAGenerator.ConcurrentSyncs,
	})
}
