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
	"encoding/json"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"

	autoscalingv1alpha1 "github.com/scaleplane/scaleplane/pkg/apis/autoscaling/v1alpha1"
	lwsv1 "github.com/scaleplane/scaleplane/pkg/apis/leaderworkerset/v1"
	scaleplanev1alpha1 "github.com/scaleplane/scaleplane/pkg/apis/scaleplane/v1alpha1"
)

func hpa(name, kind, apiVersion, target string, min, max, current int32) *autoscalingv2.HorizontalPodAutoscaler {
	return &autoscalingv2.HorizontalPodAutoscaler{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name},
		Spec: autoscalingv2.HorizontalPodAutoscalerSpec{
			ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: apiVersion, Kind: kind, Name: target},
			MinReplicas:    ptr.To(min), MaxReplicas: max,
		},
		Status: autoscalingv2.HorizontalPodAutoscalerStatus{CurrentReplicas: current, DesiredReplicas: current},
	}
}

func resizer(name, container string, status scaleplanev1alpha1.AddonResizerStatus) *scaleplanev1alpha1.AddonResizer {
	return &scaleplanev1alpha1.AddonResizer{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name},
		Spec: scaleplanev1alpha1.AddonResizerSpec{
			TargetRef:     scaleplanev1alpha1.TargetReference{Kind: scaleplanev1alpha1.TargetKindDeployment, Name: "api"},
			ContainerName: container,
			Resources: []scaleplanev1alpha1.ResourceScaling{
				{Name: corev1.ResourceCPU, Base: resource.MustParse("40m"), ExtraPerUnit: resource.MustParse("500u")},
				{Name: corev1.ResourceMemory, Base: resource.MustParse("40Mi"), ExtraPerUnit: resource.MustParse("2Mi")},
			},
			Estimator:    scaleplanev1alpha1.Estimator{Type: scaleplanev1alpha1.ExponentialEstimator, MinClusterSize: 16},
			Threshold:    10,
			ScaleUpDelay: &metav1.Duration{Duration: 10 * time.Minute},
		},
		Status: status,
	}
}

// A Deployment that an HPA scales, whose bounds a CronFederatedHPA moves,
// whose replicas another CronFederatedHPA sets (the fight the cron-scaler
// reports as AutoscalerConflict), and whose container two AddonResizers size.
func TestWhoScalesDeployment(t *testing.T) {
	now := time.Date(2026, 11, 27, 8, 0, 0, 0, time.UTC)
	kube := []runtime.Object{hpa("api-hpa", "Deployment", "apps/v1", "api", 2, 10, 3)}
	objs := []runtime.Object{
		cronFHPA("default", "api-bounds", "HorizontalPodAutoscaler", "api-hpa",
			autoscalingv1alpha1.CronFederatedHPARule{Name: "weekday", Schedule: "0 8 * * 1-5", TimeZone: ptr.To("Europe/Berlin"), TargetMinReplicas: ptr.To[int32](5)}),
		cronFHPA("default", "api-replicas", "Deployment", "api", rule("night", "0 22 * * *", ptr.To(""), 1)),
		cronFHPA("default", "other", "Deployment", "other", rule("night", "0 22 * * *", ptr.To(""), 1)),
		resizer("api-a", "api", scaleplanev1alpha1.AddonResizerStatus{ClusterSize: ptr.To[int32](20)}),
		resizer("api-b", "api", scaleplanev1alpha1.AddonResizerStatus{}),
	}
	golden(t, "who-scales-deployment.txt", run(t, now, kube, objs, "who-scales", "deployment/api"))
	golden(t, "who-scales-deployment.json", run(t, now, kube, objs, "who-scales", "deploy/api", "-o", "json"))
}

// A LeaderWorkerSet's scalePolicy, the HPA the hpa-generator keeps for it,
// and a CronFederatedHPA aimed at that HPA (the cron-scaler writes its
// bounds to the scalePolicy).
func TestWhoScalesLeaderWorkerSet(t *testing.T) {
	now := time.Date(2026, 11, 27, 8, 0, 0, 0, time.UTC)
	generated := hpa("sample", "LeaderWorkerSet", "leaderworkerset.x-k8s.io/v1", "sample", 1, 4, 2)
	generated.OwnerReferences = []metav1.OwnerReference{{APIVersion: "leaderworkerset.x-k8s.io/v1", Kind: "LeaderWorkerSet", Name: "sample", Controller: ptr.To(true)}}
	lws := &lwsv1.LeaderWorkerSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "sample"},
		Spec:       lwsv1.LeaderWorkerSetSpec{Replicas: ptr.To[int32](2), ScalePolicy: &lwsv1.ScalePolicy{MinReplicas: ptr.To[int32](1), MaxReplicas: 4}},
	}
	objs := []runtime.Object{lws,
		cronFHPA("default", "sample-peak", "HorizontalPodAutoscaler", "sample",
			autoscalingv1alpha1.CronFederatedHPARule{Name: "peak", Schedule: "0 9 * * *", TimeZone: ptr.To(""), TargetMinReplicas: ptr.To[int32](3)}),
	}
	golden(t, "who-scales-leaderworkerset.txt", run(t, now, []runtime.Object{generated}, objs, "who-scales", "lws/sample"))
}

func apiDeployment(cpu, memory string) *appsv1.Deployment {
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "api"},
		Spec: appsv1.DeploymentSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{
			Name: "api",
			Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(memory)},
				Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(memory)},
			},
		}}}}},
	}
}

// 20 nodes, Exponential from 16: the bucket is 24, so cpu is 40m + 0.5m x 24
// = 52m and memory 40Mi + 2Mi x 24 = 88Mi. The container runs at 40m/88Mi:
// cpu is out of the 10 % band (47m..57m), so a scale-up is held by its
// 10-minute delay, pending since 07:55: it is applied at 08:05.
func TestExplainAddonResizerPending(t *testing.T) {
	now := time.Date(2026, 11, 27, 8, 0, 0, 0, time.UTC)
	ar := resizer("api-a", "api", scaleplanev1alpha1.AddonResizerStatus{
		ClusterSize:   ptr.To[int32](20),
		PendingResize: &scaleplanev1alpha1.PendingResize{Direction: scaleplanev1alpha1.ResizeUp, Since: metav1.NewTime(now.Add(-5 * time.Minute))},
		Conditions:    []metav1.Condition{{Type: scaleplanev1alpha1.ConditionUpToDate, Status: metav1.ConditionFalse, Reason: "Postponed", Message: "scale-up held until 2026-11-27T08:05:00Z"}},
	})
	kube := []runtime.Object{apiDeployment("40m", "88Mi")}
	golden(t, "explain-pending.txt", run(t, now, kube, []runtime.Object{ar}, "explain", "addonresizer", "api-a"))
	golden(t, "explain-pending.json", run(t, now, kube, []runtime.Object{ar}, "explain", "addonresizer", "api-a", "-o", "json"))
}

// Within the band: nothing to do.
func TestExplainAddonResizerInBand(t *testing.T) {
	now := time.Date(2026, 11, 27, 8, 0, 0, 0, time.UTC)
	ar := resizer("api-a", "api", scaleplanev1alpha1.AddonResizerStatus{ClusterSize: ptr.To[int32](24)})
	kube := []runtime.Object{apiDeployment("50m", "90Mi")}
	golden(t, "explain-in-band.txt", run(t, now, kube, []runtime.Object{ar}, "explain", "addonresizer", "api-a"))
}

// The autoscaler the hpa-generator keeps for a LeaderWorkerSet, an HPA on a
// plain cluster and a FederatedHPA on Karmada, is recognised alike (by its
// controller reference, as the cron-scaler tells it): the LeaderWorkerSet's
// row names it, its own row says what it was generated for, and a
// CronFederatedHPA aimed at it is shown moving the LeaderWorkerSet's
// scalePolicy bounds, which is where the cron-scaler writes them (the form
// karmada-webhook admits), with its next firing; when the LeaderWorkerSet
// has no scalePolicy, its firings fail, and a warning says so.
func TestWhoScalesGeneratedAutoscaler(t *testing.T) {
	now := time.Date(2026, 11, 27, 8, 0, 0, 0, time.UTC)
	owner := []metav1.OwnerReference{{APIVersion: "leaderworkerset.x-k8s.io/v1", Kind: "LeaderWorkerSet", Name: "sample", Controller: ptr.To(true)}}
	lwsRef := autoscalingv2.CrossVersionObjectReference{APIVersion: "leaderworkerset.x-k8s.io/v1", Kind: "LeaderWorkerSet", Name: "sample"}
	generatedHPA := hpa("sample", "LeaderWorkerSet", "leaderworkerset.x-k8s.io/v1", "sample", 1, 4, 2)
	generatedHPA.OwnerReferences = owner
	generatedFHPA := &autoscalingv1alpha1.FederatedHPA{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "sample", OwnerReferences: owner},
		Spec:       autoscalingv1alpha1.FederatedHPASpec{ScaleTargetRef: lwsRef, MinReplicas: ptr.To[int32](1), MaxReplicas: 4},
		Status:     autoscalingv2.HorizontalPodAutoscalerStatus{CurrentReplicas: 2, DesiredReplicas: 2},
	}
	withPolicy := &lwsv1.LeaderWorkerSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "sample"},
		Spec:       lwsv1.LeaderWorkerSetSpec{Replicas: ptr.To[int32](2), ScalePolicy: &lwsv1.ScalePolicy{MinReplicas: ptr.To[int32](1), MaxReplicas: 4}},
	}
	withoutPolicy := withPolicy.DeepCopy()
	withoutPolicy.Spec.ScalePolicy = nil
	peak := func(kind string) *autoscalingv1alpha1.CronFederatedHPA {
		return cronFHPA("default", "sample-peak", kind, "sample",
			autoscalingv1alpha1.CronFederatedHPARule{Name: "peak", Schedule: "0 9 * * *", TimeZone: ptr.To(""), TargetMinReplicas: ptr.To[int32](3), TargetMaxReplicas: ptr.To[int32](8)})
	}
	for _, c := range []struct {
		name       string
		kube, objs []runtime.Object
		autoscaler string
		warning    string // a warning that must be given ("": none)
	}{
		{name: "HPA on a plain cluster", kube: []runtime.Object{generatedHPA}, objs: []runtime.Object{withPolicy, peak("HorizontalPodAutoscaler")},
			autoscaler: "HorizontalPodAutoscaler/sample"},
		{name: "FederatedHPA on Karmada", objs: []runtime.Object{generatedFHPA, withPolicy, peak("FederatedHPA")},
			autoscaler: "FederatedHPA/sample"},
		{name: "FederatedHPA left after the scalePolicy went", objs: []runtime.Object{generatedFHPA, withoutPolicy, peak("FederatedHPA")},
			autoscaler: "FederatedHPA/sample", warning: "LeaderWorkerSet/sample has no scalePolicy"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var list ScalerList
			if err := json.Unmarshal([]byte(run(t, now, c.kube, c.objs, "who-scales", "lws/sample", "-o", "json")), &list); err != nil {
				t.Fatal(err)
			}
			rows := map[string]Scaler{}
			for _, s := range list.Items {
				rows[s.Kind+"/"+s.Name] = s
			}
			if s, ok := rows[c.autoscaler]; !ok || s.GeneratedBy != "LeaderWorkerSet/sample" {
				t.Errorf("%s: row %+v; want it generated by LeaderWorkerSet/sample", c.autoscaler, s)
			}
			if s := rows["LeaderWorkerSet/sample"]; c.warning == "" && !strings.Contains(s.Details, "the hpa-generator keeps "+c.autoscaler) {
				t.Errorf("LeaderWorkerSet row says %q; want it to name %s", s.Details, c.autoscaler)
			}
			cron := rows["CronFederatedHPA/sample-peak"]
			if cron.Via != c.autoscaler || !strings.Contains(cron.Details, "scalePolicy of LeaderWorkerSet/sample") {
				t.Errorf("CronFederatedHPA row via %q, details %q; want via %s, setting the scalePolicy of LeaderWorkerSet/sample", cron.Via, cron.Details, c.autoscaler)
			}
			if (cron.NextFiring != nil) != (c.warning == "") {
				t.Errorf("CronFederatedHPA next firing %+v; want one only when its firings can run", cron.NextFiring)
			}
			var found bool
			for _, w := range list.Warnings {
				if strings.Contains(w, "refuses") {
					t.Errorf("warning %q: the cron-scaler writes such a rule's bounds to the scalePolicy, it does not refuse it", w)
				}
				found = found || c.warning != "" && strings.Contains(w, c.warning)
			}
			if c.warning != "" && !found {
				t.Errorf("warnings %q; want one saying %q", list.Warnings, c.warning)
			}
		})
	}
}
