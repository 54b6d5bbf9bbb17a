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

// Package v1alpha1 holds the part of Karmada's cluster.karmada.io/v1alpha1 API
// that the resizer reads: a member Cluster's status conditions and node
// summary (Karmada's pkg/apis/cluster/v1alpha1/types.go at v1.18.2). On a
// Karmada control plane karmada-aggregated-apiserver serves it; tests stand a
// CRD of the same shape in for it.
//
// +k8s:deepcopy-gen=package
// +groupName=cluster.karmada.io
// +groupGoName=Cluster
package v1alpha1
