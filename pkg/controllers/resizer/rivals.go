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
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	scaleplanev1alpha1 "github.com/scaleplane/scaleplane/pkg/apis/scaleplane/v1alpha1"
)

// rival is another AddonResizer that sizes a resource of the same container.
type rival struct {
	name      string
	resources []corev1.ResourceName
}

// rivals returns the other AddonResizers that size one of the same
// resources of the same container of the same workload, by name. Two of
// them would each patch the container to their own estimate, each patch a
// rollout of the add-on, forever; AddonResizers that size different
// resources of one container, or different containers, do not meet.
//
// An AddonResizer with updateMode Off writes nothing, so it is no one's
// rival and has none: it recommends beside another, or beside a nanny.
func (c *Controller) rivals(ar *scaleplanev1alpha1.AddonResizer, s settings) []rival {
	if recommendOnly(ar) {
		return nil
	}
	objs, err := c.indexer.ByIndex(indexTarget, targetKey(ar.Namespace, s.target.Kind, s.target.Name))
	if err != nil {
		// Only possible if the index is missing, which NewController
		// prevents.
		return nil
	}
	mine := s.managed()
	var out []rival
	for _, obj := range objs {
		other, ok := obj.(*scaleplanev1alpha1.AddonResizer)
		if !ok || other.UID == ar.UID || other.Name == ar.Name || other.DeletionTimestamp != nil || recommendOnly(other) {
			continue
		}
		os := resolve(&other.Spec)
		if os.container != s.container {
			continue
		}
		var shared []corev1.ResourceName
		for _, name := range os.managed() {
			if slices.Contains(mine, name) {
				shared = append(shared, name)
			}
		}
		if len(shared) > 0 {
			out = append(out, rival{name: other.Name, resources: shared})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out
}

// ambiguousCondition records that the container has more than one
// AddonResizer, as the HPA controller's AmbiguousSelector does: none of them
// resizes it until one is left. The Warning event follows from the
// condition's transition; each of them gets it, naming the others.
func ambiguousCondition(status *scaleplanev1alpha1.AddonResizerStatus, ar *scaleplanev1alpha1.AddonResizer, s settings, w *workload, rivals []rival, now time.Time) {
	parts := make([]string, 0, len(rivals))
	for _, r := range rivals {
		parts = append(parts, fmt.Sprintf("%s (%s)", r.name, joinNames(r.resources)))
	}
	msg := fmt.Sprintf("AddonResizer %s also sizes container %q of %s: neither resizes it while both do, as each would undo the other's patch (a rollout each time); delete one, or let each size other resources",
		strings.Join(parts, ", "), s.container, w)
	setCondition(status, scaleplanev1alpha1.ConditionUpToDate, metav1.ConditionFalse, reasonAmbiguousTarget, msg, ar.Generation, now)
	status.PendingResize = nil
}

func joinNames(names []corev1.ResourceName) string {
	out := make([]string, 0, len(names))
	for _, n := range names {
		out = append(out, string(n))
	}
	return strings.Join(out, ", ")
}
