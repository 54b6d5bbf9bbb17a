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
)

// +genclient
// +genclient:nonNamespaced
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// Cluster is a Karmada member cluster (types.go, v1.18.2). Only its status
// is declared: the resizer reads how many nodes it has and whether Karmada
// hears from it.
type Cluster struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Status is what Karmada's cluster status controller last observed.
	// +optional
	Status ClusterStatus `json:"status,omitempty"`
}

// ClusterConditionReady is True while the member is healthy and Karmada's
// cluster status controller hears from it.
const ClusterConditionReady = "Ready"

// ClusterStatus is a member cluster's observed state.
type ClusterStatus struct {
	// KubernetesVersion is the member's version.
	// +optional
	KubernetesVersion string `json:"kubernetesVersion,omitempty"`
	// Conditions are the member's conditions (Ready, CompleteAPIEnablements).
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// NodeSummary counts the member's nodes.
	// +optional
	NodeSummary *NodeSummary `json:"nodeSummary,omitempty"`
}

// NodeSummary counts a member cluster's nodes.
type NodeSummary struct {
	// TotalNum is the number of nodes.
	// +optional
	TotalNum int32 `json:"totalNum,omitempty"`
	// ReadyNum is the number of Ready nodes.
	// +optional
	ReadyNum int32 `json:"readyNum,omitempty"`
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// ClusterList is a list of Clusters.
type ClusterList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Cluster `json:"items"`
}
