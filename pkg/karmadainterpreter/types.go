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

package karmadainterpreter

import (
	"encoding/json"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The shapes below are those of Karmada's API (v1.18.2), with the same JSON
// field names, since the Lua sees them through JSON: work/v1alpha2
// ReplicaRequirements, NodeClaim and AggregatedStatusItem, config/v1alpha1
// DependentObjectReference and ResourceInterpreterCustomization.

// ReplicaRequirements is what one replica needs (work/v1alpha2).
type ReplicaRequirements struct {
	NodeClaim         *NodeClaim          `json:"nodeClaim,omitempty"`
	ResourceRequest   corev1.ResourceList `json:"resourceRequest,omitempty"`
	Namespace         string              `json:"namespace,omitempty"`
	PriorityClassName string              `json:"priorityClassName,omitempty"`
}

// NodeClaim is where one replica may run (work/v1alpha2).
type NodeClaim struct {
	HardNodeAffinity *corev1.NodeSelector `json:"hardNodeAffinity,omitempty"`
	NodeSelector     map[string]string    `json:"nodeSelector,omitempty"`
	Tolerations      []corev1.Toleration  `json:"tolerations,omitempty"`
}

// DependentObjectReference names an object a resource depends on
// (config/v1alpha1).
type DependentObjectReference struct {
	APIVersion    string                `json:"apiVersion"`
	Kind          string                `json:"kind"`
	Namespace     string                `json:"namespace,omitempty"`
	Name          string                `json:"name,omitempty"`
	LabelSelector *metav1.LabelSelector `json:"labelSelector,omitempty"`
}

// AggregatedStatusItem is one member cluster's reflected status
// (work/v1alpha2).
type AggregatedStatusItem struct {
	ClusterName    string          `json:"clusterName"`
	Status         json.RawMessage `json:"status,omitempty"`
	Applied        bool            `json:"applied,omitempty"`
	AppliedMessage string          `json:"appliedMessage,omitempty"`
	Health         string          `json:"health,omitempty"`
}

// Customization is the part of a ResourceInterpreterCustomization
// (config/v1alpha1) that says what it interprets and how.
type Customization struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name string `json:"name"`
	} `json:"metadata"`
	Spec struct {
		Target struct {
			APIVersion string `json:"apiVersion"`
			Kind       string `json:"kind"`
		} `json:"target"`
		Customizations struct {
			Retention                *LuaScript `json:"retention,omitempty"`
			ReplicaResource          *LuaScript `json:"replicaResource,omitempty"`
			ComponentResource        *LuaScript `json:"componentResource,omitempty"`
			ReplicaRevision          *LuaScript `json:"replicaRevision,omitempty"`
			StatusReflection         *LuaScript `json:"statusReflection,omitempty"`
			StatusAggregation        *LuaScript `json:"statusAggregation,omitempty"`
			HealthInterpretation     *LuaScript `json:"healthInterpretation,omitempty"`
			DependencyInterpretation *LuaScript `json:"dependencyInterpretation,omitempty"`
		} `json:"customizations"`
	} `json:"spec"`
}

// LuaScript holds one operation's script.
type LuaScript struct {
	LuaScript string `json:"luaScript"`
}
