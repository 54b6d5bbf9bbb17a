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

package leaderworkerset

import (
	"slices"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// The bounds kube-apiserver puts on HPA behavior.
const (
	maxStabilizationWindowSeconds = 3600
	maxPeriodSeconds              = 1800
)

var selectPolicies = []autoscalingv2.ScalingPolicySelect{
	autoscalingv2.MaxChangePolicySelect,
	autoscalingv2.MinChangePolicySelect,
	autoscalingv2.DisabledPolicySelect,
}

var policyTypes = []autoscalingv2.HPAScalingPolicyType{
	autoscalingv2.PercentScalingPolicy,
	autoscalingv2.PodsScalingPolicy,
}

func validateBehavior(b *autoscalingv2.HorizontalPodAutoscalerBehavior, fldPath *field.Path) field.ErrorList {
	if b == nil {
		return nil
	}
	var errs field.ErrorList
	errs = append(errs, validateScalingRules(b.ScaleUp, fldPath.Child("scaleUp"))...)
	errs = append(errs, validateScalingRules(b.ScaleDown, fldPath.Child("scaleDown"))...)
	return errs
}

// validateScalingRules checks one direction's rules. Rules without policies
// are fine: the apiserver fills in the default policies when the list is
// absent, and an empty list cannot reach it (the generator's client leaves
// empty lists out), so "at least one policy" holds for every HPA created.
func validateScalingRules(rules *autoscalingv2.HPAScalingRules, fldPath *field.Path) field.ErrorList {
	if rules == nil {
		return nil
	}
	var errs field.ErrorList
	if w := rules.StabilizationWindowSeconds; w != nil && (*w < 0 || *w > maxStabilizationWindowSeconds) {
		errs = append(errs, field.Invalid(fldPath.Child("stabilizationWindowSeconds"), *w,
			"must be between 0 and 3600 seconds"))
	}
	if p := rules.SelectPolicy; p != nil && !slices.Contains(selectPolicies, *p) {
		errs = append(errs, field.NotSupported(fldPath.Child("selectPolicy"), *p, selectPolicies))
	}
	for i, policy := range rules.Policies {
		errs = append(errs, validateScalingPolicy(policy, fldPath.Child("policies").Index(i))...)
	}
	if t := rules.Tolerance; t != nil && t.Sign() < 0 {
		errs = append(errs, field.Invalid(fldPath.Child("tolerance"), t.String(), "must be greater than or equal to 0"))
	}
	return errs
}

func validateScalingPolicy(policy autoscalingv2.HPAScalingPolicy, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	if !slices.Contains(policyTypes, policy.Type) {
		errs = append(errs, field.NotSupported(fldPath.Child("type"), policy.Type, policyTypes))
	}
	if policy.Value <= 0 {
		errs = append(errs, field.Invalid(fldPath.Child("value"), policy.Value, "must be greater than 0"))
	}
	if policy.PeriodSeconds < 1 || policy.PeriodSeconds > maxPeriodSeconds {
		errs = append(errs, field.Invalid(fldPath.Child("periodSeconds"), policy.PeriodSeconds,
			"must be between 1 and 1800 seconds"))
	}
	return errs
}
