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
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	scaleplanev1alpha1 "github.com/scaleplane/scaleplane/pkg/apis/scaleplane/v1alpha1"
	"github.com/scaleplane/scaleplane/pkg/resizeestimate"
)

// withinThresholdCondition marks the container up to date. A Resized
// condition stays as it is: the resize is what brought it within the band,
// and rewriting the reason would cost a status write after every resize.
func withinThresholdCondition(status *scaleplanev1alpha1.AddonResizerStatus, s settings, generation int64, now time.Time) {
	if cond := meta.FindStatusCondition(status.Conditions, scaleplanev1alpha1.ConditionUpToDate); cond != nil &&
		cond.Status == metav1.ConditionTrue && cond.Reason == reasonResized {
		return
	}
	setCondition(status, scaleplanev1alpha1.ConditionUpToDate, metav1.ConditionTrue, reasonWithinThreshold,
		fmt.Sprintf("Within %d%% of the recommendation", s.threshold), generation, now)
}

// cappedCondition records that the container's own limits hold the requests
// below the estimate: setLimits is false, so the limits are the user's, and
// the API server rejects a request above its limit. The Warning event
// follows from the condition's transition.
func cappedCondition(status *scaleplanev1alpha1.AddonResizerStatus, s settings, w *workload, rs resize, generation int64, now time.Time) {
	setCondition(status, scaleplanev1alpha1.ConditionUpToDate, metav1.ConditionFalse, reasonCappedAtLimit,
		fmt.Sprintf("Requests of container %q of %s capped at its limits (%s): setLimits is false and a request may not exceed its limit; raise the limits, or set setLimits: true to size them too",
			s.container, w, describeCapped(rs.capped)),
		generation, now)
}

// targetMissing records that the target cannot be read. A pending change
// is dropped: it was about a workload that is gone.
func targetMissing(status *scaleplanev1alpha1.AddonResizerStatus, ar *scaleplanev1alpha1.AddonResizer, ref scaleplanev1alpha1.TargetReference, err error, now time.Time) {
	gen := ar.Generation
	reason := reasonNotFound
	msg := fmt.Sprintf("%s %s/%s not found; nothing is resized until it exists", ref.Kind, ar.Namespace, ref.Name)
	var unsupported errUnsupportedKind
	if errors.As(err, &unsupported) {
		reason, msg = reasonUnsupportedKind, unsupported.Error()
	}
	setCondition(status, scaleplanev1alpha1.ConditionTargetFound, metav1.ConditionFalse, reason, msg, gen, now)
	setCondition(status, scaleplanev1alpha1.ConditionContainerFound, metav1.ConditionUnknown, reasonTargetNotFound, "The target was not found", gen, now)
	setCondition(status, scaleplanev1alpha1.ConditionUpToDate, metav1.ConditionFalse, reasonTargetNotFound, msg, gen, now)
	status.PendingResize = nil
}

// containerMissing records that the target's pod template has no such
// container, naming those it has.
func containerMissing(status *scaleplanev1alpha1.AddonResizerStatus, ar *scaleplanev1alpha1.AddonResizer, s settings, w *workload, now time.Time) {
	have := make([]string, 0, len(w.template.Spec.Containers))
	for _, ct := range w.template.Spec.Containers {
		have = append(have, ct.Name)
	}
	msg := fmt.Sprintf("%s has no container %q in its pod template (it has: %s); set spec.containerName to one of them", w, s.container, strings.Join(have, ", "))
	setCondition(status, scaleplanev1alpha1.ConditionContainerFound, metav1.ConditionFalse, reasonNotFound, msg, ar.Generation, now)
	setCondition(status, scaleplanev1alpha1.ConditionUpToDate, metav1.ConditionFalse, reasonContainerNotFound, msg, ar.Generation, now)
	status.PendingResize = nil
}

func verb(dir scaleplanev1alpha1.ResizeDirection) string {
	if dir == scaleplanev1alpha1.ResizeUp {
		return "Raise"
	}
	return "Cut"
}

func delayField(dir scaleplanev1alpha1.ResizeDirection) string {
	if dir == scaleplanev1alpha1.ResizeUp {
		return "scaleUpDelay"
	}
	return "scaleDownDelay"
}

func names(changes []resourceChange) string {
	out := make([]string, 0, len(changes))
	for _, c := range changes {
		out = append(out, string(c.name))
	}
	return strings.Join(out, ", ")
}

func resourceOf(kind scaleplanev1alpha1.TargetKind) string {
	return strings.ToLower(string(kind)) + "s.apps"
}

// Reasons of Bounded.
const (
	reasonCappedAtMaxAllowed = "CappedAtMaxAllowed"
	reasonRaisedToMinAllowed = "RaisedToMinAllowed"
	reasonMinAndMaxAllowed   = "MinAndMaxAllowed"
	reasonWithinBounds       = "WithinBounds"
)

// boundedCondition says whether minAllowed or maxAllowed holds an estimate:
// True naming each ("cpu estimate 2500m capped at maxAllowed 2"), False
// when none does. Without any bound in the spec the condition is removed,
// so the status of an AddonResizer without bounds is as it was. A bound is
// the user's choice, not a fault: UpToDate still says whether the container
// is at the bounded recommendation, and no Warning event is sent. hits
// are keyed by where they are: a member cluster's name, or "" on a plain
// cluster.
func boundedCondition(status *scaleplanev1alpha1.AddonResizerStatus, s settings, hits map[string][]boundHit, generation int64, now time.Time) {
	if !hasBounds(s.resources) {
		meta.RemoveStatusCondition(&status.Conditions, scaleplanev1alpha1.ConditionBounded)
		return
	}
	var parts []string
	var lo, hi bool
	for _, where := range slices.Sorted(maps.Keys(hits)) {
		if len(hits[where]) == 0 {
			continue
		}
		for _, h := range hits[where] {
			lo = lo || h.Bound == resizeestimate.MinAllowed
			hi = hi || h.Bound == resizeestimate.MaxAllowed
		}
		part := describeHits(hits[where])
		if where != "" {
			part = where + ": " + part
		}
		parts = append(parts, part)
	}
	var reason string
	switch {
	case lo && hi:
		reason = reasonMinAndMaxAllowed
	case hi:
		reason = reasonCappedAtMaxAllowed
	case lo:
		reason = reasonRaisedToMinAllowed
	default:
		setCondition(status, scaleplanev1alpha1.ConditionBounded, metav1.ConditionFalse, reasonWithinBounds,
			"Every estimate is within its minAllowed and maxAllowed", generation, now)
		return
	}
	setCondition(status, scaleplanev1alpha1.ConditionBounded, metav1.ConditionTrue, reason, strings.Join(parts, "; "), generation, now)
}
