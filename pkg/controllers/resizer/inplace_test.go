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
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"

	scaleplanev1alpha1 "github.com/scaleplane/scaleplane/pkg/apis/scaleplane/v1alpha1"
)

func quantities(kv ...string) corev1.ResourceList {
	out := corev1.ResourceList{}
	for i := 0; i < len(kv); i += 2 {
		out[corev1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
	}
	return out
}

func inPlaceWorkload(r corev1.ResourceRequirements) *workload {
	return &workload{
		kind: scaleplanev1alpha1.TargetKindDeployment, namespace: ns, name: addonName,
		template: &corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: containerName, Resources: r}}}},
		selector: &metav1.LabelSelector{MatchLabels: map[string]string{addonLabel: addonName}},
	}
}

// TestInPlaceView: the decision sees the template's container with the
// held size over its managed resources, without the template's limits of
// the held requests when limits are not set (each pod's own bind); the
// template itself is not touched, and unmanaged values are the template's.
func TestInPlaceView(t *testing.T) {
	tmpl := corev1.ResourceRequirements{
		Requests: quantities("cpu", "10m", "memory", "10Mi"),
		Limits:   quantities("cpu", "1", "example.com/gpu", "1"),
	}
	w := inPlaceWorkload(tmpl)
	s := settings{container: containerName, resources: []scaleplanev1alpha1.ResourceScaling{{Name: corev1.ResourceCPU}}, setLimits: false}
	status := &scaleplanev1alpha1.AddonResizerStatus{InPlace: &scaleplanev1alpha1.InPlaceStatus{
		Resources: corev1.ResourceRequirements{Requests: quantities("cpu", "300m"), Limits: quantities("cpu", "2")},
	}}
	got := inPlaceView(w, s, status).container(containerName).Resources
	want := corev1.ResourceRequirements{
		Requests: quantities("cpu", "300m", "memory", "10Mi"),
		// setLimits false: the limits are the user's, and in place each
		// running pod's own binds, not the template's: the held cpu
		// request's limit is left out (each pod is capped at its own).
		// Unmanaged ones stay the template's.
		Limits: quantities("example.com/gpu", "1"),
	}
	if !equality.Semantic.DeepEqual(got, want) {
		t.Errorf("view %v, want %v", got, want)
	}
	if !equality.Semantic.DeepEqual(w.container(containerName).Resources, tmpl) {
		t.Errorf("the cached template was changed: %v", w.container(containerName).Resources)
	}
	if got := inPlaceView(w, s, &scaleplanev1alpha1.AddonResizerStatus{}).container(containerName).Resources; !equality.Semantic.DeepEqual(got, tmpl) {
		t.Errorf("without a held size the view is %v, want the template's %v", got, tmpl)
	}

	held := heldSize(applyChanges(want, []resourceChange{{name: corev1.ResourceCPU, to: resource.MustParse("400m")}}, true), settings{
		resources: []scaleplanev1alpha1.ResourceScaling{{Name: corev1.ResourceCPU}}, setLimits: true,
	})
	if wantHeld := (corev1.ResourceRequirements{Requests: quantities("cpu", "400m"), Limits: quantities("cpu", "400m")}); !equality.Semantic.DeepEqual(held, wantHeld) {
		t.Errorf("held %v, want %v: only the managed resources", held, wantHeld)
	}
}

func TestInPlaceCondition(t *testing.T) {
	ar := &scaleplanev1alpha1.AddonResizer{ObjectMeta: metav1.ObjectMeta{Name: addonName, Namespace: ns, Generation: 3}}
	w := inPlaceWorkload(corev1.ResourceRequirements{})
	pod := func(name string, st podState) podAnswer {
		return podAnswer{pod: runningPod(name, "1m", "1Mi"), state: st, message: "said " + string(st)}
	}
	tests := []struct {
		name    string
		answers []podAnswer
		status  metav1.ConditionStatus
		reason  string
		says    string
	}{
		{name: "no pods", status: metav1.ConditionTrue, reason: reasonNoRunningPods, says: "Karmada"},
		{name: "all at size", answers: []podAnswer{pod("a", podAtSize), pod("b", podAtSize)}, status: metav1.ConditionTrue, reason: reasonAtSize, says: "All 2 running pods"},
		{name: "on their way", answers: []podAnswer{pod("a", podAtSize), pod("b", podResizing), pod("c", podOutdated)}, status: metav1.ConditionFalse, reason: reasonResizing, says: "1 of 3 running pods"},
		{name: "deferred", answers: []podAnswer{pod("a", podDeferred), pod("b", podResizing)}, status: metav1.ConditionFalse, reason: reasonDeferred, says: "said deferred"},
		{name: "error over deferred", answers: []podAnswer{pod("a", podDeferred), pod("b", podError)}, status: metav1.ConditionFalse, reason: reasonResizeError, says: "said error"},
		{name: "infeasible over error", answers: []podAnswer{pod("a", podInfeasible), pod("b", podError)}, status: metav1.ConditionFalse, reason: reasonInfeasible, says: "abandoned"},
		{name: "rejected first", answers: []podAnswer{pod("a", podInfeasible), pod("b", podRejected)}, status: metav1.ConditionFalse, reason: reasonResizeReject, says: "said rejected"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			status := &scaleplanev1alpha1.AddonResizerStatus{InPlace: &scaleplanev1alpha1.InPlaceStatus{
				Resources: corev1.ResourceRequirements{Requests: quantities("cpu", "200m")},
			}}
			inPlaceCondition(status, ar, w, settings{}, podSurvey{answers: tc.answers}, t0)
			c := meta.FindStatusCondition(status.Conditions, scaleplanev1alpha1.ConditionInPlaceResized)
			if c == nil || c.Status != tc.status || c.Reason != tc.reason || !strings.Contains(c.Message, tc.says) || c.ObservedGeneration != 3 {
				t.Errorf("condition %+v, want %s %s saying %q", c, tc.status, tc.reason, tc.says)
			}
		})
	}
}

// TestWarnInPlaceTransition: one Warning event when the condition turns to
// a reason a user must know, none while it stays so or for progress.
func TestWarnInPlaceTransition(t *testing.T) {
	ar := &scaleplanev1alpha1.AddonResizer{ObjectMeta: metav1.ObjectMeta{Name: addonName, Namespace: ns}}
	with := func(st metav1.ConditionStatus, reason string) *scaleplanev1alpha1.AddonResizerStatus {
		s := &scaleplanev1alpha1.AddonResizerStatus{}
		setCondition(s, scaleplanev1alpha1.ConditionInPlaceResized, st, reason, "because", 1, t0)
		return s
	}
	recorder := record.NewFakeRecorder(10)
	warnInPlaceTransition(recorder, ar, &scaleplanev1alpha1.AddonResizerStatus{}, with(metav1.ConditionFalse, reasonResizing))
	warnInPlaceTransition(recorder, ar, with(metav1.ConditionFalse, reasonResizing), with(metav1.ConditionFalse, reasonDeferred))
	warnInPlaceTransition(recorder, ar, with(metav1.ConditionFalse, reasonDeferred), with(metav1.ConditionFalse, reasonDeferred))
	warnInPlaceTransition(recorder, ar, with(metav1.ConditionFalse, reasonDeferred), with(metav1.ConditionTrue, reasonAtSize))
	close(recorder.Events)
	var got []string
	for e := range recorder.Events {
		got = append(got, e)
	}
	if len(got) != 1 || got[0] != "Warning Deferred because" {
		t.Errorf("events %q, want one Warning Deferred", got)
	}
}
