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
	autoscalingv1alpha1 "github.com/scaleplane/scaleplane/pkg/apis/autoscaling/v1alpha1"
)

// lastAppliedAnnotation is where kubectl apply keeps a copy of the object:
// as large as the spec, and never read here.
const lastAppliedAnnotation = "kubectl.kubernetes.io/last-applied-configuration"

// stripForCache is the CronFederatedHPA informer's transform: it drops from
// each cached object what the cron-scaler never reads, which at 100,000
// objects is much of the cache. Kept: spec, status, and of managedFields
// each entry's manager, operation, subresource and time (planning reads when
// the object was last changed, the guard who wrote status last); dropped:
// the entries' field sets, and kubectl's last-applied copy. Writes stay
// correct: a status write sends no managedFields (the apiserver keeps its
// own) and the apiserver takes nothing but status from it.
func stripForCache(obj any) (any, error) {
	cron, ok := obj.(*autoscalingv1alpha1.CronFederatedHPA)
	if !ok {
		// A tombstone of a deleted object passes as it is.
		return obj, nil
	}
	for i := range cron.ManagedFields {
		cron.ManagedFields[i].FieldsV1 = nil
	}
	if _, ok := cron.Annotations[lastAppliedAnnotation]; ok {
		delete(cron.Annotations, lastAppliedAnnotation)
		if len(cron.Annotations) == 0 {
			cron.Annotations = nil
		}
	}
	return cron, nil
}
