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

package app

import "strings"

// This file is the registry: the one list of the controllers the manager
// knows. A new controller is one line here and a file of its own with its
// descriptor and constructor (see docs/architecture.md); --controllers, the
// help text and the command's description are built from this list.

// NewControllerDescriptors returns every controller the manager knows, keyed
// by name. A controller joins this list only once it does its job.
func NewControllerDescriptors() map[string]*ControllerDescriptor {
	return buildControllerDescriptors(
		newCronScalerControllerDescriptor(),
		newHPAGeneratorControllerDescriptor(),
		newResizerControllerDescriptor(),
	)
}

// describeControllers lists the controllers for the command's description:
// "cron-scaler (CronFederatedHPA), ...".
func describeControllers(descriptors map[string]*ControllerDescriptor) string {
	names := KnownControllers(descriptors)
	parts := make([]string, 0, len(names))
	for _, name := range names {
		parts = append(parts, name+" ("+descriptors[name].summary+")")
	}
	return strings.Join(parts, ", ")
}
