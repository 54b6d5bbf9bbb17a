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
	"bufio"
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
)

// The in-toto Statement v1 and SLSA Provenance v1 shapes
// (https://github.com/in-toto/attestation/blob/main/spec/v1/statement.md,
// https://slsa.dev/spec/v1.0/provenance), with the fields a release fills.
type (
	statement struct {
		Type          string               `json:"_type"`
		Subject       []resourceDescriptor `json:"subject"`
		PredicateType string               `json:"predicateType"`
		Predicate     provenance           `json:"predicate"`
	}
	resourceDescriptor struct {
		Name   string            `json:"name,omitempty"`
		URI    string            `json:"uri,omitempty"`
		Digest map[string]string `json:"digest,omitempty"`
	}
	provenance struct {
		BuildDefinition buildDefinition `json:"buildDefinition"`
		RunDetails      runDetails      `json:"runDetails"`
	}
	buildDefinition struct {
		BuildType            string               `json:"buildType"`
		ExternalParameters   map[string]any       `json:"externalParameters"`
		InternalParameters   map[string]string    `json:"internalParameters,omitempty"`
		ResolvedDependencies []resourceDescriptor `json:"resolvedDependencies,omitempty"`
	}
	runDetails struct {
		Builder  builder        `json:"builder"`
		Metadata *buildMetadata `json:"metadata,omitempty"`
	}
	builder struct {
		ID string `json:"id"`
	}
	buildMetadata struct {
		InvocationID string `json:"invocationId,omitempty"`
	}
)

const (
	statementType  = "https://in-toto.io/Statement/v1"
	provenanceType = "https://slsa.dev/provenance/v1"
)

// provenanceCommand writes the release's provenance: an in-toto statement
// whose subjects are the release's files and images, with a SLSA v1
// provenance predicate naming the source commit, the builder and the
// materials (the Go toolchain, every module of the build list with its
// go.sum hash, the CA bundle the images carry). Nothing in it depends on
// when or where it is written, so it is as reproducible as the release.
// --predicate-output writes the predicate alone, which `cosign attest
// --type slsaprovenance1` wraps in a statement naming an image.
func provenanceCommand(args []string) error {
	fs := flag.NewFlagSet("provenance", flag.ContinueOnError)
	output := fs.String("output", "", "the statement to write")
	predicateOutput := fs.String("predicate-output", "", "the predicate alone, for cosign attest")
	buildType := fs.String("build-type", "", "the URI of the build's type (what the parameters mean)")
	builderID := fs.String("builder-id", "", "the URI of the builder")
	invocation := fs.String("invocation-id", "", "the URI of this run of the builder (optional)")
	sumsFile := fs.String("subjects", "", "a sha256sum-format file: each line a subject")
	modules := fs.String("go-modules", "", "`go list -m -f '{{.Path}} {{.Version}} {{.Sum}}' all` output")
	external, internal := keyValues{}, keyValues{}
	var subjects, materials repeated
	fs.Var(external, "parameter", "an external parameter key=value (repeatable)")
	fs.Var(internal, "internal", "an internal parameter key=value (repeatable)")
	fs.Var(&subjects, "subject", "a subject NAME=sha256:HEX (repeatable)")
	fs.Var(&materials, "material", "a resolved dependency URI=ALG:VALUE (repeatable)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *output == "" || *buildType == "" || *builderID == "" {
		return errors.New("provenance needs --output, --build-type and --builder-id")
	}
	st := statement{Type: statementType, PredicateType: provenanceType}
	for _, s := range subjects {
		d, err := parseDescriptor(s, "name")
		if err != nil {
			return fmt.Errorf("--subject %s: %w", s, err)
		}
		st.Subject = append(st.Subject, d)
	}
	if *sumsFile != "" {
		more, err := readSubjects(*sumsFile)
		if err != nil {
			return err
		}
		st.Subject = append(st.Subject, more...)
	}
	if len(st.Subject) == 0 {
		return errors.New("provenance needs at least one subject")
	}
	params := map[string]any{}
	for k, v := range external {
		params[k] = v
	}
	deps := []resourceDescriptor{}
	for _, m := range materials {
		d, err := parseDescriptor(m, "uri")
		if err != nil {
			return fmt.Errorf("--material %s: %w", m, err)
		}
		deps = append(deps, d)
	}
	if *modules != "" {
		more, err := readGoModules(*modules)
		if err != nil {
			return err
		}
		deps = append(deps, more...)
	}
	st.Predicate = provenance{
		BuildDefinition: buildDefinition{BuildType: *buildType, ExternalParameters: params, InternalParameters: internal, ResolvedDependencies: deps},
		RunDetails:      runDetails{Builder: builder{ID: *builderID}},
	}
	if *invocation != "" {
		st.Predicate.RunDetails.Metadata = &buildMetadata{InvocationID: *invocation}
	}
	if err := writeJSON(*output, st); err != nil {
		return err
	}
	if *predicateOutput != "" {
		return writeJSON(*predicateOutput, st.Predicate)
	}
	return nil
}

func writeJSON(path string, v any) error {
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return writeAtomically(path, append(data, '\n'))
}

// parseDescriptor reads KEY=ALG:VALUE into a descriptor whose field (name
// or uri) is KEY. The key may hold "=" (a URI's query), the digest not.
func parseDescriptor(s, field string) (resourceDescriptor, error) {
	i := strings.LastIndex(s, "=")
	if i <= 0 {
		return resourceDescriptor{}, errors.New("want KEY=ALG:VALUE")
	}
	alg, value, ok := strings.Cut(s[i+1:], ":")
	if !ok || alg == "" || value == "" {
		return resourceDescriptor{}, errors.New("want KEY=ALG:VALUE")
	}
	d := resourceDescriptor{Digest: map[string]string{alg: value}}
	if field == "name" {
		d.Name = s[:i]
	} else {
		d.URI = s[:i]
	}
	return d, nil
}

// readSubjects reads sha256sum's output: "HEX  NAME" per line.
func readSubjects(path string) ([]resourceDescriptor, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var out []resourceDescriptor
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		sum, file, ok := strings.Cut(sc.Text(), "  ")
		if !ok || len(sum) != 64 {
			return nil, fmt.Errorf("%s: %q is not a sha256sum line", path, sc.Text())
		}
		out = append(out, resourceDescriptor{Name: strings.TrimPrefix(file, "*"), Digest: map[string]string{"sha256": sum}})
	}
	return out, sc.Err()
}

// readGoModules turns "PATH VERSION h1:BASE64" lines into descriptors
// pkg:golang/PATH@VERSION with the in-toto dirHash digest: go.sum's h1
// without its prefix, in hex. The main module (no version) is skipped: the
// source commit names it.
func readGoModules(path string) ([]resourceDescriptor, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var out []resourceDescriptor
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		d := resourceDescriptor{URI: "pkg:golang/" + f[0] + "@" + f[1]}
		if len(f) == 3 {
			raw, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(f[2], "h1:"))
			if err != nil || !strings.HasPrefix(f[2], "h1:") {
				return nil, fmt.Errorf("%s: %q: not an h1: hash", path, line)
			}
			d.Digest = map[string]string{"dirHash": hex.EncodeToString(raw)}
		}
		out = append(out, d)
	}
	return out, nil
}

// repeated is a flag that may be given many times, in order.
type repeated []string

func (r *repeated) String() string     { return strings.Join(*r, ",") }
func (r *repeated) Set(s string) error { *r = append(*r, s); return nil }
