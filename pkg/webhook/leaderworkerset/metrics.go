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
	"fmt"
	"slices"
	"strings"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/validate/content"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// sourceField is the field of a MetricSpec that holds the source of each
// metric type.
var sourceField = map[autoscalingv2.MetricSourceType]string{
	autoscalingv2.ObjectMetricSourceType:            "object",
	autoscalingv2.PodsMetricSourceType:              "pods",
	autoscalingv2.ResourceMetricSourceType:          "resource",
	autoscalingv2.ContainerResourceMetricSourceType: "containerResource",
	autoscalingv2.ExternalMetricSourceType:          "external",
}

var metricSourceTypes = []autoscalingv2.MetricSourceType{
	autoscalingv2.ContainerResourceMetricSourceType,
	autoscalingv2.ExternalMetricSourceType,
	autoscalingv2.ObjectMetricSourceType,
	autoscalingv2.PodsMetricSourceType,
	autoscalingv2.ResourceMetricSourceType,
}

func (r *result) validateMetrics(metrics []autoscalingv2.MetricSpec, fldPath *field.Path) {
	for i := range metrics {
		r.validateMetric(&metrics[i], fldPath.Index(i))
	}
}

// validateMetric checks that the metric has a known type, that exactly the
// source of that type is set, and then that source.
func (r *result) validateMetric(m *autoscalingv2.MetricSpec, fldPath *field.Path) {
	want, known := sourceField[m.Type]
	switch {
	case m.Type == "":
		r.errs = append(r.errs, field.Required(fldPath.Child("type"), "must name the metric source type"))
	case !known:
		r.errs = append(r.errs, field.NotSupported(fldPath.Child("type"), m.Type, metricSourceTypes))
	}

	set := setSources(m)
	for _, name := range set {
		if name != want {
			r.errs = append(r.errs, field.Forbidden(fldPath.Child(name),
				fmt.Sprintf("must not be set when type is %q: set only the source of the metric's type", m.Type)))
		}
	}
	if known && !slices.Contains(set, want) {
		r.errs = append(r.errs, field.Required(fldPath.Child(want),
			fmt.Sprintf("must be set when type is %q", m.Type)))
	}
	// Only a metric with a single source is looked into: with several, which
	// one was meant is unclear, and the errors above already say so.
	if len(set) != 1 {
		return
	}
	switch {
	case m.Object != nil:
		r.validateObjectSource(m.Object, fldPath.Child("object"))
	case m.Pods != nil:
		r.validatePodsSource(m.Pods, fldPath.Child("pods"))
	case m.Resource != nil:
		r.validateResourceSource(m.Resource, fldPath.Child("resource"))
	case m.ContainerResource != nil:
		r.validateContainerResourceSource(m.ContainerResource, fldPath.Child("containerResource"))
	case m.External != nil:
		r.validateExternalSource(m.External, fldPath.Child("external"))
	}
}

// setSources lists the source fields of m that are set.
func setSources(m *autoscalingv2.MetricSpec) []string {
	var set []string
	if m.Object != nil {
		set = append(set, "object")
	}
	if m.Pods != nil {
		set = append(set, "pods")
	}
	if m.Resource != nil {
		set = append(set, "resource")
	}
	if m.ContainerResource != nil {
		set = append(set, "containerResource")
	}
	if m.External != nil {
		set = append(set, "external")
	}
	return set
}

func (r *result) validateObjectSource(src *autoscalingv2.ObjectMetricSource, fldPath *field.Path) {
	r.errs = append(r.errs, validateDescribedObject(src.DescribedObject, fldPath.Child("describedObject"))...)
	r.errs = append(r.errs, validateMetricIdentifier(src.Metric, fldPath.Child("metric"))...)
	r.validateTarget(src.Target, fldPath.Child("target"))
	if src.Target.Value == nil && src.Target.AverageValue == nil {
		r.errs = append(r.errs, field.Required(fldPath.Child("target", "averageValue"),
			"an object metric needs a target value or averageValue"))
	}
}

func (r *result) validatePodsSource(src *autoscalingv2.PodsMetricSource, fldPath *field.Path) {
	r.errs = append(r.errs, validateMetricIdentifier(src.Metric, fldPath.Child("metric"))...)
	r.validateTarget(src.Target, fldPath.Child("target"))
	if src.Target.AverageValue == nil {
		r.errs = append(r.errs, field.Required(fldPath.Child("target", "averageValue"),
			"a pods metric needs a target averageValue"))
	}
}

func (r *result) validateExternalSource(src *autoscalingv2.ExternalMetricSource, fldPath *field.Path) {
	r.errs = append(r.errs, validateMetricIdentifier(src.Metric, fldPath.Child("metric"))...)
	r.validateTarget(src.Target, fldPath.Child("target"))
	switch {
	case src.Target.Value == nil && src.Target.AverageValue == nil:
		r.errs = append(r.errs, field.Required(fldPath.Child("target", "averageValue"),
			"an external metric needs a target value or a per-pod averageValue"))
	case src.Target.Value != nil && src.Target.AverageValue != nil:
		r.errs = append(r.errs, field.Forbidden(fldPath.Child("target", "value"),
			"an external metric takes a target value or a per-pod averageValue, not both"))
	}
}

func (r *result) validateResourceSource(src *autoscalingv2.ResourceMetricSource, fldPath *field.Path) {
	if src.Name == "" {
		r.errs = append(r.errs, field.Required(fldPath.Child("name"), "must name a resource"))
	} else {
		r.errs = append(r.errs, validateResourceName(src.Name, fldPath.Child("name"))...)
	}
	r.validateTarget(src.Target, fldPath.Child("target"))
	r.errs = append(r.errs, validateResourceTarget(src.Target, fldPath.Child("target"))...)
}

func (r *result) validateContainerResourceSource(src *autoscalingv2.ContainerResourceMetricSource, fldPath *field.Path) {
	if src.Name == "" {
		r.errs = append(r.errs, field.Required(fldPath.Child("name"), "must name a resource"))
	} else {
		r.errs = append(r.errs, validateResourceName(src.Name, fldPath.Child("name"))...)
	}
	if src.Container == "" {
		r.errs = append(r.errs, field.Required(fldPath.Child("container"), "must name a container"))
	} else {
		for _, msg := range content.IsDNS1123Label(src.Container) {
			r.errs = append(r.errs, field.Invalid(fldPath.Child("container"), src.Container, msg))
		}
	}
	r.validateTarget(src.Target, fldPath.Child("target"))
	r.errs = append(r.errs, validateResourceTarget(src.Target, fldPath.Child("target"))...)
}

// validateResourceTarget: a resource metric is averaged over pods, as a
// utilization or as a raw value, exactly one of them.
func validateResourceTarget(t autoscalingv2.MetricTarget, fldPath *field.Path) field.ErrorList {
	switch {
	case t.AverageUtilization == nil && t.AverageValue == nil:
		return field.ErrorList{field.Required(fldPath.Child("averageUtilization"),
			"a resource metric needs a target averageUtilization or averageValue")}
	case t.AverageUtilization != nil && t.AverageValue != nil:
		return field.ErrorList{field.Forbidden(fldPath.Child("averageValue"),
			"a resource metric takes a target averageUtilization or averageValue, not both")}
	}
	return nil
}

var targetTypes = []autoscalingv2.MetricTargetType{
	autoscalingv2.UtilizationMetricType,
	autoscalingv2.ValueMetricType,
	autoscalingv2.AverageValueMetricType,
}

// validateTarget checks what every metric target must satisfy. The HPA
// controller reads the value fields, not the type, so a type that does not
// match the value set is accepted by the apiserver and only warned about here.
func (r *result) validateTarget(t autoscalingv2.MetricTarget, fldPath *field.Path) {
	switch t.Type {
	case "":
		r.errs = append(r.errs, field.Required(fldPath.Child("type"), "must name the target type"))
	case autoscalingv2.UtilizationMetricType, autoscalingv2.ValueMetricType, autoscalingv2.AverageValueMetricType:
		if name, ok := typeField(t); !ok {
			r.warn(fldPath.Child("type"), fmt.Sprintf("type %s expects %s to be set", t.Type, name))
		}
	default:
		r.errs = append(r.errs, field.NotSupported(fldPath.Child("type"), t.Type, targetTypes))
	}
	if t.Value != nil && t.Value.Sign() <= 0 {
		r.errs = append(r.errs, field.Invalid(fldPath.Child("value"), t.Value.String(), "must be greater than 0"))
	}
	if t.AverageValue != nil && t.AverageValue.Sign() <= 0 {
		r.errs = append(r.errs, field.Invalid(fldPath.Child("averageValue"), t.AverageValue.String(), "must be greater than 0"))
	}
	if t.AverageUtilization != nil && *t.AverageUtilization < 1 {
		r.errs = append(r.errs, field.Invalid(fldPath.Child("averageUtilization"), *t.AverageUtilization, "must be greater than 0"))
	}
}

// typeField returns the value field that the target's type names, and whether
// it is set.
func typeField(t autoscalingv2.MetricTarget) (string, bool) {
	switch t.Type {
	case autoscalingv2.UtilizationMetricType:
		return "averageUtilization", t.AverageUtilization != nil
	case autoscalingv2.ValueMetricType:
		return "value", t.Value != nil
	default:
		return "averageValue", t.AverageValue != nil
	}
}

// validateMetricIdentifier checks a metric's name, which the metrics APIs take
// as a URL path segment, and its selector. kube-apiserver does not check the
// selector, but the HPA controller cannot use one that does not parse, and
// would only say so in the HPA's status.
func validateMetricIdentifier(id autoscalingv2.MetricIdentifier, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	if id.Name == "" {
		errs = append(errs, field.Required(fldPath.Child("name"), "must name the metric"))
	} else {
		for _, msg := range content.IsPathSegmentName(id.Name) {
			errs = append(errs, field.Invalid(fldPath.Child("name"), id.Name, msg))
		}
	}
	if id.Selector != nil {
		errs = append(errs, metav1validation.ValidateLabelSelector(id.Selector,
			metav1validation.LabelSelectorValidationOptions{}, fldPath.Child("selector"))...)
	}
	return errs
}

// validateDescribedObject checks the object an object metric describes. Its
// apiVersion may leave out the group (core objects), but must parse.
func validateDescribedObject(ref autoscalingv2.CrossVersionObjectReference, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	errs = append(errs, validatePathSegment(ref.Kind, fldPath.Child("kind"))...)
	errs = append(errs, validatePathSegment(ref.Name, fldPath.Child("name"))...)
	if _, err := schema.ParseGroupVersion(ref.APIVersion); err != nil {
		errs = append(errs, field.Invalid(fldPath.Child("apiVersion"), ref.APIVersion, err.Error()))
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

// standardContainerResources are the resources a container requests by a bare
// name; hugepages-<size> are the others.
var standardContainerResources = []corev1.ResourceName{
	corev1.ResourceCPU, corev1.ResourceMemory, corev1.ResourceEphemeralStorage,
}

// validateResourceName checks that name is a resource a container can
// request: a standard one, or an extended resource (example.com/gpu). For
// Resource metrics kube-apiserver only requires a name; an unknown one would
// never get metrics, so it is rejected here.
func validateResourceName(name corev1.ResourceName, fldPath *field.Path) field.ErrorList {
	s := string(name)
	if msgs := content.IsLabelKey(s); len(msgs) > 0 {
		var errs field.ErrorList
		for _, msg := range msgs {
			errs = append(errs, field.Invalid(fldPath, s, msg))
		}
		return errs
	}
	domain, _, qualified := strings.Cut(s, "/")
	switch {
	case !qualified:
		if !slices.Contains(standardContainerResources, name) && !strings.HasPrefix(s, corev1.ResourceHugePagesPrefix) {
			return field.ErrorList{field.Invalid(fldPath, s,
				"must be a standard container resource (cpu, memory, ephemeral-storage, hugepages-<size>) or an extended resource name")}
		}
	case domain == "kubernetes.io" || strings.HasSuffix(domain, ".kubernetes.io"):
		// Native resources are kubernetes.io's to define.
	case strings.HasPrefix(s, corev1.DefaultResourceRequestsPrefix) || len(content.IsLabelKey(corev1.DefaultResourceRequestsPrefix+s)) > 0:
		return field.ErrorList{field.Invalid(fldPath, s, "is not a valid extended resource name")}
	}
	return nil
}
