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

// The Karmada rendering oracle's step generator (karmada_oracle_test.go has
// the run loop): the setup, the random choices, and the steps that change the
// world: members, the template, the AddonResizers' specs, a second
// AddonResizer, other parties' OverridePolicies and the injected faults.

import (
	"fmt"
	"slices"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	policyv1alpha1 "github.com/scaleplane/scaleplane/pkg/apis/policy/v1alpha1"
	scaleplanev1alpha1 "github.com/scaleplane/scaleplane/pkg/apis/scaleplane/v1alpha1"
)

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
