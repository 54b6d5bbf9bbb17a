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

// The Karmada rendering oracle's simulated queue: enqueueing, settling a
// step in fake time, one sync, the at-rest check, the garbage collector the
// test plays, and the status dump.

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	policyv1alpha1 "github.com/scaleplane/scaleplane/pkg/apis/policy/v1alpha1"
)

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
