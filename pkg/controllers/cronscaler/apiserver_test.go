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
	"strconv"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clienttesting "k8s.io/client-go/testing"

	autoscalingv1alpha1 "github.com/scaleplane/scaleplane/pkg/apis/autoscaling/v1alpha1"
)

// schemaVariant is a CronFederatedHPA CRD schema the harness plays:
// scaleplane's, or Karmada's, which stores neither maxDelaySeconds nor
// lastScheduleTime (the apiserver prunes them on every write).
type schemaVariant struct {
	name   string
	stored StoredFields
}

var (
	projectSchema = schemaVariant{name: "scaleplane CRD", stored: AllStoredFields}
	karmadaSchema = schemaVariant{name: "Karmada CRD", stored: StoredFields{}}
)

// forEachSchema runs a planning or memory test on both schemas: every promise
// of the cron-scaler must hold without the fields Karmada's CRD prunes.
func forEachSchema(t *testing.T, test func(t *testing.T, crd schemaVariant)) {
	for _, crd := range []schemaVariant{projectSchema, karmadaSchema} {
		t.Run(crd.name, func(t *testing.T) { test(t, crd) })
	}
}

// prune drops what the schema does not store, as the apiserver does.
func (s schemaVariant) prune(obj *autoscalingv1alpha1.CronFederatedHPA) {
	if !s.stored.MaxDelaySeconds {
		for i := range obj.Spec.Rules {
			obj.Spec.Rules[i].MaxDelaySeconds = nil
		}
	}
	if !s.stored.LastScheduleTime {
		for i := range obj.Status.ExecutionHistories {
			obj.Status.ExecutionHistories[i].LastScheduleTime = nil
		}
	}
}

// updateLikeAPIServer makes an update of a CronFederatedHPA in the fake
// clientset behave as the apiserver's: a write with a resourceVersion other
// than the stored one conflicts; a write of the status subresource changes
// only status, and a write of the object everything else; the schema prunes
// what it does not store; a write that changes something gets a new
// resourceVersion and moves the time of its field manager's managedFields
// entry (by subresource) to the fake clock's.
func (h *harness) updateLikeAPIServer(action clienttesting.Action) (bool, runtime.Object, error) {
	update := action.(clienttesting.UpdateActionImpl)
	obj := update.GetObject().(*autoscalingv1alpha1.CronFederatedHPA).DeepCopy()
	gvr := autoscalingv1alpha1.SchemeGroupVersion.WithResource("cronfederatedhpas")
	gr := gvr.GroupResource()
	current, err := h.client.Tracker().Get(gvr, obj.Namespace, obj.Name)
	if err != nil {
		return true, nil, err
	}
	stored := current.(*autoscalingv1alpha1.CronFederatedHPA)
	if obj.ResourceVersion != "" && obj.ResourceVersion != stored.ResourceVersion {
		return true, nil, apierrors.NewConflict(gr, obj.Name, fmt.Errorf("the object has been modified; please apply your changes to the latest version and try again"))
	}
	next := stored.DeepCopy()
	if update.GetSubresource() == "status" {
		next.Status = obj.Status
	} else {
		next.Spec, next.Labels, next.Annotations = obj.Spec, obj.Labels, obj.Annotations
	}
	h.schema.prune(next)
	if equality.Semantic.DeepEqual(next.Spec, stored.Spec) && sameStatus(next.Status, stored.Status) &&
		equality.Semantic.DeepEqual(next.ObjectMeta, stored.ObjectMeta) {
		return true, stored.DeepCopy(), nil
	}
	if !equality.Semantic.DeepEqual(next.Spec, stored.Spec) {
		next.Generation++
	}
	rv, _ := strconv.Atoi(stored.ResourceVersion)
	next.ResourceVersion = strconv.Itoa(rv + 1)
	touchManagedFields(&next.ObjectMeta, update.UpdateOptions.FieldManager, update.GetSubresource(), h.clock.Now())
	if err := h.client.Tracker().Update(gvr, next, next.Namespace); err != nil {
		return true, nil, err
	}
	return true, next.DeepCopy(), nil
}

// touchManagedFields sets the time of manager's Update entry for
// subresource, as the apiserver does when a write changes fields (with
// second precision, as it stores them). The field sets are not kept.
func touchManagedFields(m *metav1.ObjectMeta, manager, subresource string, at time.Time) {
	if manager == "" {
		manager = "unnamed-client"
	}
	t := metav1.NewTime(at.UTC().Truncate(time.Second))
	for i := range m.ManagedFields {
		if f := &m.ManagedFields[i]; f.Manager == manager && f.Subresource == subresource && f.Operation == metav1.ManagedFieldsOperationUpdate {
			f.Time = &t
			return
		}
	}
	m.ManagedFields = append(m.ManagedFields, metav1.ManagedFieldsEntry{
		Manager: manager, Operation: metav1.ManagedFieldsOperationUpdate, Subresource: subresource, Time: &t, APIVersion: "autoscaling.karmada.io/v1alpha1",
	})
}
