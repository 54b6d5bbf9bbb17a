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
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// +genclient
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:path=cronfederatedhpas,scope=Namespaced,shortName=cronfhpa,categories={karmada-io}
// +kubebuilder:printcolumn:JSONPath=`.spec.scaleTargetRef.kind`,name=`REFERENCE-KIND`,type=string
// +kubebuilder:printcolumn:JSONPath=`.spec.scaleTargetRef.name`,name=`REFERENCE-NAME`,type=string
// +kubebuilder:printcolumn:JSONPath=`.status.executionHistories[0].nextExecutionTime`,name=`NEXT-EXECUTION`,type=string,description="When the first rule fires next (a timestamp: kubectl shows date columns as ages, which a future time does not have)"
// +kubebuilder:printcolumn:JSONPath=`.status.executionHistories[0].lastScheduleTime`,name=`LAST-SCHEDULE`,type=date,description="The scheduled time of the first rule's latest firing"
// +kubebuilder:printcolumn:JSONPath=`.status.executionHistories[0].successfulExecutions[0].appliedReplicas`,name=`LAST-REPLICAS`,type=integer,description="Replicas applied by the first rule's latest successful firing"
// +kubebuilder:printcolumn:JSONPath=`.status.executionHistories[0].failedExecutions[0].message`,name=`LAST-FAILURE`,type=string,priority=1,description="Why the first rule's latest failed firing failed"
// +kubebuilder:printcolumn:JSONPath=`.metadata.creationTimestamp`,name=`AGE`,type=date

// CronFederatedHPA scales a workload, or adjusts the bounds of a FederatedHPA or
// HorizontalPodAutoscaler, on cron schedules. Each rule fires at most once per
// scheduled time; its firings are recorded in status.
type CronFederatedHPA struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec is the specification of the CronFederatedHPA.
	// +required
	Spec CronFederatedHPASpec `json:"spec"`

	// Status is the current status of the CronFederatedHPA.
	// +optional
	Status CronFederatedHPAStatus `json:"status,omitempty"`
}

// CronFederatedHPASpec is the specification of the CronFederatedHPA.
// The rule on scaleTargetRef says what Karmada's webhook says, word for word,
// so that users get the same message with or without a webhook.
// +kubebuilder:validation:XValidation:rule="!has(self.scaleTargetRef.apiVersion) || self.scaleTargetRef.apiVersion != 'autoscaling.karmada.io/v1alpha1' || self.scaleTargetRef.kind == 'FederatedHPA'",messageExpression="'invalid scaleTargetRef kind: ' + self.scaleTargetRef.kind + ', only support FederatedHPA'",fieldPath=".scaleTargetRef.kind"
type CronFederatedHPASpec struct {
	// ScaleTargetRef points to the target resource to scale. It is either a
	// FederatedHPA (autoscaling.karmada.io/v1alpha1), whose minReplicas and
	// maxReplicas are set from a rule's targetMinReplicas and targetMaxReplicas;
	// a HorizontalPodAutoscaler (autoscaling/v2), handled the same way; or any
	// resource with a scale subresource (Deployment, StatefulSet,
	// LeaderWorkerSet, custom resources), whose replicas are set from a rule's
	// targetReplicas.
	// +required
	ScaleTargetRef autoscalingv2.CrossVersionObjectReference `json:"scaleTargetRef"`

	// Rules are the cron rules. Each rule has a name unique in this object (the
	// apiserver rejects duplicates: the name is the key of the rule's
	// history), and its own schedule and time zone. On a CRD that does not
	// enforce unique names (Karmada's), the cron-scaler refuses an object with
	// duplicate names with a DuplicateRuleNames Warning event and runs none of
	// its rules.
	// +listType=map
	// +listMapKey=name
	// +required
	Rules []CronFederatedHPARule `json:"rules"`
}

// CronFederatedHPARule declares one schedule and what to apply when it fires.
type CronFederatedHPARule struct {
	// Name of the rule. Each rule in a CronFederatedHPA must have a unique name;
	// the name is the key of the rule's execution history, so renaming a rule
	// starts a new history.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=32
	// +required
	Name string `json:"name"`

	// Schedule is the cron expression that tells when the rule fires, in the
	// standard five-field form ("minute hour day-of-month month day-of-week",
	// e.g. "30 8 * * 1-5"), or a macro such as "@daily" or "@midnight". The
	// day fields combine as in Kubernetes CronJobs and Karmada (robfig/cron):
	// when either is "*" or "?" a day must match both, otherwise either
	// ("0 8 */2 * 1" fires on odd days and on Mondays). Names are accepted in
	// their own field only (JAN-DEC for months, SUN-SAT for days of the week);
	// L, NW (day of month), NL and N#K (day of week) and day of week 7
	// (Sunday) are accepted too. A schedule that does not parse is rejected
	// with the reason; one that never fires, or fires more than once a minute,
	// is rejected.
	// +kubebuilder:validation:MinLength=1
	// +required
	Schedule string `json:"schedule"`

	// TargetReplicas is the number of replicas to set on a target that is not a
	// FederatedHPA or HorizontalPodAutoscaler. 0 scales the target to zero.
	// +kubebuilder:validation:Minimum=0
	// +optional
	TargetReplicas *int32 `json:"targetReplicas,omitempty"`

	// TargetMinReplicas is the minReplicas to set on a FederatedHPA or
	// HorizontalPodAutoscaler target. Nil leaves minReplicas as it is.
	// +kubebuilder:validation:Minimum=1
	// +optional
	TargetMinReplicas *int32 `json:"targetMinReplicas,omitempty"`

	// TargetMaxReplicas is the maxReplicas to set on a FederatedHPA or
	// HorizontalPodAutoscaler target. Nil leaves maxReplicas as it is.
	// +kubebuilder:validation:Minimum=1
	// +optional
	TargetMaxReplicas *int32 `json:"targetMaxReplicas,omitempty"`

	// Suspend stops the rule from firing. Firings scheduled while the rule is
	// suspended are not run when it is resumed. Defaults to false.
	// +kubebuilder:default=false
	// +optional
	Suspend *bool `json:"suspend,omitempty"`

	// TimeZone is the IANA name of the time zone the schedule is read in, such
	// as "Asia/Shanghai". Unset (the field absent) means the time zone of the
	// controller process; an empty string means UTC, as in Karmada, which
	// loads it with Go's time.LoadLocation ("Local" is the process's zone
	// there too). A local time skipped by a daylight-saving change fires at
	// the first instant after the gap; a local time that occurs twice fires
	// once, at its first occurrence.
	// +optional
	TimeZone *string `json:"timeZone,omitempty"`

	// SuccessfulHistoryLimit is how many successful executions are kept in
	// status. Defaults to 3.
	// +kubebuilder:default=3
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=32
	// +optional
	SuccessfulHistoryLimit *int32 `json:"successfulHistoryLimit,omitempty"`

	// FailedHistoryLimit is how many failed executions are kept in status. 0
	// keeps none. Defaults to 3.
	// +kubebuilder:default=3
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=32
	// +optional
	FailedHistoryLimit *int32 `json:"failedHistoryLimit,omitempty"`

	// MaxDelaySeconds is how late a firing may still run, for example after the
	// controller was down at the scheduled time, or while its target write
	// fails for a transient reason and is retried. A firing later than that is
	// recorded as missed (or failed, with the reason) and not applied. Unset: a
	// missed firing runs as long as it is the rule's latest scheduled time
	// (until the next one). Must be smaller than the schedule's shortest
	// interval. A scaleplane addition: Karmada's CRD does not store it, and
	// there the rule behaves as if it were unset.
	// +kubebuilder:validation:Minimum=1
	// +optional
	MaxDelaySeconds *int32 `json:"maxDelaySeconds,omitempty"`
}

// CronFederatedHPAStatus is the status of a CronFederatedHPA.
type CronFederatedHPAStatus struct {
	// ExecutionHistories record the executions of each rule, one entry per rule.
	// +optional
	ExecutionHistories []ExecutionHistory `json:"executionHistories,omitempty"`
}

// ExecutionHistory records the executions of one rule.
type ExecutionHistory struct {
	// RuleName is the name of the rule this history belongs to.
	// +required
	RuleName string `json:"ruleName"`

	// NextExecutionTime is when the rule fires next. Nil while the rule is
	// suspended (or cannot be scheduled). While a firing whose target write
	// failed for a transient reason is being retried, it is that firing's
	// scheduled time. A rule seen for the first time is planned from when it
	// came to exist (the object's creation, or the change that added it), so
	// a scheduled time that passed while the controller was down still runs,
	// within maxDelaySeconds.
	// +optional
	NextExecutionTime *metav1.Time `json:"nextExecutionTime,omitempty"`

	// LastScheduleTime is the scheduled time of the rule's latest firing,
	// whether it was applied, failed or missed. A scaleplane addition,
	// written only where the CRD stores it (not on Karmada's): the cron-scaler
	// never applies a firing twice for the same scheduled time on either
	// schema, as it plans from what both store, the newest scheduleTime of the
	// rule's executions and nextExecutionTime.
	// +optional
	LastScheduleTime *metav1.Time `json:"lastScheduleTime,omitempty"`

	// SuccessfulExecutions are the latest successful executions, newest first.
	// +optional
	SuccessfulExecutions []SuccessfulExecution `json:"successfulExecutions,omitempty"`

	// FailedExecutions are the latest failed or missed executions, newest first.
	// +optional
	FailedExecutions []FailedExecution `json:"failedExecutions,omitempty"`
}

// SuccessfulExecution records one successful execution of a rule.
type SuccessfulExecution struct {
	// ScheduleTime is the time the execution was scheduled for.
	// +required
	ScheduleTime *metav1.Time `json:"scheduleTime"`

	// ExecutionTime is the time the execution happened.
	// +required
	ExecutionTime *metav1.Time `json:"executionTime"`

	// AppliedReplicas is the replicas set on a workload target.
	// +optional
	AppliedReplicas *int32 `json:"appliedReplicas,omitempty"`

	// AppliedMaxReplicas is the maxReplicas set on a FederatedHPA or
	// HorizontalPodAutoscaler target.
	// +optional
	AppliedMaxReplicas *int32 `json:"appliedMaxReplicas,omitempty"`

	// AppliedMinReplicas is the minReplicas set on a FederatedHPA or
	// HorizontalPodAutoscaler target.
	// +optional
	AppliedMinReplicas *int32 `json:"appliedMinReplicas,omitempty"`
}

// FailedExecution records one failed or missed execution of a rule.
type FailedExecution struct {
	// ScheduleTime is the time the execution was scheduled for.
	// +required
	ScheduleTime *metav1.Time `json:"scheduleTime"`

	// ExecutionTime is the time the execution was attempted, or found missed.
	// +required
	ExecutionTime *metav1.Time `json:"executionTime"`

	// Message says why the execution failed or was missed.
	// +required
	Message string `json:"message"`
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true

// CronFederatedHPAList is a list of CronFederatedHPAs.
type CronFederatedHPAList struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ListMeta `json:"metadata,omitempty"`

	// Items holds the CronFederatedHPAs.
	Items []CronFederatedHPA `json:"items"`
}
