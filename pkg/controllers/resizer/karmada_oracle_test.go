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
// rendered as Karmada renders it (render_test.go) and checked; see check().
//
// Without flags TestKarmadaOracle runs oracleSeeds. As a soak:
//
//	nice go test ./pkg/controllers/resizer/ -run 'TestKarmadaOracle$' -count=1 -timeout 0 -args -oracle.seeds=N [-oracle.first=F] [-oracle.steps=S]
//
// (or SCALEPLANE_SOAK_SEEDS=N in the environment). A failing seed prints its
// step log and replays alone with -args -oracle.seed=S -oracle.v.

import (
	"encoding/json"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	clusterv1alpha1 "github.com/scaleplane/scaleplane/pkg/apis/cluster/v1alpha1"
	policyv1alpha1 "github.com/scaleplane/scaleplane/pkg/apis/policy/v1alpha1"
	scaleplanev1alpha1 "github.com/scaleplane/scaleplane/pkg/apis/scaleplane/v1alpha1"
	clusterlisters "github.com/scaleplane/scaleplane/pkg/generated/listers/cluster/v1alpha1"
	policylisters "github.com/scaleplane/scaleplane/pkg/generated/listers/policy/v1alpha1"
	worklisters "github.com/scaleplane/scaleplane/pkg/generated/listers/work/v1alpha2"
	"github.com/scaleplane/scaleplane/pkg/resizeestimate"
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

	recent     []string // the last syncs, for a quiescence report
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
		o.collectGarbage()
		// An armed transient fault that no write met is dropped, so that
		// each step's faults are its own.
		o.failNext, o.loseNext, o.lagNext = 0, 0, false
	}
	return o
}

// Setup: two members, a template, the AddonResizer.
func (o *oracleRun) setup() {
	o.clusters["m1"] = &oCluster{total: int32(o.rng.IntN(60)), ready: metav1.ConditionTrue, summary: true}
	o.clusters["m2"] = &oCluster{total: int32(o.rng.IntN(60)), ready: metav1.ConditionTrue, summary: true}
	o.placement = []string{"m1", "m2"}
	o.containers = []oContainer{
		{name: "sidecar", image: "sidecar", req: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("5m")}},
		o.randomMain(),
	}
	if o.rng.IntN(3) == 0 {
		o.containers = append(o.containers, oContainer{name: "extra", image: "extra", req: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("32Mi")}})
	}
	o.applyClusters()
	o.applyTemplate()
	ar := &oAR{name: "ar", exists: true}
	ar.spec = addonResizer("ar").Spec
	o.randomizeSpec(ar)
	o.ars = []*oAR{ar, {name: "ar2"}}
	o.createAR(ar)
	o.log = append(o.log, fmt.Sprintf("  0 setup: members %s; template %s; ar %s", o.describeMembers(), o.describeTemplate(), describeSpec(&ar.spec)))
	o.globalChange = o.now
}

func (o *oracleRun) randomMain() oContainer {
	c := oContainer{name: containerName, image: "addon:1"}
	switch o.rng.IntN(4) {
	case 0: // no requests map
	case 1:
		c.req = corev1.ResourceList{corev1.ResourceCPU: o.pickQ(corev1.ResourceCPU)}
	default:
		c.req = corev1.ResourceList{corev1.ResourceCPU: o.pickQ(corev1.ResourceCPU), corev1.ResourceMemory: o.pickQ(corev1.ResourceMemory)}
	}
	switch o.rng.IntN(4) {
	case 0:
		c.lim = corev1.ResourceList{corev1.ResourceCPU: o.pickQ(corev1.ResourceCPU)}
	case 1:
		c.lim = corev1.ResourceList{corev1.ResourceCPU: o.pickQ(corev1.ResourceCPU), corev1.ResourceMemory: o.pickQ(corev1.ResourceMemory)}
	}
	validate(&c)
	return c
}

// validate keeps the template valid as the API server would: a request
// is never above its limit (a Deployment with one is refused).
func validate(c *oContainer) {
	for name, l := range c.lim {
		if r, ok := c.req[name]; ok && r.Cmp(l) > 0 {
			c.req[name] = l.DeepCopy()
		}
	}
}

func (o *oracleRun) pickQ(name corev1.ResourceName) resource.Quantity {
	if name == corev1.ResourceCPU {
		return resource.MustParse(oracleCPU[o.rng.IntN(len(oracleCPU))])
	}
	return resource.MustParse(oracleMemory[o.rng.IntN(len(oracleMemory))])
}

func (o *oracleRun) pickDuration() time.Duration {
	ds := []time.Duration{0, time.Second, 20 * time.Second, time.Minute, 2 * time.Minute, 5 * time.Minute, 12 * time.Minute}
	return ds[o.rng.IntN(len(ds))]
}

func (o *oracleRun) randomizeSpec(a *oAR) {
	a.spec.Resources = nil
	if o.rng.IntN(4) != 0 {
		a.spec.Resources = append(a.spec.Resources, scaleplanev1alpha1.ResourceScaling{Name: corev1.ResourceCPU, Base: resource.MustParse("100m"), ExtraPerUnit: resource.MustParse("10m")})
	}
	if len(a.spec.Resources) == 0 || o.rng.IntN(2) == 0 {
		a.spec.Resources = append(a.spec.Resources, scaleplanev1alpha1.ResourceScaling{Name: corev1.ResourceMemory, Base: resource.MustParse("100Mi"), ExtraPerUnit: resource.MustParse("10Mi")})
	}
	a.spec.SetLimits = ptr.To(o.rng.IntN(2) == 0)
	a.spec.Threshold = []int32{0, 5, 20}[o.rng.IntN(3)]
	if o.rng.IntN(3) == 0 {
		a.spec.Estimator = scaleplanev1alpha1.Estimator{Type: scaleplanev1alpha1.ExponentialEstimator, MinClusterSize: 16}
	} else {
		a.spec.Estimator = scaleplanev1alpha1.Estimator{}
	}
	o.randomDelays(a)
}

func (o *oracleRun) randomDelays(a *oAR) {
	ds := []time.Duration{0, 30 * time.Second, 2 * time.Minute, 10 * time.Minute}
	a.spec.ScaleUpDelay = &metav1.Duration{Duration: ds[o.rng.IntN(len(ds))]}
	a.spec.ScaleDownDelay = &metav1.Duration{Duration: ds[o.rng.IntN(len(ds))]}
}

// mutate makes one random step and says what it did.
func (o *oracleRun) mutate() string {
	switch r := o.rng.IntN(100); {
	case r < 30:
		return o.mutateMembers()
	case r < 50:
		return o.mutateTemplate()
	case r < 63:
		return o.mutateSpec(o.ars[0])
	case r < 66:
		return o.deleteOrCreate(o.ars[0])
	case r < 71:
		return o.mutateSecond()
	case r < 77:
		return o.mutateForeign()
	case r < 88:
		return o.mutateFaults()
	case r < 92:
		o.restart()
		return "controller restarts (state from status only)"
	}
	return "time passes"
}

func (o *oracleRun) mutateMembers() string {
	changed := func(n string) { o.memberChange[n] = o.now }
	var absent []string
	for _, n := range memberPool {
		if !slices.Contains(o.placement, n) {
			absent = append(absent, n)
		}
	}
	pick := func(list []string) string { return list[o.rng.IntN(len(list))] }
	switch o.rng.IntN(8) {
	case 0, 1:
		if len(absent) == 0 {
			break
		}
		n := pick(absent)
		if o.clusters[n] == nil || o.rng.IntN(3) == 0 {
			o.clusters[n] = &oCluster{total: int32(o.rng.IntN(60)), ready: metav1.ConditionTrue, summary: true}
		}
		o.placement = append(o.placement, n)
		sort.Strings(o.placement)
		changed(n)
		o.applyClusters()
		return fmt.Sprintf("%s joins (%s)", n, o.describeMembers())
	case 2:
		if len(o.placement) == 0 {
			break
		}
		n := pick(o.placement)
		o.placement = slices.DeleteFunc(o.placement, func(s string) bool { return s == n })
		what := "leaves the placement"
		if o.rng.IntN(2) == 0 {
			delete(o.clusters, n)
			what = "leaves the placement and is unjoined (Cluster deleted)"
		}
		changed(n)
		o.applyClusters()
		return n + " " + what
	}
	if len(o.placement) == 0 {
		return "no member to change"
	}
	n := pick(o.placement)
	c := o.clusters[n]
	if c == nil {
		c = &oCluster{total: int32(o.rng.IntN(60)), ready: metav1.ConditionTrue, summary: true}
		o.clusters[n] = c
		changed(n)
		o.applyClusters()
		return n + "'s Cluster comes back"
	}
	var what string
	switch o.rng.IntN(6) {
	case 0, 1, 2:
		c.total = int32(max(0, int(c.total)+o.rng.IntN(41)-20))
		what = fmt.Sprintf("%s has %d nodes", n, c.total)
	case 3:
		if c.ready == metav1.ConditionTrue {
			c.ready = []metav1.ConditionStatus{metav1.ConditionFalse, metav1.ConditionUnknown}[o.rng.IntN(2)]
			if o.rng.IntN(2) == 0 {
				c.total = 0 // the summary Karmada keeps is often 0
			}
			what = fmt.Sprintf("%s goes NotReady (Ready %s, %d nodes)", n, c.ready, c.total)
		} else {
			c.ready = metav1.ConditionTrue
			c.total = int32(o.rng.IntN(60))
			what = fmt.Sprintf("%s is Ready again with %d nodes", n, c.total)
		}
	case 4:
		c.summary = !c.summary
		what = fmt.Sprintf("%s's nodeSummary present: %v", n, c.summary)
	case 5:
		delete(o.clusters, n)
		what = n + "'s Cluster is deleted (still placed)"
	}
	changed(n)
	o.applyClusters()
	return what
}

func (o *oracleRun) mainIndex() int {
	return slices.IndexFunc(o.containers, func(c oContainer) bool { return c.name == containerName })
}

func (o *oracleRun) mutateTemplate() string {
	o.globalChange = o.now
	i := o.mainIndex()
	var what string
	switch r := o.rng.IntN(12); {
	case r == 0: // a container added
		o.templateRev++
		c := oContainer{name: fmt.Sprintf("c%d", o.templateRev), image: "c", req: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10m")}}
		at := o.rng.IntN(len(o.containers) + 1)
		o.containers = slices.Insert(o.containers, at, c)
		what = fmt.Sprintf("container %s added at %d", c.name, at)
	case r == 1 && len(o.containers) > 1: // a container removed (maybe main)
		at := o.rng.IntN(len(o.containers))
		what = fmt.Sprintf("container %s removed from %d", o.containers[at].name, at)
		o.containers = slices.Delete(o.containers, at, at+1)
	case r == 2: // reordered
		o.rng.Shuffle(len(o.containers), func(a, b int) { o.containers[a], o.containers[b] = o.containers[b], o.containers[a] })
		what = "containers reordered"
	case i < 0: // main comes back
		c := o.randomMain()
		at := o.rng.IntN(len(o.containers) + 1)
		o.containers = slices.Insert(o.containers, at, c)
		what = fmt.Sprintf("container main added back at %d", at)
	case r == 3:
		o.containers[i].image = fmt.Sprintf("addon:%d", o.rng.IntN(100))
		what = "main's image bumped"
	case r == 4:
		o.containers[i].lim = nil
		what = "main's limits map removed"
	case r == 5:
		o.containers[i].req = nil
		what = "main's requests map removed"
	case r <= 8: // a limit set or changed
		name := []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory}[o.rng.IntN(2)]
		if o.containers[i].lim == nil {
			o.containers[i].lim = corev1.ResourceList{}
		}
		q := o.pickQ(name)
		o.containers[i].lim[name] = q
		what = fmt.Sprintf("main's %s limit set to %s", name, q.String())
	case r == 9: // a limit removed
		name := []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory}[o.rng.IntN(2)]
		delete(o.containers[i].lim, name)
		what = fmt.Sprintf("main's %s limit removed", name)
	default: // a request set or removed
		name := []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory}[o.rng.IntN(2)]
		if o.rng.IntN(3) == 0 {
			delete(o.containers[i].req, name)
			what = fmt.Sprintf("main's %s request removed", name)
			break
		}
		if o.containers[i].req == nil {
			o.containers[i].req = corev1.ResourceList{}
		}
		q := o.pickQ(name)
		o.containers[i].req[name] = q
		what = fmt.Sprintf("main's %s request set to %s", name, q.String())
	}
	if what == "" {
		return "template unchanged"
	}
	if i := o.mainIndex(); i >= 0 {
		validate(&o.containers[i])
	}
	o.applyTemplate()
	return "template: " + what + " -> " + o.describeTemplate()
}

func (o *oracleRun) mutateSpec(a *oAR) string {
	if !a.exists {
		return o.deleteOrCreate(a)
	}
	o.globalChange = o.now
	var what string
	switch o.rng.IntN(7) {
	case 0, 1:
		a.spec.SetLimits = ptr.To(!ptr.Deref(a.spec.SetLimits, true))
		what = fmt.Sprintf("setLimits %v", *a.spec.SetLimits)
	case 2:
		old := a.spec.SetLimits
		o.randomizeSpec(a)
		a.spec.SetLimits = old
		what = "resources, threshold, estimator, delays: " + describeSpec(&a.spec)
	case 3:
		if len(a.spec.Resources) == 2 {
			drop := o.rng.IntN(2)
			what = fmt.Sprintf("resource %s removed", a.spec.Resources[drop].Name)
			a.spec.Resources = slices.Delete(slices.Clone(a.spec.Resources), drop, drop+1)
		} else {
			old := a.spec.SetLimits
			o.randomizeSpec(a)
			a.spec.SetLimits = old
			what = "resources: " + describeSpec(&a.spec)
		}
	case 4:
		a.changed = o.now
		a.spec.Federation = []scaleplanev1alpha1.FederationMode{"", scaleplanev1alpha1.FederationAuto, scaleplanev1alpha1.FederationKarmada, scaleplanev1alpha1.FederationNone}[o.rng.IntN(4)]
		what = fmt.Sprintf("federation %q", a.spec.Federation)
	default:
		o.randomDelays(a)
		what = fmt.Sprintf("delays up %v down %v", a.spec.ScaleUpDelay.Duration, a.spec.ScaleDownDelay.Duration)
	}
	o.updateAR(a)
	return a.name + ": " + what
}

func (o *oracleRun) deleteOrCreate(a *oAR) string {
	o.globalChange = o.now
	a.changed = o.now
	if a.exists {
		o.check1(o.k.client.ScaleplaneV1alpha1().AddonResizers(ns).Delete(o.k.ctx, a.name, metav1.DeleteOptions{}))
		a.exists = false
		o.k.refresh()
		return a.name + " deleted"
	}
	a.incarnation++
	a.exists = true
	a.spec = addonResizer(a.name).Spec
	if a.name == "ar" {
		o.randomizeSpec(a)
	} else {
		o.secondSpec(a)
	}
	o.createAR(a)
	return a.name + " created: " + describeSpec(&a.spec)
}

// The second AddonResizer sizes memory (or cpu) of the same container,
// requests only, at once.
func (o *oracleRun) secondSpec(a *oAR) {
	name := corev1.ResourceMemory
	if o.rng.IntN(3) == 0 {
		name = corev1.ResourceCPU
	}
	base := map[corev1.ResourceName]string{corev1.ResourceCPU: "50m", corev1.ResourceMemory: "64Mi"}[name]
	extra := map[corev1.ResourceName]string{corev1.ResourceCPU: "5m", corev1.ResourceMemory: "2Mi"}[name]
	a.spec.Resources = []scaleplanev1alpha1.ResourceScaling{{Name: name, Base: resource.MustParse(base), ExtraPerUnit: resource.MustParse(extra)}}
	a.spec.SetLimits = ptr.To(false)
}

func (o *oracleRun) mutateSecond() string {
	a := o.ars[1]
	if a.exists && o.rng.IntN(2) == 0 {
		o.globalChange = o.now
		o.secondSpec(a)
		o.updateAR(a)
		return "ar2: " + describeSpec(&a.spec)
	}
	return o.deleteOrCreate(a)
}

func (o *oracleRun) mutateForeign() string {
	o.globalChange = o.now
	policies := o.k.client.PolicyV1alpha1().OverridePolicies(ns)
	switch o.rng.IntN(4) {
	case 0, 1:
		// Someone else's policy on the pod template's labels, by name
		// (the resizer's priority), named before or after the resizer's.
		name := []string{"aa-team", "zz-team"}[o.rng.IntN(2)]
		if _, ok := o.foreign[name]; ok {
			o.asOtherParty(func() error { return policies.Delete(o.k.ctx, name, metav1.DeleteOptions{}) })
			delete(o.foreign, name)
			return "another party's OverridePolicy " + name + " deleted"
		}
		o.createForeign(name, byName(addonName), "labels")
		return "another party's OverridePolicy " + name + " (pod template labels, by name)"
	case 2:
		// Someone else's policy on main's cpu request, by label: applied
		// before the resizer's.
		name := "zz-cpu"
		if _, ok := o.foreign[name]; ok {
			o.asOtherParty(func() error { return policies.Delete(o.k.ctx, name, metav1.DeleteOptions{}) })
			delete(o.foreign, name)
			return "another party's OverridePolicy " + name + " deleted"
		}
		if o.mainIndex() < 0 {
			return "no main container for another party's policy"
		}
		o.createForeign(name, byLabel(addonLabel, addonName), "cpu")
		return "another party's OverridePolicy zz-cpu (main's cpu request at its current index, by label)"
	}
	// The resizer's name taken by someone else's policy, or freed.
	name := policyNameFor("ar")
	if o.foreign[name] != "" {
		o.asOtherParty(func() error { return policies.Delete(o.k.ctx, name, metav1.DeleteOptions{}) })
		delete(o.foreign, name)
		return "the OverridePolicy ar-resizer of another party deleted (name freed)"
	}
	if _, err := policies.Get(o.k.ctx, name, metav1.GetOptions{}); err == nil {
		return "ar-resizer exists; its name cannot be taken"
	}
	o.createForeign(name, byName(addonName), "taken")
	return "another party creates an OverridePolicy named ar-resizer (pod template labels)"
}

func (o *oracleRun) createForeign(name string, sel []policyv1alpha1.ResourceSelector, kind string) {
	var ops []policyv1alpha1.PlaintextOverrider
	switch kind {
	case "cpu":
		i := o.mainIndex()
		path := fmt.Sprintf("/spec/template/spec/containers/%d/resources/requests", i)
		if o.containers[i].req == nil {
			ops = append(ops, op("add", path, map[string]string{"cpu": "333m"}))
		} else {
			ops = append(ops, op("add", path+"/cpu", "333m"))
		}
	default:
		ops = append(ops, op("add", "/spec/template/metadata/labels/team", "obs"))
	}
	p := &policyv1alpha1.OverridePolicy{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec:       policyv1alpha1.OverrideSpec{ResourceSelectors: sel, OverrideRules: []policyv1alpha1.RuleWithCluster{rule(nil, ops...)}},
	}
	o.foreign[name] = kind
	o.asOtherParty(func() error {
		_, err := o.k.client.PolicyV1alpha1().OverridePolicies(ns).Create(o.k.ctx, p, metav1.CreateOptions{})
		return err
	})
}

// asOtherParty writes as another party would: the faults are the
// resizer's.
func (o *oracleRun) asOtherParty(write func() error) {
	forbid, fail, lose := o.forbid, o.failNext, o.loseNext
	o.forbid, o.failNext, o.loseNext = false, 0, 0
	err := write()
	o.forbid, o.failNext, o.loseNext = forbid, fail, lose
	o.check1(err)
	o.refreshPolicies()
}

func (o *oracleRun) mutateFaults() string {
	switch o.rng.IntN(6) {
	case 0:
		o.failNext = 1 + o.rng.IntN(2)
		return fmt.Sprintf("the next %d OverridePolicy writes fail (500, not applied)", o.failNext)
	case 1:
		o.loseNext = 1
		return "the next OverridePolicy write is applied and its answer lost (timeout)"
	case 2, 3:
		o.lagNext = true
		return "the policy cache lags behind the next policy write"
	}
	o.forbid = !o.forbid
	o.globalChange = o.now
	o.forbidChanged = o.now
	if o.forbid {
		return "OverridePolicy writes are forbidden (403) from now on"
	}
	return "OverridePolicy writes are allowed again"
}

// Applying the world to the harness.

func (o *oracleRun) applyClusters() {
	var cs []*clusterv1alpha1.Cluster
	for _, n := range sortedKeys(o.clusters) {
		c := o.clusters[n]
		cl := member(n, c.total, c.total, c.ready)
		if !c.summary {
			cl.Status.NodeSummary = nil
		}
		cs = append(cs, cl)
	}
	o.k.setClusters(cs...)
	if len(o.placement) == 0 {
		o.k.setPlacement()
	} else {
		o.k.setPlacement(o.placement...)
	}
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func (o *oracleRun) applyTemplate() {
	d, err := o.k.kube.AppsV1().Deployments(ns).Get(o.k.ctx, addonName, metav1.GetOptions{})
	o.check1(err)
	d.Labels = map[string]string{addonLabel: addonName}
	d.Generation++
	d.Spec.Template.Spec.Containers = nil
	for _, c := range o.containers {
		d.Spec.Template.Spec.Containers = append(d.Spec.Template.Spec.Containers, corev1.Container{
			Name: c.name, Image: c.image,
			Resources: corev1.ResourceRequirements{Requests: c.req.DeepCopy(), Limits: c.lim.DeepCopy()},
		})
	}
	_, err = o.k.kube.AppsV1().Deployments(ns).Update(o.k.ctx, d, metav1.UpdateOptions{})
	o.check1(err)
	o.k.refresh()
}

func (o *oracleRun) createAR(a *oAR) {
	ar := addonResizer(a.name)
	ar.UID = a.uid()
	ar.Spec = *a.spec.DeepCopy()
	_, err := o.k.client.ScaleplaneV1alpha1().AddonResizers(ns).Create(o.k.ctx, ar, metav1.CreateOptions{})
	o.check1(err)
	o.k.refresh()
}

func (o *oracleRun) updateAR(a *oAR) {
	ar, err := o.k.client.ScaleplaneV1alpha1().AddonResizers(ns).Get(o.k.ctx, a.name, metav1.GetOptions{})
	o.check1(err)
	ar.Spec = *a.spec.DeepCopy()
	ar.Generation++
	_, err = o.k.client.ScaleplaneV1alpha1().AddonResizers(ns).Update(o.k.ctx, ar, metav1.UpdateOptions{})
	o.check1(err)
	o.k.refresh()
}

func (o *oracleRun) check1(err error) {
	o.t.Helper()
	if err != nil {
		o.t.Fatalf("step %d: %v", o.step, err)
	}
}

// restart builds a new controller, as a restarted process: state from
// status only, caches listed afresh.
func (o *oracleRun) restart() {
	o.k.newController()
	kc := o.k.harness.c.karmada
	kc.started = true
	kc.clusters = clusterlisters.NewClusterLister(o.k.clusters)
	kc.bindings = worklisters.NewResourceBindingLister(o.k.bindings)
	kc.policies = policylisters.NewOverridePolicyLister(o.k.policies)
}

// installReactor makes the fake clientset answer OverridePolicy writes as an
// API server does (resourceVersions and uids, 409 on a stale update or
// delete precondition, AlreadyExists) and injects the faults.
func (o *oracleRun) installReactor() {
	tracker := o.k.client.Tracker()
	gvr := policyv1alpha1.SchemeGroupVersion.WithResource("overridepolicies")
	gr := policyv1alpha1.Resource("overridepolicies")
	o.k.client.PrependReactor("*", "overridepolicies", func(action clienttesting.Action) (bool, runtime.Object, error) {
		verb := action.GetVerb()
		if verb != "create" && verb != "update" && verb != "delete" {
			return false, nil, nil
		}
		if o.forbid {
			o.faultFired = true
			return true, nil, apierrors.NewForbidden(gr, "", fmt.Errorf("RBAC: %s is not allowed", verb))
		}
		if o.failNext > 0 {
			o.failNext--
			o.faultFired = true
			return true, nil, apierrors.NewInternalError(fmt.Errorf("etcdserver: request timed out (injected, not applied)"))
		}
		lose := o.loseNext > 0
		if lose {
			o.loseNext--
		}
		obj, err := o.applyPolicyWrite(tracker, gvr, gr, action)
		if err == nil {
			o.applied++
		}
		if lose && err == nil {
			o.faultFired = true
			return true, nil, apierrors.NewTimeoutError("the write was applied, its answer lost (injected)", 1)
		}
		return true, obj, err
	})
}

func (o *oracleRun) applyPolicyWrite(tracker clienttesting.ObjectTracker, gvr schema.GroupVersionResource, gr schema.GroupResource, action clienttesting.Action) (runtime.Object, error) {
	// By verb: an UpdateAction is a CreateAction too, by its methods.
	switch action.GetVerb() {
	case "create":
		p := action.(clienttesting.CreateAction).GetObject().(*policyv1alpha1.OverridePolicy).DeepCopy()
		if _, err := tracker.Get(gvr, p.Namespace, p.Name); err == nil {
			return nil, apierrors.NewAlreadyExists(gr, p.Name)
		}
		o.rvCounter++
		o.uidCounter++
		p.ResourceVersion = strconv.Itoa(o.rvCounter)
		p.UID = types.UID(fmt.Sprintf("op-uid-%d", o.uidCounter))
		return p, tracker.Create(gvr, p, p.Namespace)
	case "update":
		p := action.(clienttesting.UpdateAction).GetObject().(*policyv1alpha1.OverridePolicy).DeepCopy()
		cur, err := tracker.Get(gvr, p.Namespace, p.Name)
		if err != nil {
			return nil, err
		}
		c := cur.(*policyv1alpha1.OverridePolicy)
		if p.ResourceVersion != "" && p.ResourceVersion != c.ResourceVersion {
			return nil, apierrors.NewConflict(gr, p.Name, fmt.Errorf("the object has been modified; please apply your changes to the latest version and try again"))
		}
		o.rvCounter++
		p.ResourceVersion = strconv.Itoa(o.rvCounter)
		p.UID = c.UID
		return p, tracker.Update(gvr, p, p.Namespace)
	case "delete":
		a := action.(clienttesting.DeleteAction)
		cur, err := tracker.Get(gvr, a.GetNamespace(), a.GetName())
		if err != nil {
			return nil, err
		}
		c := cur.(*policyv1alpha1.OverridePolicy)
		if pre := a.GetDeleteOptions().Preconditions; pre != nil && pre.UID != nil && *pre.UID != c.UID {
			return nil, apierrors.NewConflict(gr, c.Name, fmt.Errorf("precondition failed: UID in precondition: %s, UID in object meta: %s", *pre.UID, c.UID))
		}
		return nil, tracker.Delete(gvr, a.GetNamespace(), a.GetName())
	}
	return nil, fmt.Errorf("unexpected action %v", action)
}

// The simulated queue.

func (o *oracleRun) enqueue(name string, at time.Time) {
	if cur, ok := o.queue[name]; !ok || at.Before(cur) {
		o.queue[name] = at
	}
}

func (o *oracleRun) enqueueAll(at time.Time) {
	for _, a := range o.ars {
		// A deleted AddonResizer is synced once more (its delete event).
		o.enqueue(a.name, at)
	}
}

func (o *oracleRun) refreshPolicies() {
	list, err := o.k.client.PolicyV1alpha1().OverridePolicies(ns).List(o.k.ctx, metav1.ListOptions{})
	o.check1(err)
	replace(o.t, o.k.policies, list.Items)
}

func (o *oracleRun) countWrites() (policy, status, applied int) {
	for _, a := range o.k.client.Actions() {
		if !isWrite(a) {
			continue
		}
		switch {
		case a.GetResource().Resource == "overridepolicies":
			policy++
		case a.GetResource().Resource == "addonresizers" && a.GetSubresource() == "status":
			status++
		}
	}
	return policy, status, o.applied
}

// settle runs the queue until end.
func (o *oracleRun) settle(end time.Time) {
	for iter := 0; ; iter++ {
		name, at, ok := "", time.Time{}, false
		for _, n := range sortedKeys(o.queue) {
			if due := o.queue[n]; !due.After(end) && (!ok || due.Before(at)) {
				name, at, ok = n, due, true
			}
		}
		if !ok {
			break
		}
		if iter > 400 {
			o.violate("quiescence", fmt.Sprintf("more than 400 syncs in one step; the last: %s", strings.Join(o.recent, "; ")))
			o.queue = map[string]time.Time{}
			break
		}
		delete(o.queue, name)
		if at.After(o.now) {
			o.now = at
		}
		o.syncOnce(name)
	}
	o.now = end
	o.k.clock.SetTime(end)
	if o.lagging {
		o.lagging = false
		o.refreshPolicies()
	}
}

func (o *oracleRun) syncOnce(name string) {
	p0, s0, a0 := o.countWrites()
	d, err := o.k.trySyncAt(o.now, name)
	p1, s1, a1 := o.countWrites()
	o.events = append(o.events, o.k.events()...)
	// Only a write the API server applied makes an informer event; one
	// refused does not.
	policyWritten, statusWritten := a1 > a0, s1 > s0
	o.recent = append(o.recent, fmt.Sprintf("%s at %v: requeue %v err %v, policy writes %d, status writes %d", name, o.now.Sub(t0), d, err, p1-p0, s1-s0))
	if len(o.recent) > 4 {
		o.recent = o.recent[1:]
	}
	switch {
	case err != nil:
		n := o.failures[name]
		o.failures[name]++
		o.enqueue(name, o.now.Add(min(5*time.Millisecond<<min(n, 20), 1000*time.Second)))
	case d > 0:
		o.failures[name] = 0
		o.enqueue(name, o.now.Add(d))
	default:
		o.failures[name] = 0
	}
	if statusWritten {
		o.enqueue(name, o.now) // the AddonResizer's own update event
	}
	if policyWritten {
		for _, a := range o.ars {
			if a.exists {
				o.enqueue(a.name, o.now)
			}
		}
	}
	switch {
	case o.lagging:
		// The sync that read the lagging cache has run: catch up.
		o.lagging = false
		o.refreshPolicies()
	case policyWritten && o.lagNext:
		o.lagNext = false
		o.lagging = true // the next sync reads the cache as it was
	default:
		o.refreshPolicies()
	}
}

// atRest syncs every AddonResizer once more with caught-up caches: nothing
// is due, so nothing may be written.
func (o *oracleRun) atRest() {
	if o.forbid {
		return // a refused write is retried, by design
	}
	for _, a := range o.ars {
		if !a.exists {
			continue
		}
		p0, s0, _ := o.countWrites()
		before := o.statusJSON(a.name)
		_, _ = o.k.trySyncAt(o.now, a.name)
		o.events = append(o.events, o.k.events()...)
		p1, s1, _ := o.countWrites()
		o.refreshPolicies()
		if p1 > p0 {
			o.violate("policy-writes-at-rest", fmt.Sprintf("%s: %d OverridePolicy writes by a sync with nothing due", a.name, p1-p0))
		}
		if s1 > s0 {
			o.violate("status-writes-at-rest", fmt.Sprintf("%s: %d status writes by a sync with nothing due: %s", a.name, s1-s0, lineDiff(before, o.statusJSON(a.name))))
		}
	}
}

// quietSince tells whether the resizer has had leftBehindGrace since t and
// since writes were last forbidden to clean up (its retries back off).
func (o *oracleRun) quietSince(t time.Time) bool {
	if o.forbid {
		return false
	}
	since := t
	if o.forbidChanged.After(since) {
		since = o.forbidChanged
	}
	return !o.now.Before(since.Add(leftBehindGrace))
}

// leftBehindGrace is how long a deleted AddonResizer's policy may live:
// the resizer's retries back off to at most 1000 s (the workqueue's
// default). gcAfter is when the test plays Kubernetes' garbage collector,
// which removes a policy whose controller is gone: the test has none, and
// a new AddonResizer of the same name would otherwise find its name taken.
const (
	leftBehindGrace = 20 * time.Minute
	gcAfter         = 25 * time.Minute
)

// collectGarbage deletes the OverridePolicies whose controlling
// AddonResizer is gone since gcAfter.
func (o *oracleRun) collectGarbage() {
	list, err := o.k.client.PolicyV1alpha1().OverridePolicies(ns).List(o.k.ctx, metav1.ListOptions{})
	o.check1(err)
	for _, p := range list.Items {
		ref := metav1.GetControllerOf(&p)
		if ref == nil || ref.Kind != "AddonResizer" {
			continue
		}
		for _, a := range o.ars {
			if ref.Name == a.name && (!a.exists || ref.UID != a.uid()) && !o.now.Before(a.changed.Add(gcAfter)) {
				o.check1(o.k.client.Tracker().Delete(policyv1alpha1.SchemeGroupVersion.WithResource("overridepolicies"), ns, p.Name))
				o.refreshPolicies()
			}
		}
	}
}

func (o *oracleRun) statusJSON(name string) string {
	ar, err := o.k.client.ScaleplaneV1alpha1().AddonResizers(ns).Get(o.k.ctx, name, metav1.GetOptions{})
	if err != nil {
		return err.Error()
	}
	return string(must(json.MarshalIndent(ar.Status, "", " ")))
}

// lineDiff lists the lines of b that are not in a, and of a not in b.
func lineDiff(a, b string) string {
	al, bl := strings.Split(a, "\n"), strings.Split(b, "\n")
	var out []string
	for _, l := range al {
		if !slices.Contains(bl, l) {
			out = append(out, "-"+strings.TrimSpace(l))
		}
	}
	for _, l := range bl {
		if !slices.Contains(al, l) {
			out = append(out, "+"+strings.TrimSpace(l))
		}
	}
	return strings.Join(out, " ")
}

func (o *oracleRun) dump(v *worldView) {
	var b strings.Builder
	fmt.Fprintf(&b, "after step %d, template containers:\n%s\n", o.step, must(json.MarshalIndent(v.template.Spec.Template.Spec.Containers, "", " ")))
	for _, p := range v.policies {
		fmt.Fprintf(&b, "OverridePolicy %s (owner %q):\n%s\n", p.Name, v.owner[p.Name], must(json.MarshalIndent(p.Spec, "", " ")))
	}
	for _, a := range o.ars {
		if a.exists {
			fmt.Fprintf(&b, "%s status:\n%s\n", a.name, o.statusJSON(a.name))
		}
	}
	o.t.Log(b.String())
}

// tag marks an invariant broken while the AddonResizer is AmbiguousTarget
// (frozen by design: it neither resizes nor rewrites its policy), so that
// those are told apart.
func (o *oracleRun) tag(invariant string, ambiguous bool) string {
	if ambiguous {
		return invariant + "(ambiguous)"
	}
	return invariant
}

// ambiguousNow tells whether the two AddonResizers size a resource in
// common.
func (o *oracleRun) ambiguousNow() bool {
	a, b := o.ars[0], o.ars[1]
	return a.exists && b.exists && slices.ContainsFunc(a.settings().managed(), func(n corev1.ResourceName) bool { return slices.Contains(b.settings().managed(), n) })
}

// managedByOther tells whether another AddonResizer in Karmada mode sizes
// resource name.
func (o *oracleRun) managedByOther(a *oAR, name corev1.ResourceName) bool {
	for _, b := range o.ars {
		if b != a && b.karmada() && slices.Contains(b.settings().managed(), name) {
			return true
		}
	}
	return false
}

func resourceNames(cs ...*corev1.Container) []corev1.ResourceName {
	var out []corev1.ResourceName
	for _, c := range cs {
		if c == nil {
			continue
		}
		for _, l := range []corev1.ResourceList{c.Resources.Requests, c.Resources.Limits} {
			for n := range l {
				if !slices.Contains(out, n) {
					out = append(out, n)
				}
			}
		}
	}
	slices.Sort(out)
	return out
}

func (o *oracleRun) violate(invariant, detail string) {
	o.violations = append(o.violations, violation{step: o.step, invariant: invariant, detail: detail})
}

// The checks.

// worldView is what one check reads.
type worldView struct {
	template *appsv1.Deployment
	policies []*policyv1alpha1.OverridePolicy
	owner    map[string]string // policy name -> the AddonResizer (name) that controls it, "" for others
	clusters map[string]*clusterv1alpha1.Cluster
	memo     map[string]renderResult
	broken   map[string]bool
}

type renderResult struct {
	d   *appsv1.Deployment
	err error
}

func (o *oracleRun) view() *worldView {
	d, err := o.k.kube.AppsV1().Deployments(ns).Get(o.k.ctx, addonName, metav1.GetOptions{})
	o.check1(err)
	list, err := o.k.client.PolicyV1alpha1().OverridePolicies(ns).List(o.k.ctx, metav1.ListOptions{})
	o.check1(err)
	v := &worldView{template: asTemplate(d), owner: map[string]string{}, clusters: map[string]*clusterv1alpha1.Cluster{}}
	for i := range list.Items {
		p := &list.Items[i]
		v.policies = append(v.policies, p)
		if ref := metav1.GetControllerOf(p); ref != nil && ref.Kind == "AddonResizer" {
			for _, a := range o.ars {
				if a.exists && ref.Name == a.name && ref.UID == a.uid() {
					v.owner[p.Name] = a.name
				}
			}
		}
	}
	sort.Slice(v.policies, func(i, j int) bool { return v.policies[i].Name < v.policies[j].Name })
	for _, obj := range o.k.clusters.List() {
		c := obj.(*clusterv1alpha1.Cluster)
		v.clusters[c.Name] = c
	}
	return v
}

// render renders member m without the policies in exclude.
func (v *worldView) render(m string, exclude map[string]bool) (*appsv1.Deployment, error) {
	key := m + "|" + strings.Join(trueKeys(exclude), ",")
	if r, ok := v.memo[key]; ok {
		return r.d, r.err
	}
	d, err := v.renderOnce(m, exclude)
	if v.memo == nil {
		v.memo = map[string]renderResult{}
	}
	v.memo[key] = renderResult{d, err}
	return d, err
}

func trueKeys(m map[string]bool) []string {
	var out []string
	for k, v := range m {
		if v {
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out
}

func (v *worldView) renderOnce(m string, exclude map[string]bool) (*appsv1.Deployment, error) {
	var ps []*policyv1alpha1.OverridePolicy
	for _, p := range v.policies {
		if !exclude[p.Name] {
			ps = append(ps, p)
		}
	}
	obj, _, err := renderMember(v.template, v.clusters[m], nil, fromOverridePolicies(ps))
	if err != nil {
		return nil, err
	}
	return renderedDeployment(obj)
}

func mainContainer(d *appsv1.Deployment) *corev1.Container {
	for i := range d.Spec.Template.Spec.Containers {
		if d.Spec.Template.Spec.Containers[i].Name == containerName {
			return &d.Spec.Template.Spec.Containers[i]
		}
	}
	return nil
}

func (o *oracleRun) check() {
	v := o.view()
	if o.step == *oracleDump {
		o.dump(v)
	}
	// The template is never written in Karmada mode, nor by None on an API
	// server without Nodes.
	for _, a := range o.k.kube.Actions() {
		if a.GetVerb() == "patch" {
			o.violate("template-written", fmt.Sprintf("%s %s", a.GetVerb(), a.GetResource().Resource))
		}
	}
	for _, a := range o.ars {
		o.checkAR(v, a)
	}
	o.checkLimits(v)
	// A Warning OverridePolicyFailed with no injected fault is a failure
	// reported for a write that went through, or was never refused.
	if !o.faultFired && !o.forbid {
		for _, e := range o.events {
			if strings.HasPrefix(e, "Warning "+reasonOverridePolicyFailed) {
				o.violate("policy-failed-without-fault", e)
			}
		}
	}
}

// checkLimits: every container a member renders has its requests at most
// its limits (the member's API server refuses anything else, and then no
// template change reaches it), unless the template with the other parties'
// policies alone renders so.
func (o *oracleRun) checkLimits(v *worldView) {
	if o.forbid {
		// The resizers cannot write their policies: one written for an
		// older template stays until they can (UpToDate says why).
		return
	}
	broken := o.brokenForeign(v)
	resizers := copySet(broken)
	for n, owner := range v.owner {
		if owner != "" {
			resizers[n] = true
		}
	}
	for _, m := range o.placement {
		if v.clusters[m] == nil {
			continue
		}
		full, err1 := v.render(m, broken)
		base, err2 := v.render(m, resizers)
		if err1 != nil || err2 != nil {
			continue
		}
		for i, ct := range full.Spec.Template.Spec.Containers {
			for name, l := range ct.Resources.Limits {
				r, ok := ct.Resources.Requests[name]
				if !ok || r.Cmp(l) <= 0 {
					continue
				}
				if i < len(base.Spec.Template.Spec.Containers) {
					b := base.Spec.Template.Spec.Containers[i].Resources
					if br, ok := b.Requests[name]; ok {
						if bl, ok := b.Limits[name]; ok && br.Cmp(bl) > 0 {
							continue // not the resizers' doing
						}
					}
				}
				o.violate(o.tag("request-above-limit", o.ambiguousNow()), fmt.Sprintf("member %s container %s: %s request %s > limit %s (OverridePolicies %v)", m, ct.Name, name, r.String(), l.String(), sortedKeys(v.owner)))
			}
		}
	}
}

// brokenForeign are the policies of others whose own patch fails for a
// member: Karmada renders nothing new there, and that is not the resizer's
// doing. They are left out of the other checks.
func (o *oracleRun) brokenForeign(v *worldView) map[string]bool {
	if v.broken != nil {
		return copySet(v.broken)
	}
	broken := map[string]bool{}
	defer func() { v.broken = copySet(broken) }()
	for range v.policies {
		changed := false
		for _, m := range o.placement {
			if v.clusters[m] == nil {
				continue
			}
			_, err := v.render(m, broken)
			if f, ok := err.(*renderFailure); ok {
				name := strings.TrimPrefix(f.policy, ns+"/")
				if v.owner[name] == "" && !broken[name] {
					broken[name] = true
					changed = true
				}
			}
		}
		if !changed {
			break
		}
	}
	return broken
}

func (o *oracleRun) checkAR(v *worldView, a *oAR) {
	own := policyNameFor(a.name)
	if !a.exists {
		for _, p := range v.policies {
			if ref := metav1.GetControllerOf(p); ref != nil && ref.Kind == "AddonResizer" && ref.Name == a.name && o.quietSince(a.changed) {
				o.violate("left-behind-addonresizer", fmt.Sprintf("OverridePolicy %s outlived AddonResizer %s (deleted at %v)", p.Name, a.name, a.changed.Sub(t0)))
			}
		}
		return
	}
	ar, err := o.k.client.ScaleplaneV1alpha1().AddonResizers(ns).Get(o.k.ctx, a.name, metav1.GetOptions{})
	o.check1(err)
	st := ar.Status
	if !a.karmada() {
		if v.owner[own] == a.name && o.quietSince(a.changed) {
			o.violate("left-behind-federation-none", fmt.Sprintf("%s: OverridePolicy %s outlived federation None", a.name, own))
		}
		if len(st.Clusters) > 0 {
			o.violate("status-federation-none", fmt.Sprintf("%s: status.clusters %d entries under federation None", a.name, len(st.Clusters)))
		}
		return
	}
	s := a.settings()
	other := o.ars[0]
	if other == a {
		other = o.ars[1]
	}
	ambiguous := other.exists && slices.ContainsFunc(s.managed(), func(n corev1.ResourceName) bool { return slices.Contains(other.settings().managed(), n) })
	viol := func(invariant, detail string) { o.violate(o.tag(invariant, ambiguous), detail) }
	broken := o.brokenForeign(v)
	// The policies of every AddonResizer must apply cleanly to the current
	// template, for every member.
	for _, m := range o.placement {
		if v.clusters[m] == nil {
			continue
		}
		if _, err := v.render(m, broken); err != nil {
			// Not while writes are refused: the resizer cannot follow the
			// template then.
			if f, ok := err.(*renderFailure); ok && strings.TrimPrefix(f.policy, ns+"/") == own && !o.forbid {
				viol("policy-applies", fmt.Sprintf("%s: member %s gets nothing new: %v", a.name, m, err))
			}
		}
	}
	idx := slices.IndexFunc(v.template.Spec.Template.Spec.Containers, func(c corev1.Container) bool { return c.Name == containerName })
	if idx < 0 {
		return
	}
	tmplMain := v.template.Spec.Template.Spec.Containers[idx]
	// Conflicts: another policy whose absence changes what this resizer
	// manages on some member. It must be reported; a policy reported must at
	// least touch a managed path.
	excl := copySet(broken)
	conflicts := map[string]bool{}
	for _, p := range v.policies {
		if p.Name == own && v.owner[own] == a.name || broken[p.Name] {
			continue
		}
		for _, m := range o.placement {
			if v.clusters[m] == nil {
				continue
			}
			full, err1 := v.render(m, excl)
			without, err2 := v.render(m, with(excl, p.Name))
			if err1 != nil || err2 != nil {
				continue
			}
			if !managedEqual(mainContainer(full), mainContainer(without), s.managed()) {
				conflicts[p.Name] = true
			}
		}
	}
	exclusive := meta.FindStatusCondition(st.Conditions, scaleplanev1alpha1.ConditionOverrideExclusive)
	for _, p := range v.policies {
		if p.Name == own && v.owner[own] == a.name {
			continue
		}
		reported := exclusive != nil && exclusive.Status == metav1.ConditionFalse && mentions(exclusive.Message, p.Name)
		// While writes are refused, a resizer's policy written for an older
		// template (a whole limits map, say) can reach what another one
		// manages; each says its policy is not written.
		staleResizer := o.forbid && v.owner[p.Name] != ""
		if conflicts[p.Name] && !reported && !ambiguous && !staleResizer {
			viol("foreign-unreported", fmt.Sprintf("%s: OverridePolicy %s changes what it manages on some member and is not reported (OverrideExclusive %v)", a.name, p.Name, condString(exclusive)))
		}
		if reported && !canClash(p, idx, tmplMain.Resources, s) {
			viol("foreign-false-report", fmt.Sprintf("%s: OverridePolicy %s reported as overriding its container's resources; its paths cannot meet %v of container %d: %s", a.name, p.Name, s.managed(), idx, opPaths(p)))
		}
	}
	ownExcl := copySet(broken)
	for n := range conflicts {
		ownExcl[n] = true
	}
	resizers := with(ownExcl, own) // what the member gets without this AddonResizer

	statusOf := map[string]*scaleplanev1alpha1.MemberClusterStatus{}
	var listed []string
	for i := range st.Clusters {
		statusOf[st.Clusters[i].Name] = &st.Clusters[i]
		listed = append(listed, st.Clusters[i].Name)
	}
	if !ambiguous && !slices.Equal(listed, o.placement) && !(len(listed) == 0 && len(o.placement) == 0) {
		viol("status-members", fmt.Sprintf("%s: status.clusters %v; placement %v", a.name, listed, o.placement))
	}
	if p := policyByName(v, own); p != nil && v.owner[own] == a.name && !ambiguous && !o.forbid {
		for _, r := range p.Spec.OverrideRules {
			if r.TargetCluster == nil {
				continue
			}
			for _, n := range r.TargetCluster.ClusterNames {
				if !slices.Contains(o.placement, n) {
					viol("left-behind-member", fmt.Sprintf("%s: a rule for %s, which is not in the placement %v", a.name, n, o.placement))
				}
			}
		}
	}
	sized := int32(0)
	for _, m := range st.Clusters {
		if m.State == scaleplanev1alpha1.MemberSized {
			sized++
		}
	}
	if st.SizedClusters != nil && *st.SizedClusters != sized && !ambiguous {
		viol("sized-count", fmt.Sprintf("%s: sizedClusters %d; %d members say Sized", a.name, *st.SizedClusters, sized))
	}
	upToDate := meta.FindStatusCondition(st.Conditions, scaleplanev1alpha1.ConditionUpToDate)
	if upToDate != nil && upToDate.Reason == reasonOverridePolicyFailed && !o.forbid {
		viol("policy-failed-at-rest", fmt.Sprintf("%s: UpToDate %s with no refused write left (the writes went through): %s", a.name, condString(upToDate), upToDate.Message))
	}
	anyCapped := false
	for _, m := range o.placement {
		c := v.clusters[m]
		if c == nil {
			continue
		}
		rendered, err := v.render(m, ownExcl)
		if err != nil {
			continue // reported above, or someone else's
		}
		base, err := v.render(m, resizers)
		if err != nil {
			continue
		}
		rMain, bMain := mainContainer(rendered), mainContainer(base)
		// What this AddonResizer's own policy changes, on top of all the
		// others: container main's resources that it manages, nothing else.
		full, err1 := v.render(m, broken)
		without, err2 := v.render(m, with(broken, own))
		if err1 == nil && err2 == nil && v.owner[own] == a.name && !o.forbid { // refused writes cannot follow the template
			if !sameOutsideMain(full, without) {
				viol("touches-outside", fmt.Sprintf("%s: member %s: its policy changes more than container main's resources (containers now %s; without it %s)", a.name, m, containerSummary(full), containerSummary(without)))
			}
			fm, wm := mainContainer(full), mainContainer(without)
			for _, name := range resourceNames(fm, wm) {
				if o.managedByOther(a, name) {
					continue // a clash between AddonResizers: reported or not, above
				}
				// Where the template has no requests (limits) map the
				// resizer adds it whole, and so wipes what another policy
				// added into it: a clash it must report (checked above),
				// not one it can avoid (JSON patch cannot add a key under a
				// map that is not there).
				wipesReported := func(tmpl corev1.ResourceList) bool {
					return len(tmpl) == 0 && exclusive != nil && exclusive.Status == metav1.ConditionFalse
				}
				if !slices.Contains(s.managed(), name) && !quantityEq(fm.Resources.Requests, wm.Resources.Requests, name) && !wipesReported(tmplMain.Resources.Requests) {
					viol("unmanaged-overridden", fmt.Sprintf("%s: member %s: its policy makes the %s request %s (%s without it); %s is not in spec.resources", a.name, m, name, qs(fm.Resources.Requests, name), qs(wm.Resources.Requests, name), name))
				}
				if (!slices.Contains(s.managed(), name) || !s.setLimits) && !quantityEq(fm.Resources.Limits, wm.Resources.Limits, name) && !wipesReported(tmplMain.Resources.Limits) {
					viol("unmanaged-overridden", fmt.Sprintf("%s: member %s: its policy makes the %s limit %s (%s without it); setLimits %v, spec.resources %v", a.name, m, name, qs(fm.Resources.Limits, name), qs(wm.Resources.Limits, name), s.setLimits, s.managed()))
				}
			}
		}
		ready, nodes := memberReady(c)
		capped := false
		if ready {
			for _, name := range s.managed() {
				est, _ := o.target(s, name, nodes, tmplMain)
				if l, ok := tmplMain.Resources.Limits[name]; ok && !s.setLimits && est.Cmp(l) > 0 && !resizeestimate.WithinThreshold(name, l, est, s.threshold) {
					capped = true
				}
			}
		}
		anyCapped = anyCapped || capped
		sm := statusOf[m]
		if sm == nil {
			continue
		}
		// Status says what is rendered. One thing it cannot say: while
		// writes are refused, a stale rule that adds a whole requests or
		// limits map (written when the template had none) drops the
		// template's values of resources it did not hold; status lists
		// held values, not removed ones, and UpToDate says the policy is
		// not written.
		if o.forbid && sm.State == scaleplanev1alpha1.MemberNotApplied && addsWholeMap(policyByName(v, own), m) {
			continue
		}
		// Nor what another policy it reports (OverrideExclusive False)
		// sets or loses, which depends on Karmada's order of the two.
		foreignReported := exclusive != nil && exclusive.Status == metav1.ConditionFalse
		if foreignReported {
			continue
		}
		for _, name := range s.managed() {
			want := quantityOf(bMain.Resources.Requests, name)
			if sm.Resources != nil && sm.Resources.Requests != nil {
				if q := quantityOf(sm.Resources.Requests, name); q != nil {
					want = q
				}
			}
			if !qEq(want, quantityOf(rMain.Resources.Requests, name)) {
				viol("status-vs-rendered", fmt.Sprintf("%s: member %s: status says %s request %s (state %s); rendered %s", a.name, m, name, qstr(want), sm.State, qs(rMain.Resources.Requests, name)))
			}
			want = quantityOf(bMain.Resources.Limits, name)
			if sm.Resources != nil && sm.Resources.Limits != nil {
				if q := quantityOf(sm.Resources.Limits, name); q != nil {
					want = q
				}
			}
			if !qEq(want, quantityOf(rMain.Resources.Limits, name)) {
				viol("status-vs-rendered", fmt.Sprintf("%s: member %s: status says %s limit %s (state %s); rendered %s", a.name, m, name, qstr(want), sm.State, qs(rMain.Resources.Limits, name)))
			}
		}
		// Sized: held at the recommendation, as rendered.
		if sm.State == scaleplanev1alpha1.MemberSized && ready && !ambiguous {
			for _, name := range s.managed() {
				est, _ := o.target(s, name, nodes, corev1.Container{}) // uncapped
				if got := effectiveRequest(rMain, name); got == nil || !resizeestimate.WithinThreshold(name, *got, est, s.threshold) {
					viol("sized-not-at-estimate", fmt.Sprintf("%s: member %s says Sized; its %s request is rendered %s, the estimate for %d nodes is %s (threshold %d%%)", a.name, m, name, qstr(got), nodes, est.String(), s.threshold))
				}
			}
		}
		// Convergence within the delays; not promised while the AddonResizer
		// reports another policy on the same values (OverrideExclusive
		// False): which one wins is Karmada's order, and the resizer does
		// not fight it.
		if o.mustConverge(a, m, ready, ambiguous) && !foreignReported {
			for _, name := range s.managed() {
				target, _ := o.target(s, name, nodes, tmplMain)
				got := effectiveRequest(rMain, name)
				if got == nil || !resizeestimate.WithinThreshold(name, *got, target, s.threshold) {
					viol("not-converged", fmt.Sprintf("%s: member %s (%d nodes, stable since %v): %s request rendered %s, target %s (threshold %d%%, state %s: %s)", a.name, m, nodes, o.stableSince(m).Sub(t0), name, qstr(got), target.String(), s.threshold, sm.State, sm.Message))
				}
				if s.setLimits {
					got := quantityOf(rMain.Resources.Limits, name)
					if got == nil || !resizeestimate.WithinThreshold(name, *got, target, s.threshold) {
						viol("not-converged", fmt.Sprintf("%s: member %s (%d nodes): %s limit rendered %s, target %s", a.name, m, nodes, name, qstr(got), target.String()))
					}
				}
			}
		}
	}
	if upToDate != nil && upToDate.Status == metav1.ConditionTrue && !ambiguous {
		if anyCapped {
			viol("capped-but-up-to-date", fmt.Sprintf("%s: UpToDate %s although a member is held at the template's limit below its estimate", a.name, condString(upToDate)))
		}
		for _, m := range o.placement {
			if sm := statusOf[m]; sm == nil || sm.State != scaleplanev1alpha1.MemberSized {
				viol("up-to-date-not-sized", fmt.Sprintf("%s: UpToDate %s but member %s is %v", a.name, condString(upToDate), m, stateOf(sm)))
			}
		}
	}
}

func stateOf(sm *scaleplanev1alpha1.MemberClusterStatus) string {
	if sm == nil {
		return "not in status"
	}
	return string(sm.State)
}

// mustConverge tells whether member m has had long enough since anything
// that bears on its size changed.
func (o *oracleRun) mustConverge(a *oAR, m string, ready, ambiguous bool) bool {
	if !ready || ambiguous || o.forbid || o.foreign[policyNameFor(a.name)] == "taken" && a.name == "ar" {
		return false
	}
	s := a.settings()
	wait := max(s.upDelay, s.downDelay) + 90*time.Second
	return !o.now.Before(o.stableSince(m).Add(wait))
}

func (o *oracleRun) stableSince(m string) time.Time {
	t := o.globalChange
	if c, ok := o.memberChange[m]; ok && c.After(t) {
		t = c
	}
	return t
}

// target is the size the member converges to: the estimate, capped at the
// template's limit when setLimits is false. It says whether it is capped.
func (o *oracleRun) target(s settings, name corev1.ResourceName, nodes int32, tmplMain corev1.Container) (resource.Quantity, bool) {
	var est resource.Quantity
	for _, r := range s.resources {
		if r.Name == name {
			est = resizeestimate.Linear(r, estimatedUnits(s, int64(nodes)))
		}
	}
	if l, ok := tmplMain.Resources.Limits[name]; ok && !s.setLimits && est.Cmp(l) > 0 {
		return l.DeepCopy(), true
	}
	return est, false
}

// managedByAny tells whether an AddonResizer in Karmada mode manages
// resource name (its limit, when limit is set).
func (o *oracleRun) managedByAny(name corev1.ResourceName, limit bool) bool {
	for _, a := range o.ars {
		if !a.karmada() {
			continue
		}
		s := a.settings()
		if slices.Contains(s.managed(), name) && (!limit || s.setLimits) {
			return true
		}
	}
	return false
}

func memberReady(c *clusterv1alpha1.Cluster) (bool, int32) {
	r := meta.FindStatusCondition(c.Status.Conditions, clusterv1alpha1.ClusterConditionReady)
	if r == nil || r.Status != metav1.ConditionTrue || c.Status.NodeSummary == nil {
		return false, 0
	}
	return true, c.Status.NodeSummary.TotalNum
}

// effectiveRequest is the request the pods run with: the limit when only
// the limit is set (Kubernetes defaults it so).
func effectiveRequest(c *corev1.Container, name corev1.ResourceName) *resource.Quantity {
	if q := quantityOf(c.Resources.Requests, name); q != nil {
		return q
	}
	return quantityOf(c.Resources.Limits, name)
}

func managedEqual(a, b *corev1.Container, names []corev1.ResourceName) bool {
	if a == nil || b == nil {
		return a == b
	}
	for _, n := range names {
		if !quantityEq(a.Resources.Requests, b.Resources.Requests, n) || !quantityEq(a.Resources.Limits, b.Resources.Limits, n) {
			return false
		}
	}
	return true
}

func quantityEq(a, b corev1.ResourceList, name corev1.ResourceName) bool {
	return qEq(quantityOf(a, name), quantityOf(b, name))
}

func qEq(a, b *resource.Quantity) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return a.Cmp(*b) == 0
}

func qstr(q *resource.Quantity) string {
	if q == nil {
		return "<none>"
	}
	return q.String()
}

func qs(l corev1.ResourceList, name corev1.ResourceName) string { return qstr(quantityOf(l, name)) }

// sameOutsideMain tells whether two renders differ in container main's
// resources at most.
func sameOutsideMain(a, b *appsv1.Deployment) bool {
	strip := func(d *appsv1.Deployment) string {
		c := d.DeepCopy()
		if m := mainContainer(c); m != nil {
			m.Resources = corev1.ResourceRequirements{}
		}
		return string(must(json.Marshal(c)))
	}
	return strip(a) == strip(b)
}

func containerSummary(d *appsv1.Deployment) string {
	var parts []string
	for _, c := range d.Spec.Template.Spec.Containers {
		parts = append(parts, fmt.Sprintf("%s%v/%v", c.Name, shortList(c.Resources.Requests), shortList(c.Resources.Limits)))
	}
	return strings.Join(parts, " ")
}

func shortList(l corev1.ResourceList) string {
	if l == nil {
		return "-"
	}
	var parts []string
	for _, n := range sortedNames(l) {
		q := l[n]
		parts = append(parts, string(n)+"="+q.String())
	}
	return "{" + strings.Join(parts, ",") + "}"
}

// canClash tells whether a plaintext path of p is a managed resource of
// container idx, or a parent of one.
// canClash tells whether p's paths can meet what the AddonResizer writes in
// the container: a managed request or limit, or, where the template has no
// requests (limits) map, that map, which the resizer then adds whole and
// so wipes, or is wiped by, any value another policy adds into it.
func canClash(p *policyv1alpha1.OverridePolicy, idx int, tmpl corev1.ResourceRequirements, s settings) bool {
	base := containerPath(idx) + "/resources"
	var managed []string
	for _, n := range s.managed() {
		managed = append(managed, base+"/requests/"+escapePointer(string(n)), base+"/limits/"+escapePointer(string(n)))
	}
	if len(tmpl.Requests) == 0 {
		managed = append(managed, base+"/requests")
	}
	if len(tmpl.Limits) == 0 && s.setLimits {
		managed = append(managed, base+"/limits")
	}
	for _, path := range opPathList(p) {
		path = strings.TrimSuffix(path, "/")
		for _, m := range managed {
			if path == m || strings.HasPrefix(m, path+"/") || strings.HasPrefix(path, m+"/") {
				return true
			}
		}
	}
	return false
}

// addsWholeMap tells whether p's rule for member m adds a whole requests
// or limits map.
func addsWholeMap(p *policyv1alpha1.OverridePolicy, m string) bool {
	if p == nil {
		return false
	}
	for _, r := range p.Spec.OverrideRules {
		if r.TargetCluster == nil || !slices.Contains(r.TargetCluster.ClusterNames, m) {
			continue
		}
		for _, op := range r.Overriders.Plaintext {
			if strings.HasSuffix(op.Path, "/resources/requests") || strings.HasSuffix(op.Path, "/resources/limits") {
				return true
			}
		}
	}
	return false
}

func opPathList(p *policyv1alpha1.OverridePolicy) []string {
	rules := p.Spec.OverrideRules
	if len(rules) == 0 {
		rules = []policyv1alpha1.RuleWithCluster{{Overriders: p.Spec.Overriders}}
	}
	var out []string
	for _, r := range rules {
		for _, op := range r.Overriders.Plaintext {
			out = append(out, op.Path)
		}
	}
	return out
}

func opPaths(p *policyv1alpha1.OverridePolicy) string { return strings.Join(opPathList(p), " ") }

func mentions(msg, name string) bool {
	return regexp.MustCompile(`(^|[^A-Za-z0-9.-])` + regexp.QuoteMeta(name) + `($|[^A-Za-z0-9.-])`).MatchString(msg)
}

func condString(c *metav1.Condition) string {
	if c == nil {
		return "<none>"
	}
	return string(c.Status) + "/" + c.Reason
}

func policyByName(v *worldView, name string) *policyv1alpha1.OverridePolicy {
	for _, p := range v.policies {
		if p.Name == name {
			return p
		}
	}
	return nil
}

func copySet(m map[string]bool) map[string]bool {
	out := make(map[string]bool, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

func with(m map[string]bool, name string) map[string]bool {
	out := copySet(m)
	out[name] = true
	return out
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
