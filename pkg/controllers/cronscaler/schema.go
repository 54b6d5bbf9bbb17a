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

package cronscaler

import (
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	autoscalingv1alpha1 "github.com/scaleplane/scaleplane/pkg/apis/autoscaling/v1alpha1"
)

// CRDName is the name of the CronFederatedHPA CustomResourceDefinition, the
// same in scaleplane's and Karmada's installations.
const CRDName = "cronfederatedhpas.autoscaling.karmada.io"

// StoredFields says which of scaleplane's additions to Karmada's API the
// installed CronFederatedHPA CRD stores. Karmada's own CRD (the sidecar
// install) has neither, and the apiserver prunes them; the zero value, the
// safe assumption, is "neither". The cron-scaler never depends on them for
// correctness: the durable state it plans from is what both schemas store
// (each rule's histories and nextExecutionTime). It writes lastScheduleTime
// only where it is stored, so that a status that did not change is not
// written again, and the apiserver does not warn about an unknown field.
type StoredFields struct {
	// MaxDelaySeconds: spec.rules[].maxDelaySeconds.
	MaxDelaySeconds bool
	// LastScheduleTime: status.executionHistories[].lastScheduleTime.
	LastScheduleTime bool
}

// AllStoredFields is what scaleplane's own CRD stores.
var AllStoredFields = StoredFields{MaxDelaySeconds: true, LastScheduleTime: true}

// StoredFieldsFromCRD reads, from a CronFederatedHPA CRD, whether the schema
// of the served version the cron-scaler uses stores each added field. A field
// is stored when the schema declares it, or when an enclosing object keeps
// unknown fields (x-kubernetes-preserve-unknown-fields).
func StoredFieldsFromCRD(crd *unstructured.Unstructured) (StoredFields, error) {
	versions, _, err := unstructured.NestedSlice(crd.Object, "spec", "versions")
	if err != nil {
		return StoredFields{}, fmt.Errorf("reading spec.versions of CRD %s: %w", crd.GetName(), err)
	}
	for _, v := range versions {
		version, ok := v.(map[string]any)
		if !ok || version["name"] != autoscalingv1alpha1.SchemeGroupVersion.Version {
			continue
		}
		schema, ok, _ := unstructured.NestedMap(version, "schema", "openAPIV3Schema")
		if !ok {
			return StoredFields{}, fmt.Errorf("CRD %s version %s has no openAPIV3Schema", crd.GetName(), autoscalingv1alpha1.SchemeGroupVersion.Version)
		}
		return StoredFields{
			MaxDelaySeconds:  declares(schema, "spec", "rules", "[]", "maxDelaySeconds"),
			LastScheduleTime: declares(schema, "status", "executionHistories", "[]", "lastScheduleTime"),
		}, nil
	}
	return StoredFields{}, fmt.Errorf("CRD %s does not serve version %s", crd.GetName(), autoscalingv1alpha1.SchemeGroupVersion.Version)
}

// declares walks an OpenAPI v3 schema along path ("[]" steps into a list's
// items) and reports whether the last property is kept by the apiserver.
func declares(schema map[string]any, path ...string) bool {
	node := schema
	for _, step := range path {
		if preserve, _ := node["x-kubernetes-preserve-unknown-fields"].(bool); preserve {
			return true
		}
		var next map[string]any
		if step == "[]" {
			next, _ = node["items"].(map[string]any)
		} else {
			props, _ := node["properties"].(map[string]any)
			next, _ = props[step].(map[string]any)
		}
		if next == nil {
			return false
		}
		node = next
	}
	return true
}

func publishStoredFields(f StoredFields) {
	for field, stored := range map[string]bool{"maxDelaySeconds": f.MaxDelaySeconds, "lastScheduleTime": f.LastScheduleTime} {
		v := 0.0
		if stored {
			v = 1
		}
		schemaFieldStored.WithLabelValues(field).Set(v)
	}
}
