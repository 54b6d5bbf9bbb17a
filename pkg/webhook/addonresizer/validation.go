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

// Package addonresizer validates AddonResizers, so that the resizer never
// meets a spec it cannot act on: resources it does not manage, negative
// amounts, bounds that cannot hold (minAllowed above maxAllowed), a target
// kind it cannot patch.
package addonresizer

import (
	"context"
	"fmt"
	"slices"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/api/validate/content"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation/field"

	scaleplanev1alpha1 "github.com/scaleplane/scaleplane/pkg/apis/scaleplane/v1alpha1"
	"github.com/scaleplane/scaleplane/pkg/resizeestimate"
	"github.com/scaleplane/scaleplane/pkg/webhook/admission"
)

// Kind labels this webhook's logs and metrics.
const Kind = "AddonResizer"

var (
	targetKinds = []scaleplanev1alpha1.TargetKind{
		scaleplanev1alpha1.TargetKindDeployment,
		scaleplanev1alpha1.TargetKindStatefulSet,
		scaleplanev1alpha1.TargetKindDaemonSet,
	}
	resourceNames = []corev1.ResourceName{
		corev1.ResourceCPU, corev1.ResourceMemory, corev1.ResourceEphemeralStorage,
	}
	scalingModes = []scaleplanev1alpha1.ScalingMode{
		scaleplanev1alpha1.NodeProportional, scaleplanev1alpha1.ContainerProportional,
	}
	sources = []scaleplanev1alpha1.SizeSource{
		scaleplanev1alpha1.SourceAPIServer, scaleplanev1alpha1.SourceMetrics,
	}
	estimatorTypes = []scaleplanev1alpha1.EstimatorType{
		scaleplanev1alpha1.LinearEstimator, scaleplanev1alpha1.ExponentialEstimator,
	}
	updateModes = []scaleplanev1alpha1.UpdateMode{
		scaleplanev1alpha1.UpdateModeRollout, scaleplanev1alpha1.UpdateModeInPlace, scaleplanev1alpha1.UpdateModeOff,
	}
)

// validator checks that the quantities parse before decoding the object:
// a quantity that does not parse would otherwise fail the whole decode, and
// the user would get a JSON error instead of the field at fault.
type validator struct {
	typed admission.ObjectValidator[scaleplanev1alpha1.AddonResizer]
}

// NewValidator returns the admission validator of AddonResizers. Updates that
// leave the spec alone are not judged.
func NewValidator() admission.Validator {
	return &validator{typed: admission.ObjectValidator[scaleplanev1alpha1.AddonResizer]{
		Rules: func(_ context.Context, ar *scaleplanev1alpha1.AddonResizer) admission.Result {
			return admission.Result{Errs: ValidateAddonResizer(ar)}
		},
		Judged: func(ar *scaleplanev1alpha1.AddonResizer) any { return ar.Spec },
	}}
}

func (v *validator) Validate(ctx context.Context, req *admissionv1.AdmissionRequest) (admission.Result, error) {
	if req.Operation == admissionv1.Create || req.Operation == admissionv1.Update {
		errs, err := validateQuantitiesParse(req.Object.Raw)
		if err != nil {
			return admission.Result{}, fmt.Errorf("decoding object: %w", err)
		}
		if len(errs) > 0 {
			return admission.Result{Errs: errs}, nil
		}
	}
	return v.typed.Validate(ctx, req)
}

// rawResources is the part of an AddonResizer that holds quantities, with the
// quantities left as raw JSON.
type rawResources struct {
	Spec struct {
		Resources []struct {
			Base         any `json:"base"`
			ExtraPerUnit any `json:"extraPerUnit"`
			MinAllowed   any `json:"minAllowed"`
			MaxAllowed   any `json:"maxAllowed"`
		} `json:"resources"`
	} `json:"spec"`
}

func validateQuantitiesParse(raw []byte) (field.ErrorList, error) {
	var obj rawResources
	if err := utiljson.Unmarshal(raw, &obj); err != nil {
		return nil, err
	}
	var errs field.ErrorList
	fldPath := field.NewPath("spec", "resources")
	for i, r := range obj.Spec.Resources {
		errs = append(errs, validateQuantityParses(r.Base, fldPath.Index(i).Child("base"))...)
		errs = append(errs, validateQuantityParses(r.ExtraPerUnit, fldPath.Index(i).Child("extraPerUnit"))...)
		errs = append(errs, validateQuantityParses(r.MinAllowed, fldPath.Index(i).Child("minAllowed"))...)
		errs = append(errs, validateQuantityParses(r.MaxAllowed, fldPath.Index(i).Child("maxAllowed"))...)
	}
	return errs, nil
}

// validateQuantityParses accepts what resource.Quantity decodes: a string in
// quantity syntax, or a number.
func validateQuantityParses(v any, fldPath *field.Path) field.ErrorList {
	switch q := v.(type) {
	case nil, int64, float64:
		return nil
	case string:
		if _, err := resource.ParseQuantity(q); err != nil {
			return field.ErrorList{field.Invalid(fldPath, q, err.Error())}
		}
		return nil
	default:
		return field.ErrorList{field.Invalid(fldPath, v, "must be a quantity, such as 100m or 64Mi")}
	}
}

// ValidateAddonResizer returns the problems of ar's spec.
func ValidateAddonResizer(ar *scaleplanev1alpha1.AddonResizer) field.ErrorList {
	spec := &ar.Spec
	fldPath := field.NewPath("spec")
	var errs field.ErrorList
	errs = append(errs, validateTargetRef(spec.TargetRef, fldPath.Child("targetRef"))...)
	errs = append(errs, validateContainerName(spec.ContainerName, fldPath.Child("containerName"))...)
	errs = append(errs, validateResources(spec.Resources, fldPath.Child("resources"))...)
	errs = append(errs, validateEnum(spec.ScalingMode, scalingModes, fldPath.Child("scalingMode"))...)
	errs = append(errs, validateEnum(spec.Source, sources, fldPath.Child("source"))...)
	errs = append(errs, validateEstimator(spec.Estimator, fldPath.Child("estimator"))...)
	if spec.Threshold < 0 || spec.Threshold > 100 {
		errs = append(errs, field.Invalid(fldPath.Child("threshold"), spec.Threshold, "must be between 0 and 100 (percent)"))
	}
	if d := spec.ScaleUpDelay; d != nil && d.Duration < 0 {
		errs = append(errs, field.Invalid(fldPath.Child("scaleUpDelay"), d.Duration.String(), "must not be negative"))
	}
	if d := spec.ScaleDownDelay; d != nil && d.Duration < 0 {
		errs = append(errs, field.Invalid(fldPath.Child("scaleDownDelay"), d.Duration.String(), "must not be negative"))
	}
	errs = append(errs, validateUpdateMode(spec, fldPath.Child("updateMode"))...)
	return errs
}

// validateUpdateMode rejects InPlace for an AddonResizer that sizes
// ephemeral-storage: the API server's pods/resize changes cpu and memory
// only, so that resource could never reach a running pod. The CRD's rule
// says the same, for clusters without the webhook.
func validateUpdateMode(spec *scaleplanev1alpha1.AddonResizerSpec, fldPath *field.Path) field.ErrorList {
	if errs := validateEnum(spec.UpdateMode, updateModes, fldPath); len(errs) > 0 {
		return errs
	}
	if spec.UpdateMode != scaleplanev1alpha1.UpdateModeInPlace {
		return nil
	}
	for _, r := range spec.Resources {
		if r.Name == corev1.ResourceEphemeralStorage {
			return field.ErrorList{field.Invalid(fldPath, spec.UpdateMode, "ephemeral-storage cannot be resized in place (pods/resize changes cpu and memory only); use updateMode Rollout")}
		}
	}
	return nil
}

func validateTargetRef(ref scaleplanev1alpha1.TargetReference, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	if ref.Kind == "" {
		errs = append(errs, field.Required(fldPath.Child("kind"), "must be Deployment, StatefulSet or DaemonSet"))
	} else if !slices.Contains(targetKinds, ref.Kind) {
		errs = append(errs, field.NotSupported(fldPath.Child("kind"), ref.Kind, targetKinds))
	}
	if ref.Name == "" {
		errs = append(errs, field.Required(fldPath.Child("name"), "must name the workload"))
	} else {
		for _, msg := range content.IsDNS1123Subdomain(ref.Name) {
			errs = append(errs, field.Invalid(fldPath.Child("name"), ref.Name, msg))
		}
	}
	return errs
}

func validateContainerName(name string, fldPath *field.Path) field.ErrorList {
	if name == "" {
		return field.ErrorList{field.Required(fldPath, "must name the container to resize")}
	}
	var errs field.ErrorList
	for _, msg := range content.IsDNS1123Label(name) {
		errs = append(errs, field.Invalid(fldPath, name, msg))
	}
	return errs
}

func validateResources(resources []scaleplanev1alpha1.ResourceScaling, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	if len(resources) == 0 {
		errs = append(errs, field.Required(fldPath, "must list at least one of cpu, memory, ephemeral-storage"))
	}
	seen := sets.New[corev1.ResourceName]()
	for i, r := range resources {
		idxPath := fldPath.Index(i)
		switch {
		case !slices.Contains(resourceNames, r.Name):
			errs = append(errs, field.NotSupported(idxPath.Child("name"), r.Name, resourceNames))
		case seen.Has(r.Name):
			errs = append(errs, field.Duplicate(idxPath.Child("name"), r.Name))
		}
		seen.Insert(r.Name)
		errs = append(errs, validateNonNegative(r.Base, idxPath.Child("base"))...)
		errs = append(errs, validateNonNegative(r.ExtraPerUnit, idxPath.Child("extraPerUnit"))...)
		errs = append(errs, validateBounds(r, idxPath)...)
	}
	return errs
}

// validateBounds checks a resource's minAllowed and maxAllowed, which bound
// its estimate as the Vertical Pod Autoscaler's container policy bounds its
// recommendation: not negative, at the precision estimates have (whole
// millicores for cpu, whole bytes otherwise, or the bound could never be
// met exactly), and minAllowed <= maxAllowed (the VPA's admission refuses
// a max below the min too). They are fields of the resource's own entry in
// spec.resources, so a bound is always for a resource the AddonResizer
// sizes.
func validateBounds(r scaleplanev1alpha1.ResourceScaling, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, b := range []struct {
		q    *resource.Quantity
		name string
	}{{r.MinAllowed, "minAllowed"}, {r.MaxAllowed, "maxAllowed"}} {
		if b.q == nil {
			continue
		}
		if neg := validateNonNegative(*b.q, fldPath.Child(b.name)); len(neg) > 0 {
			errs = append(errs, neg...)
			continue
		}
		if !resizeestimate.Precise(r.Name, *b.q) {
			unit := "whole bytes"
			if r.Name == corev1.ResourceCPU {
				unit = "whole millicores (1m)"
			}
			errs = append(errs, field.Invalid(fldPath.Child(b.name), b.q.String(), fmt.Sprintf("must be in %s, as %s estimates are rounded to them", unit, r.Name)))
		}
	}
	if r.MinAllowed != nil && r.MaxAllowed != nil && r.MaxAllowed.Cmp(*r.MinAllowed) < 0 {
		errs = append(errs, field.Invalid(fldPath.Child("maxAllowed"), r.MaxAllowed.String(),
			fmt.Sprintf("must be greater than or equal to minAllowed (%s)", r.MinAllowed.String())))
	}
	return errs
}

func validateNonNegative(q resource.Quantity, fldPath *field.Path) field.ErrorList {
	if q.Sign() < 0 {
		return field.ErrorList{field.Invalid(fldPath, q.String(), "must be greater than or equal to 0")}
	}
	return nil
}

func validateEstimator(e scaleplanev1alpha1.Estimator, fldPath *field.Path) field.ErrorList {
	errs := validateEnum(e.Type, estimatorTypes, fldPath.Child("type"))
	if e.MinClusterSize < 1 {
		errs = append(errs, field.Invalid(fldPath.Child("minClusterSize"), e.MinClusterSize, "must be at least 1"))
	}
	return errs
}

// validateEnum accepts one of allowed, or empty: the CRD defaults these
// fields before admission, so empty only reaches here from a client that
// skipped the defaults, and means the default.
func validateEnum[T ~string](v T, allowed []T, fldPath *field.Path) field.ErrorList {
	if v == "" || slices.Contains(allowed, v) {
		return nil
	}
	return field.ErrorList{field.NotSupported(fldPath, v, allowed)}
}
