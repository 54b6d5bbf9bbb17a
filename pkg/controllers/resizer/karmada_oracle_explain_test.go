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

// The Karmada rendering oracle's checks of what people read (issue 35:
// "status, `kubectl get` columns and `explain` say what is rendered"),
// after each step once the at-rest sync has run (checkReadouts):
//
//   - the `kubectl get addonresizer` columns CLUSTERS, SIZED and
//     UP-TO-DATE, evaluated as the API server's table convertor does (its
//     JSONPath, from the +kubebuilder:printcolumn markers of
//     addonresizer_types.go, over the stored AddonResizer), against the
//     placement and what each member renders;
//   - `kubectl scaleplane explain addonresizer NAME -o json`, the plugin's
//     own command run in-process on the harness's clientsets: what it says
//     the OverridePolicy sets for each member is what the member renders,
//     no member's policy differs from its held size at rest, and its
//     summary (Next) claims an OverridePolicy holds members only when there
//     is one, and that every member runs the template only when each does.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/util/jsonpath"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/scaleplane/scaleplane/cmd/kubectl-scaleplane/app"
	scaleplanev1alpha1 "github.com/scaleplane/scaleplane/pkg/apis/scaleplane/v1alpha1"
	"github.com/scaleplane/scaleplane/pkg/resizeestimate"
)

// printColumns are the AddonResizer's printer columns, name -> JSONPath,
// read from the markers the CRD's additionalPrinterColumns are generated
// from.
var printColumns = sync.OnceValues(func() (map[string]string, error) {
	src, err := os.ReadFile("../../apis/scaleplane/v1alpha1/addonresizer_types.go")
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, m := range regexp.MustCompile("(?m)^// \\+kubebuilder:printcolumn:JSONPath=`([^`]*)`,name=`([^`]*)`").FindAllSubmatch(src, -1) {
		out[string(m[2])] = string(m[1])
	}
	for _, name := range []string{"CLUSTERS", "SIZED", "UP-TO-DATE"} {
		if out[name] == "" {
			return nil, fmt.Errorf("addonresizer_types.go has no printcolumn %s", name)
		}
	}
	return out, nil
})

// column evaluates printer column name on ar as the API server's table
// convertor does (apiextensions-apiserver tableconvertor: AllowMissingKeys,
// the first result), and prints it as kubectl does ("<none>" when absent).
func (o *oracleRun) column(ar *scaleplanev1alpha1.AddonResizer, name string) string {
	cols, err := printColumns()
	o.check1(err)
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(ar)
	o.check1(err)
	p := jsonpath.New(name).AllowMissingKeys(true)
	o.check1(p.Parse("{" + cols[name] + "}"))
	res, err := p.FindResults(obj)
	o.check1(err)
	if len(res) == 0 || len(res[0]) == 0 || !res[0][0].IsValid() || res[0][0].Interface() == nil {
		return "<none>"
	}
	return fmt.Sprint(res[0][0].Interface())
}

// arContext is what the checks of one AddonResizer in Karmada mode
// exempt and render with, as checkAR computes it.
type arContext struct {
	a               *oAR
	s               settings
	own             string
	ambiguous       bool
	broken          map[string]bool
	ownExcl         map[string]bool // with the conflicting policies left out
	resizers        map[string]bool // and without a's own: what a member gets without a
	foreignReported bool
}

func (o *oracleRun) arContext(v *worldView, a *oAR, st *scaleplanev1alpha1.AddonResizerStatus) *arContext {
	x := &arContext{a: a, s: a.settings(), own: policyNameFor(a.name)}
	for _, b := range o.ars {
		if b != a && b.exists && slices.ContainsFunc(x.s.managed(), func(n corev1.ResourceName) bool { return slices.Contains(b.settings().managed(), n) }) {
			x.ambiguous = true
		}
	}
	x.broken = o.brokenForeign(v)
	x.ownExcl = copySet(x.broken)
	for n := range o.conflicts(v, a, x.broken) {
		x.ownExcl[n] = true
	}
	x.resizers = with(x.ownExcl, x.own)
	exclusive := meta.FindStatusCondition(st.Conditions, scaleplanev1alpha1.ConditionOverrideExclusive)
	x.foreignReported = exclusive != nil && exclusive.Status == metav1.ConditionFalse
	return x
}

func (x *arContext) viol(o *oracleRun, invariant, detail string) {
	o.violate(o.tag(invariant, x.ambiguous), x.a.name+": "+detail)
}

// atRecommendation tells whether member m renders container main at its
// recommendation, as the Sized checks define it: the member is ready and
// every managed request (and limit, with setLimits) is within the
// threshold of the uncapped estimate for its nodes. why says otherwise.
func (o *oracleRun) atRecommendation(v *worldView, x *arContext, m string) (ok bool, why string) {
	c := v.clusters[m]
	if c == nil {
		return false, "no Cluster"
	}
	ready, nodes := memberReady(c)
	if !ready {
		return false, "not ready"
	}
	rendered, err := v.render(m, x.ownExcl)
	if err != nil {
		return false, err.Error()
	}
	rMain := mainContainer(rendered)
	if rMain == nil {
		return false, "no container main"
	}
	tmplMain := mainContainer(v.template)
	for _, name := range x.s.managed() {
		est, _ := o.target(x.s, name, nodes, corev1.Container{})
		if _, capped := o.target(x.s, name, nodes, *tmplMain); capped {
			// Held at the template's limit, below the estimate: Capped,
			// even within the threshold of it.
			return false, fmt.Sprintf("%s capped at the template's limit %s, estimate %s", name, qs(tmplMain.Resources.Limits, name), est.String())
		}
		if got := effectiveRequest(rMain, name); got == nil || !resizeestimate.WithinThreshold(name, *got, est, x.s.threshold) {
			return false, fmt.Sprintf("%s request %s, estimate %s", name, qstr(got), est.String())
		}
		if got := quantityOf(rMain.Resources.Limits, name); x.s.setLimits && (got == nil || !resizeestimate.WithinThreshold(name, *got, est, x.s.threshold)) {
			return false, fmt.Sprintf("%s limit %s, estimate %s", name, qstr(got), est.String())
		}
	}
	return true, ""
}

// checkReadouts checks the columns and explain of every AddonResizer in
// Karmada mode. It runs after atRest, every step: the plugin's command
// costs about as much as a sync.
func (o *oracleRun) checkReadouts() {
	v := o.view()
	if o.lastView != nil && sameWorld(o.lastView, v) {
		v = o.lastView // nothing changed since check(): reuse its renderings
	}
	for _, a := range o.ars {
		if !a.karmada() {
			continue
		}
		ar, err := o.k.client.ScaleplaneV1alpha1().AddonResizers(ns).Get(o.k.ctx, a.name, metav1.GetOptions{})
		o.check1(err)
		if ar.Status.Federation != scaleplanev1alpha1.FederationKarmada {
			continue
		}
		x := o.arContext(v, a, &ar.Status)
		o.checkColumns(v, x, ar)
		o.checkExplain(v, x, ar)
	}
}

// checkColumns: CLUSTERS is the number of members the template is
// scheduled to; SIZED the number rendered at their recommendation;
// UP-TO-DATE True only when every member is, and not False for a member's
// reason when every member is.
func (o *oracleRun) checkColumns(v *worldView, x *arContext, ar *scaleplanev1alpha1.AddonResizer) {
	hasMain := slices.ContainsFunc(v.template.Spec.Template.Spec.Containers, func(c corev1.Container) bool { return c.Name == containerName })
	if x.ambiguous || !hasMain {
		// Frozen by design, or nothing to size without the container (its
		// members are kept as they were): status-members says the same.
		return
	}
	if got, want := o.column(ar, "CLUSTERS"), fmt.Sprint(len(o.placement)); got != want {
		x.viol(o, "column-clusters", fmt.Sprintf("CLUSTERS %s; the placement has %d members %v", got, len(o.placement), o.placement))
	}
	if o.forbid || x.foreignReported {
		// While writes are refused, or another policy on the same values
		// is reported (Karmada's order decides), status says what the
		// resizer holds, not what is rendered (as status-vs-rendered).
		return
	}
	sized, all := 0, true
	var not []string
	for _, m := range o.placement {
		if ok, why := o.atRecommendation(v, x, m); ok {
			sized++
		} else {
			all = false
			not = append(not, m+": "+why)
		}
	}
	if got := o.column(ar, "SIZED"); got != fmt.Sprint(sized) {
		x.viol(o, "column-sized", fmt.Sprintf("SIZED %s; %d of %v rendered at their recommendation (not: %s)", got, sized, o.placement, strings.Join(not, "; ")))
	}
	upToDate := meta.FindStatusCondition(ar.Status.Conditions, scaleplanev1alpha1.ConditionUpToDate)
	switch got := o.column(ar, "UP-TO-DATE"); {
	case got == "True" && !all:
		x.viol(o, "column-up-to-date", fmt.Sprintf("UP-TO-DATE True; not at their recommendation: %s", strings.Join(not, "; ")))
	case got == "False" && all && upToDate != nil && slices.Contains([]string{reasonPostponed, reasonCappedAtLimit, reasonClustersNotCurrent}, upToDate.Reason):
		x.viol(o, "column-up-to-date", fmt.Sprintf("UP-TO-DATE False (%s: %s); every member %v is rendered at its recommendation", upToDate.Reason, upToDate.Message, o.placement))
	}
}

// explain runs `kubectl scaleplane explain addonresizer NAME -o json` on
// the harness's clientsets at the oracle's now.
func (o *oracleRun) explain(name string) (app.Explanation, error) {
	var out, errOut bytes.Buffer
	clients := &app.Clients{Kube: o.k.kube, Scaleplane: o.k.client, Clock: testingclock.NewFakePassiveClock(o.now), Namespace: ns}
	cmd := app.NewCommand(genericiooptions.IOStreams{Out: &out, ErrOut: &errOut}, clients)
	cmd.SetArgs([]string{"explain", "addonresizer", name, "-o", "json"})
	cmd.SetOut(&out)
	cmd.SetErr(&errOut)
	if err := cmd.ExecuteContext(o.k.ctx); err != nil {
		return app.Explanation{}, fmt.Errorf("%w: %s", err, errOut.String())
	}
	var e app.Explanation
	err := json.Unmarshal(out.Bytes(), &e)
	return e, err
}

// checkExplain: explain says, per member, what the OverridePolicy sets,
// and the member renders that (the template where it sets nothing); at
// rest the policy sets the size held; its summary names an OverridePolicy
// only when the AddonResizer's exists, and says every member runs the
// template only when each does.
func (o *oracleRun) checkExplain(v *worldView, x *arContext, ar *scaleplanev1alpha1.AddonResizer) {
	e, err := o.explain(ar.Name)
	if err != nil {
		x.viol(o, "explain-fails", err.Error())
		return
	}
	if e.Federation != string(scaleplanev1alpha1.FederationKarmada) {
		x.viol(o, "explain-federation", fmt.Sprintf("explain says federation %q; status %q", e.Federation, ar.Status.Federation))
	}
	stored := policyByName(v, x.own)
	owned := stored != nil && v.owner[x.own] == x.a.name
	if strings.Contains(e.Next, "by OverridePolicy ") && !(e.OverridePolicy == x.own && owned) {
		x.viol(o, "explain-next-policy", fmt.Sprintf("explain's summary %q; OverridePolicy %s exists %v, controlled by it %v", e.Next, x.own, stored != nil, owned))
	}
	allTemplate := true
	for _, cx := range e.Clusters {
		m := cx.Name
		if v.clusters[m] == nil || !slices.Contains(o.placement, m) {
			continue
		}
		if cx.PolicyDiffers && !o.forbid {
			x.viol(o, "explain-policy-differs", fmt.Sprintf("member %s: explain says the OverridePolicy (%s) does not set the size held (%s) at rest", m, describeReq(cx.OverridePolicy), describeReq(cx.Held)))
		}
		rendered, err1 := v.render(m, x.ownExcl)
		base, err2 := v.render(m, x.resizers)
		if err1 != nil || err2 != nil {
			continue
		}
		rMain, bMain := mainContainer(rendered), mainContainer(base)
		if rMain == nil || bMain == nil {
			continue
		}
		if !managedEqual(rMain, bMain, x.s.managed()) {
			allTemplate = false
		}
		// The exemptions of status-vs-rendered: a stale rule, kept while
		// writes are refused, that adds a whole map drops the template's
		// values of resources it does not set; and where another policy on
		// the same values is reported, what a member renders depends on
		// Karmada's order of the two.
		if o.forbid && addsWholeMap(stored, m) || x.foreignReported {
			continue
		}
		set := cx.OverridePolicy
		if set == nil {
			set = &corev1.ResourceRequirements{}
		}
		for _, name := range x.s.managed() {
			for _, f := range []struct {
				field          string
				policy, b, got corev1.ResourceList
			}{{"request", set.Requests, bMain.Resources.Requests, rMain.Resources.Requests}, {"limit", set.Limits, bMain.Resources.Limits, rMain.Resources.Limits}} {
				want := quantityOf(f.b, name)
				if q := quantityOf(f.policy, name); q != nil {
					want = q
				}
				if !qEq(want, quantityOf(f.got, name)) {
					x.viol(o, "explain-vs-rendered", fmt.Sprintf("member %s: explain says OverridePolicy %q sets %s (so the %s %s is %s); rendered %s (state %s)", m, e.OverridePolicy, describeReq(cx.OverridePolicy), name, f.field, qstr(want), qs(f.got, name), cx.State))
				}
			}
		}
	}
	if strings.Contains(e.Next, "no OverridePolicy holds a size") && !allTemplate && !x.ambiguous {
		x.viol(o, "explain-next-template", fmt.Sprintf("explain's summary %q, but a member renders other values than the template's (OverridePolicy %s exists %v, controlled by it %v)", e.Next, x.own, stored != nil, owned))
	}
}

// sameWorld tells whether a and b render alike: the same template, the
// same policies (by resourceVersion, which the oracle's reactor sets) and
// the same Clusters.
func sameWorld(a, b *worldView) bool {
	if !equality.Semantic.DeepEqual(a.template.Spec, b.template.Spec) || len(a.policies) != len(b.policies) || len(a.clusters) != len(b.clusters) {
		return false
	}
	for i, p := range a.policies {
		if q := b.policies[i]; p.Name != q.Name || p.UID != q.UID || p.ResourceVersion != q.ResourceVersion {
			return false
		}
	}
	for n, c := range a.clusters {
		if d := b.clusters[n]; d == nil || !equality.Semantic.DeepEqual(c.Status, d.Status) {
			return false
		}
	}
	return true
}

func describeReq(r *corev1.ResourceRequirements) string {
	if r == nil {
		return "nothing"
	}
	return fmt.Sprintf("requests%s limits%s", shortList(r.Requests), shortList(r.Limits))
}
