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
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	autoscalingv1alpha1 "github.com/scaleplane/scaleplane/pkg/apis/autoscaling/v1alpha1"
)

// The cache keeps what planning and the guard read, and drops the rest.
func TestStripForCache(t *testing.T) {
	obj := cron("c", rule("r", "0 8 * * *", 10))
	at := metav1Time("2024-05-01 07:00:00")
	obj.ManagedFields = []metav1.ManagedFieldsEntry{{
		Manager: "kubectl-client-side-apply", Operation: metav1.ManagedFieldsOperationUpdate, Time: &at,
		FieldsType: "FieldsV1", FieldsV1: metav1.NewFieldsV1(`{"f:spec":{"f:rules":{}}}`),
	}}
	obj.Annotations = map[string]string{lastAppliedAnnotation: `{"spec":{}}`, "team": "web"}
	out, err := stripForCache(obj)
	if err != nil {
		t.Fatal(err)
	}
	got := out.(*autoscalingv1alpha1.CronFederatedHPA)
	e := got.ManagedFields[0]
	if e.FieldsV1 != nil || e.Manager != "kubectl-client-side-apply" || e.Time == nil || !e.Time.Equal(&at) {
		t.Errorf("managedFields entry %+v; want manager and time kept, field set dropped", e)
	}
	if _, ok := got.Annotations[lastAppliedAnnotation]; ok || got.Annotations["team"] != "web" {
		t.Errorf("annotations %v; want the last-applied copy dropped, the rest kept", got.Annotations)
	}
	if len(got.Spec.Rules) != 1 {
		t.Errorf("spec lost: %+v", got.Spec)
	}
	tombstone := cache.DeletedFinalStateUnknown{Key: "default/c"}
	if out, err := stripForCache(tombstone); err != nil || out != tombstone {
		t.Errorf("a tombstone came out as %v, %v", out, err)
	}
}
