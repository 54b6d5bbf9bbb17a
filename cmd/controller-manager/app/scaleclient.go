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

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	kubescheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/scale"
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
	client rest.Interface
}

// newPatchScales wraps scales with a Patch of its own, sent by a client of
// cfg.
func newPatchScales(cfg *rest.Config, scales scale.ScalesGetter) (scale.ScalesGetter, error) {
	cfg = rest.CopyConfig(cfg)
	cfg.NegotiatedSerializer = kubescheme.Codecs.WithoutConversion()
	client, err := rest.UnversionedRESTClientFor(cfg)
	if err != nil {
		return nil, fmt.Errorf("building the scale subresource's patch client: %w", err)
	}
	return patchScales{ScalesGetter: scales, client: client}, nil
}

func (s patchScales) Scales(namespace string) scale.ScaleInterface {
	return patchScale{ScaleInterface: s.ScalesGetter.Scales(namespace), client: s.client, namespace: namespace}
}

type patchScale struct {
	scale.ScaleInterface
	client    rest.Interface
	namespace string
}

// Patch patches the scale subresource of gvr's object name. An API whose
// scale subresource answers with another Scale kind (the extensions and
// apps beta versions that Kubernetes 1.16 stopped serving) fails to decode.
func (s patchScale) Patch(ctx context.Context, gvr schema.GroupVersionResource, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions) (*autoscalingv1.Scale, error) {
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
