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
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery"
	"k8s.io/klog/v2"

	"github.com/scaleplane/scaleplane/cmd/controller-manager/app/options"
	autoscalingv1alpha1 "github.com/scaleplane/scaleplane/pkg/apis/autoscaling/v1alpha1"
	lwsv1 "github.com/scaleplane/scaleplane/pkg/apis/leaderworkerset/v1"
	"github.com/scaleplane/scaleplane/pkg/controllers/hpagenerator"
	fhpainformers "github.com/scaleplane/scaleplane/pkg/generated/informers/externalversions/autoscaling/v1alpha1"
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

// karmadaResources are served by a Karmada control plane and nowhere else:
// PropagationPolicies (a CRD of karmada-apiserver) and Clusters (served by
// karmada-aggregated-apiserver). Either tells Karmada. The FederatedHPA CRD
// does not: scaleplane ships it for plain clusters too. Discovery needs no
// RBAC beyond what every authenticated client has (system:discovery).
var karmadaResources = []schema.GroupVersionResource{
	{Group: "policy.karmada.io", Version: "v1alpha1", Resource: "propagationpolicies"},
	{Group: "cluster.karmada.io", Version: "v1alpha1", Resource: "clusters"},
}

// karmadaDetectTimeout bounds how long the hpa-generator waits for
// discovery to answer at start-up.
const karmadaDetectTimeout = time.Minute

var federatedHPAResource = autoscalingv1alpha1.SchemeGroupVersion.WithResource("federatedhpas")

// isKarmada reports whether the API server serves one of the Karmada
// resources. An error means discovery could not tell for any of them.
func isKarmada(client discovery.DiscoveryInterface) (bool, error) {
	var errs []error
	for _, gvr := range karmadaResources {
		missing, err := missingResources(client, []schema.GroupVersionResource{gvr})
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if len(missing) == 0 {
			return true, nil
		}
	}
	return false, errors.Join(errs...)
}

// chooseOutput turns --hpa-generator-output into the kind to keep, with the
// reason, for the start-up log.
func chooseOutput(flag string, karmada bool) (hpagenerator.Output, string) {
	switch {
	case flag == options.HPAGeneratorOutputFederatedHPA:
		return hpagenerator.OutputFederatedHPA, "set by --hpa-generator-output"
	case flag == options.HPAGeneratorOutputHorizontalPodAutoscaler:
		return hpagenerator.OutputHorizontalPodAutoscaler, "set by --hpa-generator-output"
	case karmada:
		return hpagenerator.OutputFederatedHPA, "Auto: the API server is a Karmada control plane"
	default:
		return hpagenerator.OutputHorizontalPodAutoscaler, "Auto: the API server is not a Karmada control plane"
	}
}

func newHPAGeneratorController(ctx context.Context, controllerCtx ControllerContext) (Controller, error) {
	logger := klog.FromContext(ctx)
	disc := controllerCtx.KubeClient.Discovery()
	karmada, err := detectKarmada(ctx, disc)
	if err != nil {
		return nil, err
	}
	flag := controllerCtx.Options.HPAGenerator.Output
	out, why := chooseOutput(flag, karmada)
	// FederatedHPAs are watched whatever the output, where they are
	// served: a FederatedHPA output needs them, and an HPA output deletes
	// the FederatedHPA a LeaderWorkerSet controls from an earlier output,
	// and reports one that scales a LeaderWorkerSet.
	var fhpas fhpainformers.FederatedHPAInformer
	missing, err := missingResources(disc, []schema.GroupVersionResource{federatedHPAResource})
	switch {
	case err != nil:
		return nil, fmt.Errorf("asking discovery whether FederatedHPAs are served: %w", err)
	case len(missing) == 0:
		fhpas = controllerCtx.ScaleplaneInformerFactory.Autoscaling().V1alpha1().FederatedHPAs()
	case out == hpagenerator.OutputFederatedHPA:
		return nil, fmt.Errorf("the output is FederatedHPA (%s), but the API server does not serve %s: install Karmada's FederatedHPA CRD (or scaleplane's, artifacts/deploy/crds), or run with --hpa-generator-output=HorizontalPodAutoscaler", why, federatedHPAResource)
	}
	logger.Info("The hpa-generator keeps one autoscaler per LeaderWorkerSet with a scale policy", "output", out, "flag", flag, "reason", why, "karmada", karmada, "federatedHPAsServed", fhpas != nil)
	return hpagenerator.NewController(ctx, hpagenerator.Config{
		LeaderWorkerSets: controllerCtx.ScaleplaneInformerFactory.Leaderworkerset().V1().LeaderWorkerSets(),
		HPAs:             controllerCtx.InformerFactory.Autoscaling().V2().HorizontalPodAutoscalers(),
		FederatedHPAs:    fhpas,
		KubeClient:       controllerCtx.KubeClient,
		Client:           controllerCtx.Client,
		Output:           out,
		Karmada:          karmada,
		Recorder:         controllerCtx.EventRecorderFor(hpagenerator.Name),
		Workers:          controllerCtx.Options.HPAGenerator.ConcurrentSyncs,
	})
}

// detectKarmada asks discovery whether the API server is a Karmada control
// plane, retrying while discovery fails (an apiserver that is starting): a
// wrong answer would pick the wrong output for the whole run.
func detectKarmada(ctx context.Context, disc discovery.DiscoveryInterface) (bool, error) {
	var karmada bool
	var last error
	err := wait.PollUntilContextTimeout(ctx, resourcePollInterval, karmadaDetectTimeout, true, func(ctx context.Context) (bool, error) {
		karmada, last = isKarmada(disc)
		if last != nil {
			klog.FromContext(ctx).V(2).Info("Discovery failed while detecting Karmada, will retry", "err", last)
			return false, nil
		}
		return true, nil
	})
	if err != nil {
		return false, fmt.Errorf("detecting whether the API server is a Karmada control plane (for --hpa-generator-output=Auto): %w (last discovery error: %v)", err, last)
	}
	return karmada, nil
}
