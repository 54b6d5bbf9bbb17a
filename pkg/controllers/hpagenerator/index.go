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
)

// lwsTarget returns the name of the LeaderWorkerSet the HPA scales, if it
// scales one.
func lwsTarget(hpa *autoscalingv2.HorizontalPodAutoscaler) (string, bool) {
	ref := hpa.Spec.ScaleTargetRef
	if !isLWSRef(ref.APIVersion, ref.Kind) {
		return "", false
	}
	return ref.Name, true
}
