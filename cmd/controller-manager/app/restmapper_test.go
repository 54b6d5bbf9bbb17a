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
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"

	kubefake "k8s.io/client-go/kubernetes/fake"

	"github.com/scaleplane/scaleplane/pkg/generated/clientset/versioned/fake"

	"github.com/scaleplane/scaleplane/cmd/controller-manager/app/options"
)

var (
	deploymentKind = schema.GroupKind{Group: "apps", Kind: "Deployment"}
	rolloutKind    = schema.GroupKind{Group: "argoproj.io", Kind: "Rollout"}
	namespaceKind  = schema.GroupKind{Kind: "Namespace"}
)

// countingMapper is a discovery mapper that knows Deployments, counts its
// lookups and resets, and can hold a lookup until released.
type countingMapper struct {
	meta.ResettableRESTMapper
	mu      sync.Mutex
	lookups int
	asked   []schema.GroupKind
	resets  int
	// hold, when set, is closed by the test to let a lookup return;
	// entered is closed when the held lookup has begun.
	hold, entered chan struct{}
}

func (m *countingMapper) RESTMapping(gk schema.GroupKind, versions ...string) (*meta.RESTMapping, error) {
	m.mu.Lock()
	m.lookups++
	m.asked = append(m.asked, gk)
	hold, entered := m.hold, m.entered
	m.hold = nil
	m.mu.Unlock()
	if hold != nil {
		close(entered)
		<-hold
	}
	if gk == namespaceKind {
		return &meta.RESTMapping{Resource: schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}, Scope: meta.RESTScopeRoot}, nil
	}
	if gk != deploymentKind {
		return nil, &meta.NoKindMatchError{GroupKind: gk, SearchedVersions: versions}
	}
	return &meta.RESTMapping{
		Resource:         schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"},
		GroupVersionKind: deploymentKind.WithVersion("v1"),
		Scope:            meta.RESTScopeNamespace,
	}, nil
}

func (m *countingMapper) Reset() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.resets++
}

func (m *countingMapper) kindsAsked() []schema.GroupKind {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.asked)
}

func (m *countingMapper) counts() (lookups, resets int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.lookups, m.resets
}

func mustMap(t *testing.T, m meta.RESTMapper, gk schema.GroupKind, versions ...string) *meta.RESTMapping {
	t.Helper()
	mapping, err := m.RESTMapping(gk, versions...)
	if err != nil {
		t.Fatalf("mapping %s: %v", gk, err)
	}
	return mapping
}

// A kind is looked up once until Reset; every caller gets a copy of its
// mapping; other versions are other lookups.
func TestMappingCacheRemembersUntilReset(t *testing.T) {
	delegate := &countingMapper{}
	m := newMappingCache(delegate)

	first := mustMap(t, m, deploymentKind, "v1")
	first.Resource.Resource = "changed by a caller"
	second := mustMap(t, m, deploymentKind, "v1")
	if lookups, _ := delegate.counts(); lookups != 1 {
		t.Fatalf("two mappings of one kind took %d lookups; want 1", lookups)
	}
	if second.Resource.Resource != "deployments" {
		t.Fatalf("a caller's change of its mapping reached the next caller: %v", second.Resource)
	}
	mustMap(t, m, deploymentKind)
	if lookups, _ := delegate.counts(); lookups != 2 {
		t.Fatalf("a mapping asked with other versions took %d lookups in all; want 2", lookups)
	}

	m.Reset()
	if _, resets := delegate.counts(); resets != 1 {
		t.Fatalf("Reset reset the discovery mapper %d times; want 1", resets)
	}
	mustMap(t, m, deploymentKind, "v1")
	if lookups, _ := delegate.counts(); lookups != 3 {
		t.Fatalf("a mapping after Reset took %d lookups in all; want 3 (looked up again)", lookups)
	}
}

// A kind not found is not remembered: the cron-scaler resets the mapper and
// asks again, to find a CRD installed since.
func TestMappingCacheDoesNotRememberAKindNotFound(t *testing.T) {
	delegate := &countingMapper{}
	m := newMappingCache(delegate)
	mustMap(t, m, deploymentKind, "v1")
	for range 2 {
		if _, err := m.RESTMapping(rolloutKind, "v1alpha1"); !meta.IsNoMatchError(err) {
			t.Fatalf("mapping a kind not served: %v; want the mapper's no-match error", err)
		}
	}
	mustMap(t, m, deploymentKind, "v1")
	if lookups, _ := delegate.counts(); lookups != 3 {
		t.Fatalf("lookups %d; want 3: the Deployment once, the missing kind both times", lookups)
	}
}

// A lookup that began before Reset and returns after it answered from the
// old discovery: it is not kept.
func TestMappingCacheDropsALookupOverlappingReset(t *testing.T) {
	delegate := &countingMapper{hold: make(chan struct{}), entered: make(chan struct{})}
	hold, entered := delegate.hold, delegate.entered
	m := newMappingCache(delegate)
	done := make(chan error, 1)
	go func() {
		_, err := m.RESTMapping(deploymentKind, "v1")
		done <- err
	}()
	<-entered
	m.Reset()
	close(hold)
	if err := <-done; err != nil {
		t.Fatalf("the lookup overlapping Reset: %v", err)
	}
	mustMap(t, m, deploymentKind, "v1")
	if lookups, _ := delegate.counts(); lookups != 2 {
		t.Fatalf("lookups %d; want 2: the one overlapping Reset is not kept", lookups)
	}
}

// The controllers' mapper is the remembering one.
func TestControllerContextMapperRemembers(t *testing.T) {
	opts := options.NewOptions()
	broadcaster := record.NewBroadcaster()
	defer broadcaster.Shutdown()
	cc, err := CreateControllerContext(context.Background(), &rest.Config{Host: "https://127.0.0.1:1"}, opts, broadcaster)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := cc.RESTMapper.(*mappingCache); !ok {
		t.Fatalf("the controllers' mapper is a %T; want the remembering one", cc.RESTMapper)
	}
}

// A controller is built with discovery read already: the cron-scaler's first
// mapping comes at the first firing of a burst, where every sync worker
// would wait behind it.
func TestControllersStartWithDiscoveryRead(t *testing.T) {
	ctx, cancel := context.WithCancel(klog.NewContext(context.Background(), ktesting.NewLogger(t, ktesting.NewConfig())))
	defer cancel()
	kube := kubefake.NewClientset()
	controllerCtx := fakeControllerContext(kube, kube, fake.NewSimpleClientset())
	delegate := &countingMapper{}
	controllerCtx.RESTMapper = newMappingCache(delegate)

	askedBeforeBuild := make(chan []schema.GroupKind, 1)
	ran := make(chan struct{})
	descriptors := buildControllerDescriptors(&ControllerDescriptor{name: "own", initFunc: func(context.Context, ControllerContext) (Controller, error) {
		askedBeforeBuild <- delegate.kindsAsked()
		return ranController{name: "own", ran: ran}, nil
	}})
	done := make(chan struct{})
	go func() {
		defer close(done)
		runControllers(ctx, controllerCtx, descriptors, []string{"*"}, newHealthChecks())
	}()
	select {
	case asked := <-askedBeforeBuild:
		if !slices.Contains(asked, namespaceKind) {
			t.Errorf("the mapper was asked %v before the controller was built; want discovery read (a Namespace mapping)", asked)
		}
	case <-time.After(10 * time.Second):
		t.Error("the controller was not built")
	}
	cancel()
	<-done
}
