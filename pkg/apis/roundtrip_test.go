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

package apis_test

import (
	"math/rand"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/apitesting/fuzzer"
	"k8s.io/apimachinery/pkg/api/apitesting/roundtrip"
	"k8s.io/apimachinery/pkg/api/resource"
	metafuzzer "k8s.io/apimachinery/pkg/apis/meta/fuzzer"
	"k8s.io/apimachinery/pkg/runtime"
	runtimeserializer "k8s.io/apimachinery/pkg/runtime/serializer"
	"sigs.k8s.io/randfill"

	autoscalingv1alpha1 "github.com/scaleplane/scaleplane/pkg/apis/autoscaling/v1alpha1"
	clusterv1alpha1 "github.com/scaleplane/scaleplane/pkg/apis/cluster/v1alpha1"
	leaderworkersetv1 "github.com/scaleplane/scaleplane/pkg/apis/leaderworkerset/v1"
	policyv1alpha1 "github.com/scaleplane/scaleplane/pkg/apis/policy/v1alpha1"
	scaleplanev1alpha1 "github.com/scaleplane/scaleplane/pkg/apis/scaleplane/v1alpha1"
	workv1alpha2 "github.com/scaleplane/scaleplane/pkg/apis/work/v1alpha2"
)

// quantityFuncs fills quantities with canonical values: a random Quantity is
// not equal to itself after a round trip only because of its cached string
// form, which says nothing about our types.
func quantityFuncs(runtimeserializer.CodecFactory) []interface{} {
	return []interface{}{
		func(q *resource.Quantity, c randfill.Continue) {
			*q = *resource.NewMilliQuantity(c.Int63n(1_000_000), resource.DecimalSI)
		},
		// A plaintext overrider's value is any JSON: random bytes are not.
		func(r *runtime.RawExtension, c randfill.Continue) {
			*r = runtime.RawExtension{Raw: []byte(`"` + resource.NewMilliQuantity(c.Int63n(1_000_000), resource.DecimalSI).String() + `"`)}
		},
	}
}

// TestRoundTrip serializes randomly filled objects of every kind of every
// group to JSON and back and checks they come back equal, so that no field
// is lost or renamed by its JSON tags.
func TestRoundTrip(t *testing.T) {
	groups := map[string]func(*runtime.Scheme) error{
		"autoscaling.karmada.io":    autoscalingv1alpha1.AddToScheme,
		"leaderworkerset.x-k8s.io":  leaderworkersetv1.AddToScheme,
		"autoscaling.scaleplane.io": scaleplanev1alpha1.AddToScheme,
		"policy.karmada.io":         policyv1alpha1.AddToScheme,
		"cluster.karmada.io":        clusterv1alpha1.AddToScheme,
		"work.karmada.io":           workv1alpha2.AddToScheme,
	}
	for group, addToScheme := range groups {
		t.Run(group, func(t *testing.T) {
			scheme := runtime.NewScheme()
			if err := addToScheme(scheme); err != nil {
				t.Fatalf("adding %s to the scheme: %v", group, err)
			}
			codecs := runtimeserializer.NewCodecFactory(scheme)
			f := fuzzer.FuzzerFor(fuzzer.MergeFuzzerFuncs(metafuzzer.Funcs, quantityFuncs), rand.NewSource(rand.Int63()), codecs)
			kinds := 0
			for gvk, typ := range scheme.AllKnownTypes() {
				// metav1.AddToGroupVersion registers the meta kinds (WatchEvent,
				// ListOptions, ...) in every group; they are not ours to test.
				if gvk.Group != group || !strings.HasPrefix(typ.PkgPath(), "github.com/scaleplane/") {
					continue
				}
				kinds++
				roundtrip.RoundTripSpecificKindWithoutProtobuf(t, gvk, scheme, codecs, f, nil)
			}
			if kinds == 0 {
				t.Fatalf("no kinds registered for %s", group)
			}
		})
	}
}
