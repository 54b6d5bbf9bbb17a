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
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// +genclient
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:path=addonresizers,scope=Namespaced,shortName=ar
// +kubebuilder:printcolumn:JSONPath=`.spec.targetRef.kind`,name=`TARGET-KIND`,type=string
// +kubebuilder:printcolumn:JSONPath=`.spec.targetRef.name`,name=`TARGET`,type=string
// +kubebuilder:printcolumn:JSONPath=`.spec.containerName`,name=`CONTAINER`,type=string,priority=1
// +kubebuilder:printcolumn:JSONPath=`.spec.scalingMode`,name=`MODE`,type=string
// +kubebuilder:printcolumn:JSONPath=`.spec.updateMode`,name=`UPDATE-MODE`,type=string
// +kubebuilder:printcolumn:JSONPath=`.status.federation`,name=`FEDERATION`,type=string,priority=1
// +kubebuilder:printcolumn:JSONPath=`.status.clusterSize`,name=`CLUSTER-SIZE`,type=integer
// +kubebuilder:printcolumn:JSONPath=`.status.memberClusters`,name=`CLUSTERS`,type=integer
// +kubebuilder:printcolumn:JSONPath=`.status.sizedClusters`,name=`SIZED`,type=integer
// +kubebuilder:printcolumn:JSONPath=`.status.conditions[?(@.type=="UpToDate")].status`,name=`UP-TO-DATE`,type=string
// +kubebuilder:printcolumn:JSONPath=`.status.recommendation.requests.cpu`,name=`CPU`,type=string,priority=1
// +kubebuilder:printcolumn:JSONPath=`.status.recommendation.requests.memory`,name=`MEM`,type=string,priority=1
// +kubebuilder:printcolumn:JSONPath=`.status.lastChangeTime`,name=`LAST-CHANGE`,type=date
// +kubebuilder:printcolumn:JSONPath=`.metadata.creationTimestamp`,name=`AGE`,type=date

// AddonResizer sizes one container of an add-on (a Deployment, StatefulSet or
// DaemonSet) in proportion to the cluster: its node count, or its container
// count.
type AddonResizer struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec is the desired behaviour of the AddonResizer.
	// +required
	Spec AddonResizerSpec `json:"spec"`

	// Status is what the resizer last observed and recommended.
	// +optional
	Status AddonResizerStatus `json:"status,omitempty"`
}

// AddonResizerSpec is the desired behaviour of an AddonResizer.
// +kubebuilder:validation:XValidation:rule="!has(self.updateMode) || self.updateMode != 'InPlace' || self.resources.all(r, r.name != 'ephemeral-storage')",message="ephemeral-storage cannot be resized in place (pods/resize changes cpu and memory only); use updateMode Rollout",fieldPath=".updateMode"
type AddonResizerSpec struct {
	// TargetRef names the workload, in the AddonResizer's namespace, whose
	// container is resized.
	// +required
	TargetRef TargetReference `json:"targetRef"`

	// ContainerName is the name of the container to resize.
	// +kubebuilder:validation:MinLength=1
	// +required
	ContainerName string `json:"containerName"`

	// Resources lists, per resource, the base amount and the extra per unit of
	// cluster size. Resources not listed are left as they are.
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=3
	// +required
	Resources []ResourceScaling `json:"resources"`

	// ScalingMode tells what one unit of cluster size is: a node
	// (NodeProportional) or a container of a non-terminal pod
	// (ContainerProportional). Defaults to NodeProportional.
	// +kubebuilder:default=NodeProportional
	// +optional
	ScalingMode ScalingMode `json:"scalingMode,omitempty"`

	// Source tells where the container count is read: from the API server's
	// Pod objects (APIServer) or from the metrics API's PodMetrics,
	// metrics.k8s.io (Metrics; a pod missing from one read counts from the
	// read before). Nodes are always counted from the API server's Node
	// objects, also with Metrics, as Addon Resizer 1.8's --use-metrics did:
	// NodeMetrics lose a node for every missed scrape. Defaults to APIServer.
	// +kubebuilder:default=APIServer
	// +optional
	Source SizeSource `json:"source,omitempty"`

	// Estimator turns the cluster size into an amount of each resource.
	// +kubebuilder:default={type: Linear, minClusterSize: 16}
	// +optional
	Estimator Estimator `json:"estimator,omitempty"`

	// Threshold is how far, in percent of the estimate, the container's
	// resources may be from the estimate before they are changed. Defaults to 0
	// (any difference is corrected).
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=100
	// +optional
	Threshold int32 `json:"threshold,omitempty"`

	// ScaleUpDelay is how long an estimate above the current resources must
	// last before the resources are raised. Defaults to 0.
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('0s')",message="must not be negative"
	// +optional
	ScaleUpDelay *metav1.Duration `json:"scaleUpDelay,omitempty"`

	// ScaleDownDelay is how long an estimate below the current resources must
	// last before the resources are lowered. Defaults to 0.
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('0s')",message="must not be negative"
	// +optional
	ScaleDownDelay *metav1.Duration `json:"scaleDownDelay,omitempty"`

	// SetLimits tells whether limits are set to the estimate too, as Addon
	// Resizer does. False sets requests only. Defaults to true.
	// +kubebuilder:default=true
	// +optional
	SetLimits *bool `json:"setLimits,omitempty"`

	// UpdateMode tells how a new size reaches the add-on's pods. Rollout
	// writes it into the target's pod template, so every change is a
	// rollout (new pods), as Addon Resizer does; it works wherever the pods
	// run, also on a Karmada control plane, which has no pods of its own.
	// InPlace resizes the target's running pods through the pods/resize
	// subresource (Kubernetes 1.33 and later), a few at a time, and pods
	// created later as soon as they run, with no rollout: the pod template
	// keeps its resources, status.inPlace says the size the pods are held
	// at, and the condition InPlaceResized whether they all run at it.
	// Only cpu and memory can be resized in place. Off recommends only:
	// the size is computed and shown (status.recommendation, per member
	// cluster status.clusters[].recommendation, the UpToDate condition with
	// reason RecommendationOnly, the metric resizer_recommendation) and
	// nothing is written to the target or its pods. Defaults to Rollout.
	// +kubebuilder:default=Rollout
	// +optional
	UpdateMode UpdateMode `json:"updateMode,omitempty"`

	// Federation tells whose size counts. None sizes the target from the
	// cluster the AddonResizer is in. Karmada sizes it per member cluster
	// the target (a Karmada resource template) is scheduled to, from each
	// Cluster's status.nodeSummary, through an OverridePolicy the
	// AddonResizer owns; the template is not written. Auto is Karmada where
	// the API server serves Karmada's cluster.karmada.io or
	// policy.karmada.io API, else None. Defaults to Auto.
	// +kubebuilder:default=Auto
	// +optional
	Federation FederationMode `json:"federation,omitempty"`
}

// FederationMode tells whose size counts.
// +kubebuilder:validation:Enum={Auto,None,Karmada}
type FederationMode string

// The federation modes.
const (
	// FederationAuto is Karmada where Karmada's APIs are served, else None.
	FederationAuto FederationMode = "Auto"
	// FederationNone sizes from the AddonResizer's own cluster.
	FederationNone FederationMode = "None"
	// FederationKarmada sizes per Karmada member cluster.
	FederationKarmada FederationMode = "Karmada"
)

// UpdateMode tells how a new size reaches the add-on's pods.
// +kubebuilder:validation:Enum={Rollout,InPlace,Off}
type UpdateMode string

// The update modes.
const (
	// UpdateModeRollout patches the target's pod template: a rollout.
	UpdateModeRollout UpdateMode = "Rollout"
	// UpdateModeInPlace resizes the target's pods through pods/resize.
	UpdateModeInPlace UpdateMode = "InPlace"
	// UpdateModeOff computes and shows the size and writes nothing.
	UpdateModeOff UpdateMode = "Off"
)

// TargetKind is the kind of workload an AddonResizer resizes.
// +kubebuilder:validation:Enum={Deployment,StatefulSet,DaemonSet}
type TargetKind string

// The workload kinds an AddonResizer can resize (all apps/v1).
const (
	TargetKindDeployment  TargetKind = "Deployment"
	TargetKindStatefulSet TargetKind = "StatefulSet"
	TargetKindDaemonSet   TargetKind = "DaemonSet"
)

// TargetReference names an apps/v1 workload in the AddonResizer's namespace.
type TargetReference struct {
	// Kind of the workload: Deployment, StatefulSet or DaemonSet.
	// +required
	Kind TargetKind `json:"kind"`

	// Name of the workload.
	// +kubebuilder:validation:MinLength=1
	// +required
	Name string `json:"name"`
}

// ResourceScaling is how one resource grows with the cluster: base + extra
// per unit of cluster size, within minAllowed and maxAllowed.
// +kubebuilder:validation:XValidation:rule="!has(self.minAllowed) || !has(self.maxAllowed) || !quantity(string(self.maxAllowed)).isLessThan(quantity(string(self.minAllowed)))",message="maxAllowed must be greater than or equal to minAllowed",fieldPath=".maxAllowed"
type ResourceScaling struct {
	// Name of the resource: cpu, memory or ephemeral-storage.
	// +kubebuilder:validation:Enum={cpu,memory,ephemeral-storage}
	// +required
	Name corev1.ResourceName `json:"name"`

	// Base is the amount for an empty cluster.
	// +kubebuilder:validation:XValidation:rule="type(self) == int ? self >= 0 : !quantity(string(self)).isLessThan(quantity('0'))",message="must be greater than or equal to 0"
	// +required
	Base resource.Quantity `json:"base"`

	// ExtraPerUnit is the amount added per node or per container.
	// +kubebuilder:validation:XValidation:rule="type(self) == int ? self >= 0 : !quantity(string(self)).isLessThan(quantity('0'))",message="must be greater than or equal to 0"
	// +required
	ExtraPerUnit resource.Quantity `json:"extraPerUnit"`

	// MinAllowed is the least the resource is set to, as the Vertical Pod
	// Autoscaler's minAllowed: an estimate below it (after the Exponential
	// estimator's bucket) is raised to it, before the threshold decides.
	// The condition Bounded says when it binds.
	// +kubebuilder:validation:XValidation:rule="type(self) == int ? self >= 0 : !quantity(string(self)).isLessThan(quantity('0'))",message="must be greater than or equal to 0"
	// +optional
	MinAllowed *resource.Quantity `json:"minAllowed,omitempty"`

	// MaxAllowed is the most the resource is set to, as the Vertical Pod
	// Autoscaler's maxAllowed: an estimate above it is capped at it.
	// +kubebuilder:validation:XValidation:rule="type(self) == int ? self >= 0 : !quantity(string(self)).isLessThan(quantity('0'))",message="must be greater than or equal to 0"
	// +optional
	MaxAllowed *resource.Quantity `json:"maxAllowed,omitempty"`
}

// ScalingMode tells what one unit of cluster size is.
// +kubebuilder:validation:Enum={NodeProportional,ContainerProportional}
type ScalingMode string

// The scaling modes of KEP-5546.
const (
	NodeProportional      ScalingMode = "NodeProportional"
	ContainerProportional ScalingMode = "ContainerProportional"
)

// SizeSource tells where the cluster size is read.
// +kubebuilder:validation:Enum={APIServer,Metrics}
type SizeSource string

// The sources of the cluster size.
const (
	SourceAPIServer SizeSource = "APIServer"
	SourceMetrics   SizeSource = "Metrics"
)

// EstimatorType names an estimator.
// +kubebuilder:validation:Enum={Linear,Exponential}
type EstimatorType string

// The estimators of Addon Resizer.
const (
	// LinearEstimator estimates base + extraPerUnit × size.
	LinearEstimator EstimatorType = "Linear"
	// ExponentialEstimator rounds the size up to the next bucket of
	// minClusterSize × 1.5^k before estimating linearly, so that the
	// resources change less often as the cluster grows.
	ExponentialEstimator EstimatorType = "Exponential"
)

// Estimator turns the cluster size into an amount of each resource.
type Estimator struct {
	// Type of the estimator: Linear or Exponential. Defaults to Linear.
	// +kubebuilder:default=Linear
	// +optional
	Type EstimatorType `json:"type,omitempty"`

	// MinClusterSize is the first bucket of the Exponential estimator.
	// Defaults to 16.
	// +kubebuilder:default=16
	// +kubebuilder:validation:Minimum=1
	// +optional
	MinClusterSize int32 `json:"minClusterSize,omitempty"`
}

// AddonResizerStatus is what the resizer last observed and recommended.
type AddonResizerStatus struct {
	// ObservedGeneration is the generation of the spec the status is about.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// ClusterSize is the cluster size last observed, in nodes or containers.
	// +optional
	ClusterSize *int32 `json:"clusterSize,omitempty"`

	// Recommendation is the resources the estimator recommends for the
	// container at the observed cluster size.
	// +optional
	Recommendation *corev1.ResourceRequirements `json:"recommendation,omitempty"`

	// LastChangeTime is when the resizer last changed the container.
	// +optional
	LastChangeTime *metav1.Time `json:"lastChangeTime,omitempty"`

	// PendingResize is a change the resizer has decided on and holds back
	// until scaleUpDelay or scaleDownDelay has passed. It is kept in status,
	// not in the controller's memory, so a restart does not reset the clock.
	// Nil when the container is within the threshold of the recommendation.
	// +optional
	PendingResize *PendingResize `json:"pendingResize,omitempty"`

	// InPlace is the size the resizer holds the target's pods at with
	// updateMode InPlace, and how many run at it. Nil with Rollout.
	// +optional
	InPlace *InPlaceStatus `json:"inPlace,omitempty"`

	// Federation is the mode in effect, None or Karmada (Auto resolved).
	// +optional
	Federation FederationMode `json:"federation,omitempty"`

	// MemberClusters is, in Karmada mode, the number of member clusters the
	// target is scheduled to.
	// +optional
	MemberClusters *int32 `json:"memberClusters,omitempty"`

	// SizedClusters is, in Karmada mode, how many of them the
	// OverridePolicy holds at their recommendation.
	// +optional
	SizedClusters *int32 `json:"sizedClusters,omitempty"`

	// OverridePolicy is, in Karmada mode, the name of the OverridePolicy the
	// AddonResizer owns, in its namespace.
	// +optional
	OverridePolicy string `json:"overridePolicy,omitempty"`

	// Clusters is, in Karmada mode, each member cluster the target is
	// scheduled to: its node count, the size the OverridePolicy holds it
	// at, and why. It is the state that survives a restart: a change held
	// back by a delay, and the size a stale cluster keeps.
	// +listType=map
	// +listMapKey=name
	// +optional
	Clusters []MemberClusterStatus `json:"clusters,omitempty"`

	// Conditions tell whether the target was found and resized.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// ResizeDirection tells whether a pending change raises or cuts resources.
// +kubebuilder:validation:Enum={Up,Down}
type ResizeDirection string

// The directions of a pending change.
const (
	// ResizeUp raises at least one managed request or limit; scaleUpDelay
	// applies.
	ResizeUp ResizeDirection = "Up"
	// ResizeDown only cuts managed requests or limits; scaleDownDelay applies.
	ResizeDown ResizeDirection = "Down"
)

// PendingResize is a change held back by a delay.
type PendingResize struct {
	// Direction is Up when the change raises any managed value, else Down.
	// +required
	Direction ResizeDirection `json:"direction"`

	// Since is when the recommendation first left the threshold band in this
	// direction, with no break since. The change is applied at Since plus the
	// direction's delay.
	// +required
	Since metav1.Time `json:"since"`
}

// InPlaceStatus is the size the target's pods are resized to in place.
type InPlaceStatus struct {
	// Resources are the managed requests (and limits, with setLimits) the
	// target's running pods are resized to. The pod template keeps its own,
	// so pods it creates start there and are resized once they run.
	// +optional
	Resources corev1.ResourceRequirements `json:"resources,omitempty"`

	// Pods is the number of the target's running pods.
	// +optional
	Pods int32 `json:"pods,omitempty"`

	// AtSize is the number of them whose kubelet reports Resources applied
	// (status.containerStatuses[].resources).
	// +optional
	AtSize int32 `json:"atSize,omitempty"`
}

// MemberClusterStatus is one Karmada member cluster's sizing.
type MemberClusterStatus struct {
	// Name of the member cluster.
	// +required
	Name string `json:"name"`

	// Nodes is the cluster's node count the size was last computed from
	// (its Cluster's status.nodeSummary.totalNum). Nil until one was read.
	// +optional
	Nodes *int32 `json:"nodes,omitempty"`

	// Resources are the managed requests (and limits, with setLimits) the
	// OverridePolicy holds the cluster's container at. Nil: no rule, the
	// cluster runs the template's own resources.
	// +optional
	Resources *corev1.ResourceRequirements `json:"resources,omitempty"`

	// Recommendation is what the estimator recommends for the cluster at
	// Nodes, within minAllowed and maxAllowed (with updateMode Off, what
	// would be set).
	// +optional
	Recommendation *corev1.ResourceRequirements `json:"recommendation,omitempty"`

	// PendingResize is a change for this cluster held back by a delay.
	// +optional
	PendingResize *PendingResize `json:"pendingResize,omitempty"`

	// LastChangeTime is when this cluster's size last changed.
	// +optional
	LastChangeTime *metav1.Time `json:"lastChangeTime,omitempty"`

	// State is Sized (held at the recommendation), Capped (held at the
	// template's limit, below the recommendation: setLimits is false and a
	// request may not exceed its limit), Postponed (a delay holds a change
	// back), Stale (the Cluster's status is not current: the size is kept,
	// not recomputed, and never above the template's limits), Unknown (the
	// Cluster or its node summary is missing) or NotApplied (the size decided
	// for it is not in the OverridePolicy: its write failed or was refused,
	// and the UpToDate condition says why; resources are then what the
	// policy holds it at) or Recommended (updateMode Off: recommendation
	// computed, nothing written).
	// +optional
	State MemberState `json:"state,omitempty"`

	// Message says why, for a person.
	// +optional
	Message string `json:"message,omitempty"`
}

// MemberState is how a member cluster's size stands.
// +kubebuilder:validation:Enum={Sized,Capped,Postponed,Stale,Unknown,NotApplied,Recommended}
type MemberState string

// The states of a member cluster's size.
const (
	MemberSized       MemberState = "Sized"
	MemberCapped      MemberState = "Capped"
	MemberPostponed   MemberState = "Postponed"
	MemberStale       MemberState = "Stale"
	MemberUnknown     MemberState = "Unknown"
	MemberNotApplied  MemberState = "NotApplied"
	MemberRecommended MemberState = "Recommended"
)

// Condition types of an AddonResizer.
const (
	// ConditionTargetFound is True when the target workload exists.
	ConditionTargetFound = "TargetFound"
	// ConditionContainerFound is True when the target's pod template has the
	// container.
	ConditionContainerFound = "ContainerFound"
	// ConditionMetricsAvailable is True when the metrics API answered (source
	// Metrics only).
	ConditionMetricsAvailable = "MetricsAvailable"
	// ConditionUpToDate is True when the container's resources are within the
	// threshold of the recommendation; False with reason Postponed while a
	// delay holds a change back. With updateMode Off its reason is
	// RecommendationOnly, True or False as the container stands against
	// the recommendation, which is not applied.
	ConditionUpToDate = "UpToDate"
	// ConditionInPlaceResized, with updateMode InPlace only, is True when
	// every running pod of the target runs at status.inPlace.resources;
	// False while pods are resized (Resizing), when a kubelet defers a
	// resize (Deferred) or cannot make it (Infeasible), when a kubelet
	// fails to apply one and retries (ResizeError), when the API server
	// refuses one (ResizeRejected), when a pod's kubelet reports no
	// resources to resize from (ResourcesNotReported), or when a pod's
	// resizes keep conflicting (ResizeConflict). True with reason
	// NoRunningPods when the target has no running pods.
	ConditionInPlaceResized = "InPlaceResized"
	// ConditionFederation tells which cluster the size is counted from: True
	// with reason Karmada (per member cluster) or Local; False with reason
	// NoNodesOnKarmada when federation None would count the Nodes of an API
	// server that serves Karmada's APIs and has none (nothing is written),
	// or UnsupportedOnKarmada for ContainerProportional or updateMode InPlace
	// in Karmada mode.
	ConditionFederation = "Federation"
	// ConditionBounded, present when a resource has minAllowed or
	// maxAllowed, is True when one of them holds an estimate (reason
	// CappedAtMaxAllowed, RaisedToMinAllowed or MinAndMaxAllowed, the
	// message naming the estimate and the bound), False (WithinBounds)
	// when none does.
	ConditionBounded = "Bounded"
	// ConditionOverrideExclusive, in Karmada mode, is False when another
	// OverridePolicy in the namespace also overrides the container's
	// resources for the target: Karmada applies policies in name order
	// (after ClusterOverridePolicies), so the last one wins. The resizer
	// reports it and does not touch the other policy.
	ConditionOverrideExclusive = "OverrideExclusive"
)

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true

// AddonResizerList is a list of AddonResizers.
type AddonResizerList struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ListMeta `json:"metadata,omitempty"`

	// Items holds the AddonResizers.
	Items []AddonResizer `json:"items"`
}
