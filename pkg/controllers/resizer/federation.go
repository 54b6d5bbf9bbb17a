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
	"context"
	"fmt"
	"sync"
	"time"

	"k8s.io/client-go/discovery"
	"k8s.io/utils/clock"

	clusterv1alpha1 "github.com/scaleplane/scaleplane/pkg/apis/cluster/v1alpha1"
	policyv1alpha1 "github.com/scaleplane/scaleplane/pkg/apis/policy/v1alpha1"
	scaleplanev1alpha1 "github.com/scaleplane/scaleplane/pkg/apis/scaleplane/v1alpha1"
	workv1alpha2 "github.com/scaleplane/scaleplane/pkg/apis/work/v1alpha2"
)

// discoveryInterval is how long what the API server serves is remembered.
// Karmada's APIs appear once, when Karmada is installed; a minute late is
// soon enough, and discovery is not read on every sync.
const discoveryInterval = time.Minute

// karmadaAPIs tells which of Karmada's API groups the API server serves.
type karmadaAPIs struct {
	cluster, policy, work bool
}

// any is true where Karmada is installed: then the Nodes of this API server
// are not the cluster an add-on runs in.
func (a karmadaAPIs) any() bool { return a.cluster || a.policy || a.work }

// all is true where Karmada mode can work: Clusters, OverridePolicies and
// ResourceBindings are all served.
func (a karmadaAPIs) all() bool { return a.cluster && a.policy && a.work }

func (a karmadaAPIs) missing() string {
	var out []string
	for _, g := range []struct {
		ok   bool
		name string
	}{{a.cluster, clusterv1alpha1.SchemeGroupVersion.String()}, {a.policy, policyv1alpha1.SchemeGroupVersion.String()}, {a.work, workv1alpha2.SchemeGroupVersion.String()}} {
		if !g.ok {
			out = append(out, g.name)
		}
	}
	return fmt.Sprint(out)
}

// apiDetector reads discovery at most once per discoveryInterval.
type apiDetector struct {
	discovery discovery.DiscoveryInterface
	clock     clock.Clock

	mu   sync.Mutex
	at   time.Time
	last karmadaAPIs
	done bool
}

func newAPIDetector(d discovery.DiscoveryInterface, clk clock.Clock) *apiDetector {
	return &apiDetector{discovery: d, clock: clk}
}

// apis returns which of Karmada's group versions are served, as read at
// most discoveryInterval ago.
func (d *apiDetector) apis(ctx context.Context) (karmadaAPIs, error) {
	return d.read(ctx, false)
}

// fresh reads discovery now.
func (d *apiDetector) fresh(ctx context.Context) (karmadaAPIs, error) {
	return d.read(ctx, true)
}

func (d *apiDetector) read(_ context.Context, fresh bool) (karmadaAPIs, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	now := d.clock.Now()
	if !fresh && d.done && now.Sub(d.at) < discoveryInterval {
		return d.last, nil
	}
	groups, err := d.discovery.ServerGroups()
	if err != nil {
		return karmadaAPIs{}, fmt.Errorf("reading the API groups the API server serves: %w", err)
	}
	var a karmadaAPIs
	for _, g := range groups.Groups {
		for _, v := range g.Versions {
			switch v.GroupVersion {
			case clusterv1alpha1.SchemeGroupVersion.String():
				a.cluster = true
			case policyv1alpha1.SchemeGroupVersion.String():
				a.policy = true
			case workv1alpha2.SchemeGroupVersion.String():
				a.work = true
			}
		}
	}
	d.last, d.at, d.done = a, now, true
	return a, nil
}

// federationOf resolves the spec's federation mode against what is served.
func federationOf(spec *scaleplanev1alpha1.AddonResizerSpec, apis karmadaAPIs) scaleplanev1alpha1.FederationMode {
	switch spec.Federation {
	case scaleplanev1alpha1.FederationNone, scaleplanev1alpha1.FederationKarmada:
		return spec.Federation
	}
	if apis.any() {
		return scaleplanev1alpha1.FederationKarmada
	}
	return scaleplanev1alpha1.FederationNone
}
