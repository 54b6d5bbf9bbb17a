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

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	clusterv1alpha1 "github.com/scaleplane/scaleplane/pkg/apis/cluster/v1alpha1"
	scaleplanev1alpha1 "github.com/scaleplane/scaleplane/pkg/apis/scaleplane/v1alpha1"
)

// memberDecision is what sizing one member cluster decided.
type memberDecision struct {
	status scaleplanev1alpha1.MemberClusterStatus
	// changed is set when the held size changed in this decision.
	changed bool
	// requeue is when a held-back change is due; 0 if none.
	requeue time.Duration
	// changes are the changes applied, for the event.
	changes []resourceChange
	// fitted says what fitHeld changed of the held size.
	fitted []string
	// hits are the resources whose estimate a bound holds.
	hits []boundHit
}

// memberCount returns the node count a member cluster is sized from, or
// why it cannot be read. The count is status.nodeSummary.totalNum: every
// Node of the member, as the resizer counts Node objects on a plain cluster
// and Addon Resizer 1.8 did. readyNum would shrink the add-on each time
// nodes go NotReady for a while (an upgrade drains them one by one), and an
// add-on such as metrics-server still has every node to serve. A Cluster
// whose Ready condition is not True is stale: Karmada's cluster controller
// turns Ready Unknown when the member's lease is not renewed within its
// grace period (pkg/controllers/cluster/cluster_controller.go,
// monitorClusterHealth, v1.18.2), and False when it cannot reach the
// member, and the node summary is then the last one it saw. Cluster status
// carries no heartbeat time of its own to check besides that.
func memberCount(cluster *clusterv1alpha1.Cluster) (int32, scaleplanev1alpha1.MemberState, string) {
	if cluster == nil {
		return 0, scaleplanev1alpha1.MemberUnknown, "Cluster not found"
	}
	ready := meta.FindStatusCondition(cluster.Status.Conditions, clusterv1alpha1.ClusterConditionReady)
	switch {
	case ready == nil:
		return 0, scaleplanev1alpha1.MemberStale, "Cluster has no Ready condition yet"
	case ready.Status != metav1.ConditionTrue:
		return 0, scaleplanev1alpha1.MemberStale, fmt.Sprintf("Cluster is not Ready (%s: %s)", ready.Reason, ready.Message)
	case cluster.Status.NodeSummary == nil:
		return 0, scaleplanev1alpha1.MemberUnknown, "Cluster has no status.nodeSummary yet"
	}
	return cluster.Status.NodeSummary.TotalNum, scaleplanev1alpha1.MemberSized, ""
}

// heldResources is the container as the member runs it: the template's
// resources with the managed ones the OverridePolicy holds put over them.
func heldResources(base corev1.ResourceRequirements, held *corev1.ResourceRequirements) corev1.ResourceRequirements {
	out := *base.DeepCopy()
	if held == nil {
		return out
	}
	for name, q := range held.Requests {
		if out.Requests == nil {
			out.Requests = corev1.ResourceList{}
		}
		out.Requests[name] = q.DeepCopy()
	}
	for name, q := range held.Limits {
		if out.Limits == nil {
			out.Limits = corev1.ResourceList{}
		}
		out.Limits[name] = q.DeepCopy()
	}
	return out
}

// managedOf returns the managed requests (and limits, with setLimits) of r:
// what an override rule sets.
func managedOf(r corev1.ResourceRequirements, s settings) *corev1.ResourceRequirements {
	out := &corev1.ResourceRequirements{}
	for _, name := range s.managed() {
		if q, ok := r.Requests[name]; ok {
			if out.Requests == nil {
				out.Requests = corev1.ResourceList{}
			}
			out.Requests[name] = q.DeepCopy()
		}
		if q, ok := r.Limits[name]; ok && s.setLimits {
			if out.Limits == nil {
				out.Limits = corev1.ResourceList{}
			}
			out.Limits[name] = q.DeepCopy()
		}
	}
	return out
}

// decideMember sizes one member cluster, the way the resizer sizes a
// container on a plain cluster (decide, hold), with the member's held size
// in place of the template's: prev is the member's last status (nil for a
// cluster new to the placement), base the template's container resources.
// The held size is first fitted to the spec and the template (fitHeld),
// whatever the member's count says. A member whose count cannot be read
// keeps its fitted size and its pending change; it is never sized to the
// base.
func decideMember(name string, prev *scaleplanev1alpha1.MemberClusterStatus, cluster *clusterv1alpha1.Cluster, base corev1.ResourceRequirements, s settings, now time.Time) memberDecision {
	next := scaleplanev1alpha1.MemberClusterStatus{Name: name}
	if prev != nil {
		next = *prev.DeepCopy()
	}
	var fitted []string
	next.Resources, fitted = fitHeld(next.Resources, base, s)
	if len(fitted) > 0 {
		next.LastChangeTime = ptr.To(metav1.NewTime(now).Rfc3339Copy())
	}
	d := sizeMember(next, cluster, base, s, now)
	d.fitted = fitted
	if len(d.hits) > 0 {
		d.status.Message += " (" + describeHits(d.hits) + ")"
	}
	return d
}

// describeHits says how bounds hold estimates: "cpu estimate 2500m capped
// at maxAllowed 2, memory ...".
func describeHits(hits []boundHit) string {
	parts := make([]string, 0, len(hits))
	for _, h := range hits {
		parts = append(parts, h.Describe(string(h.name)))
	}
	return strings.Join(parts, ", ")
}

// sizeMember decides a member's size from its count.
func sizeMember(next scaleplanev1alpha1.MemberClusterStatus, cluster *clusterv1alpha1.Cluster, base corev1.ResourceRequirements, s settings, now time.Time) memberDecision {
	nodes, state, why := memberCount(cluster)
	if state != scaleplanev1alpha1.MemberSized {
		next.State = state
		if next.Resources != nil {
			next.Message = why + "; the size it holds is kept"
		} else {
			next.Message = why + "; it runs the template's resources"
		}
		return memberDecision{status: next}
	}
	next.Nodes = ptr.To(nodes)
	current := heldResources(base, next.Resources)
	expected, hits := boundedEstimate(s.resources, estimatedUnits(s, int64(nodes)))
	next.Recommendation = recommendation(expected, s.setLimits)
	rs := decide(current, expected, s)
	if len(rs.changes) == 0 {
		next.PendingResize = nil
		next.State = scaleplanev1alpha1.MemberSized
		next.Message = fmt.Sprintf("Within %d%% of the estimate for %d nodes", s.threshold, nodes)
		if len(rs.capped) > 0 {
			next.State = scaleplanev1alpha1.MemberCapped
			next.Message = cappedMessage(rs.capped, nodes)
		}
		return memberDecision{status: next, hits: hits}
	}
	delay := s.delay(rs.direction)
	pending, due, ok := hold(next.PendingResize, rs.direction, now, delay)
	next.PendingResize = pending
	if !ok {
		next.State = scaleplanev1alpha1.MemberPostponed
		next.Message = fmt.Sprintf("%s of %s for %d nodes held back by %s (%v) until %s",
			verb(rs.direction), names(rs.changes), nodes, delayField(rs.direction), delay, due.UTC().Format(time.RFC3339))
		return memberDecision{status: next, requeue: due.Sub(now), hits: hits}
	}
	applied := current.DeepCopy()
	for _, c := range rs.changes {
		if applied.Requests == nil {
			applied.Requests = corev1.ResourceList{}
		}
		applied.Requests[c.name] = c.to.DeepCopy()
		if s.setLimits {
			if applied.Limits == nil {
				applied.Limits = corev1.ResourceList{}
			}
			applied.Limits[c.name] = c.to.DeepCopy()
		}
	}
	next.Resources = managedOf(*applied, s)
	next.PendingResize = nil
	next.LastChangeTime = ptr.To(metav1.NewTime(now).Rfc3339Copy())
	next.State = scaleplanev1alpha1.MemberSized
	next.Message = fmt.Sprintf("Sized for %d nodes", nodes)
	if len(rs.capped) > 0 {
		next.State = scaleplanev1alpha1.MemberCapped
		next.Message = cappedMessage(rs.capped, nodes)
	}
	return memberDecision{status: next, changed: true, changes: rs.changes, hits: hits}
}

// cappedMessage says that the template's limits hold a member's requests
// below its estimate.
func cappedMessage(capped []cappedResource, nodes int32) string {
	return fmt.Sprintf("Requests capped at the template's limits (%s) for %d nodes: setLimits is false and a request may not exceed its limit", describeCapped(capped), nodes)
}

// fitHeld fits a member's held size to what the spec manages and to the
// template, before and whatever its count decides, and says what it
// changed:
//   - a resource the spec no longer lists, and every limit when setLimits
//     is false, is no longer held: the member runs the template's value,
//     now, rather than at the moment another resource of it changes;
//   - a held request above the limit the member renders (the held limit,
//     else the template's) is cut down to that limit at once, not after
//     scaleDownDelay: Karmada would render a request above its limit, the
//     member's API server refuses it, and then no change of the template
//     (an image bump too) reaches that member.
//
// Nil when nothing is left to hold.
func fitHeld(held *corev1.ResourceRequirements, base corev1.ResourceRequirements, s settings) (*corev1.ResourceRequirements, []string) {
	if held == nil {
		return nil, nil
	}
	var notes []string
	out := managedOf(*held, s)
	for name := range held.Requests {
		if _, ok := out.Requests[name]; !ok {
			notes = append(notes, fmt.Sprintf("%s request no longer managed", name))
		}
	}
	for name := range held.Limits {
		if _, ok := out.Limits[name]; !ok {
			notes = append(notes, fmt.Sprintf("%s limit no longer managed", name))
		}
	}
	for _, name := range sortedNames(out.Requests) {
		req := out.Requests[name]
		lim, ok := out.Limits[name]
		if !ok {
			lim, ok = base.Limits[name]
		}
		if ok && req.Cmp(lim) > 0 {
			notes = append(notes, fmt.Sprintf("%s request %s -> %s (the limit it runs with)", name, req.String(), lim.String()))
			out.Requests[name] = lim.DeepCopy()
		}
	}
	sort.Strings(notes)
	if len(out.Requests) == 0 && len(out.Limits) == 0 {
		return nil, notes
	}
	return out, notes
}

// summary says what the decision changed, for the Resized event; empty
// when nothing changed.
func (d memberDecision) summary(setLimits bool) string {
	parts := slices.Clone(d.fitted)
	if d.changed {
		parts = append(parts, describe(d.changes, setLimits))
	}
	return strings.Join(parts, "; ")
}
