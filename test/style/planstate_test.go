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

package style

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"testing/fstest"
)

// The cron-scaler's plan state (docs/architecture.md, "The cron-scaler's
// plan state", issue 36) is a few concepts, each a type in a file of its
// own with its invariants in its doc comment. It grew to seventeen pieces
// over seven files because a fix could add a field anywhere; this test makes
// adding one a decision. Everything the cron-scaler keeps hangs off its
// Controller, so every field of every struct of the package reachable from
// Controller, outside the concept files, is listed below with what it is:
// the concept it holds, a holder of fields listed here, a dependency (a
// client, lister, queue, clock, setting or lock: no state of the
// cron-scaler's own), or not plan state, saying why it decides no firing.
// So is every package-level variable but the metrics. A field or variable
// added outside the concept files fails until it is listed, and one that
// holds a concept type must say so: plan state cannot be kept anywhere else
// without this list, and the review of it, naming it.

// cronscalerPlanState is the cron-scaler's plan state, as
// docs/architecture.md's table names it.
var cronscalerPlanState = planStateRules{
	dir:  "pkg/controllers/cronscaler",
	root: "Controller",
	// The concept types, by the file that declares each. The durable record
	// is the object's status (an API type), whose rules are in record.go;
	// the reads made at decision time keep nothing but their index of
	// shared targets (targetCounts), their results are priorWrite and
	// laterSlot, and the object read fresh goes into the journal.
	concepts: map[string]string{
		"timeline":       "timeline.go",
		"statusJournal":  "journal.go",
		"ownWrites":      "journal.go",
		"replanMarks":    "replanmarks.go",
		"firingAttempts": "attempts.go",
		"priorWrite":     "inherited.go",
		"laterSlot":      "acrossobjects.go",
		"targetCounts":   "acrossobjects.go",
		"processStart":   "start.go",
	},
	// A type these files declare is part of its concept: its fields are the
	// concept's own, and not listed here.
	conceptFiles: []string{"record.go", "timeline.go", "journal.go", "replanmarks.go", "attempts.go",
		"reads.go", "inherited.go", "acrossobjects.go", "start.go"},
	fields: map[string]string{
		"Controller.client":       roleDependency,
		"Controller.kubeClient":   roleDependency,
		"Controller.scales":       roleDependency,
		"Controller.metadata":     roleDependency,
		"Controller.mapper":       roleDependency,
		"Controller.crons":        roleDependency,
		"cronCache.indexer":       roleDependency,
		"Controller.synced":       roleDependency,
		"Controller.recorder":     roleDependency,
		"Controller.clock":        roleDependency,
		"Controller.queue":        roleDependency,
		"Controller.records":      roleDependency,
		"Controller.firing":       notPlanState("a count of the syncs in progress, which paces status writes behind target writes"),
		"Controller.firingsGate":  roleDependency,
		"Controller.workers":      roleDependency,
		"Controller.locks":        roleHolds,
		"Controller.normalEvents": roleDependency,
		"Controller.deferred":     roleHolds,
		"Controller.stored":       roleHolds,
		"Controller.start":        planState("processStart"),
		"Controller.drainTimeout": roleDependency,
		"Controller.schedules":    roleHolds,
		"Controller.memory":       roleHolds,
		"Controller.counts":       roleHolds,
		"Controller.writers":      roleHolds,
		"Controller.autoscalers":  roleHolds,
		"Controller.targets":      planState("targetCounts"),

		// memory.go: the per-object holder of the journal, the replan
		// marks and the firing attempts.
		"memory.mu":                      roleDependency,
		"memory.objects":                 roleHolds,
		"objectMemory.uid":               notPlanState("the identity of the object the memory is of"),
		"objectMemory.journal":           planState("statusJournal"),
		"objectMemory.marks":             planState("replanMarks"),
		"objectMemory.attempts":          planState("firingAttempts"),
		"objectMemory.refused":           notPlanState("an object with duplicate rule names is reported once per change; no rule of it runs either way"),
		"objectMemory.refusedGeneration": notPlanState("see objectMemory.refused"),
		"objectMemory.abandoned":         notPlanState("pending histories the drain could not write are reported once"),

		// guard.go: the second-writer guard, which reports and decides no
		// firing; the journal's ownWrites it compares with.
		"statusWriters.mu":          roleDependency,
		"statusWriters.objects":     roleHolds,
		"writerLog.own":             planState("ownWrites"),
		"writerLog.seen":            roleHolds,
		"writerLog.reported":        notPlanState("when another writer was last reported, to bound the Warning events"),
		"seenWrite.resourceVersion": notPlanState("a status change the watch showed, compared with ownWrites at the next sync"),
		"seenWrite.manager":         notPlanState("see seenWrite.resourceVersion"),
		"seenWrite.at":              notPlanState("see seenWrite.resourceVersion"),
		"seenWrite.status":          notPlanState("see seenWrite.resourceVersion"),

		// Other state of the process, none of which decides a firing.
		"keyLocks.mu":                   roleDependency,
		"keyLocks.locks":                roleHolds,
		"keyLock.mu":                    roleDependency,
		"keyLock.refs":                  roleDependency,
		"deferredEvents.mu":             roleDependency,
		"deferredEvents.events":         notPlanState("Normal events wait for the status write that records their firings"),
		"objectEvents.uid":              notPlanState("see deferredEvents.events"),
		"objectEvents.messages":         notPlanState("see deferredEvents.events"),
		"deferredEvent.reason":          notPlanState("see deferredEvents.events"),
		"deferredEvent.message":         notPlanState("see deferredEvents.events"),
		"StoredFields.MaxDelaySeconds":  notPlanState("the installed CRD's schema, read at start-up"),
		"StoredFields.LastScheduleTime": notPlanState("the installed CRD's schema, read at start-up"),
		"scheduleCache.mu":              roleDependency,
		"scheduleCache.m":               notPlanState("parsed schedules, derived from the spec"),
		"scheduleKey.expr":              notPlanState("see scheduleCache.m"),
		"scheduleKey.zone":              notPlanState("see scheduleCache.m"),
		"scheduleKey.hasZone":           notPlanState("see scheduleCache.m"),
		"scheduleEntry.sched":           notPlanState("see scheduleCache.m"),
		"scheduleEntry.err":             notPlanState("see scheduleCache.m"),
		"watchCounts.mu":                roleDependency,
		"watchCounts.objects":           notPlanState("the watched objects gauge"),
		"watchCounts.rules":             notPlanState("the watched rules gauge"),
		"autoscalers.indexers":          roleDependency,
		"autoscalers.kinds":             roleDependency,
		"autoscalers.mu":                roleDependency,
		"autoscalers.reported":          notPlanState("when an object's autoscaler conflict was last reported, to bound the Warning events"),
	},
	vars: map[string]string{
		"targetOutcomes":  notPlanState("the metric's label values"),
		"targetKinds":     notPlanState("the metric's label values"),
		"registerOnce":    roleDependency,
		"interner":        notPlanState("strings shared by the cached objects"),
		"zones":           notPlanState("time zone pointers shared by the cached objects"),
		"noRest":          notPlanState("the empty metadata the cached objects' getters read when an object has none"),
		"AllStoredFields": notPlanState("a constant of the schema's fields"),
	},
}

// TestCronScalerPlanStateStaysInItsConcepts checks cronscalerPlanState on
// the checkout.
func TestCronScalerPlanStateStaysInItsConcepts(t *testing.T) {
	root := filepath.Join("..", "..")
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("the repository's root is not %s: %v", root, err)
	}
	problems, err := checkPlanState(os.DirFS(root), cronscalerPlanState)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Error(p)
	}
}

// Roles of a field or package-level variable outside the concept files.
const (
	// roleHolds is a field whose type is a struct of the package, whose
	// fields are listed in turn.
	roleHolds = "holds"
	// roleDependency is a client, lister, queue, recorder, clock, setting
	// or lock: no state of the controller's own.
	roleDependency     = "dependency"
	planStatePrefix    = "plan state: "
	notPlanStatePrefix = "not plan state: "
)

// roleUnlisted is the role of what is not listed, which unlisted reports.
const roleUnlisted = ""

// unlisted says what is wrong with a field or variable that is not listed,
// declared in file, whose type names the package's types mentioned.
func unlisted(what, file string, concepts map[string]string, mentioned []string) string {
	for _, m := range mentioned {
		if home, concept := concepts[m]; concept {
			return fmt.Sprintf("%s (%s) holds %s, plan state, outside its concept's file %s: keep it in that concept, or list it as %q and say so in docs/architecture.md",
				what, file, m, home, planState(m))
		}
	}
	return fmt.Sprintf("%s (%s) may keep state and is not listed: say which concept of the plan state holds it (%q, and keep it in that concept's file), why it is not plan state (%q...), or that it is a %s",
		what, file, planState("<type>"), notPlanStatePrefix, roleDependency)
}

// planState is the role of a field that holds the concept type concept.
func planState(concept string) string { return planStatePrefix + concept }

// notPlanState is the role of a field that keeps state that decides no
// firing, saying why.
func notPlanState(why string) string { return notPlanStatePrefix + why }

// planStateRules say where a controller's plan state may be kept.
type planStateRules struct {
	// dir is the package's directory, slash-separated from the root.
	dir string
	// root is the struct everything the controller keeps hangs off.
	root string
	// concepts are the concept types, by the file that declares each.
	concepts map[string]string
	// conceptFiles are the files of the concepts.
	conceptFiles []string
	// fields are the fields of the structs reachable from root outside
	// the concept files, as "Type.field", with their roles.
	fields map[string]string
	// vars are the package-level variables but the metrics (a call of
	// metrics.New...), with their roles.
	vars map[string]string
}

// typeDecl is a type the package declares.
type typeDecl struct {
	file string
	spec *ast.TypeSpec
}

// checkPlanState checks the package of r.dir in fsys (its Go files but the
// tests) against r and returns what breaks it.
func checkPlanState(fsys fs.FS, r planStateRules) ([]string, error) {
	types, vars, err := parsePackage(fsys, r.dir)
	if err != nil {
		return nil, err
	}
	var problems []string
	for name, file := range r.concepts {
		switch d, ok := types[name]; {
		case !ok:
			problems = append(problems, fmt.Sprintf("concept type %s is not declared: docs/architecture.md names it, in %s", name, file))
		case d.file != file:
			problems = append(problems, fmt.Sprintf("concept type %s is declared in %s, not in its concept's file %s", name, d.file, file))
		}
	}
	inConcepts := func(name string) bool {
		_, concept := r.concepts[name]
		return concept || slices.Contains(r.conceptFiles, types[name].file)
	}
	// check says what is wrong with something of role that refers to the
	// package's types mentioned, and queues the types to look into.
	var queue []string
	check := func(what, role string, mentioned []string) {
		var held []string
		for _, m := range mentioned {
			if _, concept := r.concepts[m]; concept {
				held = append(held, m)
			}
			if !inConcepts(m) {
				queue = append(queue, m)
			}
		}
		switch concept, isPlan := strings.CutPrefix(role, planStatePrefix); {
		case role == roleUnlisted:
		case isPlan && !slices.Contains(held, concept):
			problems = append(problems, fmt.Sprintf("%s is listed as %q, but does not hold a %s", what, role, concept))
		case !isPlan && len(held) > 0:
			problems = append(problems, fmt.Sprintf("%s holds %s, plan state, but is listed as %q: list it as %q", what, strings.Join(held, ", "), role, planState(held[0])))
		case role == roleHolds && len(mentioned) == 0:
			problems = append(problems, fmt.Sprintf("%s is listed as %q, but its type is no struct of the package", what, role))
		}
	}
	seenVars := map[string]bool{}
	for _, v := range vars {
		if slices.Contains(r.conceptFiles, v.file) || isMetric(v.value) {
			continue
		}
		seenVars[v.name] = true
		var mentioned []string
		for _, e := range []ast.Expr{v.typ, v.value} {
			if e != nil {
				mentioned = append(mentioned, mentionedTypes(e, types)...)
			}
		}
		role, listed := r.vars[v.name]
		if !listed {
			problems = append(problems, unlisted("variable "+v.name, v.file, r.concepts, mentioned))
			role = roleUnlisted
		}
		check("variable "+v.name, role, mentioned)
	}
	for name := range r.vars {
		if !seenVars[name] {
			problems = append(problems, fmt.Sprintf("variable %s is listed, but there is no such package-level variable outside the concept files: remove it", name))
		}
	}
	if _, ok := types[r.root]; !ok {
		problems = append(problems, fmt.Sprintf("%s, which everything the controller keeps hangs off, is not declared", r.root))
	}
	seen := map[string]bool{}
	visited := map[string]bool{}
	for queue = append([]string{r.root}, queue...); len(queue) > 0; {
		name := queue[0]
		queue = queue[1:]
		if visited[name] {
			continue
		}
		visited[name] = true
		st, ok := types[name].spec.Type.(*ast.StructType)
		if !ok {
			continue
		}
		for _, f := range st.Fields.List {
			names := fieldNames(f)
			for _, n := range names {
				key := name + "." + n
				seen[key] = true
				mentioned := mentionedTypes(f.Type, types)
				role, listed := r.fields[key]
				if !listed {
					problems = append(problems, unlisted(key, types[name].file, r.concepts, mentioned))
					role = roleUnlisted
				}
				check(key, role, mentioned)
			}
		}
	}
	for key := range r.fields {
		if !seen[key] {
			problems = append(problems, fmt.Sprintf("%s is listed, but no such field is reached from %s outside the concept files: remove it", key, r.root))
		}
	}
	sort.Strings(problems)
	return slices.Compact(problems), nil
}

// varDecl is a package-level variable.
type varDecl struct {
	name, file string
	typ, value ast.Expr
}

// parsePackage returns the types and package-level variables the Go files
// of dir declare, tests aside.
func parsePackage(fsys fs.FS, dir string) (map[string]typeDecl, []varDecl, error) {
	entries, err := fs.ReadDir(fsys, dir)
	if err != nil {
		return nil, nil, err
	}
	fset := token.NewFileSet()
	types := map[string]typeDecl{}
	var vars []varDecl
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			continue
		}
		src, err := fs.ReadFile(fsys, path.Join(dir, name))
		if err != nil {
			return nil, nil, err
		}
		f, err := parser.ParseFile(fset, name, src, parser.SkipObjectResolution)
		if err != nil {
			return nil, nil, err
		}
		for _, d := range f.Decls {
			g, ok := d.(*ast.GenDecl)
			if !ok {
				continue
			}
			for _, s := range g.Specs {
				switch s := s.(type) {
				case *ast.TypeSpec:
					types[s.Name.Name] = typeDecl{file: name, spec: s}
				case *ast.ValueSpec:
					if g.Tok != token.VAR {
						continue
					}
					for i, n := range s.Names {
						v := varDecl{name: n.Name, file: name, typ: s.Type}
						if i < len(s.Values) {
							v.value = s.Values[i]
						}
						vars = append(vars, v)
					}
				}
			}
		}
	}
	return types, vars, nil
}

// fieldNames are the names of a struct field: its type's for an embedded
// one.
func fieldNames(f *ast.Field) []string {
	var names []string
	for _, n := range f.Names {
		names = append(names, n.Name)
	}
	if len(names) > 0 {
		return names
	}
	t := f.Type
	if s, ok := t.(*ast.StarExpr); ok {
		t = s.X
	}
	switch t := t.(type) {
	case *ast.Ident:
		return []string{t.Name}
	case *ast.SelectorExpr:
		return []string{t.Sel.Name}
	}
	return []string{fmt.Sprintf("%T", t)}
}

// mentionedTypes are the package's types that e names (another package's
// are passed over).
func mentionedTypes(e ast.Expr, types map[string]typeDecl) []string {
	var out []string
	ast.Inspect(e, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.SelectorExpr:
			return false
		case *ast.Ident:
			if _, ok := types[n.Name]; ok && !slices.Contains(out, n.Name) {
				out = append(out, n.Name)
			}
		}
		return true
	})
	return out
}

// isMetric says whether a variable is set to a new metric
// (metrics.NewCounter and the like): its state is the metric's.
func isMetric(value ast.Expr) bool {
	call, ok := value.(*ast.CallExpr)
	if !ok {
		return false
	}
	sel, ok := call.Fun.(*ast.SelectorExpr)
	if !ok {
		return false
	}
	pkg, ok := sel.X.(*ast.Ident)
	return ok && pkg.Name == "metrics" && strings.HasPrefix(sel.Sel.Name, "New")
}

// TestCheckPlanState checks the check itself, on a made-up package.
func TestCheckPlanState(t *testing.T) {
	fsys := fstest.MapFS{
		"p/start.go": {Data: []byte("package p\n\nimport \"time\"\n\ntype processStart struct{ at time.Time }\n")},
		"p/controller.go": {Data: []byte(`package p

import (
	"sync"
	"time"

	"example.com/metrics"
)

type Controller struct {
	mu        sync.Mutex
	start     processStart
	memory    *memory
	lastFired map[string]time.Time
}

type memory struct{ objects map[string]*objectMemory }

type objectMemory struct {
	marks time.Time
	again processStart
}

var cache = map[string]processStart{}

var fired = metrics.NewCounter()
`)},
		"p/controller_test.go": {Data: []byte("package p\n\ntype fake struct{ Controller }\n")},
	}
	rules := planStateRules{
		dir:          "p",
		root:         "Controller",
		concepts:     map[string]string{"processStart": "start.go", "replanMarks": "marks.go"},
		conceptFiles: []string{"start.go", "marks.go"},
		fields: map[string]string{
			"Controller.mu":      roleDependency,
			"Controller.start":   planState("processStart"),
			"Controller.memory":  roleHolds,
			"memory.objects":     roleHolds,
			"objectMemory.marks": planState("replanMarks"),
			"objectMemory.gone":  roleDependency,
		},
		vars: map[string]string{"cache": roleDependency},
	}
	problems, err := checkPlanState(fsys, rules)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		`Controller.lastFired (controller.go) may keep state and is not listed`,
		`concept type replanMarks is not declared`,
		`objectMemory.again (controller.go) holds processStart, plan state, outside its concept's file start.go`,
		`objectMemory.gone is listed, but no such field is reached from Controller`,
		`objectMemory.marks is listed as "plan state: replanMarks", but does not hold a replanMarks`,
		`variable cache holds processStart, plan state, but is listed as "dependency"`,
	}
	if len(problems) != len(want) {
		t.Fatalf("problems:\n%s\nwant %d:\n%s", strings.Join(problems, "\n"), len(want), strings.Join(want, "\n"))
	}
	for i, w := range want {
		if !strings.HasPrefix(problems[i], w) {
			t.Errorf("problem %d: %q, want it to start with %q", i, problems[i], w)
		}
	}
}
