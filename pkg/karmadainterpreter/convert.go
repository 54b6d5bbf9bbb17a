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
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"

	lua "github.com/yuin/gopher-lua"
)

// Karmada moves values between Go and Lua through JSON (gopher-json's
// Encode and Decode). These functions behave as those do, including what a
// script must live with: JSON null is no value at all (a nil table field,
// or nothing appended to an array), numbers are float64, an empty table
// encodes as [], and one table reached twice in a result fails the
// encoding even when it is not a cycle.

var (
	errNested      = errors.New("cannot encode recursively nested tables to JSON")
	errSparseArray = errors.New("cannot encode sparse array")
	errInvalidKeys = errors.New("cannot encode mixed or invalid key types")
)

// toLua turns a Go value into a Lua value as Karmada's decodeValue does for
// objects: through its JSON form.
func toLua(l *lua.LState, value any) (lua.LValue, error) {
	if value == nil {
		return lua.LNil, nil
	}
	v := reflect.ValueOf(value)
	switch {
	case v.CanInt():
		return lua.LNumber(v.Int()), nil
	case v.CanUint():
		return lua.LNumber(v.Uint()), nil
	case v.CanFloat():
		return lua.LNumber(v.Float()), nil
	}
	switch v.Kind() {
	case reflect.String:
		return lua.LString(v.String()), nil
	case reflect.Bool:
		return lua.LBool(v.Bool()), nil
	case reflect.Pointer, reflect.Slice, reflect.Map:
		if v.IsNil() {
			return lua.LNil, nil
		}
	}
	data, err := json.Marshal(value)
	if err != nil {
		return nil, fmt.Errorf("json marshal %T: %w", value, err)
	}
	var decoded any
	if err := json.Unmarshal(data, &decoded); err != nil {
		return nil, fmt.Errorf("json unmarshal %T: %w", value, err)
	}
	return jsonToLua(l, decoded), nil
}

// jsonToLua converts what encoding/json decodes into Lua values.
func jsonToLua(l *lua.LState, value any) lua.LValue {
	switch v := value.(type) {
	case bool:
		return lua.LBool(v)
	case float64:
		return lua.LNumber(v)
	case string:
		return lua.LString(v)
	case []any:
		t := l.CreateTable(len(v), 0)
		for _, item := range v {
			t.Append(jsonToLua(l, item)) // Append drops nil, as in Karmada
		}
		return t
	case map[string]any:
		t := l.CreateTable(0, len(v))
		for key, item := range v {
			t.RawSetH(lua.LString(key), jsonToLua(l, item))
		}
		return t
	}
	return lua.LNil
}

// encodeLua is gopher-json's Encode: the JSON form of a Lua value.
func encodeLua(value lua.LValue) ([]byte, error) {
	v, err := luaToJSON(value, map[*lua.LTable]bool{})
	if err != nil {
		return nil, err
	}
	return json.Marshal(v)
}

func luaToJSON(value lua.LValue, visited map[*lua.LTable]bool) (any, error) {
	switch v := value.(type) {
	case lua.LBool:
		return bool(v), nil
	case lua.LNumber:
		return float64(v), nil
	case *lua.LNilType:
		return nil, nil
	case lua.LString:
		return string(v), nil
	case *lua.LTable:
		// gopher-json marks a table visited for the whole encoding, not
		// only along the current path.
		if visited[v] {
			return nil, errNested
		}
		visited[v] = true
		key, item := v.Next(lua.LNil)
		switch key.Type() {
		case lua.LTNil:
			return []any{}, nil
		case lua.LTNumber:
			arr := []any{}
			expected := lua.LNumber(1)
			for key != lua.LNil {
				if key.Type() != lua.LTNumber {
					return nil, errInvalidKeys
				}
				if key != expected {
					return nil, errSparseArray
				}
				x, err := luaToJSON(item, visited)
				if err != nil {
					return nil, err
				}
				arr = append(arr, x)
				expected++
				key, item = v.Next(key)
			}
			return arr, nil
		case lua.LTString:
			obj := map[string]any{}
			for key != lua.LNil {
				if key.Type() != lua.LTString {
					return nil, errInvalidKeys
				}
				x, err := luaToJSON(item, visited)
				if err != nil {
					return nil, err
				}
				obj[key.String()] = x
				key, item = v.Next(key)
			}
			return obj, nil
		default:
			return nil, errInvalidKeys
		}
	default:
		return nil, fmt.Errorf("cannot encode %s to JSON", value.Type())
	}
}

// convertLuaInto is Karmada's ConvertLuaResultInto: encode the table, then
// repair the empty arrays (every empty table became one): an empty array
// whose path (array indices left out) is an empty object in one of the
// references becomes {}, one that is an empty array there stays, and any
// other is deleted. A result that is only [] becomes {} when obj is a
// struct.
func convertLuaInto(table *lua.LTable, obj any, references ...any) error {
	target := reflect.ValueOf(obj)
	if target.Kind() != reflect.Pointer || target.IsNil() {
		return fmt.Errorf("obj is not pointer")
	}
	data, err := encodeLua(table)
	if err != nil {
		return fmt.Errorf("encode lua result to json failed: %w", err)
	}
	if string(data) == "[]" {
		if target.Elem().Kind() == reflect.Struct {
			data = []byte("{}")
		}
	} else {
		emptyArrays, emptyObjects := map[string]bool{}, map[string]bool{}
		for _, reference := range references {
			refData, err := json.Marshal(reference)
			if err != nil {
				return fmt.Errorf("json marshal reference failed: %w", err)
			}
			var ref any
			if err := json.Unmarshal(refData, &ref); err != nil {
				return err
			}
			findEmpty(ref, nil, emptyArrays, emptyObjects)
		}
		var result any
		if err := json.Unmarshal(data, &result); err != nil {
			return err
		}
		result = repairEmpty(result, nil, emptyArrays, emptyObjects)
		if data, err = json.Marshal(result); err != nil {
			return err
		}
	}
	if err := json.Unmarshal(data, obj); err != nil {
		return fmt.Errorf("json unmarshal obj failed: %w", err)
	}
	return nil
}

// findEmpty records the paths of the empty arrays and empty objects in
// value. Elements of an array add no path segment.
func findEmpty(value any, path []string, emptyArrays, emptyObjects map[string]bool) {
	visit := func(child any, childPath []string) {
		key := strings.Join(childPath, ".")
		switch c := child.(type) {
		case []any:
			if len(c) == 0 {
				emptyArrays[key] = true
				return
			}
		case map[string]any:
			if len(c) == 0 {
				emptyObjects[key] = true
				return
			}
		default:
			return
		}
		findEmpty(child, childPath, emptyArrays, emptyObjects)
	}
	switch v := value.(type) {
	case map[string]any:
		for k, child := range v {
			visit(child, appendPath(path, k))
		}
	case []any:
		for _, child := range v {
			visit(child, path)
		}
	}
}

// repairEmpty applies the rule of convertLuaInto to every empty array
// below value.
func repairEmpty(value any, path []string, emptyArrays, emptyObjects map[string]bool) any {
	fix := func(child any, childPath []string) (any, bool) {
		if c, ok := child.([]any); ok && len(c) == 0 {
			key := strings.Join(childPath, ".")
			switch {
			case emptyObjects[key]:
				return map[string]any{}, true
			case emptyArrays[key]:
				return child, true
			default:
				return nil, false
			}
		}
		return repairEmpty(child, childPath, emptyArrays, emptyObjects), true
	}
	switch v := value.(type) {
	case map[string]any:
		for k, child := range v {
			fixed, keep := fix(child, appendPath(path, k))
			if keep {
				v[k] = fixed
			} else {
				delete(v, k)
			}
		}
	case []any:
		kept := v[:0]
		for _, child := range v {
			if fixed, keep := fix(child, path); keep {
				kept = append(kept, fixed)
			}
		}
		return kept
	}
	return value
}

func appendPath(path []string, key string) []string {
	out := make([]string, len(path), len(path)+1)
	copy(out, path)
	return append(out, key)
}
