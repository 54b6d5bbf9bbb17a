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

package app

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"

	scaleplanev1alpha1 "github.com/scaleplane/scaleplane/pkg/apis/scaleplane/v1alpha1"
	"github.com/scaleplane/scaleplane/pkg/resizeestimate"
)

// offBanner heads the explanation of an AddonResizer with updateMode Off.
const offBanner = "Recommend only (updateMode Off): the sizes below are shown, in status and resizer_recommendation, and nothing is written to the target, its pods or an OverridePolicy."

// explainBounds records r's bounds, and how one holds the estimate, in x;
// the arithmetic says it too: "40m + 1m x 3000 = 3040m, capped at maxAllowed
// 2". The bounds are the controller's own (resizeestimate.Estimate).
func explainBounds(x *ResourceExplanation, r scaleplanev1alpha1.ResourceScaling, b resizeestimate.Bounded) {
	x.MinAllowed, x.MaxAllowed = quantityOrEmpty(r.MinAllowed), quantityOrEmpty(r.MaxAllowed)
	if x.Bounded = b.How(); x.Bounded != "" {
		x.Arithmetic += ", " + x.Bounded
	}
}

func quantityOrEmpty(q *resource.Quantity) string {
	if q == nil {
		return ""
	}
	return q.String()
}

// offNext is what an AddonResizer with updateMode Off does next: nothing,
// and what it would set.
func offNext(container string, threshold int64, changes []string) string {
	if len(changes) == 0 {
		return fmt.Sprintf("nothing (updateMode Off): container %s is within %d%% of every estimate, so it would not change it either", container, threshold)
	}
	return fmt.Sprintf("nothing (updateMode Off): it would set container %s %s, and writes nothing", container, strings.Join(changes, ", "))
}

// karmadaOffNext says how the member clusters stand against their
// recommendations with updateMode Off.
func karmadaOffNext(status *scaleplanev1alpha1.AddonResizerStatus) string {
	next := fmt.Sprintf("nothing (updateMode Off): %d of %d member clusters run within the threshold of their recommendation; each cluster's message says what it would set, and no OverridePolicy is written",
		ptrInt(status.SizedClusters), ptrInt(status.MemberClusters))
	if status.OverridePolicy != "" {
		next += fmt.Sprintf("; OverridePolicy %s, from before, keeps holding the sizes it held", status.OverridePolicy)
	}
	return next
}
