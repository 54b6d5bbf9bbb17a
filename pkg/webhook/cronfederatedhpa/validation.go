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

// Package cronfederatedhpa validates CronFederatedHPAs: every rule of
// Karmada's webhook, with its messages, and on top of them what makes sure an
// admitted rule can run: its schedule is parsed by the code the cron-scaler
// schedules with, fires, and not more than once a minute; maxDelaySeconds fits
// in the schedule; the target's apiVersion parses; HorizontalPodAutoscaler
// targets get the FederatedHPA min/max rules.
package cronfederatedhpa

import (
	"context"
	"fmt"
	"strings"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	"k8s.io/apimachinery/pkg/api/validate/content"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/clock"

	autoscalingv1alpha1 "github.com/scaleplane/scaleplane/pkg/apis/autoscaling/v1alpha1"
	"github.com/scaleplane/scaleplane/pkg/webhook/admission"
)

// Kind labels this webhook's logs and metrics.
const Kind = "CronFederatedHPA"

const (
	federatedHPAKind = "FederatedHPA"
	hpaKind          = "HorizontalPodAutoscaler"
)

// Validator validates CronFederatedHPAs. It needs a clock because a schedule
// must fire within the next four years, counted from now.
type Validator struct {
	clock clock.PassiveClock
}

// NewValidator returns a CronFederatedHPA validator reading the time from clk.
func NewValidator(clk clock.PassiveClock) *Validator {
	return &Validator{clock: clk}
}

// AdmissionValidator returns v as an admission validator. Updates that leave
// the spec alone are not judged, so that a rule admitted under older checks
// does not block label or finalizer changes.
func (v *Validator) AdmissionValidator() admission.Validator {
	return &admission.ObjectValidator[autoscalingv1alpha1.CronFederatedHPA]{
		Rules: func(_ context.Context, cron *autoscalingv1alpha1.CronFederatedHPA) admission.Result {
			return admission.Result{Errs: v.ValidateCronFederatedHPA(cron)}
		},
		Judged: func(cron *autoscalingv1alpha1.CronFederatedHPA) any { return cron.Spec },
	}
}

// ValidateCronFederatedHPA returns every problem of cron, to be reported
// together.
func (v *Validator) ValidateCronFederatedHPA(cron *autoscalingv1alpha1.CronFederatedHPA) field.ErrorList {
	errs := apivalidation.ValidateObjectMeta(&cron.ObjectMeta, true, apivalidation.NameIsDNSSubdomain, field.NewPath("metadata"))
	return append(errs, v.validateSpec(&cron.Spec, field.NewPath("spec"))...)
}

func (v *Validator) validateSpec(spec *autoscalingv1alpha1.CronFederatedHPASpec, fldPath *field.Path) field.ErrorList {
	ref := spec.ScaleTargetRef
	refPath := fldPath.Child("scaleTargetRef")
	// Karmada's only target in its own group is the FederatedHPA; anything
	// else there is a mistake that makes the rest of the spec moot.
	if ref.APIVersion == autoscalingv1alpha1.SchemeGroupVersion.String() && ref.Kind != federatedHPAKind {
		return field.ErrorList{field.Invalid(refPath.Child("kind"), ref.Kind,
			fmt.Sprintf("invalid scaleTargetRef kind: %s, only support %s", ref.Kind, federatedHPAKind))}
	}
	errs := validateScaleTargetRef(ref, refPath)
	names := sets.New[string]()
	for i := range spec.Rules {
		rule := &spec.Rules[i]
		rulePath := fldPath.Child("rules").Index(i)
		if names.Has(rule.Name) {
			errs = append(errs, field.Duplicate(rulePath.Child("name"), rule.Name))
		}
		names.Insert(rule.Name)
		errs = append(errs, v.validateRuleSchedule(rule, rulePath)...)
		errs = append(errs, validateRuleReplicas(rule, ref, rulePath)...)
	}
	return errs
}

// validateScaleTargetRef checks what the cron-scaler needs to find the
// target: a kind and name usable in a URL, and an apiVersion that parses.
func validateScaleTargetRef(ref autoscalingv2.CrossVersionObjectReference, fldPath *field.Path) field.ErrorList {
	errs := validatePathSegment(ref.Kind, fldPath.Child("kind"))
	errs = append(errs, validatePathSegment(ref.Name, fldPath.Child("name"))...)
	apiVersionPath := fldPath.Child("apiVersion")
	if ref.APIVersion == "" {
		// The target is found by group and kind; without an apiVersion the
		// kind is looked up in the core group, where no scalable kind the
		// cron-scaler supports lives.
		return append(errs, field.Required(apiVersionPath, "must name the target's API group and version, such as apps/v1"))
	}
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	if err != nil {
		return append(errs, field.Invalid(apiVersionPath, ref.APIVersion, err.Error()))
	}
	// The cron-scaler sets HorizontalPodAutoscaler bounds through
	// autoscaling/v2 only; autoscaling/v1 objects are the same objects.
	if gv.Group == autoscalingv2.GroupName && ref.Kind == hpaKind && gv.Version != autoscalingv2.SchemeGroupVersion.Version {
		errs = append(errs, field.Invalid(apiVersionPath, ref.APIVersion,
			"a HorizontalPodAutoscaler target must use apiVersion autoscaling/v2"))
	}
	return errs
}

func validatePathSegment(value string, fldPath *field.Path) field.ErrorList {
	if value == "" {
		return field.ErrorList{field.Required(fldPath, "")}
	}
	var errs field.ErrorList
	for _, msg := range content.IsPathSegmentName(value) {
		errs = append(errs, field.Invalid(fldPath, value, msg))
	}
	return errs
}

// scalesBounds tells whether the rule sets minReplicas/maxReplicas of the
// target (a FederatedHPA or a HorizontalPodAutoscaler) rather than replicas.
func scalesBounds(ref autoscalingv2.CrossVersionObjectReference) bool {
	switch ref.APIVersion {
	case autoscalingv1alpha1.SchemeGroupVersion.String():
		return ref.Kind == federatedHPAKind
	case autoscalingv2.SchemeGroupVersion.String():
		return ref.Kind == hpaKind
	}
	return false
}

// validateRuleReplicas checks the values a rule applies: bounds for a
// FederatedHPA or HorizontalPodAutoscaler (targetReplicas is ignored there),
// replicas for anything else (bounds ignored).
func validateRuleReplicas(rule *autoscalingv1alpha1.CronFederatedHPARule, ref autoscalingv2.CrossVersionObjectReference, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	if isLeaderWorkerSet(ref) {
		return validateLeaderWorkerSetRule(rule, ref, fldPath)
	}
	if !scalesBounds(ref) {
		replicasPath := fldPath.Child("targetReplicas")
		switch {
		case rule.TargetReplicas == nil:
			errs = append(errs, field.Required(replicasPath,
				fmt.Sprintf("targetReplicas cannot be nil if you want to scale %s", ref.Kind)))
		case *rule.TargetReplicas < 0:
			errs = append(errs, field.Invalid(replicasPath, *rule.TargetReplicas,
				"targetReplicas should be larger than or equal to 0"))
		}
		return errs
	}

	minRep, maxRep := rule.TargetMinReplicas, rule.TargetMaxReplicas
	if minRep == nil && maxRep == nil {
		errs = append(errs, field.Required(fldPath.Child("targetMinReplicas"), fmt.Sprintf(
			"targetMinReplicas and targetMaxReplicas cannot be nil at the same time if you want to scale %s", ref.Kind)))
	}
	return append(errs, validateBounds(rule, fldPath)...)
}

// isLeaderWorkerSet tells a LeaderWorkerSet target, whose replicas a rule
// sets (targetReplicas), or the bounds of its spec.scalePolicy
// (targetMinReplicas/targetMaxReplicas, which the hpa-generator's HPA
// follows), or both.
func isLeaderWorkerSet(ref autoscalingv2.CrossVersionObjectReference) bool {
	return ref.Kind == "LeaderWorkerSet" && strings.HasPrefix(ref.APIVersion, "leaderworkerset.x-k8s.io/")
}

func validateLeaderWorkerSetRule(rule *autoscalingv1alpha1.CronFederatedHPARule, ref autoscalingv2.CrossVersionObjectReference, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	if rule.TargetReplicas == nil && rule.TargetMinReplicas == nil && rule.TargetMaxReplicas == nil {
		errs = append(errs, field.Required(fldPath.Child("targetReplicas"), fmt.Sprintf(
			"set targetReplicas (the replicas of the %s) or targetMinReplicas/targetMaxReplicas (the bounds of its spec.scalePolicy)", ref.Kind)))
	}
	if rule.TargetReplicas != nil && *rule.TargetReplicas < 0 {
		errs = append(errs, field.Invalid(fldPath.Child("targetReplicas"), *rule.TargetReplicas,
			"targetReplicas should be larger than or equal to 0"))
	}
	return append(errs, validateBounds(rule, fldPath)...)
}

// validateBounds checks targetMinReplicas and targetMaxReplicas where set.
func validateBounds(rule *autoscalingv1alpha1.CronFederatedHPARule, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	minRep, maxRep := rule.TargetMinReplicas, rule.TargetMaxReplicas
	minPath, maxPath := fldPath.Child("targetMinReplicas"), fldPath.Child("targetMaxReplicas")
	if minRep != nil && *minRep <= 0 {
		errs = append(errs, field.Invalid(minPath, *minRep, "targetMinReplicas should be larger than 0"))
	}
	if maxRep != nil && *maxRep <= 0 {
		errs = append(errs, field.Invalid(maxPath, *maxRep, "targetMaxReplicas should be larger than 0"))
	}
	if minRep != nil && maxRep != nil && *maxRep < *minRep {
		errs = append(errs, field.Invalid(maxPath, *maxRep, "targetMaxReplicas should be larger than or equal to targetMinReplicas"))
	}
	return errs
}
