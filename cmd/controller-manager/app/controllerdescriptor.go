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

import (
	"context"
	"fmt"
	"sort"

	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Controller is a started controller. Run blocks until ctx ends. HasSynced
// says whether the caches it reads have synced: the manager waits for them,
// and only them, before it runs the controller (see startController).
type Controller interface {
	Name() string
	Run(ctx context.Context)
	HasSynced() bool
}

// InitFunc builds a controller: it registers the informers the controller
// needs with the factories of controllerCtx and returns the controller, which
// the manager runs once the informers have synced.
type InitFunc func(ctx context.Context, controllerCtx ControllerContext) (Controller, error)

// ControllerDescriptor describes a controller the manager can run, in the
// style of kube-controller-manager: its name, its aliases, its constructor,
// and the API resources it cannot work without.
type ControllerDescriptor struct {
	name string
	// summary says in a few words what the controller acts on, for the
	// command's description.
	summary             string
	aliases             []string
	initFunc            InitFunc
	isDisabledByDefault bool
	// requiredResources are resources (usually of a CRD) the controller waits
	// for before it is built, so that a missing CRD means a patient controller
	// and one log line, not a crash loop or a reflector spamming errors.
	requiredResources []schema.GroupVersionResource
}

// Name returns the controller's --controllers name.
func (d *ControllerDescriptor) Name() string { return d.name }

// Summary says in a few words what the controller acts on.
func (d *ControllerDescriptor) Summary() string { return d.summary }

// Aliases returns the other names --controllers accepts for the controller.
func (d *ControllerDescriptor) Aliases() []string { return d.aliases }

// IsDisabledByDefault reports whether '*' leaves the controller off.
func (d *ControllerDescriptor) IsDisabledByDefault() bool { return d.isDisabledByDefault }

// RequiredResources returns the resources the controller waits for.
func (d *ControllerDescriptor) RequiredResources() []schema.GroupVersionResource {
	return d.requiredResources
}

// buildControllerDescriptors indexes descriptors by name and panics on a
// duplicate name or alias: two controllers answering to one name is a
// programming error that must not reach a cluster.
func buildControllerDescriptors(descriptors ...*ControllerDescriptor) map[string]*ControllerDescriptor {
	byName := map[string]*ControllerDescriptor{}
	seen := map[string]string{}
	claim := func(name, owner string) {
		if name == "" {
			panic(fmt.Sprintf("controller descriptor %q has an empty name or alias", owner))
		}
		if other, ok := seen[name]; ok {
			panic(fmt.Sprintf("controller name or alias %q is used by both %q and %q", name, other, owner))
		}
		seen[name] = owner
	}
	for _, d := range descriptors {
		if d.initFunc == nil {
			panic(fmt.Sprintf("controller descriptor %q has no constructor", d.name))
		}
		claim(d.name, d.name)
		for _, alias := range d.aliases {
			claim(alias, d.name)
		}
		byName[d.name] = d
	}
	return byName
}

// KnownControllers returns the sorted names of all controllers.
func KnownControllers(descriptors map[string]*ControllerDescriptor) []string {
	names := make([]string, 0, len(descriptors))
	for name := range descriptors {
		names = append(names, name)
	}
	sort.Strings(names)
	return names
}

// ControllersDisabledByDefault returns the sorted names of the controllers
// '*' does not enable.
func ControllersDisabledByDefault(descriptors map[string]*ControllerDescriptor) []string {
	var names []string
	for name, d := range descriptors {
		if d.isDisabledByDefault {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	return names
}

// ControllerAliases maps every alias to the name of its controller.
func ControllerAliases(descriptors map[string]*ControllerDescriptor) map[string]string {
	aliases := map[string]string{}
	for name, d := range descriptors {
		for _, alias := range d.aliases {
			aliases[alias] = name
		}
	}
	return aliases
}

// IsControllerEnabled applies the --controllers semantics to one controller:
// the first item that names it (by name or alias, with or without '-')
// decides; otherwise '*' enables it unless it is disabled by default.
func IsControllerEnabled(d *ControllerDescriptor, controllers []string) bool {
	names := append([]string{d.name}, d.aliases...)
	hasStar := false
	for _, item := range controllers {
		for _, name := range names {
			switch item {
			case name:
				return true
			case "-" + name:
				return false
			}
		}
		if item == "*" {
			hasStar = true
		}
	}
	return hasStar && !d.isDisabledByDefault
}
