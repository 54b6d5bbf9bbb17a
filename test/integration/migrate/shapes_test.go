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

package migrate

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/scaleplane/scaleplane/test/integration/framework"
)

// nanny is one Addon Resizer container of a shape, with the values it sizes
// by, copied by hand from the shape's manifest (its flags, or the
// NannyConfiguration of its --config-dir where that sets them): the
// expected sizes below come from these, not from what migrate writes.
type nanny struct {
	addonResizer, container      string
	cpu, extraCPU, mem, extraMem string
	minClusterSize               uint64 // --minClusterSize (exponential estimator; 16 by default)
}

// shape is one transcribed user of the nanny.
type shape struct {
	name       string // the file in cmd/kubectl-scaleplane/app/testdata/migrate, without .yaml
	deployment string
	nannies    []nanny
	// leftovers are what migrate must list as no longer needed, as
	// "Kind name"; cluster-scoped names get the namespace's suffix (see
	// createShape).
	leftovers []string
	// printed: the test applies migrate's printed output itself, as a user
	// pipes it to kubectl apply --server-side and runs the printed kubectl
	// patch; otherwise migrate --apply writes.
	printed bool
	// watchFirst: --watch-only --apply before --apply (the guide's step 1).
	watchFirst bool
}

var shapes = []shape{
	{
		// The chart's nanny has no --cpu/--memory: its ConfigMap's
		// NannyConfiguration says baseCPU 0m, cpuPerNode 1m, baseMemory
		// 0Mi, memoryPerNode 2Mi; --minClusterSize=100, --threshold=5.
		name: "metrics-server-chart-3.13.1", deployment: "metrics-server", printed: true,
		nannies: []nanny{{"metrics-server", "metrics-server", "0", "1m", "0", "2Mi", 100}},
		leftovers: []string{"ConfigMap metrics-server-nanny-config", "RoleBinding metrics-server-nanny", "Role system:metrics-server-nanny",
			"ClusterRoleBinding system:metrics-server-nanny+", "ClusterRole system:metrics-server-nanny+"},
	},
	{
		name: "kubernetes-addons-metrics-server", deployment: "metrics-server-v0.5.2",
		nannies:   []nanny{{"metrics-server-v0.5.2", "metrics-server", "40m", "0.5m", "40Mi", "4Mi", 16}},
		leftovers: []string{"ConfigMap metrics-server-config", "ClusterRole system:metrics-server+"},
	},
	{
		name: "kubernetes-addons-heapster", deployment: "heapster-v1.5.3", watchFirst: true,
		nannies: []nanny{
			{"heapster-v1.5.3-heapster", "heapster", "80m", "0.5m", "140Mi", "4Mi", 16},
			{"heapster-v1.5.3-eventer", "eventer", "100m", "0m", "190Mi", "500Ki", 16},
		},
		leftovers: []string{"ConfigMap heapster-config", "ConfigMap eventer-config"},
	},
}

// The nanny's arithmetic, transcribed (as TestSameSizesAsAddonResizer18 in
// cmd/kubectl-scaleplane/app/migrate_nanny_test.go does, whose helpers are
// not exported) from kubernetes/autoscaler at addon-resizer-1.8.24 (commit
// a7a842b55d19), addon-resizer/nanny/estimator.go.

// nannyBucket is ExponentialEstimator.scale's cluster size
// (estimator.go:71-76): from minClusterSize, n becomes
// uint64(float64(n)*1.5 + 0.01) while it is below the node count.
func nannyBucket(nodes, minClusterSize uint64) uint64 {
	n := minClusterSize
	for n < nodes {
		n = uint64(float64(n)*1.5 + 0.01)
	}
	return n
}

// nannyEstimate is calculateResources (estimator.go:114-128) through
// computeResourceOverheadValueString (98-112): the extra printed by
// Quantity.String, read back as a float and a suffix, multiplied, printed
// with %f and the suffix, parsed and added to the base. The nanny writes it
// as the request and the limit.
func nannyEstimate(base, extra string, units uint64) resource.Quantity {
	var number float64
	var suffix string
	e := resource.MustParse(extra)
	_, _ = fmt.Sscanf(e.String(), "%f%s", &number, &suffix)
	out := resource.MustParse(base)
	out.Add(resource.MustParse(fmt.Sprintf("%f%s", number*float64(units), suffix)))
	return out
}

// nannySizes are the requests (and limits) the nanny writes at nodes.
func (n nanny) sizes(nodes uint64) corev1.ResourceList {
	units := nannyBucket(nodes, n.minClusterSize)
	return corev1.ResourceList{
		corev1.ResourceCPU:    nannyEstimate(n.cpu, n.extraCPU, units),
		corev1.ResourceMemory: nannyEstimate(n.mem, n.extraMem, units),
	}
}

// asScheduled is q as the scheduler and the kubelet read it: whole
// millicores of cpu, whole bytes of memory, rounded up. The nanny writes
// e.g. 100500u (40m + 0.5m x 121), which they read as 101m; the resizer
// writes 101m (docs/kubectl-plugin.md, "migrate addon-resizer").
func asScheduled(name corev1.ResourceName, q resource.Quantity) resource.Quantity {
	out := q.DeepCopy()
	if name == corev1.ResourceCPU {
		out.RoundUp(resource.Milli)
	} else {
		out.RoundUp(0)
	}
	return out
}

// TestNannyModel pins the transcription above to Addon Resizer's own
// numbers (nanny/estimator_test.go at addon-resizer-1.8.24) and spells out
// the values the migration test expects at its node counts.
func TestNannyModel(t *testing.T) {
	if got := nannyEstimate("0.3", "0.5m", 3); got.Cmp(resource.MustParse("0.3015")) != 0 {
		t.Errorf("lessThanMilliEstimator at 3 nodes: %s, Addon Resizer's test wants 0.3015", got.String())
	}
	if got := nannyEstimate("30Mi", "1Mi", nannyBucket(17, 16)); got.Cmp(resource.MustParse("54Mi")) != 0 {
		t.Errorf("exponential memory at 17 nodes: %s, Addon Resizer's test wants 54Mi", got.String())
	}
	var buckets []uint64
	for _, n := range []uint64{3, 16, 100, 1000} {
		buckets = append(buckets, nannyBucket(n, 16), nannyBucket(n, 100))
	}
	if got := fmt.Sprint(buckets); got != "[16 100 16 100 121 100 1369 1135]" {
		t.Errorf("buckets at 3, 16, 100, 1000 nodes from 16 and from 100: %s", got)
	}
	// kubernetes-addons-metrics-server at 100 nodes: 40m + 0.5m x 121 and
	// 40Mi + 4Mi x 121; at 1,000: 40m + 0.5m x 1369.
	ms := shapes[1].nannies[0]
	for _, c := range []struct {
		nodes              uint64
		cpu, sched, memory string
	}{{100, "100500u", "101m", "524Mi"}, {1000, "724500u", "725m", "5516Mi"}, {3, "48m", "48m", "104Mi"}} {
		s := ms.sizes(c.nodes)
		cpu, mem := s[corev1.ResourceCPU], s[corev1.ResourceMemory]
		if sched := asScheduled(corev1.ResourceCPU, cpu); cpu.String() != c.cpu || sched.String() != c.sched || mem.String() != c.memory {
			t.Errorf("%d nodes: cpu %s (scheduled %s) memory %s; want %s (%s) %s", c.nodes, cpu.String(), sched.String(), mem.String(), c.cpu, c.sched, c.memory)
		}
	}
}

// shapePath is the shape's manifest.
func shapePath(t *testing.T, name string) string {
	t.Helper()
	root, err := framework.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Join(root, "cmd", "kubectl-scaleplane", "app", "testdata", "migrate", name+".yaml")
}

var shapeResources = map[string]schema.GroupVersionResource{
	"ServiceAccount":     {Version: "v1", Resource: "serviceaccounts"},
	"ConfigMap":          {Version: "v1", Resource: "configmaps"},
	"Service":            {Version: "v1", Resource: "services"},
	"Deployment":         {Group: "apps", Version: "v1", Resource: "deployments"},
	"Role":               {Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "roles"},
	"RoleBinding":        {Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "rolebindings"},
	"ClusterRole":        {Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "clusterroles"},
	"ClusterRoleBinding": {Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "clusterrolebindings"},
}

// createShape creates the shape's objects in ns as its manifest has them in
// kube-system, so that the three shapes run side by side: namespaces (of
// objects and of service-account subjects) become ns; the cluster-scoped
// ClusterRoles and ClusterRoleBindings (the chart and cluster/addons both
// name one system:metrics-server) get the suffix "-"+ns, and references to
// a ClusterRole of the shape follow. The APIService is left out (nothing
// serves metrics.k8s.io here), and the extensions/v1beta1 Deployment of
// heapster is created as apps/v1, as an API server of today stores it.
func createShape(t *testing.T, cp *framework.ControlPlane, ns, name string) {
	t.Helper()
	objs, err := framework.DecodeManifests(shapePath(t, name))
	if err != nil {
		t.Fatal(err)
	}
	clusterRoles := map[string]bool{}
	for _, o := range objs {
		if o.GetKind() == "ClusterRole" {
			clusterRoles[o.GetName()] = true
		}
	}
	ctx := context.Background()
	for _, o := range objs {
		gvr, ok := shapeResources[o.GetKind()]
		if !ok {
			if o.GetKind() != "APIService" {
				t.Fatalf("%s: %s %s: no resource known for the kind", name, o.GetKind(), o.GetName())
			}
			continue
		}
		o.SetAPIVersion(gvr.GroupVersion().String())
		client := cp.DynamicClient().Resource(gvr)
		var err error
		switch o.GetKind() {
		case "ClusterRole", "ClusterRoleBinding":
			o.SetName(o.GetName() + "-" + ns)
		default:
			o.SetNamespace(ns)
		}
		if ref, ok := o.Object["roleRef"].(map[string]any); ok && ref["kind"] == "ClusterRole" && clusterRoles[fmt.Sprint(ref["name"])] {
			ref["name"] = fmt.Sprint(ref["name"]) + "-" + ns
		}
		if subjects, ok := o.Object["subjects"].([]any); ok {
			for _, s := range subjects {
				if s, ok := s.(map[string]any); ok && s["kind"] == "ServiceAccount" {
					s["namespace"] = ns
				}
			}
		}
		if o.GetNamespace() != "" {
			_, err = client.Namespace(ns).Create(ctx, o, metav1.CreateOptions{})
		} else {
			_, err = client.Create(ctx, o, metav1.CreateOptions{})
		}
		if err != nil {
			t.Fatalf("%s: creating %s %s: %v", name, o.GetKind(), o.GetName(), err)
		}
	}
}

// growNodes creates plain Node objects node-0000, node-0001, ... up to n of
// them, many at once: the resizer counts Node objects (source APIServer),
// whatever runs them.
func growNodes(t *testing.T, cp *framework.ControlPlane, from, to int) {
	t.Helper()
	ctx := context.Background()
	work := make(chan int)
	var mu sync.Mutex
	var errs []error
	var wg sync.WaitGroup
	for range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("node-%04d", i)}}
				if _, err := cp.KubeClient().CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
				}
			}
		}()
	}
	for i := from; i < to; i++ {
		work <- i
	}
	close(work)
	wg.Wait()
	if len(errs) > 0 {
		t.Fatalf("creating nodes %d to %d: %d failed, first: %v", from, to, len(errs), errs[0])
	}
}
