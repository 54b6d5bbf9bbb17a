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

package hpagenerator

import (
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	lwsv1 "github.com/scaleplane/scaleplane/pkg/apis/leaderworkerset/v1"
)

// The label the generator puts on the HPAs it creates and keeps there.
const (
	ManagedByLabelKey   = "app.kubernetes.io/managed-by"
	ManagedByLabelValue = "scaleplane-hpa-generator"
)

// How the HPA refers to the LeaderWorkerSet, as owner and as scale target.
// Always these constants: the TypeMeta of objects read from informers is
// empty, so it cannot be used to build references.
const lwsKind = "LeaderWorkerSet"

var (
	lwsAPIVersion = lwsv1.SchemeGroupVersion.String()
	lwsGroup      = lwsv1.SchemeGroupVersion.Group
)

// Names of the fields the generator owns, as events report them.
const (
	fieldScaleTargetRef = "scaleTargetRef"
	fieldMinReplicas    = "minReplicas"
	fieldMaxReplicas    = "maxReplicas"
	fieldMetrics        = "metrics"
	fieldBehavior       = "behavior"
	fieldLabel          = "label " + ManagedByLabelKey
	fieldOwnerReference = "controller ownerReference"
)

// wantsHPA reports whether the LeaderWorkerSet asks for an HPA: a scale
// policy with at least one metric.
func wantsHPA(lws *lwsv1.LeaderWorkerSet) bool {
	return lws.Spec.ScalePolicy != nil && len(lws.Spec.ScalePolicy.Metrics) > 0
}

// desiredHPA builds the HPA the LeaderWorkerSet's scale policy asks for. The
// caller checked wantsHPA.
func desiredHPA(lws *lwsv1.LeaderWorkerSet) *autoscalingv2.HorizontalPodAutoscaler {
	policy := lws.Spec.ScalePolicy.DeepCopy()
	return &autoscalingv2.HorizontalPodAutoscaler{
		ObjectMeta: metav1.ObjectMeta{
			Name:            lws.Name,
			Namespace:       lws.Namespace,
			Labels:          map[string]string{ManagedByLabelKey: ManagedByLabelValue},
			OwnerReferences: []metav1.OwnerReference{ownerReference(lws)},
		},
		Spec: autoscalingv2.HorizontalPodAutoscalerSpec{
			ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{
				APIVersion: lwsAPIVersion,
				Kind:       lwsKind,
				Name:       lws.Name,
			},
			MinReplicas: ptr.To(ptr.Deref(policy.MinReplicas, defaultMinReplicas)),
			MaxReplicas: policy.MaxReplicas,
			Metrics:     policy.Metrics,
			Behavior:    policy.Behavior,
		},
	}
}

// ownerReference makes the LeaderWorkerSet the HPA's controller. Blocking
// owner deletion keeps a foreground deletion of the LeaderWorkerSet waiting
// until its HPA is gone, so the HPA never scales a half-deleted object.
func ownerReference(lws *lwsv1.LeaderWorkerSet) metav1.OwnerReference {
	return metav1.OwnerReference{
		APIVersion:         lwsAPIVersion,
		Kind:               lwsKind,
		Name:               lws.Name,
		UID:                lws.UID,
		Controller:         ptr.To(true),
		BlockOwnerDeletion: ptr.To(true),
	}
}

// isLWSRef reports whether an apiVersion and kind name a LeaderWorkerSet, of
// any version of its group.
func isLWSRef(apiVersion, kind string) bool {
	if kind != lwsKind {
		return false
	}
	gv, err := schema.ParseGroupVersion(apiVersion)
	return err == nil && gv.Group == lwsGroup
}

// controllingLWS returns the name of the LeaderWorkerSet that controls hpa,
// if one does.
func controllingLWS(hpa *autoscalingv2.HorizontalPodAutoscaler) (string, bool) {
	ref := metav1.GetControllerOfNoCopy(hpa)
	if ref == nil || !isLWSRef(ref.APIVersion, ref.Kind) {
		return "", false
	}
	return ref.Name, true
}

// isOurs reports whether the HPA belongs to this LeaderWorkerSet (this one,
// by UID, not an earlier one of the same name): its controller reference
// points to it, or, when the HPA has no controller at all, it can be shown
// that the generator made it for this LeaderWorkerSet: an owner reference to
// it and an entry of the generator's field manager in managedFields. The
// second case adopts back an HPA whose controller flag was cleared by hand
// (repairing the reference is drift repair). An owner reference alone is not
// enough: other tools (controllerutil.SetOwnerReference, kubectl-made
// manifests) add plain owner references to HPAs they own, and taking such an
// HPA as ours would delete or overwrite it.
func isOurs(hpa *autoscalingv2.HorizontalPodAutoscaler, lws *lwsv1.LeaderWorkerSet) bool {
	if ref := metav1.GetControllerOfNoCopy(hpa); ref != nil {
		return ref.UID == lws.UID
	}
	return hasOwnerReference(hpa, lws) && writtenByGenerator(hpa)
}

// hasOwnerReference reports whether one of the HPA's owner references
// points to this LeaderWorkerSet, by UID.
func hasOwnerReference(hpa *autoscalingv2.HorizontalPodAutoscaler, lws *lwsv1.LeaderWorkerSet) bool {
	_, ok := findOwnerReference(hpa.OwnerReferences, lws.UID)
	return ok
}

// writtenByGenerator reports whether the generator's field manager has
// written the HPA: the API server records every create and update with it in
// managedFields. The generator writes only HPAs it controls.
func writtenByGenerator(hpa *autoscalingv2.HorizontalPodAutoscaler) bool {
	for _, entry := range hpa.ManagedFields {
		if entry.Manager == fieldManager {
			return true
		}
	}
	return false
}

// driftedFields lists the owned fields in which existing differs from
// desired, in a stable order. Specs are compared with the apiserver's
// defaults applied to both, so the fields the apiserver fills in are not
// drift; quantities compare by value (equality.Semantic).
func driftedFields(existing, desired *autoscalingv2.HorizontalPodAutoscaler) []string {
	var fields []string
	have, want := withDefaults(&existing.Spec), withDefaults(&desired.Spec)
	add := func(name string, equal bool) {
		if !equal {
			fields = append(fields, name)
		}
	}
	add(fieldScaleTargetRef, have.ScaleTargetRef == want.ScaleTargetRef)
	add(fieldMinReplicas, equality.Semantic.DeepEqual(have.MinReplicas, want.MinReplicas))
	add(fieldMaxReplicas, have.MaxReplicas == want.MaxReplicas)
	add(fieldMetrics, equality.Semantic.DeepEqual(have.Metrics, want.Metrics))
	add(fieldBehavior, equality.Semantic.DeepEqual(have.Behavior, want.Behavior))
	add(fieldLabel, existing.Labels[ManagedByLabelKey] == ManagedByLabelValue)
	ref := desired.OwnerReferences[0]
	have0, ok := findOwnerReference(existing.OwnerReferences, ref.UID)
	add(fieldOwnerReference, ok && equality.Semantic.DeepEqual(*have0, ref))
	return fields
}

// withOwnedFields returns a copy of existing with the owned fields set from
// desired: the whole spec, the managed-by label and the controller owner
// reference. Everything else (other labels, annotations, other owner
// references, status, resourceVersion) is kept, so the update neither
// clobbers what others wrote nor overwrites a newer object.
func withOwnedFields(existing, desired *autoscalingv2.HorizontalPodAutoscaler) *autoscalingv2.HorizontalPodAutoscaler {
	out := existing.DeepCopy()
	out.Spec = *desired.Spec.DeepCopy()
	if out.Labels == nil {
		out.Labels = map[string]string{}
	}
	out.Labels[ManagedByLabelKey] = ManagedByLabelValue
	ref := desired.OwnerReferences[0]
	if have, ok := findOwnerReference(out.OwnerReferences, ref.UID); ok {
		*have = ref
	} else {
		out.OwnerReferences = append(out.OwnerReferences, ref)
	}
	return out
}

func findOwnerReference(refs []metav1.OwnerReference, uid types.UID) (*metav1.OwnerReference, bool) {
	for i := range refs {
		if refs[i].UID == uid {
			return &refs[i], true
		}
	}
	return nil, false
}
