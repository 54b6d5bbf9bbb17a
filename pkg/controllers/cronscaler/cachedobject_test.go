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
	"fmt"
	"math/rand"
	"reflect"
	"runtime"
	"testing"

	"k8s.io/apimachinery/pkg/api/apitesting/fuzzer"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metafuzzer "k8s.io/apimachinery/pkg/apis/meta/fuzzer"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/apimachinery/pkg/runtime"
	runtimeserializer "k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	autoscalingv1alpha1 "github.com/scaleplane/scaleplane/pkg/apis/autoscaling/v1alpha1"
	"github.com/scaleplane/scaleplane/pkg/generated/clientset/versioned/scheme"
)

// The cache's compact form gives back exactly the stripped object, for
// randomly filled objects (every field of ObjectMeta, spec and status) and
// for the shapes the apiserver writes (a UUID uid, managedFields with and
// without times): whatever reads the cache decides as on the typed object.
func TestCachedObjectRoundTrip(t *testing.T) {
	f := fuzzer.FuzzerFor(metafuzzer.Funcs, rand.NewSource(rand.Int63()), runtimeserializer.NewCodecFactory(scheme.Scheme))
	check := func(name string, obj *autoscalingv1alpha1.CronFederatedHPA) {
		t.Helper()
		want := strip(obj.DeepCopy())
		out, err := stripForCache(obj.DeepCopy())
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := out.(*cachedCron); !ok {
			t.Fatalf("%s: the transform gave %T; want *cachedCron", name, out)
		}
		got, ok := cronOf(out)
		if !ok || !reflect.DeepEqual(got, want) {
			t.Fatalf("%s: the cached object comes back as\n%+v\nwant\n%+v", name, got, want)
		}
		checkMetaGetters(t, name, out, want)
	}
	for i := range 500 {
		obj := &autoscalingv1alpha1.CronFederatedHPA{}
		f.Fill(obj)
		if i%2 == 0 {
			obj.UID = types.UID(fmt.Sprintf("%08x-1c2d-4e5f-8a9b-%012x", i, i*7919))
		}
		check(fmt.Sprintf("filled object %d", i), obj)
	}
	created, written := metav1Time("2024-05-01 07:00:00"), metav1Time("2024-05-01 07:30:00")
	plain := cron("plain", rule("r", "0 8 * * *", 10))
	plain.UID = "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0"
	plain.CreationTimestamp = created
	plain.ManagedFields = []metav1.ManagedFieldsEntry{
		{Manager: "kubectl", Operation: metav1.ManagedFieldsOperationUpdate, Time: &created},
		{Manager: FieldManager, Operation: metav1.ManagedFieldsOperationUpdate, Time: &written, Subresource: "status"},
		{Manager: "no-time", Operation: metav1.ManagedFieldsOperationApply, Subresource: "status"},
	}
	plain.Status.ExecutionHistories = []autoscalingv1alpha1.ExecutionHistory{{RuleName: "r", NextExecutionTime: &written}}
	check("as the apiserver writes it", plain)
	if c := mustCache(t, plain); c.rest != nil || !c.hasUID {
		t.Errorf("an object with no other metadata keeps %+v apart, uid parsed %v; want nothing apart, the uid parsed", c.rest, c.hasUID)
	}
	for _, uid := range []types.UID{"", "not-a-uuid", "0F1E2D3C-4B5A-6978-8796-A5B4C3D2E1F0", "0f1e2d3c+4b5a-6978-8796-a5b4c3d2e1f0"} {
		o := plain.DeepCopy()
		o.UID = uid
		check(fmt.Sprintf("uid %q", uid), o)
	}
	labelled := plain.DeepCopy()
	labelled.Labels = map[string]string{"team": "web"}
	labelled.Finalizers = []string{"example.com/keep"}
	check("with labels and finalizers", labelled)
	deleting := plain.DeepCopy()
	deleting.DeletionTimestamp, deleting.DeletionGracePeriodSeconds = &written, ptr.To[int64](0)
	check("being deleted", deleting)
	if _, ok := cronOf(cache.DeletedFinalStateUnknown{Key: "default/c"}); ok {
		t.Error("a tombstone was taken for an object")
	}
}

func mustCache(t *testing.T, obj *autoscalingv1alpha1.CronFederatedHPA) *cachedCron {
	t.Helper()
	out, err := stripForCache(obj.DeepCopy())
	if err != nil {
		t.Fatal(err)
	}
	return out.(*cachedCron)
}

// BenchmarkCacheBytesPerObject measures the heap the informer's cache keeps
// per CronFederatedHPA, decoded from the JSON the apiserver sends for the
// objects of test/bench/cron (one rule, planned: a status entry with the
// next run, managedFields of the creator and the cron-scaler), as the
// transform leaves it and, for comparison, as the typed object it was
// before the compact form (strip only). Reported as B/object.
//
//	go test -run '^$' -bench CacheBytesPerObject ./pkg/controllers/cronscaler/
//
// checkMetaGetters checks that meta.Accessor hands out the cached object
// itself and that each getter reads what the typed object has.
func checkMetaGetters(t *testing.T, name string, cached any, want *autoscalingv1alpha1.CronFederatedHPA) {
	t.Helper()
	m, err := apimeta.Accessor(cached)
	if err != nil || m != cached {
		t.Fatalf("%s: meta.Accessor gave %T, %v; want the cached object itself", name, m, err)
	}
	got := metav1.ObjectMeta{
		Name: m.GetName(), Namespace: m.GetNamespace(), GenerateName: m.GetGenerateName(),
		UID: m.GetUID(), ResourceVersion: m.GetResourceVersion(), Generation: m.GetGeneration(),
		CreationTimestamp: m.GetCreationTimestamp(), DeletionTimestamp: m.GetDeletionTimestamp(),
		DeletionGracePeriodSeconds: m.GetDeletionGracePeriodSeconds(), Labels: m.GetLabels(), Annotations: m.GetAnnotations(),
		OwnerReferences: m.GetOwnerReferences(), Finalizers: m.GetFinalizers(), ManagedFields: m.GetManagedFields(),
	}
	// The deprecated field, set through its accessor.
	got.SetSelfLink(m.GetSelfLink())
	if !reflect.DeepEqual(got, want.ObjectMeta) {
		t.Fatalf("%s: the getters read\n%+v\nwant\n%+v", name, got, want.ObjectMeta)
	}
}

// The setters of the cached object's metadata change what object() gives
// as the typed object's setters change it.
func TestCachedObjectSetters(t *testing.T) {
	f := fuzzer.FuzzerFor(metafuzzer.Funcs, rand.NewSource(rand.Int63()), runtimeserializer.NewCodecFactory(scheme.Scheme))
	for i := range 200 {
		from, to := &autoscalingv1alpha1.CronFederatedHPA{}, &autoscalingv1alpha1.CronFederatedHPA{}
		f.Fill(from)
		f.Fill(to)
		if i%2 == 0 {
			to.UID = types.UID(fmt.Sprintf("%08x-1c2d-4e5f-8a9b-%012x", i, i*7919))
		}
		to = strip(to)
		out, err := stripForCache(from)
		if err != nil {
			t.Fatal(err)
		}
		c := out.(*cachedCron)
		tm := to.ObjectMeta
		c.SetName(tm.Name)
		c.SetNamespace(tm.Namespace)
		c.SetGenerateName(tm.GenerateName)
		c.SetSelfLink(tm.GetSelfLink())
		c.SetUID(tm.UID)
		c.SetResourceVersion(tm.ResourceVersion)
		c.SetGeneration(tm.Generation)
		c.SetCreationTimestamp(tm.CreationTimestamp)
		c.SetDeletionTimestamp(tm.DeletionTimestamp)
		c.SetDeletionGracePeriodSeconds(tm.DeletionGracePeriodSeconds)
		c.SetLabels(tm.Labels)
		c.SetAnnotations(tm.Annotations)
		c.SetOwnerReferences(tm.OwnerReferences)
		c.SetFinalizers(tm.Finalizers)
		c.SetManagedFields(tm.ManagedFields)
		if got := c.object().ObjectMeta; !reflect.DeepEqual(got, tm) {
			t.Fatalf("object %d: after the setters the metadata is\n%+v\nwant\n%+v", i, got, tm)
		}
	}
}

// The informer's key, index and update paths read a cached object's name,
// namespace and resourceVersion without allocating.
func TestCachedObjectMetaReadsDoNotAllocate(t *testing.T) {
	out, err := stripForCache(cron("plain", rule("r", "0 8 * * *", 10)))
	if err != nil {
		t.Fatal(err)
	}
	var sink int
	allocs := testing.AllocsPerRun(100, func() {
		m, _ := apimeta.Accessor(out)
		sink += len(m.GetName()) + len(m.GetNamespace()) + len(m.GetResourceVersion())
	})
	if allocs != 0 {
		t.Errorf("reading the key fields allocated %v times per read; want 0", allocs)
	}
	_ = sink
}

func BenchmarkCacheBytesPerObject(b *testing.B) {
	for _, form := range []struct {
		name string
		keep func(*autoscalingv1alpha1.CronFederatedHPA) any
	}{
		{"compact", func(o *autoscalingv1alpha1.CronFederatedHPA) any { out, _ := stripForCache(o); return out }},
		{"typed", func(o *autoscalingv1alpha1.CronFederatedHPA) any { return strip(o) }},
	} {
		b.Run(form.name, func(b *testing.B) {
			const n = 10000
			// As client-go's REST client decodes (it drops apiVersion and kind).
			decoder := runtimeapi.WithoutVersionDecoder{Decoder: scheme.Codecs.UniversalDeserializer()}
			for b.Loop() {
				store := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
				before := heapInUse()
				for i := range n {
					decoded, _, err := decoder.Decode(benchObjectJSON(i), nil, &autoscalingv1alpha1.CronFederatedHPA{})
					if err != nil {
						b.Fatal(err)
					}
					if err := store.Add(form.keep(decoded.(*autoscalingv1alpha1.CronFederatedHPA))); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(heapInUse()-before)/n, "B/object")
				runtime.KeepAlive(store)
			}
		})
	}
}

// benchObjectJSON is object i of test/bench/cron as the apiserver sends it
// once the cron-scaler planned it.
func benchObjectJSON(i int) []byte {
	return fmt.Appendf(nil, `{"apiVersion":"autoscaling.karmada.io/v1alpha1","kind":"CronFederatedHPA","metadata":{"creationTimestamp":"2026-11-29T08:41:20Z","generation":1,"managedFields":[{"apiVersion":"autoscaling.karmada.io/v1alpha1","fieldsType":"FieldsV1","fieldsV1":{"f:spec":{".":{},"f:rules":{},"f:scaleTargetRef":{".":{},"f:apiVersion":{},"f:kind":{},"f:name":{}}}},"manager":"cron","operation":"Update","time":"2026-11-29T08:41:20Z"},{"apiVersion":"autoscaling.karmada.io/v1alpha1","fieldsType":"FieldsV1","fieldsV1":{"f:status":{".":{},"f:executionHistories":{}}},"manager":"scaleplane-cron-scaler","operation":"Update","subresource":"status","time":"2026-11-29T08:41:21Z"}],"name":"cron-%05d","namespace":"bench","resourceVersion":"%d","uid":"%08x-5d1c-4a8e-9f3b-%012x"},"spec":{"rules":[{"name":"burst","schedule":"44 8 * * *","targetReplicas":2,"timeZone":"UTC"}],"scaleTargetRef":{"apiVersion":"apps/v1","kind":"Deployment","name":"web-%05d"}},"status":{"executionHistories":[{"nextExecutionTime":"2026-11-29T08:44:00Z","ruleName":"burst"}]}}`, i, 40000+i, i, i*7919, i)
}

// heapInUse is the heap in use after a collection.
func heapInUse() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// parseUID reads exactly the uids formatUID writes (a lowercase UUID) and
// refuses anything else; uidKey tells apart any two uids, UUIDs or not.
func TestParseUID(t *testing.T) {
	for i := range 1000 {
		var b [16]byte
		rand.New(rand.NewSource(int64(i))).Read(b[:])
		uid := formatUID(b)
		if got, ok := parseUID(uid); !ok || got != b {
			t.Fatalf("parseUID(%q) = %x, %v; want %x", uid, got, ok, b)
		}
	}
	for _, uid := range []types.UID{"", "uid-1", "0F1E2D3C-4B5A-6978-8796-A5B4C3D2E1F0", "0f1e2d3c+4b5a-6978-8796-a5b4c3d2e1f0",
		"0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f", "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f00", "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1fg"} {
		if _, ok := parseUID(uid); ok {
			t.Errorf("parseUID(%q) accepted it; want it refused (formatUID would not give it back)", uid)
		}
	}
	seen := map[[16]byte]types.UID{}
	for _, uid := range []types.UID{"", "uid-1", "uid-2", "0F1E2D3C-4B5A-6978-8796-A5B4C3D2E1F0", "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0"} {
		k := uidKey(uid)
		if other, dup := seen[k]; dup {
			t.Errorf("uidKey(%q) = uidKey(%q)", uid, other)
		}
		seen[k] = uid
	}
	if n := testing.AllocsPerRun(100, func() { uidKey("0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0") }); n != 0 {
		t.Errorf("uidKey of a UUID allocated %v times; want 0", n)
	}
}
