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
	"encoding/json"
	"fmt"
	"sync"
	"time"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	metadatafake "k8s.io/client-go/metadata/fake"
	scalefake "k8s.io/client-go/scale/fake"
	clienttesting "k8s.io/client-go/testing"
	testingclock "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	lwsv1 "github.com/scaleplane/scaleplane/pkg/apis/leaderworkerset/v1"
)

// scaleStore backs the fake scale client: replicas by resource and name,
// and, as the apiserver keeps them, the managedFields entries that own them
// (served to the fake metadata client).
type scaleStore struct {
	mu       sync.Mutex
	clock    *testingclock.FakeClock
	fake     *scalefake.FakeScaleClient
	metadata *metadatafake.FakeMetadataClient
	replicas map[string]int32
	managers map[string]metav1.ManagedFieldsEntry
	updates  int
	// conflicts makes the next updates fail with a conflict.
	conflicts int
	// err, when set, fails every update with it.
	err error
	// block, when set, holds every update until it is closed; entered
	// receives one value per update that started.
	block, entered chan struct{}
}

func newScaleStore(clk *testingclock.FakeClock) *scaleStore {
	s := &scaleStore{
		clock: clk, fake: &scalefake.FakeScaleClient{}, metadata: metadatafake.NewSimpleMetadataClient(runtime.NewScheme()),
		replicas: map[string]int32{}, managers: map[string]metav1.ManagedFieldsEntry{},
	}
	s.metadata.PrependReactor("get", "*", func(action clienttesting.Action) (bool, runtime.Object, error) {
		get := action.(clienttesting.GetAction)
		key := get.GetResource().Resource + "/" + get.GetName()
		s.mu.Lock()
		defer s.mu.Unlock()
		if _, ok := s.replicas[key]; !ok {
			return true, nil, apierrors.NewNotFound(get.GetResource().GroupResource(), get.GetName())
		}
		m := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: get.GetName(), Namespace: get.GetNamespace()}}
		if e, ok := s.managers[key]; ok {
			m.ManagedFields = []metav1.ManagedFieldsEntry{e}
		}
		return true, m, nil
	})
	s.fake.AddReactor("patch", "*", func(action clienttesting.Action) (bool, runtime.Object, error) {
		s.mu.Lock()
		block, entered := s.block, s.entered
		s.mu.Unlock()
		if block != nil {
			entered <- struct{}{}
			<-block
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.err != nil {
			return true, nil, s.err
		}
		patch := action.(clienttesting.PatchAction)
		if patch.GetSubresource() != "scale" || patch.GetPatchType() != types.MergePatchType {
			return true, nil, fmt.Errorf("unexpected %s patch of %s", patch.GetPatchType(), patch.GetSubresource())
		}
		if s.conflicts > 0 {
			s.conflicts--
			return true, nil, apierrors.NewConflict(patch.GetResource().GroupResource(), patch.GetName(), nil)
		}
		key := patch.GetResource().Resource + "/" + patch.GetName()
		if _, ok := s.replicas[key]; !ok {
			return true, nil, apierrors.NewNotFound(patch.GetResource().GroupResource(), patch.GetName())
		}
		var body struct {
			Spec struct {
				Replicas *int32 `json:"replicas"`
			} `json:"spec"`
		}
		if err := json.Unmarshal(patch.GetPatch(), &body); err != nil || body.Spec.Replicas == nil {
			return true, nil, apierrors.NewBadRequest(fmt.Sprintf("patch %s does not set spec.replicas", patch.GetPatch()))
		}
		s.updates++
		// The fake scale client drops the patch options: every scale
		// patch is the cron-scaler's.
		s.write(key, FieldManager, "scale", *body.Spec.Replicas)
		sc := &autoscalingv1.Scale{ObjectMeta: metav1.ObjectMeta{Name: patch.GetName(), Namespace: patch.GetNamespace()}}
		sc.Spec.Replicas = *body.Spec.Replicas
		return true, sc, nil
	})
	return s
}

// write sets replicas as manager, as the apiserver records it: a write that
// changes the value makes manager the owner of spec.replicas, at the clock's
// time (in seconds); one that changes nothing changes no entry. A write
// through the scale subresource gets no time: the apiserver's scale handler
// drops it (k8s.io/apimachinery v0.37.2, pkg/util/managedfields/scalehandler.go,
// ToParent takes the time from the parent's entries, where a manager that
// writes only through the scale subresource has none), as the cron-scaler
// integration test InheritedFiringNotReapplied shows.
func (s *scaleStore) write(key, manager, subresource string, replicas int32) {
	if old, ok := s.replicas[key]; ok && old == replicas {
		return
	}
	s.replicas[key] = replicas
	var at *metav1.Time
	if subresource != "scale" {
		at = ptr.To(metav1.NewTime(s.clock.Now().UTC().Truncate(time.Second)))
	}
	s.managers[key] = metav1.ManagedFieldsEntry{
		Manager: manager, Operation: metav1.ManagedFieldsOperationUpdate, Subresource: subresource, Time: at,
		FieldsType: "FieldsV1", FieldsV1: metav1.NewFieldsV1(`{"f:spec":{"f:replicas":{}}}`),
	}
}

// scaleBy sets replicas as another manager would, through the object
// (kubectl edit, apply or patch) or, with subresource "scale", through the
// scale subresource (kubectl scale, the HPA controller).
func (s *scaleStore) scaleBy(manager, subresource, resource, name string, replicas int32) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.write(resource+"/"+name, manager, subresource, replicas)
}

// set sets replicas without a trace in managedFields (a test's setup).
func (s *scaleStore) set(resource, name string, replicas int32) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.replicas[resource+"/"+name] = replicas
}

func (s *scaleStore) failWith(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.err = err
}

func (s *scaleStore) get(resource, name string) int32 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.replicas[resource+"/"+name]
}

func (s *scaleStore) updateCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.updates
}

// testMapper knows Deployments and StatefulSets; kinds in onReset become
// known when it is reset, like a CRD installed after discovery was cached.
type testMapper struct {
	*meta.DefaultRESTMapper
	resets  int
	onReset []schema.GroupVersionKind
}

func newTestMapper() *testMapper {
	m := &testMapper{DefaultRESTMapper: meta.NewDefaultRESTMapper(nil)}
	m.Add(schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}, meta.RESTScopeNamespace)
	m.Add(schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "StatefulSet"}, meta.RESTScopeNamespace)
	m.Add(lwsv1.SchemeGroupVersion.WithKind("LeaderWorkerSet"), meta.RESTScopeNamespace)
	return m
}

func (m *testMapper) Reset() {
	m.resets++
	for _, gvk := range m.onReset {
		m.Add(gvk, meta.RESTScopeNamespace)
	}
}
