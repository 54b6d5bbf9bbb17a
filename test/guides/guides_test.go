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

// Package guides checks the Karmada guides (docs/karmada/*.md) without a
// cluster: the objects and commands a user pastes from them, read out of
// their code blocks.
package guides

import (
	"bufio"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

// repoRoot is the checkout this file is in.
func repoRoot(t *testing.T) string {
	t.Helper()
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		t.Fatal("cannot locate the test's source file")
	}
	return filepath.Join(filepath.Dir(file), "..", "..")
}

// guide is what a user pastes from one page: the objects of its YAML blocks
// and of the here-documents in its shell blocks, and its command lines
// (continuation lines joined).
type guide struct {
	path     string
	objects  []*unstructured.Unstructured
	commands []string
}

var heredocStart = regexp.MustCompile(`<<-?\s*'?"?([A-Za-z_]+)'?"?\s*$`)

func readGuide(t *testing.T, path string) *guide {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	g := &guide{path: path}
	var (
		fence     string // the open code block's language, "" outside one
		inBlock   bool
		heredoc   string // the here-document's terminator, "" outside one
		yamlText  strings.Builder
		command   strings.Builder
		lineCount int
	)
	flushYAML := func() {
		g.objects = append(g.objects, decodeObjects(t, path, yamlText.String())...)
		yamlText.Reset()
	}
	scanner := bufio.NewScanner(f)
	scanner.Buffer(make([]byte, 1<<20), 1<<20)
	for scanner.Scan() {
		line := scanner.Text()
		lineCount++
		trimmed := strings.TrimSpace(line)
		if strings.HasPrefix(trimmed, "```") {
			if inBlock {
				if fence == "yaml" {
					flushYAML()
				}
				inBlock, fence, heredoc = false, "", ""
				command.Reset()
			} else {
				inBlock, fence = true, strings.TrimPrefix(trimmed, "```")
			}
			continue
		}
		if !inBlock {
			continue
		}
		switch {
		case fence == "yaml":
			yamlText.WriteString(line + "\n")
		case fence == "sh" || fence == "bash" || fence == "console":
			if heredoc != "" {
				if trimmed == heredoc {
					flushYAML()
					heredoc = ""
				} else {
					yamlText.WriteString(line + "\n")
				}
				continue
			}
			command.WriteString(strings.TrimSuffix(trimmed, "\\") + " ")
			if strings.HasSuffix(trimmed, "\\") {
				continue
			}
			cmd := strings.TrimSpace(command.String())
			command.Reset()
			if cmd != "" && !strings.HasPrefix(cmd, "#") {
				g.commands = append(g.commands, cmd)
			}
			if m := heredocStart.FindStringSubmatch(cmd); m != nil {
				heredoc = m[1]
			}
		}
	}
	if err := scanner.Err(); err != nil {
		t.Fatal(err)
	}
	return g
}

// decodeObjects decodes the Kubernetes objects of a YAML stream; a document
// without a kind (a values file, an output) is not an object.
func decodeObjects(t *testing.T, path, text string) []*unstructured.Unstructured {
	t.Helper()
	var objs []*unstructured.Unstructured
	for _, doc := range regexp.MustCompile(`(?m)^---\s*$`).Split(text, -1) {
		if strings.TrimSpace(doc) == "" {
			continue
		}
		var m map[string]any
		if err := yaml.Unmarshal([]byte(doc), &m); err != nil {
			continue // output shown in a yaml block, not an object
		}
		obj := &unstructured.Unstructured{Object: m}
		if obj.GetKind() == "" || obj.GetAPIVersion() == "" {
			continue
		}
		objs = append(objs, obj)
	}
	return objs
}

func karmadaGuides(t *testing.T) []*guide {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(repoRoot(t), "docs", "karmada", "*.md"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no guides in docs/karmada: %v", err)
	}
	var guides []*guide
	for _, p := range paths {
		guides = append(guides, readGuide(t, p))
	}
	return guides
}

func (g *guide) name() string { return "docs/karmada/" + filepath.Base(g.path) }
