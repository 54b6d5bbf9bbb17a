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

package karmadainterpreter

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"testing"

	"sigs.k8s.io/yaml"

	leaderworkersetv1 "github.com/scaleplane/scaleplane/pkg/apis/leaderworkerset/v1"
)

// memberLWS is a member cluster's LeaderWorkerSet as Karmada reads it:
// metadata.generation, the template generation Karmada annotated it with,
// and the status its LWS controller wrote.
func memberLWS(generation, templateGeneration int64, status map[string]any) map[string]any {
	obj := map[string]any{
		"apiVersion": "leaderworkerset.x-k8s.io/v1",
		"kind":       "LeaderWorkerSet",
		"metadata": map[string]any{
			"name": "vllm", "namespace": "serving", "generation": generation,
			"annotations": map[string]any{"resourcetemplate.karmada.io/generation": fmt.Sprint(templateGeneration)},
		},
		"spec": map[string]any{"replicas": 2, "leaderWorkerTemplate": map[string]any{"size": 4,
			"workerTemplate": map[string]any{"spec": map[string]any{"containers": []any{
				map[string]any{"name": "worker", "image": "vllm/vllm-openai:v0.11.0"}}}}}},
	}
	if status != nil {
		obj["status"] = status
	}
	return obj
}

const leaderSelector = "leaderworkerset.sigs.k8s.io/name=vllm,leaderworkerset.sigs.k8s.io/worker-index=0"

// statusBeforeV09 is what LWS v0.1.0 to v0.8.0 write (tag v0.8.0, c52b4f929a:
// api/leaderworkerset/v1/leaderworkerset_types.go LeaderWorkerSetStatus, lines
// 354-371; pkg/controllers/leaderworkerset_controller.go updateStatus, line
// 482, and makeCondition, line 797): replicas, readyReplicas, updatedReplicas,
// hpaPodSelector and conditions, and no observedGeneration anywhere.
func statusBeforeV09() map[string]any {
	return map[string]any{
		"replicas": 2, "readyReplicas": 2, "updatedReplicas": 2, "hpaPodSelector": leaderSelector,
		"conditions": []any{map[string]any{"type": "Available", "status": "True", "reason": "AllGroupsReady",
			"message": "All replicas are ready", "lastTransitionTime": "2026-11-27T07:00:00Z"}},
	}
}

// statusV09 is what LWS v0.9.0 and later write (tag v0.9.0, 81ac8b0bb3:
// leaderworkerset_types.go line 389 adds status.observedGeneration;
// leaderworkerset_controller.go lines 530-531 set it to metadata.generation
// in the same write as the rest, and line 891 puts it on every condition).
func statusV09(observed int64) map[string]any {
	s := statusBeforeV09()
	s["observedGeneration"] = observed
	s["conditions"].([]any)[0].(map[string]any)["observedGeneration"] = observed
	return s
}

// TestTemplateObservedGenerationWithMembersOfEveryLWSRelease runs the
// statusReflection script on members' LeaderWorkerSets as each LWS release
// writes them, then the statusAggregation script on what it reflected, as
// Karmada does, and checks when the template's status.observedGeneration
// (what Flux and Argo CD wait for) reaches the template's generation.
func TestTemplateObservedGenerationWithMembersOfEveryLWSRelease(t *testing.T) {
	c := loadCustomization(t)
	reflect, aggregate := script(c, "InterpretStatus"), script(c, "AggregateStatus")
	const generation = 3
	for _, tc := range []struct {
		name    string
		members []map[string]any
		want    int64
	}{
		{"before v0.9, both members on the current template", []map[string]any{
			memberLWS(4, generation, statusBeforeV09()), memberLWS(2, generation, statusBeforeV09())}, generation},
		{"before v0.9, one member on an older template", []map[string]any{
			memberLWS(4, generation, statusBeforeV09()), memberLWS(2, generation-1, statusBeforeV09())}, 2},
		{"before v0.9, one member's controller has written nothing yet", []map[string]any{
			memberLWS(4, generation, statusBeforeV09()), memberLWS(1, generation, nil)}, 2},
		{"v0.9 and one before, both on the current template", []map[string]any{
			memberLWS(4, generation, statusV09(4)), memberLWS(2, generation, statusBeforeV09())}, generation},
		{"v0.9, one member's controller behind its object", []map[string]any{
			memberLWS(4, generation, statusV09(4)), memberLWS(2, generation, statusV09(1))}, 2},
		{"v0.9, both observed", []map[string]any{
			memberLWS(4, generation, statusV09(4)), memberLWS(2, generation, statusV09(2))}, generation},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var items []AggregatedStatusItem
			for i, member := range tc.members {
				reflected, err := ReflectStatus(reflect, member)
				if err != nil {
					t.Fatal(err)
				}
				items = append(items, AggregatedStatusItem{ClusterName: fmt.Sprintf("member%d", i+1), Status: reflected, Applied: true})
			}
			template := map[string]any{
				"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet",
				"metadata": map[string]any{"name": "vllm", "namespace": "serving", "generation": generation},
				"spec":     map[string]any{"replicas": 4},
				"status":   map[string]any{"observedGeneration": 2},
			}
			out, err := AggregateStatus(aggregate, template, items)
			if err != nil {
				t.Fatal(err)
			}
			data, _ := json.Marshal(out["status"])
			var status struct {
				ObservedGeneration int64 `json:"observedGeneration"`
			}
			if err := json.Unmarshal(data, &status); err != nil {
				t.Fatal(err)
			}
			if status.ObservedGeneration != tc.want {
				t.Errorf("template status.observedGeneration = %d, want %d (reflected %s)", status.ObservedGeneration, tc.want, mustJSON(items))
			}
		})
	}
}

// What the aggregation writes into the template's status must survive the
// API server's pruning on karmada-apiserver, where the LeaderWorkerSet CRD
// is scaleplane's (generated from pkg/apis/leaderworkerset/v1): every field
// of the aggregated status is a field of LeaderWorkerSetStatus, and the
// shipped CRD keeps status.observedGeneration. On a real Karmada the template's
// observedGeneration stayed empty while the members reported theirs
// (issue 35, the guide's run on 2026-11-29).
func TestAggregatedStatusSurvivesTheCRDsPruning(t *testing.T) {
	c := loadCustomization(t)
	reflect, aggregate := script(c, "InterpretStatus"), script(c, "AggregateStatus")
	var items []AggregatedStatusItem
	for i, member := range []map[string]any{memberLWS(4, 3, statusV09(4)), memberLWS(2, 3, statusV09(2))} {
		reflected, err := ReflectStatus(reflect, member)
		if err != nil {
			t.Fatal(err)
		}
		items = append(items, AggregatedStatusItem{ClusterName: fmt.Sprintf("member%d", i+1), Status: reflected, Applied: true})
	}
	template := map[string]any{
		"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet",
		"metadata": map[string]any{"name": "vllm", "namespace": "serving", "generation": 3},
		"spec":     map[string]any{"replicas": 4},
	}
	out, err := AggregateStatus(aggregate, template, items)
	if err != nil {
		t.Fatal(err)
	}
	data, _ := json.Marshal(out["status"])
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var status leaderworkersetv1.LeaderWorkerSetStatus
	if err := dec.Decode(&status); err != nil {
		t.Fatalf("the aggregated status has a field the CRD would prune: %v (%s)", err, data)
	}
	if status.ObservedGeneration != 3 {
		t.Errorf("observedGeneration %d, want 3", status.ObservedGeneration)
	}
	crd, err := os.ReadFile("../../artifacts/deploy/crds/leaderworkerset.x-k8s.io_leaderworkersets.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Spec struct {
			Versions []struct {
				Schema struct {
					OpenAPIV3Schema struct {
						Properties map[string]struct {
							Properties map[string]any `json:"properties"`
						} `json:"properties"`
					} `json:"openAPIV3Schema"`
				} `json:"schema"`
			} `json:"versions"`
		} `json:"spec"`
	}
	if err := yaml.Unmarshal(crd, &doc); err != nil {
		t.Fatal(err)
	}
	for _, v := range doc.Spec.Versions {
		if _, ok := v.Schema.OpenAPIV3Schema.Properties["status"].Properties["observedGeneration"]; !ok {
			t.Error("the shipped LeaderWorkerSet CRD has no status.observedGeneration: karmada-apiserver prunes what the interpreter aggregates")
		}
	}
}
