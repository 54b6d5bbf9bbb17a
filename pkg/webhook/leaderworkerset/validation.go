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

// Package leaderworkerset validates the spec.scalePolicy of LeaderWorkerSets:
// the hpa-generator turns it into a HorizontalPodAutoscaler, so it is checked
// as kube-apiserver will check that HorizontalPodAutoscaler, and rejected at
// admission instead of failing later, out of the user's sight. The rest of the
// LeaderWorkerSet is the upstream LWS webhook's business.
package leaderworkerset

import (
	"context"

	"k8s.io/apimachinery/pkg/util/validation/field"

	lwsv1 "github.com/scaleplane/scaleplane/pkg/apis/leaderworkerset/v1"
	"github.com/scaleplane/scaleplane/pkg/webhook/admission"
)

// Kind labels this webhook's logs and metrics.
const Kind = "LeaderWorkerSet"

// NewValidator returns the admission validator of LeaderWorkerSets. Updates
// that leave spec.scalePolicy alone are not judged.
func NewValidator() admission.Validator {
	return &admission.ObjectValidator[lwsv1.LeaderWorkerSet]{
		Rules: func(_ context.Context, lws *lwsv1.LeaderWorkerSet) admission.Result {
			return ValidateLeaderWorkerSet(lws)
		},
		Judged: func(lws *lwsv1.LeaderWorkerSet) any { return lws.Spec.ScalePolicy },
	}
}

// ValidateLeaderWorkerSet checks the scale policy of lws, if it has one.
func ValidateLeaderWorkerSet(lws *lwsv1.LeaderWorkerSet) admission.Result {
	if lws.Spec.ScalePolicy == nil {
		return admission.Result{}
	}
	return ValidateScalePolicy(lws.Spec.ScalePolicy, field.NewPath("spec", "scalePolicy"))
}

// ValidateScalePolicy checks a scale policy as kube-apiserver checks the spec
// of the HorizontalPodAutoscaler made from it, after defaulting. Warnings
// point at what the apiserver accepts but probably does not do what was meant.
func ValidateScalePolicy(policy *lwsv1.ScalePolicy, fldPath *field.Path) admission.Result {
	r := &result{}
	r.errs = append(r.errs, validateReplicaBounds(policy, fldPath)...)
	r.validateMetrics(policy.Metrics, fldPath.Child("metrics"))
	r.errs = append(r.errs, validateBehavior(policy.Behavior, fldPath.Child("behavior"))...)
	return admission.Result{Errs: r.errs, Warnings: r.warnings}
}

// result collects errors and warnings while a policy is walked.
type result struct {
	errs     field.ErrorList
	warnings []string
}

func (r *result) warn(fldPath *field.Path, msg string) {
	r.warnings = append(r.warnings, fldPath.String()+": "+msg)
}

// validateReplicaBounds checks min and max. minReplicas 0 is not allowed even
// where the HPAScaleToZero gate is on: a LeaderWorkerSet group count of zero
// cannot be scaled back up by the metrics of its (then absent) leader pods,
// and the CRD schema forbids it too.
func validateReplicaBounds(policy *lwsv1.ScalePolicy, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	if policy.MinReplicas != nil && *policy.MinReplicas < 1 {
		errs = append(errs, field.Invalid(fldPath.Child("minReplicas"), *policy.MinReplicas,
			"must be greater than or equal to 1"))
	}
	switch {
	case policy.MaxReplicas < 1:
		errs = append(errs, field.Invalid(fldPath.Child("maxReplicas"), policy.MaxReplicas,
			"must be greater than or equal to 1"))
	case policy.MinReplicas != nil && policy.MaxReplicas < *policy.MinReplicas:
		errs = append(errs, field.Invalid(fldPath.Child("maxReplicas"), policy.MaxReplicas,
			"must be greater than or equal to minReplicas"))
	}
	return errs
}
