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

// What Karmada's scheduler makes of the requirements the customization
// reports for one replica (one group of a LeaderWorkerSet): the arithmetic of
// its replica estimators, written again here from a reading of Karmada's
// source at commit f8fdd02df (karmada-io/karmada; the files below are the same
// at v1.18.2, 0533b555e). Facts, not code, carry over; each piece names where
// it was read.
//
//   - General estimator (always on), pkg/estimator/client/general.go:
//     maxAvailableReplicas (lines 66-108) bounds a cluster by its free pod
//     slots (getAllowedPodNumber, 445-463), then, with the feature gate
//     CustomizedClusterResourceModeling (Beta, on by default,
//     pkg/features/features.go:171) and AllocatableModelings in the Cluster's
//     status, returns the count from the resource models (89-98) and never
//     looks at the cluster-wide sums; otherwise the cluster-wide sums
//     (getMaximumReplicasBasedOnClusterSummary, 465-505).
//   - The resource models: every Cluster gets Karmada's default models on
//     creation (pkg/registry/cluster/strategy.go:97-103;
//     pkg/apis/cluster/mutation/mutation.go:81-219, grades 0 to 8 over cpu and
//     memory only); karmada-controller-manager counts each member node in the
//     grade whose minimums it reaches for every resource
//     (pkg/controllers/status/cluster_status_controller.go:642-679,
//     pkg/modeling/modeling.go:112-145: per resource the last grade whose Min
//     is <= the node's free amount, the lowest of those over the resources).
//     getMaximumReplicasBasedOnResourceModels (general.go:507-553) builds one
//     node per counted node with its grade's minimums and 110 pod slots
//     (buildModelNodes, 296-361) and places replicas first fit, one whole
//     replica on one node, until one does not fit
//     (pkg/estimator/scheduling_simulator_components.go:51-66, 83-130).
//   - karmada-scheduler-estimator (optional, per member):
//     pkg/estimator/server/framework/plugins/noderesource/noderesource.go:70-131
//     sums over the nodes how many whole replicas each node's free resources
//     hold (Resource.MaxDivided, pkg/util/resource.go:221-248: per resource
//     free / request, cpu in millicores, the "pods" key ignored, at most the
//     node's free pod slots, 135-144).
//   - The scheduler takes, per cluster, the lowest answer of the estimators
//     (pkg/scheduler/core/util.go:86-98, 157-170), and a dynamic division
//     fails when their sum is below the replicas wanted
//     (pkg/scheduler/core/division_algorithm.go:76-77: "Clusters available
//     replicas %d are not enough to schedule.").

import (
	"math"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// vec is an amount of resources in Karmada's units: cpu in millicores,
// everything else in whole units (Quantity.Value).
type vec map[corev1.ResourceName]int64

func toVec(list corev1.ResourceList) vec {
	v := vec{}
	for name, q := range list {
		if name == corev1.ResourceCPU {
			v[name] = q.MilliValue()
		} else {
			v[name] = q.Value()
		}
	}
	return v
}

// memberNode is a node of a member cluster with nothing on it yet: its free
// resources and pod slots.
type memberNode struct {
	free vec
	pods int64
}

func nodes(n int, free corev1.ResourceList) []memberNode {
	var out []memberNode
	for range n {
		out = append(out, memberNode{free: toVec(free), pods: 110})
	}
	return out
}

// maxDivided is how many whole copies of request a node's free resources
// hold: Resource.MaxDivided (pkg/util/resource.go:221-248). Resources the
// request does not ask for, or asks 0 of, do not bound it; "pods" in the
// request is ignored; the node's pod slots do.
func maxDivided(free vec, pods int64, request vec) int64 {
	res := int64(math.MaxInt64)
	for name, amount := range request {
		if name == corev1.ResourcePods || amount <= 0 {
			continue
		}
		res = min(res, free[name]/amount)
	}
	return min(res, pods)
}

// accurateEstimate is karmada-scheduler-estimator's node-resource plugin:
// the sum over nodes of the whole replicas each holds (noderesource.go:121-130).
func accurateEstimate(member []memberNode, request vec) int64 {
	var sum int64
	for _, n := range member {
		sum += maxDivided(n.free, n.pods, request)
	}
	return sum
}

// summaryEstimate is the general estimator without resource models:
// cluster-wide free amounts divided by the request, at most the free pod
// slots (general.go:77-83, 102-107, 445-505).
func summaryEstimate(member []memberNode, request vec) int64 {
	total := vec{}
	var pods int64
	for _, n := range member {
		for name, amount := range n.free {
			total[name] += amount
		}
		pods += n.pods
	}
	best := pods
	for name, amount := range request {
		if amount <= 0 || name == corev1.ResourcePods {
			continue
		}
		free, ok := total[name]
		if !ok || free <= 0 {
			return 0
		}
		best = min(best, free/amount)
	}
	return best
}

// resourceModel is one grade of a Cluster's resource models: the minimum of
// each resource it ranges over.
type resourceModel map[corev1.ResourceName]int64

// defaultModels are Karmada's default resource models
// (pkg/apis/cluster/mutation/mutation.go:81-219): cpu and memory only.
func defaultModels() []resourceModel {
	gi := int64(1024 * 1024 * 1024)
	cpus := []int64{0, 1, 2, 4, 8, 16, 32, 64, 128}
	mems := []int64{0, 4, 16, 32, 64, 128, 256, 512, 1024}
	var models []resourceModel
	for i := range cpus {
		models = append(models, resourceModel{corev1.ResourceCPU: cpus[i] * 1000, corev1.ResourceMemory: mems[i] * gi})
	}
	return models
}

// grade is the grade a node is counted in: per resource of the models, the
// last grade whose minimum the node's free amount reaches; the lowest of
// those (modeling.go:112-145).
func grade(models []resourceModel, free vec) int {
	g := math.MaxInt
	for name := range models[0] {
		last := -1
		for i, m := range models {
			if m[name] <= free[name] {
				last = i
			}
		}
		g = min(g, last)
	}
	return g
}

// modelEstimate is the general estimator with resource models: one node per
// member node, with its grade's minimums and 110 pod slots, in grade order
// (buildModelNodes, general.go:296-361), and replicas placed first fit, one
// whole replica on one node, until one does not fit
// (scheduling_simulator_components.go:51-130), at most the member's free
// pod slots (general.go:77-98).
func modelEstimate(models []resourceModel, member []memberNode, request vec) int64 {
	var grades []int
	var pods int64
	for _, n := range member {
		grades = append(grades, grade(models, n.free))
		pods += n.pods
	}
	slices.Sort(grades)
	type modelNode struct {
		free vec
		pods int64
	}
	var modelNodes []*modelNode
	for _, g := range grades {
		free := vec{}
		for name, amount := range models[g] {
			free[name] = amount
		}
		modelNodes = append(modelNodes, &modelNode{free: free, pods: 110})
	}
	var placed int64
	for placed < math.MaxInt32 {
		fits := false
		for _, n := range modelNodes {
			if maxDivided(n.free, n.pods, request) == 0 {
				continue
			}
			for name, amount := range request {
				if name != corev1.ResourcePods {
					n.free[name] -= amount
				}
			}
			n.pods--
			fits = true
			break
		}
		if !fits {
			break
		}
		placed++
	}
	return min(placed, pods)
}

// scheduled is the answer the scheduler uses for a member: the lowest of the
// general estimator (with Karmada's default resource models, as a member
// gets them) and karmada-scheduler-estimator.
func scheduled(member []memberNode, request vec) int64 {
	return min(modelEstimate(defaultModels(), member, request), accurateEstimate(member, request))
}

// groupsThatFit is how many groups a member really runs: each group's pods
// (the leader, then size - 1 workers) placed first fit on the nodes, pod by
// pod as kube-scheduler places them, until a group does not fit. With leader
// and workers alike this is exact.
func groupsThatFit(member []memberNode, leader, worker vec, size int64) int64 {
	free := make([]memberNode, len(member))
	for i, n := range member {
		free[i] = memberNode{free: vec{}, pods: n.pods}
		for name, amount := range n.free {
			free[i].free[name] = amount
		}
	}
	place := func(pod vec) bool {
		for i := range free {
			if maxDivided(free[i].free, free[i].pods, pod) == 0 {
				continue
			}
			for name, amount := range pod {
				free[i].free[name] -= amount
			}
			free[i].pods--
			return true
		}
		return false
	}
	// The first group that does not fit ends the count; what it placed is
	// not used again.
	var groups int64
	for {
		ok := place(leader)
		for i := int64(1); ok && i < size; i++ {
			ok = place(worker)
		}
		if !ok {
			return groups
		}
		groups++
	}
}

func rl(pairs ...string) corev1.ResourceList {
	out := corev1.ResourceList{}
	for i := 0; i < len(pairs); i += 2 {
		out[corev1.ResourceName(pairs[i])] = resource.MustParse(pairs[i+1])
	}
	return out
}

// lwsObject is a LeaderWorkerSet with the given size and pod requests; the
// leader template only when leader is not nil.
func lwsObject(replicas, size int64, leader, worker corev1.ResourceList) map[string]any {
	pod := func(name string, requests corev1.ResourceList) map[string]any {
		r := map[string]any{}
		for k, v := range requests {
			r[string(k)] = v.String()
		}
		return map[string]any{"spec": map[string]any{"containers": []any{map[string]any{
			"name": name, "image": "vllm/vllm-openai:v0.11.0", "resources": map[string]any{"requests": r}}}}}
	}
	lwt := map[string]any{"size": size, "workerTemplate": pod("worker", worker)}
	if leader != nil {
		lwt["leaderTemplate"] = pod("leader", leader)
	}
	return map[string]any{
		"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet",
		"metadata": map[string]any{"name": "vllm", "namespace": "default"},
		"spec":     map[string]any{"replicas": replicas, "leaderWorkerTemplate": lwt},
	}
}

// TestEstimatorsCountGroupsThatSpanNodes places the LeaderWorkerSets of
// members whose groups need more than one node, and checks what Karmada's
// estimators answer for the requirements the shipped customization reports:
// for a member that runs N groups, at least 1 and exactly the documented
// value (the pod slots of the group's largest pod: size x N when leader and
// workers ask alike), where a group's summed requirements gave 0.
func TestEstimatorsCountGroupsThatSpanNodes(t *testing.T) {
	s := script(loadCustomization(t), "InterpretReplica")
	for _, tc := range []struct {
		name           string
		size           int64
		leader, worker corev1.ResourceList
		member         []memberNode
		// groups the member runs, what the scheduler is told now, and what
		// it was told with a group's summed requirements.
		groups, want, before int64
	}{{
		// docs/karmada/leaderworkerset.md's LWS: size 4, no leader template,
		// 2 CPU and 8Gi a pod. 14 nodes with 4 CPU and 32Gi free hold two
		// pods each: 28 pods, 7 groups; no node holds a group (8 CPU, 32Gi).
		// Each node is counted in grade 3 of the default models (4 CPU,
		// 32Gi), which is what it has.
		name: "the guide's LWS, 7 groups over 14 nodes", size: 4,
		worker: rl("cpu", "2", "memory", "8Gi"),
		member: nodes(14, rl("cpu", "4", "memory", "32Gi")),
		groups: 7, want: 28, before: 0,
	}, {
		// A leader smaller than its workers: a pod slot is the larger of each.
		name: "a small leader and 3 workers, 1 group per 2 nodes", size: 4,
		leader: rl("cpu", "1", "memory", "4Gi"), worker: rl("cpu", "2", "memory", "16Gi"),
		member: nodes(6, rl("cpu", "4", "memory", "32Gi")),
		groups: 3, want: 12, before: 0,
	}, {
		// Groups that fit one node stay counted: 2 groups of 2 pods a node.
		name: "groups that fit a node", size: 2,
		worker: rl("cpu", "1", "memory", "4Gi"),
		member: nodes(3, rl("cpu", "4", "memory", "32Gi")),
		groups: 6, want: 12, before: 6,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			leader := tc.leader
			if leader == nil {
				leader = tc.worker
			}
			if got := groupsThatFit(tc.member, toVec(leader), toVec(tc.worker), tc.size); got != tc.groups {
				t.Fatalf("the member runs %d groups, the case says %d", got, tc.groups)
			}

			// Before: one replica asked for the group's sum.
			group := toVec(leader)
			for name, amount := range toVec(tc.worker) {
				group[name] += (tc.size - 1) * amount
			}
			if got := scheduled(tc.member, group); got != tc.before {
				t.Errorf("with a group's summed requirements %v the scheduler was told %d, the case says %d", group, got, tc.before)
			}

			_, requires, err := GetReplicas(s, lwsObject(2, tc.size, tc.leader, tc.worker))
			if err != nil {
				t.Fatal(err)
			}
			request := toVec(requestOf(requires))
			general := modelEstimate(defaultModels(), tc.member, request)
			accurate := accurateEstimate(tc.member, request)
			summary := summaryEstimate(tc.member, request)
			got := scheduled(tc.member, request)
			t.Logf("request %v: general (default models) %d, scheduler-estimator %d, general without models %d; %d groups run", request, general, accurate, summary, tc.groups)
			if got < 1 {
				t.Errorf("a member that runs %d groups is estimated at %d replicas", tc.groups, got)
			}
			if got != tc.want {
				t.Errorf("estimated at %d, want the documented %d (the pod slots of the largest pod)", got, tc.want)
			}
			if got/tc.size > tc.groups {
				t.Errorf("estimate %d / size %d = %d groups, more than the %d the member runs", got, tc.size, got/tc.size, tc.groups)
			}
			for name, e := range map[string]int64{"general with models": general, "scheduler-estimator": accurate, "general without models": summary} {
				if e < tc.groups || e > tc.size*tc.groups+tc.size-1 {
					t.Errorf("%s: %d, want between the %d groups and size x groups (+ size - 1)", name, e, tc.groups)
				}
			}
			// The dynamic division of 2 groups (division_algorithm.go:76-77)
			// needs a sum of at least 2 over the members.
			if got < 2 {
				t.Errorf("one member estimated at %d: a dynamic division of 2 groups fails", got)
			}
		})
	}
}

// TestDefaultModelsCountNoGPUs records a limit of Karmada's, not of the
// interpreter: the default resource models range over cpu and memory only,
// so their model nodes have no GPUs, and the general estimator answers 0 for
// any replica that asks for one, whatever the member has (general.go:296-361,
// resource.go:237-243). Models that include the GPU count it, and so does
// karmada-scheduler-estimator; with them, a multi-node GPU LWS is counted in
// pod slots as the CPU ones are.
func TestDefaultModelsCountNoGPUs(t *testing.T) {
	member := nodes(4, rl("cpu", "64", "memory", "512Gi", "nvidia.com/gpu", "8"))
	pod := toVec(rl("cpu", "8", "memory", "64Gi", "nvidia.com/gpu", "8"))
	if got := modelEstimate(defaultModels(), member, pod); got != 0 {
		t.Errorf("default models: %d, want 0", got)
	}
	if got := accurateEstimate(member, pod); got != 4 {
		t.Errorf("scheduler-estimator: %d, want 4", got)
	}
	withGPU := defaultModels()
	for i, m := range withGPU {
		m["nvidia.com/gpu"] = []int64{0, 1, 2, 4, 8, 16, 32, 64, 128}[i]
	}
	if got := modelEstimate(withGPU, member, pod); got != 4 {
		t.Errorf("models with nvidia.com/gpu: %d, want 4", got)
	}

	// A multi-node LWS: a leader and a worker of 8 GPUs each, one pod a node.
	// 6 such nodes run 3 groups. A group's sum (16 GPUs) fits no node: 0
	// from either count; a pod slot: 6, twice the groups.
	member = nodes(6, rl("cpu", "64", "memory", "512Gi", "nvidia.com/gpu", "8"))
	worker := rl("cpu", "8", "memory", "64Gi", "nvidia.com/gpu", "8")
	if got := groupsThatFit(member, toVec(worker), toVec(worker), 2); got != 3 {
		t.Fatalf("the member runs %d groups, want 3", got)
	}
	group := toVec(rl("cpu", "16", "memory", "128Gi", "nvidia.com/gpu", "16"))
	if a, m := accurateEstimate(member, group), modelEstimate(withGPU, member, group); a != 0 || m != 0 {
		t.Errorf("a group's sum: scheduler-estimator %d, models with GPUs %d, want 0 and 0", a, m)
	}
	_, requires, err := GetReplicas(script(loadCustomization(t), "InterpretReplica"), lwsObject(2, 2, nil, worker))
	if err != nil {
		t.Fatal(err)
	}
	slot := toVec(requestOf(requires))
	if a, m := accurateEstimate(member, slot), modelEstimate(withGPU, member, slot); a != 6 || m != 6 {
		t.Errorf("a pod slot: scheduler-estimator %d, models with GPUs %d, want 6 and 6 (size 2 x 3 groups)", a, m)
	}
}
