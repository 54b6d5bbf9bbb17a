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

// Package v1alpha1 holds the autoscaling.karmada.io/v1alpha1 API: CronFederatedHPA,
// byte-compatible with Karmada's, and FederatedHPA, declared so that the
// cron-scaler can read and update its bounds on clusters with or without Karmada.
//
// +k8s:deepcopy-gen=package
// +groupName=autoscaling.karmada.io
package v1alpha1
