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
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"

	scaleplanev1alpha1 "github.com/scaleplane/scaleplane/pkg/apis/scaleplane/v1alpha1"
)

// 20 nodes, Exponential from 16: the bucket is 24, cpu 40m + 0.5m x 24 =
// 52m capped at maxAllowed 50m, memory 88Mi (above its minAllowed 64Mi).
// The container runs at 40m/88Mi, so Off would set cpu to 50m, and writes
// nothing; no delay is shown, as Off holds none.
func TestExplainAddonResizerOff(t *testing.T) {
	now := time.Date(2026, 11, 27, 8, 0, 0, 0, time.UTC)
	ar := resizer("api-a", "api", scaleplanev1alpha1.AddonResizerStatus{
		ClusterSize: ptr.To[int32](20),
		Conditions: []metav1.Condition{
			{Type: scaleplanev1alpha1.ConditionUpToDate, Status: metav1.ConditionFalse, Reason: "RecommendationOnly",
				Message: `updateMode Off: recommendation only, nothing is written; it would set container "api" of Deployment default/api: cpu request 40m -> 50m, limit 40m -> 50m`},
			{Type: scaleplanev1alpha1.ConditionBounded, Status: metav1.ConditionTrue, Reason: "CappedAtMaxAllowed", Message: "cpu estimate 52m capped at maxAllowed 50m"},
		},
	})
	ar.Spec.UpdateMode = scaleplanev1alpha1.UpdateModeOff
	ar.Spec.Resources[0].MaxAllowed = ptr.To(resource.MustParse("50m"))
	ar.Spec.Resources[1].MinAllowed = ptr.To(resource.MustParse("64Mi"))
	kube := []runtime.Object{apiDeployment("40m", "88Mi")}
	out := run(t, now, kube, []runtime.Object{ar}, "explain", "addonresizer", "api-a")
	golden(t, "explain-off.txt", out)
	golden(t, "explain-off.json", run(t, now, kube, []runtime.Object{ar}, "explain", "addonresizer", "api-a", "-o", "json"))
	for _, want := range []string{
		"(updateMode Off).\n" + offBanner + "\n",
		"40m + 500u x 24 = 52m, capped at maxAllowed 50m",
		"false (estimate capped at maxAllowed 50m)",
		"Next:      nothing (updateMode Off): it would set container api cpu to 50m, and writes nothing\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("explain does not say %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "Pending:") || strings.Contains(out, "delay") {
		t.Errorf("explain shows a delay for Off:\n%s", out)
	}

	// Within the band: nothing, and it says it would not change it either.
	kube = []runtime.Object{apiDeployment("50m", "88Mi")}
	out = run(t, now, kube, []runtime.Object{ar}, "explain", "addonresizer", "api-a")
	if want := "Next:      nothing (updateMode Off): container api is within 10% of every estimate, so it would not change it either\n"; !strings.Contains(out, want) {
		t.Errorf("explain does not say %q:\n%s", want, out)
	}
}

// On Karmada with Off: the members' estimates are bounded as the
// controller bounds them, and Next says nothing is written.
func TestExplainKarmadaOff(t *testing.T) {
	now := time.Date(2026, 11, 27, 8, 0, 0, 0, time.UTC)
	ar := resizer("api-a", "api", scaleplanev1alpha1.AddonResizerStatus{
		Federation: scaleplanev1alpha1.FederationKarmada, MemberClusters: ptr.To[int32](2), SizedClusters: ptr.To[int32](1),
		Clusters: []scaleplanev1alpha1.MemberClusterStatus{
			{Name: "big", Nodes: ptr.To[int32](500), State: scaleplanev1alpha1.MemberRecommended, Message: "would set cpu request 40m -> 100m"},
			{Name: "small", Nodes: ptr.To[int32](3), State: scaleplanev1alpha1.MemberRecommended, Message: "within 10%"},
		},
	})
	ar.Spec.UpdateMode = scaleplanev1alpha1.UpdateModeOff
	ar.Spec.Federation = scaleplanev1alpha1.FederationKarmada
	ar.Spec.Resources[0].MaxAllowed = ptr.To(resource.MustParse("100m"))
	kube := []runtime.Object{&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "api"}}}
	out := run(t, now, kube, []runtime.Object{ar}, "explain", "addonresizer", "api-a")
	for _, want := range []string{
		offBanner,
		"Next:      nothing (updateMode Off): 1 of 2 member clusters run within the threshold of their recommendation; each cluster's message says what it would set, and no OverridePolicy is written\n",
		"cpu=100m,memory=1258Mi", // big: bucket 609, cpu 345m capped at 100m
	} {
		if !strings.Contains(out, want) {
			t.Errorf("explain does not say %q:\n%s", want, out)
		}
	}
}
