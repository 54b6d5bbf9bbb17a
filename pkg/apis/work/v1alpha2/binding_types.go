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

package v1alpha2

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// +genclient
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// ResourceBinding binds a resource template to the member clusters it is
// scheduled to (binding_types.go, v1.18.2). Karmada names it
// <template name>-<kind, lower case> (pkg/util/names/names.go,
// GenerateBindingName, ':' replaced by '.').
type ResourceBinding struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec is the binding.
	Spec ResourceBindingSpec `json:"spec"`
}

// ResourceBindingSpec is the part of a binding the resizer reads.
type ResourceBindingSpec struct {
	// Resource is the template the binding is for.
	Resource ObjectReference `json:"resource"`
	// Clusters are the clusters the scheduler placed the template on.
	// +optional
	Clusters []TargetCluster `json:"clusters,omitempty"`
}

// ObjectReference names the template.
type ObjectReference struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	// +optional
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name"`
	// +optional
	UID types.UID `json:"uid,omitempty"`
	// +optional
	ResourceVersion string `json:"resourceVersion,omitempty"`
}

// TargetCluster is one scheduled cluster.
type TargetCluster struct {
	// Name is the member cluster's name.
	Name string `json:"name"`
	// Replicas is the number of replicas placed there.
	// +optional
	Replicas int32 `json:"replicas,omitempty"`
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// ResourceBindingList is a list of ResourceBindings.
type ResourceBindingList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ResourceBinding `json:"items"`
}
