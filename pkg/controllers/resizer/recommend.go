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
	"context"
	"fmt"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	scaleplanev1alpha1 "github.com/scaleplane/scaleplane/pkg/apis/scaleplane/v1alpha1"
)

// reasonRecommendationOnly is UpToDate's reason with updateMode Off: True
// when the container is within the threshold of the recommendation, False
// when the resizer would change it; either way nothing is written. It is no
// Warning: a difference is what recommend-only mode is there to show (a
// nanny, or a person, sizes the add-on meanwhile).
const reasonRecommendationOnly = "RecommendationOnly"

// offNote ends every message of updateMode Off.
const offNote = "updateMode Off: recommendation only, nothing is written"

// recommendOnly reports whether ar asks for recommendations only.
func recommendOnly(ar *scaleplanev1alpha1.AddonResizer) bool {
	return ar.Spec.UpdateMode == scaleplanev1alpha1.UpdateModeOff
}

// recommend is resize for updateMode Off: the decision is made against the
// pod template as Rollout would make it (threshold band, the limit that
// caps a request with setLimits false), and only recorded. Nothing is
// written to the target or its pods, and no delay is held: pendingResize is
// cleared, so a switch to Rollout or InPlace starts its delays from the
// switch, not from when Off first saw the difference. What InPlace held is
// dropped (and its pod watch stopped): the pods keep the size they were
// resized to, until their template's size reaches them by a rollout.
func (c *Controller) recommend(ar *scaleplanev1alpha1.AddonResizer, s settings, w *workload, z sizing, status *scaleplanev1alpha1.AddonResizerStatus, now time.Time) result {
	c.inPlace.rollout(ar, status)
	status.PendingResize = nil
	container := w.container(s.container)
	if container == nil {
		containerMissing(status, ar, s, w, now)
		return result{outcome: outcomeError}
	}
	rs := decide(container.Resources, z.expected, s)
	setCondition(status, scaleplanev1alpha1.ConditionUpToDate, recommendedStatus(rs), reasonRecommendationOnly,
		recommendationMessage(fmt.Sprintf("container %q of %s", s.container, w), rs, s), ar.Generation, now)
	return result{outcome: outcomeRecommended}
}

func recommendedStatus(rs resize) metav1.ConditionStatus {
	if len(rs.changes) > 0 {
		return metav1.ConditionFalse
	}
	return metav1.ConditionTrue
}

// recommendationMessage says what the resizer would do to what, and that
// it does not: "updateMode Off: recommendation only, nothing is written;
// it would set container "main" of Deployment ns/addon: cpu request 100m ->
// 200m". It leaves the cluster size out (status.clusterSize has it), so
// that it changes only with the recommendation.
func recommendationMessage(what string, rs resize, s settings) string {
	var msg string
	if len(rs.changes) == 0 {
		msg = fmt.Sprintf("%s; %s is within %d%% of the recommendation", offNote, what, s.threshold)
	} else {
		msg = fmt.Sprintf("%s; it would set %s: %s", offNote, what, describe(rs.changes, s.setLimits))
	}
	if len(rs.capped) > 0 {
		msg += fmt.Sprintf("; requests capped at the container's limits (%s), as setLimits is false", describeCapped(rs.capped))
	}
	return msg
}

// recommendMembers is sizeMembers for updateMode Off on Karmada: each
// member the template is placed on gets its recommendation in
// status.clusters (state Recommended, or Stale / Unknown with the last one
// kept), and no size is changed. No OverridePolicy is written for Off. A
// policy of this AddonResizer's own from before (it ran with Rollout) is
// kept, holding the sizes it held, as a template keeps the last size
// written on a plain cluster: deleting it would send every member back to
// the template's resources, a rollout in each, which is an action Off must
// not take. It is still kept valid against the template (fitHeld: the
// container's index, resources no longer listed, a request never above the
// limit it renders with), because a policy that no longer fits the
// template makes Karmada's whole override fail and then no change of the
// template reaches those members; that is a write only when the template or
// the spec changes so, never toward a recommendation.
func (c *Controller) recommendMembers(ctx context.Context, ar *scaleplanev1alpha1.AddonResizer, s settings, w *workload, index int, placed []string, status *scaleplanev1alpha1.AddonResizerStatus, now time.Time) result {
	base := w.template.Spec.Containers[index].Resources
	prev := previousMembers(status)
	members := make([]scaleplanev1alpha1.MemberClusterStatus, 0, len(placed))
	hits := map[string][]boundHit{}
	var within int32
	var differ, notCurrent []string
	held := false
	for _, name := range placed {
		cluster, err := c.karmada.clusters.Get(name)
		if err != nil && !apierrors.IsNotFound(err) {
			return result{outcome: outcomeError, err: err}
		}
		if err != nil {
			cluster = nil
		}
		m := scaleplanev1alpha1.MemberClusterStatus{Name: name}
		if p := prev[name]; p != nil {
			m = *p.DeepCopy()
		}
		m.PendingResize = nil
		m.Resources, _ = fitHeld(m.Resources, base, s)
		held = held || m.Resources != nil
		nodes, state, why := memberCount(cluster)
		if state != scaleplanev1alpha1.MemberSized {
			m.State, m.Message = state, why+"; its last recommendation is kept"
			notCurrent = append(notCurrent, name)
			members = append(members, m)
			continue
		}
		m.Nodes = ptr.To(nodes)
		expected, h := boundedEstimate(s.resources, estimatedUnits(s, int64(nodes)))
		if len(h) > 0 {
			hits[name] = h
		}
		m.Recommendation = recommendation(expected, s.setLimits)
		rs := decide(heldResources(base, m.Resources), expected, s)
		m.State = scaleplanev1alpha1.MemberRecommended
		m.Message = recommendationMessage(fmt.Sprintf("the container it runs, for %d nodes,", nodes), rs, s)
		if len(rs.changes) == 0 {
			within++
		} else {
			differ = append(differ, name)
		}
		members = append(members, m)
	}
	if len(members) == 0 {
		members = nil
	}
	status.MemberClusters = ptr.To(int32(len(placed)))
	setCondition(status, scaleplanev1alpha1.ConditionFederation, metav1.ConditionTrue, reasonKarmada,
		"Recommended per member cluster from its Cluster's status.nodeSummary.totalNum; "+offNote+" (no OverridePolicy)", ar.Generation, now)
	c.foreignCondition(ar, w, s, index, status, now)
	boundedCondition(status, s, hits, ar.Generation, now)
	status.Clusters, status.SizedClusters = members, ptr.To(within)
	if held || status.OverridePolicy != "" {
		out, err := c.holdMembers(ctx, ar, w, index, members, prev, status)
		// No member is Sized with Off: SIZED counts those within the band.
		status.SizedClusters = ptr.To(within)
		if out.problem != nil {
			setCondition(status, scaleplanev1alpha1.ConditionUpToDate, metav1.ConditionFalse, out.problem.reason, out.problem.message, ar.Generation, now)
			return result{outcome: outcomeError, err: err, requeue: policyRetry}
		}
		if err != nil {
			return result{outcome: outcomeError, err: err}
		}
	}
	msg := fmt.Sprintf("%s; all %d member clusters run within %d%% of their recommendation", offNote, len(placed), s.threshold)
	st := metav1.ConditionTrue
	if len(differ)+len(notCurrent) > 0 {
		st = metav1.ConditionFalse
		var parts []string
		if len(differ) > 0 {
			parts = append(parts, "it would change "+strings.Join(differ, ", "))
		}
		if len(notCurrent) > 0 {
			parts = append(parts, "not current: "+strings.Join(notCurrent, ", "))
		}
		msg = fmt.Sprintf("%s; %s (status.clusters says how)", offNote, strings.Join(parts, "; "))
	}
	if status.OverridePolicy != "" {
		msg += fmt.Sprintf("; OverridePolicy %s, from before updateMode Off, keeps holding the sizes it held", status.OverridePolicy)
	}
	setCondition(status, scaleplanev1alpha1.ConditionUpToDate, st, reasonRecommendationOnly, msg, ar.Generation, now)
	return result{outcome: outcomeRecommended}
}

// recommendationOnlyChurn tells whether a condition's message may change
// with the recommendation alone, so that a status that differs only there
// is an observation, written at most every observationInterval.
func recommendationOnlyChurn(c *metav1.Condition) bool {
	return c.Type == scaleplanev1alpha1.ConditionBounded ||
		c.Type == scaleplanev1alpha1.ConditionUpToDate && c.Reason == reasonRecommendationOnly
}
