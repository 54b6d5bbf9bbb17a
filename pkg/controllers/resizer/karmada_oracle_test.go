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

package resizer

// The rendering oracle of the resizer's Karmada mode (issue 35, "The method:
// render what each member gets, and check it"). A seeded, randomized run
// drives the real controller (the karmadaHarness: the production sync path,
// fake clientsets, a fake clock) through steps: template edits, AddonResizer
// edits, members joining, leaving, growing and going NotReady, other
// parties' OverridePolicies, a second AddonResizer, controller restarts,
// failed and lost OverridePolicy writes and a policy cache that lags behind
// the resizer's own writes. The queue is simulated: a change enqueues the
// AddonResizers at once, a sync's requeue-after and error backoff are
// honoured in fake time, a status write enqueues its AddonResizer again (its
// informer's event) and a policy write enqueues every AddonResizer of the
// namespace (onOverridePolicy). After every step each member's workload is
// rendered as Karmada renders it (render_test.go) and checked; see check(),
// and checkReadouts() for the `kubectl get` columns and `explain`.
//
// Without flags TestKarmadaOracle runs oracleSeeds. As a soak:
//
//	nice go test ./pkg/controllers/resizer/ -run 'TestKarmadaOracle$' -count=1 -timeout 0 -args -oracle.seeds=N [-oracle.first=F] [-oracle.steps=S]
//
// (or SCALEPLANE_SOAK_SEEDS=N in the environment). A failing seed prints its
// step log and replays alone with -args -oracle.seed=S -oracle.v.
//
// This file holds the flags, the run loop and the reporting. The rest is in
// karmada_oracle_steps_test.go (the step generator),
// karmada_oracle_apply_test.go (the world written to the harness, the
// reactor and its faults), karmada_oracle_queue_test.go (the simulated
// queue), karmada_oracle_checks_test.go (the checks of the whole world),
// karmada_oracle_addonresizer_checks_test.go (the invariants of one
// AddonResizer), karmada_oracle_explain_test.go (the columns and explain)
// and karmada_oracle_compare_test.go (the helpers).

import (
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	scaleplanev1alpha1 "github.com/scaleplane/scaleplane/pkg/apis/scaleplane/v1alpha1"
)

var (
	oracleSeed  = flag.Uint64("oracle.seed", 0, "run only this seed of the Karmada rendering oracle")
	oracleCount = flag.Int("oracle.seeds", 0, "run this many seeds from -oracle.first instead of the fixed ones (a soak); SCALEPLANE_SOAK_SEEDS too")
	oracleFirst = flag.Uint64("oracle.first", 1000, "the first seed of -oracle.seeds")
	oracleSteps = flag.Int("oracle.steps", 60, "steps per seed")
	oracleV     = flag.Bool("oracle.v", false, "print every seed's step log, and every violation")
	oracleDump  = flag.Int("oracle.dump", -1, "print the template, the OverridePolicies and the statuses after this step (with -oracle.seed)")
	oracleLogs  = flag.Bool("oracle.logs", false, "keep the controller's logs (test output)")
)

// oracleSeeds run in the unit tests.
var oracleSeeds = []uint64{1, 2, 3, 4, 5, 6, 7, 8}

func oracleSeedsToRun() []uint64 {
	n := *oracleCount
	if n == 0 {
		if v, err := strconv.Atoi(os.Getenv("SCALEPLANE_SOAK_SEEDS")); err == nil {
			n = v
		}
	}
	switch {
	case *oracleSeed != 0:
		return []uint64{*oracleSeed}
	case n > 0:
		out := make([]uint64, 0, n)
		for i := range n {
			out = append(out, *oracleFirst+uint64(i))
		}
		return out
	}
	return oracleSeeds
}

func TestKarmadaOracle(t *testing.T) {
	seeds := oracleSeedsToRun()
	steps, failed := 0, 0
	byInvariant := map[string][]string{}
	start := time.Now()
	for _, seed := range seeds {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			o := runOracle(t, seed, *oracleSteps)
			steps += len(o.log)
			if len(o.violations) == 0 {
				if *oracleV {
					t.Logf("seed %d: no violation\n%s", seed, o.describe(len(o.log)))
				}
				return
			}
			failed++
			for _, inv := range o.invariants() {
				byInvariant[inv] = append(byInvariant[inv], fmt.Sprint(seed))
			}
			t.Errorf("seed %d: %d violations; replay: go test ./pkg/controllers/resizer/ -run 'TestKarmadaOracle$' -count=1 -args -oracle.seed=%d -oracle.steps=%d -oracle.v\n%s\nsteps:\n%s",
				seed, len(o.violations), seed, *oracleSteps, o.summarize(*oracleV), o.describe(o.lastToShow()))
		})
	}
	var inv []string
	for k, v := range byInvariant {
		inv = append(inv, fmt.Sprintf("%s: %d seeds (%s)", k, len(v), strings.Join(v[:min(len(v), 10)], " ")))
	}
	sort.Strings(inv)
	t.Logf("%d seeds, %d steps, %d failing, in %v\n%s", len(seeds), steps, failed, time.Since(start).Round(time.Millisecond), strings.Join(inv, "\n"))
}

// The world the steps change.

var (
	oracleCPU    = []string{"50m", "100m", "130m", "200m", "300m", "450m", "600m", "1"}
	oracleMemory = []string{"64Mi", "100Mi", "128Mi", "200Mi", "300Mi", "450Mi", "600Mi", "1Gi"}
	memberPool   = []string{"m1", "m2", "m3", "m4", "m5"}
)

type oCluster struct {
	total   int32
	ready   metav1.ConditionStatus
	summary bool
}

type oContainer struct {
	name, image string
	req, lim    corev1.ResourceList // nil: the map is absent
}

// oAR is an AddonResizer as the steps left it.
type oAR struct {
	changed     time.Time // created, deleted or its federation changed
	name        string
	exists      bool
	incarnation int
	spec        scaleplanev1alpha1.AddonResizerSpec
}

func (a *oAR) settings() settings { return resolve(&a.spec) }

func (a *oAR) karmada() bool {
	return a.exists && a.spec.Federation != scaleplanev1alpha1.FederationNone
}

func (a *oAR) uid() types.UID { return types.UID(fmt.Sprintf("uid-%s-%d", a.name, a.incarnation)) }

type violation struct {
	step      int
	invariant string
	detail    string
}

type oracleRun struct {
	seed uint64
	t    *testing.T
	k    *karmadaHarness
	rng  *rand.Rand
	now  time.Time

	clusters   map[string]*oCluster
	placement  []string
	containers []oContainer
	ars        []*oAR            // ar, ar2
	foreign    map[string]string // name -> kind: "labels" (touches no resources), "cpu" (main's cpu request), "taken" (the resizer's name)

	// Faults.
	forbid        bool // every OverridePolicy write is refused (403)
	failNext      int  // the next writes fail before they are applied (500)
	loseNext      int  // the next writes are applied, and answered with an error (a timeout)
	lagNext       bool // the next sync after a policy write reads the policy cache before it shows the write
	lagging       bool
	faultFired    bool // an injected fault answered a write in this step
	applied       int  // OverridePolicy writes the API server applied
	forbidChanged time.Time
	rvCounter     int
	uidCounter    int
	queue         map[string]time.Time
	failures      map[string]int
	globalChange  time.Time
	memberChange  map[string]time.Time
	templateRev   int
	events        []string

	lastView   *worldView // check's, with its renderings, for checkReadouts
	recent     []string   // the last syncs, for a quiescence report
	step       int
	log        []string
	violations []violation
}

func runOracle(t *testing.T, seed uint64, steps int) *oracleRun {
	o := &oracleRun{
		seed:         seed,
		t:            t,
		rng:          rand.New(rand.NewPCG(seed, seed^0x5deece66d)),
		now:          t0,
		clusters:     map[string]*oCluster{},
		foreign:      map[string]string{},
		queue:        map[string]time.Time{},
		failures:     map[string]int{},
		memberChange: map[string]time.Time{},
	}
	o.k = newKarmadaHarness(t)
	if !*oracleLogs {
		// The controller's logs cost more than the run itself;
		// -oracle.logs keeps them.
		o.k.ctx = klog.NewContext(o.k.ctx, logr.Discard())
	}
	o.k.setNodes(0) // karmada-apiserver has no Nodes
	o.installReactor()
	o.setup()
	o.enqueueAll(o.now)
	o.settle(o.now)
	o.check()
	for o.step = 1; o.step <= steps; o.step++ {
		o.k.client.ClearActions()
		o.k.kube.ClearActions()
		o.faultFired = false
		o.events = nil
		what := o.mutate()
		dt := o.pickDuration()
		o.log = append(o.log, fmt.Sprintf("%3d %s +%v: %s", o.step, o.now.Sub(t0), dt, what))
		o.enqueueAll(o.now)
		o.settle(o.now.Add(dt))
		o.check()
		o.atRest()
		o.checkReadouts()
		o.collectGarbage()
		// An armed transient fault that no write met is dropped, so that
		// each step's faults are its own.
		o.failNext, o.loseNext, o.lagNext = 0, 0, false
	}
	return o
}

// Reporting.

func (o *oracleRun) describeMembers() string {
	var parts []string
	for _, n := range memberPool {
		c := o.clusters[n]
		placed := slices.Contains(o.placement, n)
		if c == nil && !placed {
			continue
		}
		s := n
		if c == nil {
			s += "(no Cluster)"
		} else {
			s += fmt.Sprintf("(%d nodes", c.total)
			if c.ready != metav1.ConditionTrue {
				s += ", Ready " + string(c.ready)
			}
			if !c.summary {
				s += ", no summary"
			}
			s += ")"
		}
		if !placed {
			s += "[not placed]"
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, " ")
}

func (o *oracleRun) describeTemplate() string {
	var parts []string
	for _, c := range o.containers {
		if c.name == containerName {
			parts = append(parts, fmt.Sprintf("main req%s lim%s", shortList(c.req), shortList(c.lim)))
		} else {
			parts = append(parts, c.name)
		}
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

func describeSpec(s *scaleplanev1alpha1.AddonResizerSpec) string {
	var rs []string
	for _, r := range s.Resources {
		rs = append(rs, fmt.Sprintf("%s %s+%s", r.Name, r.Base.String(), r.ExtraPerUnit.String()))
	}
	out := fmt.Sprintf("{%s} setLimits %v threshold %d", strings.Join(rs, ", "), ptr.Deref(s.SetLimits, true), s.Threshold)
	if s.Estimator.Type != "" {
		out += " " + string(s.Estimator.Type)
	}
	if s.ScaleUpDelay != nil {
		out += fmt.Sprintf(" up %v down %v", s.ScaleUpDelay.Duration, s.ScaleDownDelay.Duration)
	}
	if s.Federation != "" {
		out += " federation " + string(s.Federation)
	}
	return out
}

func (o *oracleRun) invariants() []string {
	seen := map[string]bool{}
	var out []string
	for _, v := range o.violations {
		if !seen[v.invariant] {
			seen[v.invariant] = true
			out = append(out, v.invariant)
		}
	}
	return out
}

// summarize lists each invariant's first violation (all with verbose).
func (o *oracleRun) summarize(all bool) string {
	var b strings.Builder
	count := map[string]int{}
	for _, v := range o.violations {
		count[v.invariant]++
	}
	seen := map[string]bool{}
	for _, v := range o.violations {
		if seen[v.invariant] && !all {
			continue
		}
		seen[v.invariant] = true
		fmt.Fprintf(&b, "  seed %d step %d %s (%d in all): %s\n", o.seed, v.step, v.invariant, count[v.invariant], v.detail)
	}
	return b.String()
}

// lastToShow is the last step the log shows: a few after the last first
// violation of an invariant.
func (o *oracleRun) lastToShow() int {
	last := 0
	seen := map[string]bool{}
	for _, v := range o.violations {
		if !seen[v.invariant] {
			seen[v.invariant] = true
			last = max(last, v.step)
		}
	}
	return min(last+2, len(o.log))
}

func (o *oracleRun) describe(upTo int) string {
	return strings.Join(o.log[:min(upTo+1, len(o.log))], "\n")
}
