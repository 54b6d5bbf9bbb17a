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

// Package v1 holds the leaderworkerset.x-k8s.io/v1 API: LeaderWorkerSet,
// compatible with the upstream LWS v1 schema, plus spec.scalePolicy (LWS
// KEP-213) from which the hpa-generator builds a HorizontalPodAutoscaler.
//
// +k8s:deepcopy-gen=package
// +groupName=leaderworkerset.x-k8s.io
package v1
