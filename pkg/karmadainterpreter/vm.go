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
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"time"

	lua "github.com/yuin/gopher-lua"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// scriptTimeout is how long Karmada lets one call run.
const scriptTimeout = time.Second

// unsafeFunctions are the base functions Karmada replaces with ones that
// fail.
var unsafeFunctions = []string{
	"collectgarbage", "dofile", "getfenv", "getmetatable", "load", "loadfile", "loadstring",
	"rawequal", "rawget", "rawset", "setfenv", "setmetatable", "module", "newproxy",
}

// newState opens a Lua state as Karmada's VM does: only the package (its
// preload loader alone), base, table, string and math libraries, an os
// library with only time and date, the unsafe base functions replaced, and
// the kube module to require.
func newState(ctx context.Context) (*lua.LState, error) {
	l := lua.NewState(lua.Options{SkipOpenLibs: true})
	for _, lib := range []struct {
		name string
		open lua.LGFunction
	}{
		{lua.LoadLibName, lua.OpenPackage},
		{lua.BaseLibName, lua.OpenBase},
		{lua.TabLibName, lua.OpenTable},
		{lua.StringLibName, lua.OpenString},
		{lua.MathLibName, lua.OpenMath},
		{lua.OsLibName, lua.OpenOs},
	} {
		if err := l.CallByParam(lua.P{Fn: l.NewFunction(lib.open), NRet: 0, Protect: true}, lua.LString(lib.name)); err != nil {
			l.Close()
			return nil, err
		}
	}
	// require finds modules in package.preload only: no files, no C.
	pkg := l.GetGlobal(lua.LoadLibName).(*lua.LTable)
	loaders := l.GetField(pkg, "loaders").(*lua.LTable)
	preloadOnly := l.NewTable()
	preloadOnly.Append(loaders.RawGetInt(1))
	l.SetField(pkg, "loaders", preloadOnly)
	l.SetField(l.Get(lua.RegistryIndex), "_LOADERS", preloadOnly)
	l.SetField(pkg, "loadlib", l.NewFunction(func(l *lua.LState) int {
		l.RaiseError("loadlib is not supported")
		return 0
	}))
	// os keeps only time and date.
	os := l.GetGlobal(lua.OsLibName).(*lua.LTable)
	safeOS := l.NewTable()
	for _, name := range []string{"time", "date"} {
		l.SetField(safeOS, name, l.GetField(os, name))
	}
	l.SetGlobal(lua.OsLibName, safeOS)
	for _, name := range unsafeFunctions {
		stub := fmt.Sprintf("function %s() error('call function %s is not supported in karmada customized resourceinterpreter.') end", name, name)
		if err := l.DoString(stub); err != nil {
			l.Close()
			return nil, err
		}
	}
	l.PreloadModule("kube", kubeLoader)
	l.SetContext(ctx)
	return l, nil
}

// CheckScript loads a script without calling anything, as Karmada's
// validating webhook and `karmadactl interpret --check` do.
func CheckScript(script string) error {
	ctx, cancel := context.WithTimeout(context.Background(), scriptTimeout)
	defer cancel()
	l, err := newState(ctx)
	if err != nil {
		return err
	}
	defer l.Close()
	_, err = l.LoadString(script)
	return err
}

// call runs script, then calls its global function fn with args converted
// to Lua, and returns nRets results. The caller closes the state once it has
// converted them.
func call(script, fn string, nRets int, args ...any) (*lua.LState, []lua.LValue, error) {
	ctx, cancel := context.WithTimeout(context.Background(), scriptTimeout)
	l, err := newState(ctx)
	if err != nil {
		cancel()
		return nil, nil, err
	}
	fail := func(err error) (*lua.LState, []lua.LValue, error) {
		l.Close()
		cancel()
		return nil, nil, err
	}
	if err := l.DoString(script); err != nil {
		return fail(err)
	}
	values := make([]lua.LValue, len(args))
	for i, arg := range args {
		if values[i], err = toLua(l, arg); err != nil {
			return fail(err)
		}
	}
	f := l.GetGlobal(fn)
	if f.Type() == lua.LTNil {
		return fail(fmt.Errorf("not found function %v", fn))
	}
	if f.Type() != lua.LTFunction {
		return fail(fmt.Errorf("%s is not a function: %s", fn, f.Type()))
	}
	if err := l.CallByParam(lua.P{Fn: f, NRet: nRets, Protect: true}, values...); err != nil {
		return fail(err)
	}
	rets := make([]lua.LValue, nRets)
	for i := range rets {
		rets[i] = l.Get(i + 1)
	}
	cancel()
	return l, rets, nil
}

// GetReplicas runs a replicaResource script: the number of replicas and
// what each needs (nil when the script returns nil).
func GetReplicas(script string, obj map[string]any) (int32, *ReplicaRequirements, error) {
	l, rets, err := call(script, "GetReplicas", 2, obj)
	if err != nil {
		return 0, nil, err
	}
	defer l.Close()
	if rets[0].Type() != lua.LTNumber {
		return 0, nil, fmt.Errorf("result type %#v is not number", rets[0].Type())
	}
	replicas := int32(rets[0].(lua.LNumber))
	switch rets[1].Type() {
	case lua.LTNil:
		return replicas, nil, nil
	case lua.LTTable:
		requires := &ReplicaRequirements{}
		if err := convertLuaInto(rets[1].(*lua.LTable), requires); err != nil {
			return 0, nil, err
		}
		return replicas, requires, nil
	default:
		return 0, nil, fmt.Errorf("expect the returned requires type is table but got %s", rets[1].Type())
	}
}

// ReviseReplica runs a replicaRevision script.
func ReviseReplica(script string, obj map[string]any, replicas int64) (map[string]any, error) {
	return objectCall(script, "ReviseReplica", []any{obj}, obj, replicas)
}

// Retain runs a retention script.
func Retain(script string, desired, observed map[string]any) (map[string]any, error) {
	return objectCall(script, "Retain", []any{desired, observed}, desired, observed)
}

// AggregateStatus runs a statusAggregation script. Karmada converts its
// result with no reference objects.
func AggregateStatus(script string, obj map[string]any, items []AggregatedStatusItem) (map[string]any, error) {
	return objectCall(script, "AggregateStatus", nil, obj, items)
}

// objectCall runs a script whose function returns an object, and converts
// it as Karmada converts into an unstructured object (which must name its
// kind).
func objectCall(script, fn string, references []any, args ...any) (map[string]any, error) {
	l, rets, err := call(script, fn, 1, args...)
	if err != nil {
		return nil, err
	}
	defer l.Close()
	table, ok := rets[0].(*lua.LTable)
	if !ok {
		return nil, fmt.Errorf("expect the returned requires type is table but got %s", rets[0].Type())
	}
	var out object
	if err := convertLuaInto(table, &out, references...); err != nil {
		return nil, err
	}
	return out.Object, nil
}

// object decodes like unstructured.Unstructured: a JSON object with a kind.
type object struct {
	Object map[string]any
}

func (o *object) UnmarshalJSON(data []byte) error {
	o.Object = nil
	if err := json.Unmarshal(data, &o.Object); err != nil {
		return err
	}
	if kind, _ := o.Object["kind"].(string); kind == "" {
		return fmt.Errorf("object 'Kind' is missing in '%s'", data)
	}
	return nil
}

// ReflectStatus runs a statusReflection script: the status Karmada keeps
// for a member cluster, as raw JSON.
func ReflectStatus(script string, obj map[string]any) (json.RawMessage, error) {
	l, rets, err := call(script, "ReflectStatus", 1, obj)
	if err != nil {
		return nil, err
	}
	defer l.Close()
	table, ok := rets[0].(*lua.LTable)
	if !ok {
		return nil, fmt.Errorf("expect the returned replica type is table but got %s", rets[0].Type())
	}
	var raw rawExtension
	if err := convertLuaInto(table, &raw); err != nil {
		return nil, err
	}
	return raw.Raw, nil
}

// rawExtension decodes like runtime.RawExtension (a struct, so that an
// empty result is {}).
type rawExtension struct {
	Raw json.RawMessage
}

func (r *rawExtension) UnmarshalJSON(data []byte) error {
	if !bytes.Equal(data, []byte("null")) {
		r.Raw = append(r.Raw[:0], data...)
	}
	return nil
}

// InterpretHealth runs a healthInterpretation script.
func InterpretHealth(script string, obj map[string]any) (bool, error) {
	l, rets, err := call(script, "InterpretHealth", 1, obj)
	if err != nil {
		return false, err
	}
	defer l.Close()
	if rets[0].Type() != lua.LTBool {
		return false, fmt.Errorf("result type %#v is not bool", rets[0].Type())
	}
	return bool(rets[0].(lua.LBool)), nil
}

// GetDependencies runs a dependencyInterpretation script, then checks,
// deduplicates and sorts its references as Karmada's configurable
// interpreter does.
func GetDependencies(script string, obj map[string]any) ([]DependentObjectReference, error) {
	l, rets, err := call(script, "GetDependencies", 1, obj)
	if err != nil {
		return nil, err
	}
	defer l.Close()
	table, ok := rets[0].(*lua.LTable)
	if !ok {
		return nil, fmt.Errorf("expect the returned requires type is table but got %s", rets[0].Type())
	}
	var refs []DependentObjectReference
	if err := convertLuaInto(table, &refs); err != nil {
		return nil, err
	}
	if err := verifyDependencies(refs); err != nil {
		return nil, err
	}
	seen := sets.New[string]()
	unique := []DependentObjectReference{}
	for _, ref := range refs {
		key, err := json.Marshal(ref)
		if err != nil {
			return nil, err
		}
		if !seen.Has(string(key)) {
			seen.Insert(string(key))
			unique = append(unique, ref)
		}
	}
	SortDependencies(unique)
	return unique, nil
}

func verifyDependencies(refs []DependentObjectReference) error {
	var errs field.ErrorList
	path := field.NewPath("dependencies")
	for i, ref := range refs {
		p := path.Index(i)
		if ref.APIVersion == "" {
			errs = append(errs, field.Invalid(p.Child("apiVersion"), ref.APIVersion, "missing required apiVersion"))
		}
		if ref.Kind == "" {
			errs = append(errs, field.Invalid(p.Child("kind"), ref.Kind, "missing required kind"))
		}
		if ref.Name == "" && ref.LabelSelector == nil {
			errs = append(errs, field.Invalid(p, ref, "dependency can not leave name and labelSelector all empty"))
		}
		errs = append(errs, metav1validation.ValidateLabelSelector(ref.LabelSelector,
			metav1validation.LabelSelectorValidationOptions{}, p.Child("labelSelector"))...)
	}
	return errs.ToAggregate()
}

// SortDependencies orders references by apiVersion, kind, namespace and name.
func SortDependencies(refs []DependentObjectReference) {
	sort.Slice(refs, func(i, j int) bool {
		a, b := refs[i], refs[j]
		if a.APIVersion != b.APIVersion {
			return a.APIVersion < b.APIVersion
		}
		if a.Kind != b.Kind {
			return a.Kind < b.Kind
		}
		if a.Namespace != b.Namespace {
			return a.Namespace < b.Namespace
		}
		return a.Name < b.Name
	})
}
