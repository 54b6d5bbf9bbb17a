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

package v1

import (
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// +genclient
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:subresource:scale:specpath=.spec.replicas,statuspath=.status.replicas,selectorpath=.status.hpaPodSelector
// +kubebuilder:resource:path=leaderworkersets,scope=Namespaced,shortName=lws
// +kubebuilder:printcolumn:JSONPath=`.spec.replicas`,name=`REPLICAS`,type=integer
// +kubebuilder:printcolumn:JSONPath=`.status.readyReplicas`,name=`READY`,type=integer
// +kubebuilder:printcolumn:JSONPath=`.spec.scalePolicy.minReplicas`,name=`MIN`,type=integer,priority=1
// +kubebuilder:printcolumn:JSONPath=`.spec.scalePolicy.maxReplicas`,name=`MAX`,type=integer,priority=1
// +kubebuilder:printcolumn:JSONPath=`.metadata.creationTimestamp`,name=`AGE`,type=date

// LeaderWorkerSet deploys groups of pods, each a leader and its workers, as a
// unit of replication.
type LeaderWorkerSet struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec is the desired state of the LeaderWorkerSet.
	// +optional
	Spec LeaderWorkerSetSpec `json:"spec,omitempty"`

	// Status is the observed state of the LeaderWorkerSet.
	// +optional
	Status LeaderWorkerSetStatus `json:"status,omitempty"`
}

// LeaderWorkerSetSpec is the desired state of a LeaderWorkerSet.
type LeaderWorkerSetSpec struct {
	// Replicas is the number of groups (a leader and its workers) to run.
	// Defaults to 1.
	// +kubebuilder:default=1
	// +kubebuilder:validation:Minimum=0
	// +optional
	Replicas *int32 `json:"replicas,omitempty"`

	// LeaderWorkerTemplate describes the pods of one group.
	// +required
	LeaderWorkerTemplate LeaderWorkerTemplate `json:"leaderWorkerTemplate"`

	// RolloutStrategy is how groups are replaced when the templates change.
	// +kubebuilder:default={type: RollingUpdate, rollingUpdateConfiguration: {partition: 0, maxUnavailable: 1, maxSurge: 0}}
	// +optional
	RolloutStrategy RolloutStrategy `json:"rolloutStrategy,omitempty"`

	// StartupPolicy tells when the workers of a group are created: as soon as
	// the leader pod is created (LeaderCreated) or once it is ready
	// (LeaderReady).
	// +kubebuilder:default=LeaderCreated
	// +kubebuilder:validation:Enum={LeaderCreated,LeaderReady}
	// +optional
	StartupPolicy StartupPolicyType `json:"startupPolicy,omitempty"`

	// NetworkConfig configures the headless service of the groups.
	// +optional
	NetworkConfig *NetworkConfig `json:"networkConfig,omitempty"`

	// ScalePolicy asks scaleplane's hpa-generator for a HorizontalPodAutoscaler
	// that scales this LeaderWorkerSet by its groups. Without it, or with no
	// metrics, no HorizontalPodAutoscaler is kept.
	// +optional
	ScalePolicy *ScalePolicy `json:"scalePolicy,omitempty"`
}

// ScalePolicy describes the HorizontalPodAutoscaler the hpa-generator keeps for
// a LeaderWorkerSet (LWS KEP-213).
// +kubebuilder:validation:XValidation:rule="!has(self.minReplicas) || self.maxReplicas >= self.minReplicas",message="maxReplicas must be greater than or equal to minReplicas"
type ScalePolicy struct {
	// MinReplicas is the lower bound of the number of groups. Defaults to 1.
	// +kubebuilder:validation:Minimum=1
	// +optional
	MinReplicas *int32 `json:"minReplicas,omitempty"`

	// MaxReplicas is the upper bound of the number of groups. It must not be
	// smaller than minReplicas.
	// +kubebuilder:validation:Minimum=1
	// +required
	MaxReplicas int32 `json:"maxReplicas"`

	// Metrics are what the desired number of groups is computed from, as in a
	// HorizontalPodAutoscaler. Empty means no autoscaling: the generated
	// HorizontalPodAutoscaler is deleted.
	// +optional
	Metrics []autoscalingv2.MetricSpec `json:"metrics,omitempty"`

	// Behavior configures scaling up and down, as in a HorizontalPodAutoscaler.
	// +optional
	Behavior *autoscalingv2.HorizontalPodAutoscalerBehavior `json:"behavior,omitempty"`
}

// LeaderWorkerTemplate describes the pods of one group.
type LeaderWorkerTemplate struct {
	// LeaderTemplate is the template of the leader pod. Unset: the leader uses
	// the worker template.
	// +optional
	LeaderTemplate *corev1.PodTemplateSpec `json:"leaderTemplate,omitempty"`

	// WorkerTemplate is the template of the worker pods.
	// +required
	WorkerTemplate corev1.PodTemplateSpec `json:"workerTemplate"`

	// Size is the number of pods in a group, the leader included. Defaults to 1.
	// +kubebuilder:default=1
	// +kubebuilder:validation:Minimum=1
	// +optional
	Size *int32 `json:"size,omitempty"`

	// RestartPolicy tells what happens to a group when one of its pods
	// restarts.
	// +kubebuilder:default=RecreateGroupOnPodRestart
	// +kubebuilder:validation:Enum={RecreateGroupOnPodRestart,RecreateGroupAfterStart,None,Default}
	// +optional
	RestartPolicy RestartPolicyType `json:"restartPolicy,omitempty"`

	// SubGroupPolicy splits a group into subgroups for topology-aware
	// placement.
	// +optional
	SubGroupPolicy *SubGroupPolicy `json:"subGroupPolicy,omitempty"`

	// VolumeClaimTemplates are claims each pod of a group gets.
	// +optional
	VolumeClaimTemplates []corev1.PersistentVolumeClaim `json:"volumeClaimTemplates,omitempty"`
}

// RestartPolicyType tells what happens to a group when one of its pods restarts.
type RestartPolicyType string

// The restart policies of upstream LWS v1.
const (
	RecreateGroupOnPodRestart RestartPolicyType = "RecreateGroupOnPodRestart"
	RecreateGroupAfterStart   RestartPolicyType = "RecreateGroupAfterStart"
	NoneRestartPolicy         RestartPolicyType = "None"
	DefaultRestartPolicy      RestartPolicyType = "Default"
)

// SubGroupPolicyType tells whether the leader takes part in subgroups.
type SubGroupPolicyType string

// The subgroup policies of upstream LWS v1.
const (
	SubGroupPolicyTypeLeaderWorker   SubGroupPolicyType = "LeaderWorker"
	SubGroupPolicyTypeLeaderExcluded SubGroupPolicyType = "LeaderExcluded"
)

// SubGroupPolicy splits a group into subgroups.
type SubGroupPolicy struct {
	// Type tells whether the leader is part of the first subgroup.
	// +kubebuilder:default=LeaderWorker
	// +kubebuilder:validation:Enum={LeaderWorker,LeaderExcluded}
	// +optional
	Type *SubGroupPolicyType `json:"subGroupPolicyType,omitempty"`

	// SubGroupSize is the number of pods in a subgroup.
	// +kubebuilder:validation:Minimum=1
	// +optional
	SubGroupSize *int32 `json:"subGroupSize,omitempty"`
}

// RolloutStrategyType names a rollout strategy.
type RolloutStrategyType string

// RollingUpdateStrategyType replaces groups one batch at a time.
const RollingUpdateStrategyType RolloutStrategyType = "RollingUpdate"

// RolloutStrategy is how groups are replaced when the templates change.
type RolloutStrategy struct {
	// Type of the rollout. Only RollingUpdate is supported, and it is the
	// default. (Upstream requires the field; it is defaulted here because Go
	// clients serialize the non-pointer rolloutStrategy as {"type": ""} when
	// they leave it unset, which would otherwise be rejected.)
	// +kubebuilder:default=RollingUpdate
	// +kubebuilder:validation:Enum={RollingUpdate}
	// +optional
	Type RolloutStrategyType `json:"type,omitempty"`

	// RollingUpdateConfiguration configures a RollingUpdate rollout.
	// +optional
	RollingUpdateConfiguration *RollingUpdateConfiguration `json:"rollingUpdateConfiguration,omitempty"`
}

// RollingUpdateConfiguration configures a RollingUpdate rollout.
type RollingUpdateConfiguration struct {
	// Partition: groups with an index at or above it are updated.
	// +kubebuilder:default=0
	// +kubebuilder:validation:Minimum=0
	// +optional
	Partition *int32 `json:"partition,omitempty"`

	// MaxUnavailable is how many groups may be unavailable during the update.
	// +kubebuilder:validation:XIntOrString
	// +kubebuilder:default=1
	// +optional
	MaxUnavailable intstr.IntOrString `json:"maxUnavailable,omitempty"`

	// MaxSurge is how many extra groups may be created during the update.
	// +kubebuilder:validation:XIntOrString
	// +kubebuilder:default=0
	// +optional
	MaxSurge intstr.IntOrString `json:"maxSurge,omitempty"`
}

// StartupPolicyType tells when the workers of a group are created.
type StartupPolicyType string

// The startup policies of upstream LWS v1.
const (
	LeaderCreatedStartupPolicy StartupPolicyType = "LeaderCreated"
	LeaderReadyStartupPolicy   StartupPolicyType = "LeaderReady"
)

// SubdomainPolicy tells how many headless services the groups share.
type SubdomainPolicy string

// The subdomain policies of upstream LWS v1.
const (
	SubdomainShared           SubdomainPolicy = "Shared"
	SubdomainUniquePerReplica SubdomainPolicy = "UniquePerReplica"
)

// NetworkConfig configures the headless service of the groups.
type NetworkConfig struct {
	// SubdomainPolicy tells whether all groups share one subdomain.
	// +kubebuilder:validation:Enum={Shared,UniquePerReplica}
	// +optional
	SubdomainPolicy *SubdomainPolicy `json:"subdomainPolicy,omitempty"`
}

// LeaderWorkerSetStatus is the observed state of a LeaderWorkerSet.
type LeaderWorkerSetStatus struct {
	// Conditions track the state of the LeaderWorkerSet.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// ReadyReplicas is the number of groups whose pods are all ready.
	// +optional
	ReadyReplicas int32 `json:"readyReplicas,omitempty"`

	// UpdatedReplicas is the number of groups on the latest templates.
	// +optional
	UpdatedReplicas int32 `json:"updatedReplicas,omitempty"`

	// Replicas is the number of groups that exist.
	// +optional
	Replicas int32 `json:"replicas,omitempty"`

	// HPAPodSelector is the label selector of the leader pods, which a
	// HorizontalPodAutoscaler reads metrics from.
	// +optional
	HPAPodSelector string `json:"hpaPodSelector,omitempty"`

	// ObservedGeneration is the generation the status was computed for, as
	// LeaderWorkerSet v0.9 writes it. On karmada-apiserver the
	// LeaderWorkerSet interpreter aggregates it from the members; without
	// the field in the schema the API server would prune it, and Flux or
	// Argo CD would never see the template reconciled.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true

// LeaderWorkerSetList is a list of LeaderWorkerSets.
type LeaderWorkerSetList struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ListMeta `json:"metadata,omitempty"`

	// Items holds the LeaderWorkerSets.
	Items []LeaderWorkerSet `json:"items"`
}
