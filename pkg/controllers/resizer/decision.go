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
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	scaleplanev1alpha1 "github.com/scaleplane/scaleplane/pkg/apis/scaleplane/v1alpha1"
	"github.com/scaleplane/scaleplane/pkg/resizeestimate"
)

// resourceChange sets one managed resource of the container to its
// estimate: its request, and its limit when the AddonResizer sets limits.
type resourceChange struct {
	name corev1.ResourceName
	to   resource.Quantity
	// fromRequest and fromLimit are the container's values before the
	// change; nil when not set. fromLimit is nil too when limits are not
	// managed.
	fromRequest *resource.Quantity
	fromLimit   *resource.Quantity
}

// resize is what would bring the container to the recommendation.
type resize struct {
	changes   []resourceChange
	direction scaleplanev1alpha1.ResizeDirection
	// capped are the resources whose estimate is above the container's
	// limit while limits are not managed: their request is sized to the
	// limit instead.
	capped []cappedResource
}

// cappedResource is an estimate the container's own limit holds back.
type cappedResource struct {
	name     corev1.ResourceName
	estimate resource.Quantity
	limit    resource.Quantity
}

// decide compares the container's resources with the estimate, resource by
// resource, as Addon Resizer 1.8 does: a value is kept while it is within
// threshold percent of the estimate, and a resource whose request (or limit,
// when limits are managed) is out of the band, or not set, is set exactly to
// the estimate. Request and limit of one resource are set together, so a
// kept request can never end above a new limit. Resources the AddonResizer
// does not list are not looked at.
//
// A request that is not set but has a limit is the limit: Kubernetes
// defaults it so, and the pods run with it. With setLimits false the limit
// is the user's: an estimate above it would be a request the API server
// rejects (a request may not exceed its limit), so the request is sized to
// the limit and the resize says it is capped.
func decide(current corev1.ResourceRequirements, expected corev1.ResourceList, s settings) resize {
	var r resize
	r.direction = scaleplanev1alpha1.ResizeDown
	for _, name := range s.managed() {
		want := expected[name]
		req, hasReq := current.Requests[name]
		lim, hasLim := current.Limits[name]
		if !hasReq && hasLim {
			req, hasReq = lim, true
		}
		if !s.setLimits && hasLim && want.Cmp(lim) > 0 {
			r.capped = append(r.capped, cappedResource{name: name, estimate: want.DeepCopy(), limit: lim.DeepCopy()})
			want = lim.DeepCopy()
		}
		out := !hasReq || !withinThreshold(name, req, want, s.threshold)
		if s.setLimits {
			out = out || !hasLim || !withinThreshold(name, lim, want, s.threshold)
		}
		if !out {
			continue
		}
		c := resourceChange{name: name, to: want}
		if hasReq {
			c.fromRequest = ptr.To(req.DeepCopy())
		}
		if s.setLimits && hasLim {
			c.fromLimit = ptr.To(lim.DeepCopy())
		}
		if raises(c.fromRequest, want) || s.setLimits && raises(c.fromLimit, want) {
			r.direction = scaleplanev1alpha1.ResizeUp
		}
		r.changes = append(r.changes, c)
	}
	return r
}

// describeCapped says which estimates the container's limits hold back, for
// the condition: "cpu estimate 700m, limit 500m".
func describeCapped(capped []cappedResource) string {
	parts := make([]string, 0, len(capped))
	for _, c := range capped {
		parts = append(parts, fmt.Sprintf("%s estimate %s, limit %s", c.name, c.estimate.String(), c.limit.String()))
	}
	return strings.Join(parts, "; ")
}

// raises reports whether setting a value to to raises it. A value that was
// not set counts as a raise: a missing request without a limit is a request
// of zero, and setting a missing limit is the first sizing of the container.
func raises(from *resource.Quantity, to resource.Quantity) bool {
	return from == nil || to.Cmp(*from) > 0
}

func withinThreshold(name corev1.ResourceName, actual, expected resource.Quantity, threshold int64) bool {
	return resizeestimate.WithinThreshold(name, actual, expected, threshold)
}

// hold applies the delay of the change's direction. pending is the change
// held back so far (from status, so that a restart does not reset the
// clock): it is kept while the direction stays the same and restarted when
// it changes. It returns the pending change to record, and whether the
// delay has passed; when it has not, the change is due at next.Since plus
// the delay.
func hold(pending *scaleplanev1alpha1.PendingResize, dir scaleplanev1alpha1.ResizeDirection, now time.Time, delay time.Duration) (next *scaleplanev1alpha1.PendingResize, due time.Time, apply bool) {
	next = pending
	if next == nil || next.Direction != dir {
		// Second precision, as status stores it: a change may be applied
		// up to a second early, never late.
		next = &scaleplanev1alpha1.PendingResize{Direction: dir, Since: metav1.NewTime(now).Rfc3339Copy()}
	}
	due = next.Since.Add(delay)
	return next, due, !now.Before(due)
}

// describe says what the changes do, for events: "cpu request 40m -> 48m,
// limit 40m -> 48m; memory request <none> -> 104Mi".
func describe(changes []resourceChange, setLimits bool) string {
	parts := make([]string, 0, len(changes))
	for _, c := range changes {
		s := fmt.Sprintf("%s request %s -> %s", c.name, quantityString(c.fromRequest), c.to.String())
		if setLimits {
			s += fmt.Sprintf(", limit %s -> %s", quantityString(c.fromLimit), c.to.String())
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, "; ")
}

func quantityString(q *resource.Quantity) string {
	if q == nil {
		return "<none>"
	}
	return q.String()
}

// recommendation is the status form of the estimate.
func recommendation(expected corev1.ResourceList, setLimits bool) *corev1.ResourceRequirements {
	r := &corev1.ResourceRequirements{Requests: expected.DeepCopy()}
	if setLimits {
		r.Limits = expected.DeepCopy()
	}
	return r
}
