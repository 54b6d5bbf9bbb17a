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
	"reflect"
	"strings"
	"testing"
)

type fakeController struct{ name string }

func (c fakeController) Name() string        { return c.name }
func (c fakeController) Run(context.Context) {}
func (c fakeController) HasSynced() bool     { return true }

func testDescriptor(name string, disabledByDefault bool, aliases ...string) *ControllerDescriptor {
	return &ControllerDescriptor{
		name:                name,
		aliases:             aliases,
		isDisabledByDefault: disabledByDefault,
		initFunc: func(context.Context, ControllerContext) (Controller, error) {
			return fakeController{name: name}, nil
		},
	}
}

func testDescriptors() map[string]*ControllerDescriptor {
	return buildControllerDescriptors(
		testDescriptor("cron-scaler", false, "cronFederatedHorizontalPodAutoscaler"),
		testDescriptor("hpa-generator", false),
		testDescriptor("experimental", true, "exp"),
	)
}

func TestIsControllerEnabled(t *testing.T) {
	tests := []struct {
		name        string
		controllers []string
		want        []string
	}{
		{name: "star enables on-by-default only", controllers: []string{"*"}, want: []string{"cron-scaler", "hpa-generator"}},
		{name: "empty enables nothing", controllers: nil, want: nil},
		{name: "explicit name without star", controllers: []string{"hpa-generator"}, want: []string{"hpa-generator"}},
		{name: "star minus one", controllers: []string{"*", "-cron-scaler"}, want: []string{"hpa-generator"}},
		{name: "minus before star", controllers: []string{"-hpa-generator", "*"}, want: []string{"cron-scaler"}},
		{name: "star plus disabled-by-default", controllers: []string{"*", "experimental"}, want: []string{"cron-scaler", "experimental", "hpa-generator"}},
		{name: "alias enables", controllers: []string{"cronFederatedHorizontalPodAutoscaler"}, want: []string{"cron-scaler"}},
		{name: "alias disables", controllers: []string{"-cronFederatedHorizontalPodAutoscaler", "*"}, want: []string{"hpa-generator"}},
		{name: "alias of disabled-by-default", controllers: []string{"exp"}, want: []string{"experimental"}},
		{name: "first mention wins: disable then enable", controllers: []string{"-hpa-generator", "hpa-generator"}, want: nil},
		{name: "first mention wins: enable then disable", controllers: []string{"hpa-generator", "-hpa-generator"}, want: []string{"hpa-generator"}},
		{name: "first mention wins across alias and name", controllers: []string{"cronFederatedHorizontalPodAutoscaler", "-cron-scaler"}, want: []string{"cron-scaler"}},
	}
	descriptors := testDescriptors()
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, name := range KnownControllers(descriptors) {
				if IsControllerEnabled(descriptors[name], tc.controllers) {
					got = append(got, name)
				}
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("--controllers=%s enabled %v, want %v", strings.Join(tc.controllers, ","), got, tc.want)
			}
		})
	}
}

func TestBuildControllerDescriptorsPanicsOnDuplicates(t *testing.T) {
	tests := []struct {
		name        string
		descriptors []*ControllerDescriptor
		wantPanic   string
	}{
		{name: "duplicate name", descriptors: []*ControllerDescriptor{testDescriptor("a", false), testDescriptor("a", false)}, wantPanic: `"a" is used by both`},
		{name: "alias equals another name", descriptors: []*ControllerDescriptor{testDescriptor("a", false), testDescriptor("b", false, "a")}, wantPanic: `"a" is used by both "a" and "b"`},
		{name: "duplicate alias", descriptors: []*ControllerDescriptor{testDescriptor("a", false, "x"), testDescriptor("b", false, "x")}, wantPanic: `"x" is used by both "a" and "b"`},
		{name: "empty name", descriptors: []*ControllerDescriptor{testDescriptor("", false)}, wantPanic: "empty name"},
		{name: "no constructor", descriptors: []*ControllerDescriptor{{name: "a"}}, wantPanic: "has no constructor"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			defer func() {
				r := recover()
				if r == nil {
					t.Fatalf("expected a panic containing %q", tc.wantPanic)
				}
				if msg, _ := r.(string); !strings.Contains(msg, tc.wantPanic) {
					t.Fatalf("panic %q does not contain %q", r, tc.wantPanic)
				}
			}()
			buildControllerDescriptors(tc.descriptors...)
		})
	}
}

func TestRegistryListings(t *testing.T) {
	descriptors := testDescriptors()
	if got, want := KnownControllers(descriptors), []string{"cron-scaler", "experimental", "hpa-generator"}; !reflect.DeepEqual(got, want) {
		t.Errorf("KnownControllers = %v, want %v", got, want)
	}
	if got, want := ControllersDisabledByDefault(descriptors), []string{"experimental"}; !reflect.DeepEqual(got, want) {
		t.Errorf("ControllersDisabledByDefault = %v, want %v", got, want)
	}
	want := map[string]string{"cronFederatedHorizontalPodAutoscaler": "cron-scaler", "exp": "experimental"}
	if got := ControllerAliases(descriptors); !reflect.DeepEqual(got, want) {
		t.Errorf("ControllerAliases = %v, want %v", got, want)
	}
}

// TestRealRegistryIsConsistent builds the production registry: a duplicate
// name or alias would panic here rather than at start-up in a cluster.
func TestRealRegistryIsConsistent(t *testing.T) {
	descriptors := NewControllerDescriptors()
	for name, d := range descriptors {
		if d.Name() != name {
			t.Errorf("descriptor %q is indexed as %q", d.Name(), name)
		}
	}
}

// TestHelpListsControllersFromRegistry checks that --help names every
// controller, alias and disabled-by-default controller of the registry, so
// the help text cannot drift from what the binary runs.
func TestHelpListsControllersFromRegistry(t *testing.T) {
	cmd := newCommand(newTestOptions(), testDescriptors())
	help := cmd.Flags().Lookup("controllers").Usage
	for _, want := range []string{
		"All controllers: cron-scaler, experimental, hpa-generator",
		"Disabled-by-default controllers: experimental",
		"cronFederatedHorizontalPodAutoscaler (cron-scaler)",
		"exp (experimental)",
	} {
		if !strings.Contains(help, want) {
			t.Errorf("--controllers help does not contain %q:\n%s", want, help)
		}
	}
}

// TestCommandRejectsUnknownControllers runs the command's flag parsing and
// validation: an unknown name fails before anything connects to a cluster.
func TestCommandRejectsUnknownControllers(t *testing.T) {
	cmd := newCommand(newTestOptions(), testDescriptors())
	cmd.SetArgs([]string{"--controllers=*,-hpa-generatr", "--kubeconfig=/nonexistent"})
	var out strings.Builder
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	err := cmd.Execute()
	if err == nil {
		t.Fatal("expected an error for an unknown controller")
	}
	for _, want := range []string{
		`"-hpa-generatr" is not a known controller`,
		"known controllers: cron-scaler, cronFederatedHorizontalPodAutoscaler, exp, experimental, hpa-generator",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not contain %q", err, want)
		}
	}
}

// TestCommandVersion checks --version prints and exits without a cluster.
func TestCommandVersion(t *testing.T) {
	cmd := newCommand(newTestOptions(), testDescriptors())
	cmd.SetArgs([]string{"--version"})
	var out strings.Builder
	cmd.SetOut(&out)
	if err := cmd.Execute(); err != nil {
		t.Fatalf("--version failed: %v", err)
	}
	if !strings.HasPrefix(out.String(), "scaleplane-controller-manager v") {
		t.Errorf("--version printed %q", out.String())
	}
}
