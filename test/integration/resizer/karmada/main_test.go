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

// Package karmada tests the resizer's Karmada mode against a real
// kube-apiserver with Karmada's OverridePolicy and ResourceBinding CRDs
// (transcribed from Karmada v1.18.2, testdata/) and a CRD standing in for the
// Cluster API, which karmada-aggregated-apiserver serves on a real Karmada
// control plane. It has a control plane of its own: once Karmada's APIs are
// served, AddonResizers there default to the Karmada mode, which must not
// touch the plain-cluster tests of the resizer package.
package karmada

import (
	"testing"

	"github.com/scaleplane/scaleplane/test/integration/framework"
)

func TestMain(m *testing.M) {
	framework.Main(m, framework.Options{})
}
