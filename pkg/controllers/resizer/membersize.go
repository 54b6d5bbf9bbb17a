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
// A member whose count cannot be read keeps its held size and its pending
// change; it is never sized to the base.
func decideMember(name string, prev *scaleplanev1alpha1.MemberClusterStatus, cluster *clusterv1alpha1.Cluster, base corev1.ResourceRequirements, s settings, now time.Time) memberDecision {
	next := scaleplanev1alpha1.MemberClusterStatus{Name: name}
	if prev != nil {
		next = *prev.DeepCopy()
	}
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
	expected := estimate(s.resources, estimatedUnits(s, int64(nodes)))
	rs := decide(current, expected, s)
	if len(rs.changes) == 0 {
		next.PendingResize = nil
		next.State = scaleplanev1alpha1.MemberSized
		next.Message = fmt.Sprintf("Within %d%% of the estimate for %d nodes", s.threshold, nodes)
		if len(rs.capped) > 0 {
			next.Message = fmt.Sprintf("Requests capped at the template's limits (%s) for %d nodes", describeCapped(rs.capped), nodes)
		}
		return memberDecision{status: next}
	}
	delay := s.delay(rs.direction)
	pending, due, ok := hold(next.PendingResize, rs.direction, now, delay)
	next.PendingResize = pending
	if !ok {
		next.State = scaleplanev1alpha1.MemberPostponed
		next.Message = fmt.Sprintf("%s of %s for %d nodes held back by %s (%v) until %s",
			verb(rs.direction), names(rs.changes), nodes, delayField(rs.direction), delay, due.UTC().Format(time.RFC3339))
		return memberDecision{status: next, requeue: due.Sub(now)}
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
	return memberDecision{status: next, changed: true, changes: rs.changes}
}
