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

// Package karmadainterpreter runs the Lua of a Karmada
// ResourceInterpreterCustomization offline, the way Karmada's declarative
// interpreter runs it, so that the customization scaleplane ships for
// LeaderWorkerSet (artifacts/deploy/karmada/leaderworkerset-interpreter.yaml)
// is tested in `make test`. Karmada is not a Go module dependency of
// scaleplane; what this package reproduces was read from Karmada v1.18.2:
//
//   - pkg/resourceinterpreter/customized/declarative/luavm/lua.go: the
//     sandbox (which libraries are open, which base functions are
//     replaced by ones that fail), how each operation's function is called,
//     and how its results are converted;
//   - luavm/lua_convert.go and layeh.com/gopher-json: how Lua values turn
//     into JSON and back, with their quirks (an empty table is an empty JSON
//     array; an empty array the reference objects do not have is dropped);
//   - luavm/kube.go, pkg/util/helper (GenerateReplicaRequirements,
//     GetDependenciesFromPodTemplate), pkg/util/resource.go and
//     pkg/util/lifted: the `kube` module's resourceAdd,
//     accuratePodRequirements, getPodDependencies and getResourceQuantity.
//
// Karmada's feature gate ResourceQuotaEstimate (alpha, off by default) is
// taken as off: accuratePodRequirements then reports no priorityClassName.
package karmadainterpreter
