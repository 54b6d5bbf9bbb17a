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

package hpagenerator

import (
	"regexp"
	"strings"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/validation/field"

	lwsv1 "github.com/scaleplane/scaleplane/pkg/apis/leaderworkerset/v1"
)

// What Karmada's FederatedHPA refuses or cannot serve, beyond what the
// LeaderWorkerSet's own validation (an HPA's rules) already refuses. Read
// from karmada-io/karmada v1.18.2:
//   - pkg/util/lifted/validatingfhpa.go, ValidateFederatedHPA, which
//     karmada-webhook's FederatedHPA validating handler
//     (pkg/webhook/federatedhpa/validating.go) runs: minReplicas must be at
//     least 1 (minReplicasLowerBound 1, "Karmada does not support HPA scale
//     to zero temporarily"); metric types are Object, Pods, Resource and
//     ContainerResource only (validMetricSourceTypes, "Karmada do not support
//     ExternalMetricSourceType currently"); the rest is Kubernetes 1.27's HPA
//     validation, which the LeaderWorkerSet's validation already applies.
//   - pkg/util/lifted/federatedhpa.go, SetDefaultsFederatedHPA, which
//     karmada-webhook's mutating handler (pkg/webhook/federatedhpa/mutating.go)
//     runs: behavior's rules are rebuilt from the defaults and the set
//     fields, and copyHPAScalingRules copies selectPolicy,
//     stabilizationWindowSeconds and policies, not tolerance: a tolerance is
//     dropped on every write.
//   - pkg/controllers/federatedhpa/federatedhpa_controller.go: the
//     controller computes Object, Pods, Resource and ContainerResource
//     metrics, and applies its --horizontal-pod-autoscaler-tolerance flag
//     (config/types.go) to every FederatedHPA; it never reads behavior's
//     tolerance.
//
// The generator refuses these before it writes, on the LeaderWorkerSet, by
// the field of spec.scalePolicy to fix: written anyway, the first two would
// be denied by karmada-webhook on every try, and the third would be dropped
// and written again on every sync.
var federatedHPAMetricTypes = []string{
	string(autoscalingv2.ContainerResourceMetricSourceType),
	string(autoscalingv2.ObjectMetricSourceType),
	string(autoscalingv2.PodsMetricSourceType),
	string(autoscalingv2.ResourceMetricSourceType),
}

// federatedHPARefusals returns what of the policy a FederatedHPA cannot
// carry, each naming its field under spec.scalePolicy; none means it can.
func federatedHPARefusals(policy *lwsv1.ScalePolicy) field.ErrorList {
	var errs field.ErrorList
	path := field.NewPath("spec", "scalePolicy")
	if policy.MinReplicas != nil && *policy.MinReplicas < 1 {
		errs = append(errs, field.Invalid(path.Child("minReplicas"), *policy.MinReplicas,
			"Karmada's FederatedHPA needs at least 1 (it does not scale to zero)"))
	}
	for i, m := range policy.Metrics {
		supported := false
		for _, t := range federatedHPAMetricTypes {
			supported = supported || string(m.Type) == t
		}
		if !supported {
			errs = append(errs, field.NotSupported(path.Child("metrics").Index(i).Child("type"), m.Type, federatedHPAMetricTypes))
		}
	}
	if b := policy.Behavior; b != nil {
		for _, r := range []struct {
			name  string
			rules *autoscalingv2.HPAScalingRules
		}{{"scaleUp", b.ScaleUp}, {"scaleDown", b.ScaleDown}} {
			if r.rules != nil && r.rules.Tolerance != nil {
				errs = append(errs, field.Forbidden(path.Child("behavior", r.name, "tolerance"),
					"Karmada's FederatedHPA does not keep it (karmada-webhook drops it) and its controller applies its own --horizontal-pod-autoscaler-tolerance; remove it"))
			}
		}
	}
	return errs
}

// isAdmissionDenied reports an admission webhook's denial. karmada-webhook
// denies a FederatedHPA with controller-runtime's admission.Denied, whose
// code is 403, so the apiserver answers Forbidden, as it does for missing
// permissions; its message says which webhook denied it
// (k8s.io/apiserver's webhook ToStatusErr: `admission webhook "<name>" denied
// the request: <reason>`). A denial stays until the object changes: it is a
// refusal, not a permission to wait for.
func isAdmissionDenied(err error) bool {
	if !apierrors.IsForbidden(err) {
		return false
	}
	msg := err.Error()
	return strings.Contains(msg, "admission webhook") && strings.Contains(msg, "denied the request")
}

// specField matches the generated autoscaler's spec fields that come from
// the scale policy, as the apiserver and karmada-webhook name them.
var specField = regexp.MustCompile(`\bspec\.(minReplicas|maxReplicas|metrics|behavior)\b`)

// inScalePolicy rewrites the field paths of a refusal of the generated
// autoscaler into the LeaderWorkerSet's, where the user fixes them:
// spec.metrics[0].type is spec.scalePolicy.metrics[0].type there.
func inScalePolicy(msg string) string {
	return specField.ReplaceAllString(msg, "spec.scalePolicy.$1")
}

// refusalMessage joins refusals for an event.
func refusalMessage(errs field.ErrorList) string {
	parts := make([]string, 0, len(errs))
	for _, e := range errs {
		parts = append(parts, e.Error())
	}
	return strings.Join(parts, "; ")
}
