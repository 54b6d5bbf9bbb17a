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

package hpagenerator

import (
	"sync"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	"k8s.io/apimachinery/pkg/types"
)

// toleranceSupport remembers whether the API server keeps behavior's
// tolerance (scaleUp/scaleDown.tolerance). A server with the
// HPAConfigurableTolerance feature gate off, or one that predates the field,
// drops it on every write: comparing the policy's tolerance with the stored
// HPA would then find drift on every sync, and write and report an update
// each time. The generator learns it from the HPA its own write returns
// (what the server kept), and from then on compares without the field and
// says so once per LeaderWorkerSet. It is learned again after a restart,
// with one write, so a server that gains the field is noticed then.
type toleranceSupport struct {
	mu      sync.Mutex
	dropped bool
	told    map[types.UID]struct{}
}

func newToleranceSupport() *toleranceSupport {
	return &toleranceSupport{told: map[types.UID]struct{}{}}
}

// learn records what a write showed: the server dropped the tolerance it
// was sent.
func (t *toleranceSupport) learn(sent, kept *autoscalingv2.HorizontalPodAutoscaler) {
	if !hasTolerance(sent) || hasTolerance(kept) {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.dropped = true
}

// honoured reports whether the server keeps the tolerance field, as far as
// the generator has learned.
func (t *toleranceSupport) honoured() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return !t.dropped
}

// tell reports whether the LeaderWorkerSet is still to be told that its
// tolerance is not honoured, and counts it as told.
func (t *toleranceSupport) tell(uid types.UID) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.dropped {
		return false
	}
	if _, ok := t.told[uid]; ok {
		return false
	}
	t.told[uid] = struct{}{}
	return true
}

// hasTolerance reports whether the HPA's behavior sets a tolerance.
func hasTolerance(hpa *autoscalingv2.HorizontalPodAutoscaler) bool {
	b := hpa.Spec.Behavior
	return b != nil && (b.ScaleUp != nil && b.ScaleUp.Tolerance != nil || b.ScaleDown != nil && b.ScaleDown.Tolerance != nil)
}

// withoutTolerance returns a copy of the HPA without behavior's tolerance,
// as a server that does not know the field stores it.
func withoutTolerance(hpa *autoscalingv2.HorizontalPodAutoscaler) *autoscalingv2.HorizontalPodAutoscaler {
	out := hpa.DeepCopy()
	if b := out.Spec.Behavior; b != nil {
		if b.ScaleUp != nil {
			b.ScaleUp.Tolerance = nil
		}
		if b.ScaleDown != nil {
			b.ScaleDown.Tolerance = nil
		}
	}
	return out
}
