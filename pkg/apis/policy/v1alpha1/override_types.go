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

package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// +genclient
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// OverridePolicy tells Karmada how to change a resource template for some
// member clusters when it propagates it (override_types.go, v1.18.2).
type OverridePolicy struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec is the policy.
	Spec OverrideSpec `json:"spec"`
}

// OverrideSpec is the spec of an OverridePolicy. TargetCluster and Overriders
// are Karmada's deprecated single-rule form, read only to detect someone
// else's policy; Karmada uses them when OverrideRules is empty.
type OverrideSpec struct {
	// ResourceSelectors restricts the resources the policy applies to; empty
	// selects every resource in the policy's namespace.
	// +optional
	ResourceSelectors []ResourceSelector `json:"resourceSelectors,omitempty"`

	// OverrideRules are applied in order, each to the clusters it targets.
	// +optional
	OverrideRules []RuleWithCluster `json:"overrideRules,omitempty"`

	// TargetCluster is the deprecated single rule's clusters.
	// +optional
	TargetCluster *ClusterAffinity `json:"targetCluster,omitempty"`

	// Overriders is the deprecated single rule's overriders. Not omitempty,
	// as in Karmada: it is always serialized.
	Overriders Overriders `json:"overriders"`
}

// ResourceSelector selects resources (propagation_types.go, v1.18.2).
type ResourceSelector struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	// +optional
	Namespace string `json:"namespace,omitempty"`
	// +optional
	Name string `json:"name,omitempty"`
	// LabelSelector is ignored when Name is set.
	// +optional
	LabelSelector *metav1.LabelSelector `json:"labelSelector,omitempty"`
}

// RuleWithCluster is one override rule: its clusters and its overriders.
type RuleWithCluster struct {
	// TargetCluster selects the clusters; nil selects all.
	// +optional
	TargetCluster *ClusterAffinity `json:"targetCluster,omitempty"`
	// Overriders change the template for those clusters.
	Overriders Overriders `json:"overriders"`
}

// ClusterAffinity selects member clusters (propagation_types.go, v1.18.2;
// the fieldSelector is left out: the resizer writes clusterNames only).
type ClusterAffinity struct {
	// +optional
	LabelSelector *metav1.LabelSelector `json:"labelSelector,omitempty"`
	// +optional
	ClusterNames []string `json:"clusterNames,omitempty"`
	// +optional
	ExcludeClusters []string `json:"exclude,omitempty"`
}

// Overriders are a rule's changes. Karmada applies them in the order image,
// command, args, labels, annotations, fieldOverrider, and plaintext last
// (pkg/util/overridemanager/overridemanager.go, applyPolicyOverriders,
// v1.18.2). Only the two kinds that can reach a container's resources are
// declared.
type Overriders struct {
	// Plaintext are JSON-patch operations on the template.
	// +optional
	Plaintext []PlaintextOverrider `json:"plaintext,omitempty"`
	// FieldOverrider patches JSON or YAML held in a string field.
	// +optional
	FieldOverrider []FieldOverrider `json:"fieldOverrider,omitempty"`
}

// PlaintextOverrider is one JSON-patch operation (RFC 6902).
type PlaintextOverrider struct {
	// Path is a JSON pointer into the template.
	Path string `json:"path"`
	// Operator is add, remove or replace.
	Operator OverriderOperator `json:"operator"`
	// Value is the operation's value. Karmada declares it as
	// apiextensions/v1 JSON; RawExtension marshals the same way (the raw
	// bytes, or null) without that module.
	// +optional
	Value runtime.RawExtension `json:"value,omitempty"`
}

// FieldOverrider patches a field that holds JSON or YAML text.
type FieldOverrider struct {
	// FieldPath is a JSON pointer to the field.
	FieldPath string `json:"fieldPath"`
}

// OverriderOperator is a JSON-patch operation.
type OverriderOperator string

// The operators Karmada accepts.
const (
	OverriderOpAdd     OverriderOperator = "add"
	OverriderOpRemove  OverriderOperator = "remove"
	OverriderOpReplace OverriderOperator = "replace"
)

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// OverridePolicyList is a list of OverridePolicies.
type OverridePolicyList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []OverridePolicy `json:"items"`
}
