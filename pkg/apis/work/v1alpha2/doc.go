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

// Package v1alpha2 holds the part of Karmada's work.karmada.io/v1alpha2 API
// that the resizer reads: a ResourceBinding's resource and the clusters it is
// scheduled to (Karmada's pkg/apis/work/v1alpha2/binding_types.go at v1.18.2).
//
// +k8s:deepcopy-gen=package
// +groupName=work.karmada.io
// +groupGoName=Work
package v1alpha2
