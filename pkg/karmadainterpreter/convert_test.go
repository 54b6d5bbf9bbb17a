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
	"context"
	"errors"
	"strings"
	"testing"

	lua "github.com/yuin/gopher-lua"
)

// luaTable evaluates a Lua expression that yields a table.
func luaTable(t *testing.T, l *lua.LState, expr string) *lua.LTable {
	t.Helper()
	if err := l.DoString("result = " + expr); err != nil {
		t.Fatal(err)
	}
	table, ok := l.GetGlobal("result").(*lua.LTable)
	if !ok {
		t.Fatalf("%s is not a table", expr)
	}
	return table
}

// TestEncodeQuirks checks the gopher-json behaviours a script meets.
func TestEncodeQuirks(t *testing.T) {
	l, err := newState(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	for _, tc := range []struct {
		expr, want string
		wantErr    error
	}{
		{expr: `{}`, want: `[]`},
		{expr: `{a = {}, b = {1, 2}, c = 1.5, d = true}`, want: `{"a":[],"b":[1,2],"c":1.5,"d":true}`},
		{expr: `{[1] = "a", [3] = "c"}`, wantErr: errSparseArray},
		{expr: `{1, a = 2}`, wantErr: errInvalidKeys},
		// One table reached twice fails even though it is no cycle.
		{expr: `(function() local shared = {x = 1} return {a = shared, b = shared} end)()`, wantErr: errNested},
	} {
		got, err := encodeLua(luaTable(t, l, tc.expr))
		if tc.wantErr != nil {
			if !errors.Is(err, tc.wantErr) {
				t.Errorf("%s: want %v, got %v (%s)", tc.expr, tc.wantErr, err, got)
			}
			continue
		}
		if err != nil || string(got) != tc.want {
			t.Errorf("%s: want %s, got %s (%v)", tc.expr, tc.want, got, err)
		}
	}
}

// TestDecodeDropsNulls checks that JSON nulls become no value at all.
func TestDecodeDropsNulls(t *testing.T) {
	l, err := newState(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	v, err := toLua(l, map[string]any{"list": []any{1, nil, 2}, "gone": nil})
	if err != nil {
		t.Fatal(err)
	}
	table := v.(*lua.LTable)
	if n := table.RawGetString("list").(*lua.LTable).Len(); n != 2 {
		t.Errorf("list length %d, want 2", n)
	}
	if table.RawGetString("gone") != lua.LNil {
		t.Error("a null field is present")
	}
}

// TestConvertRepairsEmptyArrays checks Karmada's repair of the empty arrays
// of a result against its reference objects.
func TestConvertRepairsEmptyArrays(t *testing.T) {
	l, err := newState(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	reference := map[string]any{"kind": "K", "spec": map[string]any{
		"obj": map[string]any{}, "arr": []any{}, "items": []any{map[string]any{"inner": map[string]any{}}},
	}}
	table := luaTable(t, l, `{kind = "K", spec = {obj = {}, arr = {}, other = {}, items = {{inner = {}}, {inner = {}}}}}`)

	var out object
	if err := convertLuaInto(table, &out, reference); err != nil {
		t.Fatal(err)
	}
	want := `{"kind":"K","spec":{"arr":[],"items":[{"inner":{}},{"inner":{}}],"obj":{}}}`
	if got := mustJSON(out.Object); got != want {
		t.Errorf("with the reference: want %s, got %s", want, got)
	}

	out = object{}
	if err := convertLuaInto(table, &out); err != nil {
		t.Fatal(err)
	}
	want = `{"kind":"K","spec":{"items":[{},{}]}}`
	if got := mustJSON(out.Object); got != want {
		t.Errorf("without references: want %s, got %s", want, got)
	}

	var raw rawExtension
	if err := convertLuaInto(luaTable(t, l, `{}`), &raw); err != nil || string(raw.Raw) != "{}" {
		t.Errorf("an empty table into a struct: want {}, got %s (%v)", raw.Raw, err)
	}
	var refs []DependentObjectReference
	if err := convertLuaInto(luaTable(t, l, `{}`), &refs); err != nil || refs == nil || len(refs) != 0 {
		t.Errorf("an empty table into a slice: want [], got %v (%v)", refs, err)
	}
	var noKind object
	if err := convertLuaInto(luaTable(t, l, `{spec = {}}`), &noKind); err == nil || !strings.Contains(err.Error(), "Kind") {
		t.Errorf("an object without kind: want an error, got %v", err)
	}
}
