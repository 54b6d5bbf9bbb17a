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

package cronscaler

import (
	"testing"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/component-base/metrics/legacyregistry"
	"k8s.io/component-base/metrics/testutil"
	"k8s.io/utils/ptr"

	autoscalingv1alpha1 "github.com/scaleplane/scaleplane/pkg/apis/autoscaling/v1alpha1"
	"github.com/scaleplane/scaleplane/pkg/internal/testkit"
)

// The alerts on failed and missed firings use increase(), which sees no
// increase in a series whose first sample is already 1: every result must be
// exported before the first firing.
func TestEveryFiringResultExportedFromTheStart(t *testing.T) {
	registerMetrics()
	for _, r := range []string{resultSuccess, resultFailed, resultMissed, resultSuperseded} {
		if _, ok := testkit.MetricValue(t, "cron_scaler_firings_total", map[string]string{"result": r}); !ok {
			t.Errorf("cron_scaler_firings_total{result=%q} is not exported after registration", r)
		}
	}
}

// "Did the firing reach its target" is asked per kind of target and outcome,
// from the start, and never per object: every kind and outcome is exported
// at zero after registration, and nothing else.
func TestEveryTargetOutcomeExportedFromTheStart(t *testing.T) {
	registerMetrics()
	kinds := []string{"Deployment", "StatefulSet", "ReplicaSet", "LeaderWorkerSet", "FederatedHPA", "HorizontalPodAutoscaler", "Other"}
	for _, k := range kinds {
		for _, o := range []string{"applied", "already_applied", "not_reapplied", "failed", "superseded", "missed"} {
			if _, ok := testkit.MetricValue(t, "cron_scaler_target_firings_total", map[string]string{"kind": k, "outcome": o}); !ok {
				t.Errorf("cron_scaler_target_firings_total{kind=%q,outcome=%q} is not exported after registration", k, o)
			}
		}
		if _, err := testutil.GetHistogramVecFromGatherer(legacyregistry.DefaultGatherer, "cron_scaler_target_write_lag_seconds", map[string]string{"kind": k}); err != nil {
			t.Errorf("cron_scaler_target_write_lag_seconds{kind=%q} is not exported after registration: %v", k, err)
		}
	}
}

// The kind label has a bounded set of values: a custom resource's kind is
// Other, whatever its name.
func TestKindLabel(t *testing.T) {
	for _, tc := range []struct {
		apiVersion, kind, want string
	}{
		{"apps/v1", "Deployment", "Deployment"},
		{"apps/v1", "StatefulSet", "StatefulSet"},
		{"apps/v1", "ReplicaSet", "ReplicaSet"},
		{"leaderworkerset.x-k8s.io/v1", "LeaderWorkerSet", "LeaderWorkerSet"},
		{"autoscaling.karmada.io/v1alpha1", "FederatedHPA", "FederatedHPA"},
		{"autoscaling/v2", "HorizontalPodAutoscaler", "HorizontalPodAutoscaler"},
		{"autoscaling/v1", "HorizontalPodAutoscaler", "HorizontalPodAutoscaler"},
		{"example.com/v1", "Deployment", "Other"},
		{"example.com/v1", "Widget", "Other"},
		{"a/b/c", "Deployment", "Other"},
	} {
		ref := autoscalingv2.CrossVersionObjectReference{APIVersion: tc.apiVersion, Kind: tc.kind, Name: "x"}
		if got := kindLabel(ref); got != tc.want {
			t.Errorf("kindLabel(%s %s) = %q; want %q", tc.apiVersion, tc.kind, got, tc.want)
		}
	}
}

// outcomeCounts reads target_firings_total for kind, by outcome.
func outcomeCounts(t *testing.T, kind string) map[string]float64 {
	t.Helper()
	out := map[string]float64{}
	for _, o := range targetOutcomes {
		v, err := testutil.GetCounterMetricValue(targetFirings.WithLabelValues(kind, o))
		if err != nil {
			t.Fatal(err)
		}
		out[o] = v
	}
	return out
}

// lagOf reads the count and sum of target_write_lag_seconds for kind.
func lagOf(t *testing.T, kind string) (uint64, float64) {
	t.Helper()
	n, err := testutil.GetHistogramMetricCount(targetWriteLag.WithLabelValues(kind))
	if err != nil {
		t.Fatal(err)
	}
	sum, err := testutil.GetHistogramMetricValue(targetWriteLag.WithLabelValues(kind))
	if err != nil {
		t.Fatal(err)
	}
	return n, sum
}

// grown is what grew from before to after, outcomes that did not grow left out.
func grown(before, after map[string]float64) map[string]float64 {
	out := map[string]float64{}
	for o, v := range after {
		if d := v - before[o]; d != 0 {
			out[o] = d
		}
	}
	return out
}

// A firing that reaches its target counts as applied, and its lag runs from
// the slot to the answer of the target write, which here takes 2 s (a client
// rate limiter in a burst, say): the skew, taken when the sync began, does
// not see those 2 s.
func TestTargetWriteLagRunsToTheWritesAnswer(t *testing.T) {
	h := newHarness(t, utc("2024-05-01 07:59:00"), cron("c", rule("r", "0 8 * * *", 10)))
	h.scales.set("deployments", "web", 1)
	h.syncAt(utc("2024-05-01 07:59:00"), "c")
	h.scales.fake.PrependReactor("patch", "*", func(clienttesting.Action) (bool, runtime.Object, error) {
		h.clock.Step(2 * time.Second)
		return false, nil, nil
	})
	before := outcomeCounts(t, "Deployment")
	n0, sum0 := lagOf(t, "Deployment")
	h.syncAt(utc("2024-05-01 08:00:00.500"), "c")
	if got := h.scales.get("deployments", "web"); got != 10 {
		t.Fatalf("replicas = %d; want 10", got)
	}
	if got := grown(before, outcomeCounts(t, "Deployment")); len(got) != 1 || got[outcomeApplied] != 1 {
		t.Errorf("target_firings_total{kind=Deployment} grew by %v; want applied 1", got)
	}
	n, sum := lagOf(t, "Deployment")
	if n-n0 != 1 || sum-sum0 != 2.5 {
		t.Errorf("target_write_lag_seconds{kind=Deployment}: %d observations summing to %gs; want 1 of 2.5s (0.5s to the sync, 2s of write)", n-n0, sum-sum0)
	}
}

// The firings that do not reach their target say why, by outcome: a target
// that does not exist fails; a firing inherited from a manager that died
// after its write, whose target another manager changed since, is not
// reapplied; one found applied on an HPA is already_applied. None of them
// is a confirmed write of this process: no lag is observed.
func TestFiringsThatDidNotReachTheirTargetCountedByOutcome(t *testing.T) {
	t.Run("failed", func(t *testing.T) {
		h := newHarness(t, utc("2024-05-01 07:59:00"), cron("c", rule("r", "0 8 * * *", 10)))
		h.syncAt(utc("2024-05-01 07:59:00"), "c")
		before := outcomeCounts(t, "Deployment")
		n0, _ := lagOf(t, "Deployment")
		h.syncAt(utc("2024-05-01 08:00:01"), "c")
		if got := grown(before, outcomeCounts(t, "Deployment")); len(got) != 1 || got[outcomeFailed] != 1 {
			t.Errorf("target_firings_total{kind=Deployment} grew by %v; want failed 1", got)
		}
		if n, _ := lagOf(t, "Deployment"); n != n0 {
			t.Errorf("a failed write observed %d lags", n-n0)
		}
	})
	t.Run("not_reapplied", func(t *testing.T) {
		h := crashAfterTargetWrite(t, projectSchema)
		h.clock.SetTime(utc("2024-05-01 08:00:01"))
		h.scales.scaleBy("kubectl-edit", "", "deployments", "web", 3)
		h.newController()
		before := outcomeCounts(t, "Deployment")
		n0, _ := lagOf(t, "Deployment")
		h.syncAt(utc("2024-05-01 08:00:05"), "c")
		if got := grown(before, outcomeCounts(t, "Deployment")); len(got) != 1 || got[outcomeNotReapplied] != 1 {
			t.Errorf("target_firings_total{kind=Deployment} grew by %v; want not_reapplied 1", got)
		}
		if n, _ := lagOf(t, "Deployment"); n != n0 {
			t.Errorf("a firing not reapplied observed %d lags", n-n0)
		}
	})
	t.Run("already_applied", func(t *testing.T) {
		obj := cron("c", autoscalingv1alpha1.CronFederatedHPARule{Name: "r", Schedule: "0 8 * * *", TimeZone: ptr.To("UTC"), TargetMaxReplicas: ptr.To[int32](50)})
		obj.Spec.ScaleTargetRef = autoscalingv2.CrossVersionObjectReference{APIVersion: "autoscaling/v2", Kind: "HorizontalPodAutoscaler", Name: "hpa"}
		at := metav1.NewTime(utc("2024-05-01 08:00:00"))
		hpa := &autoscalingv2.HorizontalPodAutoscaler{
			ObjectMeta: metav1.ObjectMeta{Name: "hpa", Namespace: ns, ManagedFields: []metav1.ManagedFieldsEntry{{
				Manager: FieldManager, Operation: metav1.ManagedFieldsOperationUpdate, Time: &at,
				FieldsType: "FieldsV1", FieldsV1: metav1.NewFieldsV1(`{"f:spec":{"f:maxReplicas":{}}}`),
			}}},
			Spec: autoscalingv2.HorizontalPodAutoscalerSpec{MinReplicas: ptr.To[int32](1), MaxReplicas: 50},
		}
		h := newHarness(t, utc("2024-05-01 07:00:00"), obj, hpa)
		h.syncAt(utc("2024-05-01 07:00:00"), "c")
		h.clock.SetTime(utc("2024-05-01 08:00:01"))
		h.newController()
		before := outcomeCounts(t, "HorizontalPodAutoscaler")
		n0, _ := lagOf(t, "HorizontalPodAutoscaler")
		h.syncAt(utc("2024-05-01 08:00:02"), "c")
		if got := grown(before, outcomeCounts(t, "HorizontalPodAutoscaler")); len(got) != 1 || got[outcomeAlreadyApplied] != 1 {
			t.Errorf("target_firings_total{kind=HorizontalPodAutoscaler} grew by %v; want already_applied 1", got)
		}
		if n, _ := lagOf(t, "HorizontalPodAutoscaler"); n != n0 {
			t.Errorf("a firing found applied by the previous manager observed %d lags", n-n0)
		}
	})
}
