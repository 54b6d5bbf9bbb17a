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

// Package v1alpha1 holds the part of Karmada's policy.karmada.io/v1alpha1 API
// that the resizer uses: OverridePolicy, with the fields it writes and the
// ones it reads to find someone else's policy for the same container. The
// JSON is Karmada's (pkg/apis/policy/v1alpha1/override_types.go and
// propagation_types.go at v1.18.2). An update sends the whole object, so
// fields left out here would be lost on one: the resizer only ever updates
// OverridePolicies it created and owns, which hold nothing else.
//
// +k8s:deepcopy-gen=package
// +groupName=policy.karmada.io
// +groupGoName=Policy
package v1alpha1
