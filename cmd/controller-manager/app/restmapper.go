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
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/klog/v2"
)

// mappingCache is a ResettableRESTMapper that remembers the RESTMapping of
// each kind it was asked for until Reset. client-go's discovery mapper
// answers from discovery cached until Reset too, so the answers are the
// same; but it finds each one anew, across every served group, making a
// no-match error for each group without the kind. In a burst of 10,000
// cron firings that was 7 KB and 14 µs a firing, more than a quarter of what
// the cron-scaler allocated while it wrote the targets (test/bench/README.md,
// issue 36), on the cores the apiserver needs for those writes.
//
// Only mappings found are remembered: a kind not found is asked again (the
// cron-scaler resets the mapper and asks once more, to find CRDs installed
// later).
type mappingCache struct {
	meta.ResettableRESTMapper

	mu sync.RWMutex
	// generation counts Resets, so that a mapping found before a Reset and
	// stored after it is not kept.
	generation uint64
	mappings   map[mappingKey]meta.RESTMapping
}

type mappingKey struct {
	kind     schema.GroupKind
	versions string
}

func newMappingCache(mapper meta.ResettableRESTMapper) *mappingCache {
	return &mappingCache{ResettableRESTMapper: mapper, mappings: map[mappingKey]meta.RESTMapping{}}
}

// RESTMapping is RESTMappingWithContext without a context.
func (m *mappingCache) RESTMapping(gk schema.GroupKind, versions ...string) (*meta.RESTMapping, error) {
	return m.RESTMappingWithContext(context.Background(), gk, versions...)
}

// RESTMappingWithContext returns the mapper's mapping of gk in the first of
// versions it serves, remembered since the last Reset. Each caller gets a
// copy. A discovery read it makes ends with ctx.
func (m *mappingCache) RESTMappingWithContext(ctx context.Context, gk schema.GroupKind, versions ...string) (*meta.RESTMapping, error) {
	key := mappingKey{kind: gk, versions: strings.Join(versions, ",")}
	m.mu.RLock()
	mapping, ok := m.mappings[key]
	generation := m.generation
	m.mu.RUnlock()
	if ok {
		return &mapping, nil
	}
	found, err := meta.ToRESTMapperWithContext(m.ResettableRESTMapper).RESTMappingWithContext(ctx, gk, versions...)
	if err != nil {
		return nil, err
	}
	m.mu.Lock()
	if m.generation == generation {
		m.mappings[key] = *found
	}
	m.mu.Unlock()
	copied := *found
	return &copied, nil
}

// Reset resets the mapper, so that its next lookup reads discovery again,
// then forgets the remembered mappings. In that order, and the mapper's
// reset outside the lock (it waits for a discovery read in progress): a
// lookup that began before the forget is not kept, and one that began after
// it asks the reset mapper.
func (m *mappingCache) Reset() {
	m.ResettableRESTMapper.Reset()
	m.mu.Lock()
	defer m.mu.Unlock()
	m.generation++
	clear(m.mappings)
}

// readDiscoveryAhead has the mapper read discovery now, by mapping the one
// kind every apiserver serves (Namespace), rather than at a controller's
// first mapping: the cron-scaler's comes at the first firing of a burst,
// when every sync worker would wait for discovery behind it. It ends with
// ctx. A failure is not an error: discovery is read at the first mapping
// then, as before.
func readDiscoveryAhead(ctx context.Context, mapper meta.RESTMapper) {
	namespace := schema.GroupKind{Kind: "Namespace"}
	var err error
	if m, ok := mapper.(interface {
		RESTMappingWithContext(context.Context, schema.GroupKind, ...string) (*meta.RESTMapping, error)
	}); ok {
		_, err = m.RESTMappingWithContext(ctx, namespace, "v1")
	} else {
		_, err = mapper.RESTMapping(namespace, "v1")
	}
	if err != nil {
		klog.FromContext(ctx).V(2).Info("Reading discovery ahead of the first mapping failed; it is read at the first mapping", "err", err)
	}
}
