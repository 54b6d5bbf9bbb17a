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
	"maps"
	"math/rand"
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/cache"
)

var selectAddon = labels.SelectorFromSet(labels.Set{addonLabel: addonName})

func counted(p *corev1.Pod) *countedPod { return newCountedPod(p) }

func TestContainerCounterCounts(t *testing.T) {
	c := newContainerCounter()
	full := pod("apps", "full", corev1.PodRunning, nil, 2)
	full.Spec.InitContainers = []corev1.Container{{Name: "init"}}
	full.Spec.EphemeralContainers = []corev1.EphemeralContainer{{EphemeralContainerCommon: corev1.EphemeralContainerCommon{Name: "debug"}}}
	c.add(counted(full))
	if got := c.total(); got != 4 {
		t.Fatalf("init + 2 regular + ephemeral = %d; want 4", got)
	}
	c.add(counted(pod("apps", "pending", corev1.PodPending, nil, 1)))
	c.add(counted(pod("apps", "unknown", corev1.PodUnknown, nil, 1)))
	if changed := c.add(counted(pod("apps", "done", corev1.PodSucceeded, nil, 3))); changed {
		t.Errorf("adding a succeeded pod reported a change")
	}
	c.add(counted(pod("apps", "failed", corev1.PodFailed, nil, 3)))
	if got := c.total(); got != 6 {
		t.Fatalf("terminal pods counted: total %d; want 6", got)
	}

	// A phase change to Succeeded removes the pod's containers.
	old := counted(pod("apps", "pending", corev1.PodPending, nil, 1))
	if !c.update(old, counted(pod("apps", "pending", corev1.PodSucceeded, nil, 1))) {
		t.Errorf("a pod that succeeded reported no change")
	}
	if got := c.total(); got != 5 {
		t.Errorf("after a pod succeeded: %d; want 5", got)
	}
	// An update that changes nothing counted reports no change.
	if c.update(counted(full), counted(full)) {
		t.Errorf("an unchanged pod reported a change")
	}
	// Seeing an add twice does not count twice.
	c.add(counted(full))
	if got := c.total(); got != 5 {
		t.Errorf("after a repeated add: %d; want 5", got)
	}
	if !c.delete(counted(full)) || c.total() != 1 {
		t.Errorf("after deleting the full pod: %d; want 1", c.total())
	}
	if c.delete(counted(full)) {
		t.Errorf("a second delete reported a change")
	}
}

func TestContainerCounterExcluding(t *testing.T) {
	c := newContainerCounter()
	addon := map[string]string{addonLabel: addonName}
	c.add(counted(pod(ns, "addon-1", corev1.PodRunning, addon, 2)))
	c.add(counted(pod(ns, "addon-2", corev1.PodRunning, addon, 2)))
	c.add(counted(pod(ns, "other", corev1.PodRunning, map[string]string{addonLabel: "other"}, 1)))
	c.add(counted(pod("apps", "same-labels-elsewhere", corev1.PodRunning, addon, 5)))
	if got := c.total(); got != 10 {
		t.Fatalf("total %d; want 10", got)
	}
	if got := c.excluding(ns, selectAddon); got != 6 {
		t.Errorf("excluding the add-on's pods: %d; want 6 (pods of other namespaces stay)", got)
	}
	if got := c.excluding(ns, labels.Nothing()); got != 10 {
		t.Errorf("excluding nothing: %d; want 10", got)
	}
	// A label change that moves a pod into the selector is a change.
	if !c.update(nil, counted(pod(ns, "other", corev1.PodRunning, addon, 1))) {
		t.Errorf("a label change reported no change")
	}
	if got := c.excluding(ns, selectAddon); got != 5 {
		t.Errorf("after the label change: %d; want 5", got)
	}
}

// Any sequence of adds, updates (phase, label and container changes) and
// deletes leaves the incremental counts equal to a count from scratch.
func TestContainerCounterMatchesRecount(t *testing.T) {
	rng := rand.New(rand.NewSource(5546))
	phases := []corev1.PodPhase{corev1.PodPending, corev1.PodRunning, corev1.PodSucceeded, corev1.PodFailed, corev1.PodUnknown}
	namespaces := []string{ns, "apps", "jobs"}
	c := newContainerCounter()
	live := map[string]*corev1.Pod{}
	randomPod := func(namespace, name string) *corev1.Pod {
		var l map[string]string
		if rng.Intn(2) == 0 {
			l = map[string]string{addonLabel: addonName}
		}
		p := pod(namespace, name, phases[rng.Intn(len(phases))], l, rng.Intn(4))
		for range rng.Intn(2) {
			p.Spec.InitContainers = append(p.Spec.InitContainers, corev1.Container{Name: "init"})
		}
		return p
	}
	recount := func(namespace string, sel labels.Selector) (total, excluding int64) {
		for _, p := range live {
			if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
				continue
			}
			n := int64(len(p.Spec.InitContainers) + len(p.Spec.Containers) + len(p.Spec.EphemeralContainers))
			total += n
			if p.Namespace != namespace || !sel.Matches(labels.Set(p.Labels)) {
				excluding += n
			}
		}
		return total, excluding
	}
	for step := range 20000 {
		namespace := namespaces[rng.Intn(len(namespaces))]
		name := fmt.Sprintf("p%d", rng.Intn(200))
		key := namespace + "/" + name
		old, exists := live[key]
		switch op := rng.Intn(3); {
		case !exists || op == 0 && rng.Intn(2) == 0:
			// Add (the informer never adds twice, but a relist may).
			p := randomPod(namespace, name)
			live[key] = p
			c.add(counted(p))
		case op == 1:
			p := randomPod(namespace, name)
			live[key] = p
			c.update(counted(old), counted(p))
		default:
			delete(live, key)
			if rng.Intn(4) == 0 {
				// A deletion the informer missed comes as a tombstone.
				p, _ := asCountedPod(cache.DeletedFinalStateUnknown{Key: key, Obj: counted(old)})
				c.delete(p)
			} else {
				c.delete(counted(old))
			}
		}
		if step%97 == 0 || step == 19999 {
			total, excluding := recount(ns, selectAddon)
			if got := c.total(); got != total {
				t.Fatalf("step %d: total %d; recount %d", step, got, total)
			}
			if got := c.excluding(ns, selectAddon); got != excluding {
				t.Fatalf("step %d: excluding %d; recount %d", step, got, excluding)
			}
		}
	}
}

// The transform keeps what counting needs and nothing else, and passes
// what it already transformed, and tombstones, unchanged.
func TestTransformPod(t *testing.T) {
	p := pod(ns, "addon-1", corev1.PodRunning, map[string]string{addonLabel: addonName}, 2)
	p.Annotations = map[string]string{"big": "annotation"}
	p.OwnerReferences = []metav1.OwnerReference{{Name: "rs"}}
	p.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "kubelet"}}
	p.Finalizers = []string{"f"}
	p.Spec.InitContainers = []corev1.Container{{Name: "init"}}
	p.Spec.EphemeralContainers = []corev1.EphemeralContainer{{EphemeralContainerCommon: corev1.EphemeralContainerCommon{Name: "debug"}}}
	p.Spec.NodeName = "node-1"
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady}}
	p.ResourceVersion = "42"

	out, err := transformPod(p)
	if err != nil {
		t.Fatal(err)
	}
	cp, ok := out.(*countedPod)
	if !ok {
		t.Fatalf("transform returned %T", out)
	}
	want := &countedPod{
		Namespace:  ns,
		Name:       "addon-1",
		Labels:     map[string]string{addonLabel: addonName},
		Phase:      corev1.PodRunning,
		Containers: 4,
	}
	if fmt.Sprintf("%+v", cp) != fmt.Sprintf("%+v", want) {
		t.Errorf("transformed pod\n%+v\nwant\n%+v", cp, want)
	}
	// The reflector's temporary store keys it as it keyed the pod.
	if key, _ := cache.DeletionHandlingMetaNamespaceKeyFunc(cp); key != ns+"/addon-1" {
		t.Errorf("store key %q", key)
	}
	// Idempotent.
	if again, _ := transformPod(cp); again != cp {
		t.Errorf("transforming a countedPod again returned %v", again)
	}
	tombstone := cache.DeletedFinalStateUnknown{Key: ns + "/addon-1", Obj: cp}
	if again, _ := transformPod(tombstone); again != any(tombstone) {
		t.Errorf("tombstone changed: %v", again)
	}
	if got, ok := asCountedPod(tombstone); !ok || got != cp {
		t.Errorf("tombstone unwrapped to %v, %v", got, ok)
	}
	// DeepCopyObject copies the labels.
	copied := cp.DeepCopyObject().(*countedPod)
	copied.Labels["x"] = "y"
	if _, ok := cp.Labels["x"]; ok {
		t.Errorf("DeepCopyObject shares the labels")
	}
}

func TestTransformNode(t *testing.T) {
	n := &metav1.PartialObjectMetadata{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Node"},
		ObjectMeta: metav1.ObjectMeta{
			Name: "node-1", UID: "u1", ResourceVersion: "9",
			Labels:        map[string]string{"topology.kubernetes.io/zone": "a"},
			Annotations:   map[string]string{"node.alpha.kubernetes.io/ttl": "0"},
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubelet"}},
		},
	}
	out, _ := transformNode(n)
	m := out.(*metav1.PartialObjectMetadata)
	if m.Name != "node-1" || m.UID != "u1" || m.ResourceVersion != "9" || m.Labels != nil || m.Annotations != nil || m.ManagedFields != nil {
		t.Errorf("transformed node %+v", m)
	}
	if name, ok := nodeName(cache.DeletedFinalStateUnknown{Key: "node-1", Obj: m}); !ok || name != "node-1" {
		t.Errorf("tombstone name %q, %v", name, ok)
	}
}

func TestNodeCounter(t *testing.T) {
	c := newNodeCounter()
	if !c.add("a") || !c.add("b") || c.add("a") {
		t.Errorf("add reported the wrong changes")
	}
	if c.count() != 2 {
		t.Errorf("count %d; want 2", c.count())
	}
	if !c.delete("a") || c.delete("a") || c.count() != 1 {
		t.Errorf("after delete: %d; want 1", c.count())
	}
}

func TestCompactKeepsCounts(t *testing.T) {
	c := newContainerCounter()
	addon := map[string]string{addonLabel: addonName}
	for i := range 50 {
		c.add(counted(pod(ns, fmt.Sprintf("addon-%d", i), corev1.PodRunning, addon, 2)))
		c.add(counted(pod("apps", fmt.Sprintf("web-%d", i), corev1.PodRunning, map[string]string{"app": "web"}, 3)))
	}
	before, excluded := c.total(), c.excluding(ns, selectAddon)
	c.compact()
	if c.total() != before || c.excluding(ns, selectAddon) != excluded {
		t.Fatalf("after compact: total %d excluding %d; want %d %d", c.total(), c.excluding(ns, selectAddon), before, excluded)
	}
	if len(c.labels) != 2 {
		t.Errorf("%d interned label sets; want 2", len(c.labels))
	}
	// Reference counts survive: removing every pod of one set frees it.
	for i := range 50 {
		c.delete(counted(pod("apps", fmt.Sprintf("web-%d", i), corev1.PodRunning, nil, 3)))
	}
	if len(c.labels) != 1 || c.total() != 100 {
		t.Errorf("after deleting the web pods: %d label sets, total %d; want 1, 100", len(c.labels), c.total())
	}
}

// While a list streams into the reflector's temporary store, pods with equal
// labels share one label map: at 150,000 pods of ten labels each a map per
// pod was about 130 MB held until the list ended, the start-up peak. Replace
// drops the table.
func TestTransformSharesLabels(t *testing.T) {
	c := newContainerCounter()
	labelsOf := func(i int) map[string]string {
		return map[string]string{"app": "web", "pod-template-hash": "5d8f7c", "team": fmt.Sprintf("t%d", i%2)}
	}
	var list []any
	for i := range 4 {
		p := pod("apps", fmt.Sprintf("web-%d", i), corev1.PodRunning, labelsOf(i), 2)
		obj, err := c.Transformer()(p)
		if err != nil {
			t.Fatal(err)
		}
		list = append(list, obj)
	}
	mapOf := func(obj any) uintptr { return reflect.ValueOf(obj.(*countedPod).Labels).Pointer() }
	if mapOf(list[0]) != mapOf(list[2]) || mapOf(list[1]) != mapOf(list[3]) || mapOf(list[0]) == mapOf(list[1]) {
		t.Errorf("label maps not shared by equal label sets, or shared by different ones")
	}
	if !maps.Equal(list[1].(*countedPod).Labels, labelsOf(1)) {
		t.Errorf("labels %v; want %v", list[1].(*countedPod).Labels, labelsOf(1))
	}
	if err := c.Replace(list, "1"); err != nil {
		t.Fatal(err)
	}
	if c.total() != 8 || len(c.labels) != 2 || c.canonical != nil {
		t.Errorf("after Replace: total %d, %d label sets, canonical table %d; want 8, 2, none", c.total(), len(c.labels), len(c.canonical))
	}
}
