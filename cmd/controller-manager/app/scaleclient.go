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
	"fmt"
	"strconv"
	"sync"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	kubescheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/scale"

	"github.com/scaleplane/scaleplane/pkg/gcpace"
)

// patchScales is the cron-scaler's scale client: client-go's, but for
// Patch, which sends the same request and reads the answer as the
// autoscaling/v1 Scale every served API answers with. client-go's reads
// any Scale kind through an unstructured object and a conversion, which in
// a burst of 10,000 firings was a fifth of the cron-scaler's CPU while the
// targets were written, on the cores the apiserver needs for them
// (test/bench/README.md, issue 36).
type patchScales struct {
	scale.ScalesGetter
	client   rest.Interface
	inFlight *inFlight
}

// newPatchScales wraps scales with a Patch of its own, sent by a client of
// cfg, that holds hold while any patch is in flight (burstHeadroom).
func newPatchScales(cfg *rest.Config, scales scale.ScalesGetter, hold func() (release func())) (scale.ScalesGetter, error) {
	cfg = rest.CopyConfig(cfg)
	cfg.NegotiatedSerializer = kubescheme.Codecs.WithoutConversion()
	client, err := rest.UnversionedRESTClientFor(cfg)
	if err != nil {
		return nil, fmt.Errorf("building the scale subresource's patch client: %w", err)
	}
	return patchScales{ScalesGetter: scales, client: client, inFlight: &inFlight{hold: hold}}, nil
}

func (s patchScales) Scales(namespace string) scale.ScaleInterface {
	return patchScale{ScaleInterface: s.ScalesGetter.Scales(namespace), client: s.client, namespace: namespace, inFlight: s.inFlight}
}

type patchScale struct {
	scale.ScaleInterface
	client    rest.Interface
	namespace string
	inFlight  *inFlight
}

// Patch patches the scale subresource of gvr's object name. An API whose
// scale subresource answers with another Scale kind (the extensions and
// apps beta versions that Kubernetes 1.16 stopped serving) fails to decode.
func (s patchScale) Patch(ctx context.Context, gvr schema.GroupVersionResource, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions) (*autoscalingv1.Scale, error) {
	s.inFlight.enter()
	defer s.inFlight.exit()
	gv := gvr.GroupVersion()
	// The answer in protobuf where the server has it, JSON otherwise: what
	// client-go's generated clients of built-in kinds ask for
	// (gentype.PrefersProtobuf), so what a bare client's scale patch of a
	// Deployment gets. A Scale in JSON costs the apiserver's encoding and
	// this process's decoding more, on the cores a burst shares with the
	// apiserver (test/bench/README.md, issue 36, session 17). Unless the
	// config names a content type, which is then kept. The patch itself
	// stays the merge patch it is.
	req := s.client.Patch(pt).UseProtobufAsDefault().
		AbsPath(rest.DefaultVersionedAPIPath(dynamic.LegacyAPIPathResolverFunc(gv.WithKind("")), gv)).
		NamespaceIfScoped(s.namespace, s.namespace != "").
		Resource(gvr.Resource).
		Name(name).
		SubResource("scale").
		Body(data)
	if opts.FieldManager != "" {
		req.Param("fieldManager", opts.FieldManager)
	}
	for _, d := range opts.DryRun {
		req.Param("dryRun", d)
	}
	if opts.Force != nil {
		req.Param("force", strconv.FormatBool(*opts.Force))
	}
	if opts.FieldValidation != "" {
		req.Param("fieldValidation", opts.FieldValidation)
	}
	out := &autoscalingv1.Scale{}
	if err := req.Do(ctx).Into(out); err != nil {
		return nil, err
	}
	return out, nil
}

// burstHeadroomBytes is how much the heap may grow between collections
// while scale patches are in flight. A burst of 1,000 firings allocates
// about 24 MB (24 KB a firing, most of it client-go's request and its
// answer); at GOGC=50 on the 5 MB live heap of 1,000 objects that was 7
// collections in a 1.3 s burst, a fifth of the controller manager's CPU
// while it wrote the targets, on the cores the apiserver needs for them
// (test/bench/README.md, issue 36, session 19). 16 MiB makes that one or two
// collections, for at most 16 MiB more heap while the burst lasts. Above a
// live heap of 32 MiB (about 15,000 objects) GOGC=50 gives this much room
// already, and it changes nothing.
const burstHeadroomBytes = 16 << 20

// burstHeadroom is the cron-scaler's hold while its scale patches are in
// flight.
func burstHeadroom() (release func()) { return gcpace.Headroom(burstHeadroomBytes) }

// inFlight takes hold when the first patch starts and releases it when the
// last in flight ends: the syncs of a burst run between the patches of
// others, and their allocations count as much. A patch alone takes it for
// itself (two calls that cost far less than the request).
type inFlight struct {
	hold func() (release func())

	mu      sync.Mutex
	n       int
	release func()
}

func (f *inFlight) enter() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.n == 0 {
		f.release = f.hold()
	}
	f.n++
}

func (f *inFlight) exit() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.n--
	if f.n == 0 {
		f.release()
		f.release = nil
	}
}
