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

package karmadainterpreter

import (
	"math"

	lua "github.com/yuin/gopher-lua"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// kubeLoader opens the `kube` module of Karmada's VM, which scripts load
// with require("kube").
func kubeLoader(l *lua.LState) int {
	l.Push(l.SetFuncs(l.NewTable(), map[string]lua.LGFunction{
		"resourceAdd":             luaResourceAdd,
		"accuratePodRequirements": luaAccuratePodRequirements,
		"getPodDependencies":      luaGetPodDependencies,
		"getResourceQuantity":     luaGetResourceQuantity,
	}))
	return 1
}

// luaResourceAdd sums quantities given as strings (nil counts as zero) and
// returns the sum's canonical string.
func luaResourceAdd(l *lua.LState) int {
	sum := resource.Quantity{}
	for i := 1; i <= l.GetTop(); i++ {
		sum.Add(checkQuantity(l, i))
	}
	l.Push(lua.LString(sum.String()))
	return 1
}

// luaAccuratePodRequirements returns what one pod of a PodTemplateSpec needs,
// as a ReplicaRequirements table, or nil when it needs nothing and claims
// no node.
func luaAccuratePodRequirements(l *lua.LState) int {
	if l.GetTop() != 1 {
		l.RaiseError("getPodRequirements only accepts one argument")
		return 0
	}
	table := l.CheckTable(1)
	template := &corev1.PodTemplateSpec{}
	if err := convertLuaInto(table, template); err != nil {
		l.RaiseError("fail to convert lua value %#v to PodTemplateSpec: %v", table, err)
		return 0
	}
	value, err := toLua(l, PodRequirements(template))
	if err != nil {
		l.RaiseError("fail to convert requirements to Lua value: %v", err)
		return 0
	}
	l.Push(value)
	return 1
}

// luaGetPodDependencies returns the dependencies of a PodTemplateSpec in a
// namespace (nil means "default"), or nil when there are none.
func luaGetPodDependencies(l *lua.LState) int {
	if l.GetTop() != 2 {
		l.RaiseError("getPodDependencies only accepts two argument")
		return 0
	}
	table := l.CheckTable(1)
	namespace := "default"
	switch v := l.Get(2); v.Type() {
	case lua.LTNil:
	case lua.LTString, lua.LTNumber:
		namespace = l.CheckString(2)
	default:
		l.TypeError(2, lua.LTString)
		return 0
	}
	template := &corev1.PodTemplateSpec{}
	if err := convertLuaInto(table, template); err != nil {
		l.RaiseError("fail to convert lua value %#v to corev1.PodTemplateSpec: %v", table, err)
		return 0
	}
	value, err := toLua(l, PodDependencies(&template.Spec, namespace))
	if err != nil {
		l.RaiseError("fail to convert dependencies to Lua value: %v", err)
		return 0
	}
	l.Push(value)
	return 1
}

// luaGetResourceQuantity returns a quantity as an approximate number.
func luaGetResourceQuantity(l *lua.LState) int {
	if l.GetTop() != 1 {
		l.RaiseError("getResourceQuantity only accepts one argument")
		return 0
	}
	q := checkQuantity(l, 1)
	n := q.AsApproximateFloat64()
	if n < 0 {
		l.RaiseError("int approximation unexpectedly returned a negative value: %#v,", q)
		return 0
	}
	if math.IsInf(n, 1) {
		l.RaiseError("int approximation unexpectedly returned an infinite value: %#v,", q)
		return 0
	}
	l.Push(lua.LNumber(n))
	return 1
}

// checkQuantity reads argument n as a quantity: nil is zero, a string is
// parsed (a malformed one panics, which the VM turns into the call's error,
// as Karmada's resource.MustParse does), anything else is a type error.
func checkQuantity(l *lua.LState, n int) resource.Quantity {
	switch v := l.Get(n); v.Type() {
	case lua.LTNil:
		return resource.Quantity{}
	case lua.LTString:
		return resource.MustParse(string(v.(lua.LString)))
	default:
		l.TypeError(n, lua.LTString)
		return resource.Quantity{}
	}
}
