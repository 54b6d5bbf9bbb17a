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

package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"regexp"
	"strings"

	"sigs.k8s.io/yaml"
)

// stringList is a repeatable flag.
type stringList []string

func (l *stringList) String() string     { return strings.Join(*l, ",") }
func (l *stringList) Set(s string) error { *l = append(*l, s); return nil }

func stripCRDCommand(args []string) error {
	fs := flag.NewFlagSet("strip-crd", flag.ContinueOnError)
	path := fs.String("crd", "", "the CustomResourceDefinition (YAML)")
	var remove stringList
	fs.Var(&remove, "remove", "a property to remove, e.g. spec.rules[].maxDelaySeconds; repeatable")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *path == "" || len(remove) == 0 {
		return errors.New("strip-crd needs --crd and at least one --remove")
	}
	crd, err := readObject(*path)
	if err != nil {
		return err
	}
	if err := stripCRD(crd, remove); err != nil {
		return fmt.Errorf("%s: %w", *path, err)
	}
	out, err := json.MarshalIndent(crd, "", "  ")
	if err != nil {
		return fmt.Errorf("encoding the CRD: %w", err)
	}
	fmt.Println(string(out))
	return nil
}

func readObject(path string) (map[string]any, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", path, err)
	}
	var obj map[string]any
	if err := yaml.Unmarshal(data, &obj); err != nil {
		return nil, fmt.Errorf("decoding %s: %w", path, err)
	}
	return obj, nil
}

// stripCRD removes each property from every served version's schema. A
// property that is not there fails: the API changed, and the local Karmada
// mode would silently stop being one.
func stripCRD(crd map[string]any, remove []string) error {
	spec, _ := crd["spec"].(map[string]any)
	versions, _ := spec["versions"].([]any)
	if len(versions) == 0 {
		return errors.New("no spec.versions")
	}
	for _, v := range versions {
		version, _ := v.(map[string]any)
		if err := stripVersion(version, remove); err != nil {
			return fmt.Errorf("version %v: %w", version["name"], err)
		}
	}
	return nil
}

func stripVersion(version map[string]any, remove []string) error {
	schemaHolder, _ := version["schema"].(map[string]any)
	schema, _ := schemaHolder["openAPIV3Schema"].(map[string]any)
	if schema == nil {
		return errors.New("no schema.openAPIV3Schema")
	}
	for _, p := range remove {
		if err := removeProperty(schema, p); err != nil {
			return fmt.Errorf("%s: %w", p, err)
		}
		field := p[strings.LastIndex(p, ".")+1:]
		dropPrinterColumns(version, field)
		dropValidations(schema, field)
	}
	return nil
}

// removeProperty walks "a.b[].c" through properties (and items for []) and
// deletes the last one, and its entry in required.
func removeProperty(schema map[string]any, path string) error {
	segments := strings.Split(path, ".")
	node := schema
	for _, seg := range segments[:len(segments)-1] {
		name, list := strings.CutSuffix(seg, "[]")
		next, err := property(node, name)
		if err != nil {
			return err
		}
		if list {
			if next, _ = next["items"].(map[string]any); next == nil {
				return fmt.Errorf("%s is not a list", name)
			}
		}
		node = next
	}
	last := segments[len(segments)-1]
	if _, err := property(node, last); err != nil {
		return err
	}
	delete(node["properties"].(map[string]any), last)
	if required, ok := node["required"].([]any); ok {
		node["required"] = without(required, last)
	}
	return nil
}

func property(node map[string]any, name string) (map[string]any, error) {
	props, _ := node["properties"].(map[string]any)
	p, _ := props[name].(map[string]any)
	if p == nil {
		return nil, fmt.Errorf("no property %s", name)
	}
	return p, nil
}

func without(list []any, s string) []any {
	out := list[:0]
	for _, v := range list {
		if v != s {
			out = append(out, v)
		}
	}
	return out
}

// dropPrinterColumns removes the columns that read the removed field: Karmada's
// CRD has none of them.
func dropPrinterColumns(version map[string]any, field string) {
	columns, ok := version["additionalPrinterColumns"].([]any)
	if !ok {
		return
	}
	ref := regexp.MustCompile(`\.` + regexp.QuoteMeta(field) + `\b`)
	kept := columns[:0]
	for _, c := range columns {
		col, _ := c.(map[string]any)
		if jsonPath, _ := col["jsonPath"].(string); !ref.MatchString(jsonPath) {
			kept = append(kept, c)
		}
	}
	version["additionalPrinterColumns"] = kept
}

// dropValidations removes, anywhere in the schema, CEL rules that mention
// the field: the apiserver refuses a CRD whose rules name a property it does
// not have.
func dropValidations(node map[string]any, field string) {
	ref := regexp.MustCompile(`\b` + regexp.QuoteMeta(field) + `\b`)
	var walk func(any)
	walk = func(v any) {
		switch n := v.(type) {
		case map[string]any:
			if rules, ok := n["x-kubernetes-validations"].([]any); ok {
				kept := rules[:0]
				for _, r := range rules {
					rule, _ := r.(map[string]any)
					text := fmt.Sprint(rule["rule"], " ", rule["messageExpression"])
					if !ref.MatchString(text) {
						kept = append(kept, r)
					}
				}
				n["x-kubernetes-validations"] = kept
				if len(kept) == 0 {
					delete(n, "x-kubernetes-validations")
				}
			}
			for _, child := range n {
				walk(child)
			}
		case []any:
			for _, child := range n {
				walk(child)
			}
		}
	}
	walk(node)
}
