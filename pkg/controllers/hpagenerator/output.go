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

package hpagenerator

import (
	"context"
	"fmt"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	autoscalingv2listers "k8s.io/client-go/listers/autoscaling/v2"
	"k8s.io/client-go/tools/cache"

	autoscalingv1alpha1 "github.com/scaleplane/scaleplane/pkg/apis/autoscaling/v1alpha1"
	"github.com/scaleplane/scaleplane/pkg/generated/clientset/versioned"
	autoscalingv1alpha1listers "github.com/scaleplane/scaleplane/pkg/generated/listers/autoscaling/v1alpha1"
	"github.com/scaleplane/scaleplane/pkg/scaletarget"
)

// Output is the kind of autoscaler the generator keeps for a LeaderWorkerSet.
type Output string

const (
	// OutputHorizontalPodAutoscaler: an autoscaling/v2
	// HorizontalPodAutoscaler, which kube-controller-manager's HPA
	// controller acts on.
	OutputHorizontalPodAutoscaler Output = "HorizontalPodAutoscaler"
	// OutputFederatedHPA: an autoscaling.karmada.io/v1alpha1 FederatedHPA,
	// which karmada-controller-manager acts on: on karmada-apiserver no HPA
	// controller runs, and an HPA propagated to member clusters would scale
	// each member's copy on its own, against Karmada's replica division.
	OutputFederatedHPA Output = "FederatedHPA"
)

// autoscalers reads and writes one kind of autoscaler, as
// HorizontalPodAutoscalers: a FederatedHPA's spec has the fields of an HPA's,
// one for one and of the same types (scaleTargetRef, minReplicas,
// maxReplicas, metrics, behavior), and its status is an HPA's status, so the
// generator decides once for both kinds (ownership, drift, the apiserver's
// defaults) and converts at the edges, where it reads and writes.
type autoscalers interface {
	// kind names the kind in events and logs.
	kind() string
	// get reads the autoscaler from the informer cache.
	get(namespace, name string) (*autoscalingv2.HorizontalPodAutoscaler, error)
	// targeting returns the autoscalers in the cache that scale the
	// LeaderWorkerSet.
	targeting(namespace, lwsName string) ([]*autoscalingv2.HorizontalPodAutoscaler, error)
	create(ctx context.Context, obj *autoscalingv2.HorizontalPodAutoscaler) (*autoscalingv2.HorizontalPodAutoscaler, error)
	update(ctx context.Context, obj *autoscalingv2.HorizontalPodAutoscaler) (*autoscalingv2.HorizontalPodAutoscaler, error)
	delete(ctx context.Context, namespace, name string, opts metav1.DeleteOptions) error
}

// lwsTargetKey is the scale target index key of a LeaderWorkerSet.
func lwsTargetKey(namespace, name string) string {
	return scaletarget.Key(namespace, lwsGroup, lwsKind, name)
}

// hpas are autoscaling/v2 HorizontalPodAutoscalers.
type hpas struct {
	lister  autoscalingv2listers.HorizontalPodAutoscalerLister
	indexer cache.Indexer
	client  kubernetes.Interface
}

func (h *hpas) kind() string { return string(OutputHorizontalPodAutoscaler) }

func (h *hpas) get(namespace, name string) (*autoscalingv2.HorizontalPodAutoscaler, error) {
	return h.lister.HorizontalPodAutoscalers(namespace).Get(name)
}

func (h *hpas) targeting(namespace, lwsName string) ([]*autoscalingv2.HorizontalPodAutoscaler, error) {
	objs, err := h.indexer.ByIndex(scaletarget.Index, lwsTargetKey(namespace, lwsName))
	if err != nil {
		return nil, fmt.Errorf("looking up the HorizontalPodAutoscalers that target LeaderWorkerSet %s/%s: %w", namespace, lwsName, err)
	}
	out := make([]*autoscalingv2.HorizontalPodAutoscaler, 0, len(objs))
	for _, obj := range objs {
		if hpa, ok := obj.(*autoscalingv2.HorizontalPodAutoscaler); ok {
			out = append(out, hpa)
		}
	}
	return out, nil
}

func (h *hpas) create(ctx context.Context, obj *autoscalingv2.HorizontalPodAutoscaler) (*autoscalingv2.HorizontalPodAutoscaler, error) {
	return h.client.AutoscalingV2().HorizontalPodAutoscalers(obj.Namespace).Create(ctx, obj, metav1.CreateOptions{FieldManager: fieldManager})
}

func (h *hpas) update(ctx context.Context, obj *autoscalingv2.HorizontalPodAutoscaler) (*autoscalingv2.HorizontalPodAutoscaler, error) {
	return h.client.AutoscalingV2().HorizontalPodAutoscalers(obj.Namespace).Update(ctx, obj, metav1.UpdateOptions{FieldManager: fieldManager})
}

func (h *hpas) delete(ctx context.Context, namespace, name string, opts metav1.DeleteOptions) error {
	return h.client.AutoscalingV2().HorizontalPodAutoscalers(namespace).Delete(ctx, name, opts)
}

// federatedHPAs are Karmada's autoscaling.karmada.io/v1alpha1 FederatedHPAs.
type federatedHPAs struct {
	lister  autoscalingv1alpha1listers.FederatedHPALister
	indexer cache.Indexer
	client  versioned.Interface
}

func (f *federatedHPAs) kind() string { return string(OutputFederatedHPA) }

func (f *federatedHPAs) get(namespace, name string) (*autoscalingv2.HorizontalPodAutoscaler, error) {
	fhpa, err := f.lister.FederatedHPAs(namespace).Get(name)
	if err != nil {
		return nil, err
	}
	return fromFederatedHPA(fhpa), nil
}

func (f *federatedHPAs) targeting(namespace, lwsName string) ([]*autoscalingv2.HorizontalPodAutoscaler, error) {
	objs, err := f.indexer.ByIndex(scaletarget.Index, lwsTargetKey(namespace, lwsName))
	if err != nil {
		return nil, fmt.Errorf("looking up the FederatedHPAs that target LeaderWorkerSet %s/%s: %w", namespace, lwsName, err)
	}
	out := make([]*autoscalingv2.HorizontalPodAutoscaler, 0, len(objs))
	for _, obj := range objs {
		if fhpa, ok := obj.(*autoscalingv1alpha1.FederatedHPA); ok {
			out = append(out, fromFederatedHPA(fhpa))
		}
	}
	return out, nil
}

func (f *federatedHPAs) create(ctx context.Context, obj *autoscalingv2.HorizontalPodAutoscaler) (*autoscalingv2.HorizontalPodAutoscaler, error) {
	created, err := f.client.AutoscalingV1alpha1().FederatedHPAs(obj.Namespace).Create(ctx, toFederatedHPA(obj), metav1.CreateOptions{FieldManager: fieldManager})
	if err != nil {
		return nil, err
	}
	return fromFederatedHPA(created), nil
}

func (f *federatedHPAs) update(ctx context.Context, obj *autoscalingv2.HorizontalPodAutoscaler) (*autoscalingv2.HorizontalPodAutoscaler, error) {
	updated, err := f.client.AutoscalingV1alpha1().FederatedHPAs(obj.Namespace).Update(ctx, toFederatedHPA(obj), metav1.UpdateOptions{FieldManager: fieldManager})
	if err != nil {
		return nil, err
	}
	return fromFederatedHPA(updated), nil
}

func (f *federatedHPAs) delete(ctx context.Context, namespace, name string, opts metav1.DeleteOptions) error {
	return f.client.AutoscalingV1alpha1().FederatedHPAs(namespace).Delete(ctx, name, opts)
}

// fromFederatedHPA is the FederatedHPA as an HPA. The object meta is a
// shallow copy: the result is read like a cache object, never changed (the
// writes start from a deep copy).
func fromFederatedHPA(f *autoscalingv1alpha1.FederatedHPA) *autoscalingv2.HorizontalPodAutoscaler {
	return &autoscalingv2.HorizontalPodAutoscaler{
		ObjectMeta: f.ObjectMeta,
		Spec: autoscalingv2.HorizontalPodAutoscalerSpec{
			ScaleTargetRef: f.Spec.ScaleTargetRef,
			MinReplicas:    f.Spec.MinReplicas,
			MaxReplicas:    f.Spec.MaxReplicas,
			Metrics:        f.Spec.Metrics,
			Behavior:       f.Spec.Behavior,
		},
		Status: f.Status,
	}
}

// toFederatedHPA is the HPA-shaped object as the FederatedHPA to write.
func toFederatedHPA(h *autoscalingv2.HorizontalPodAutoscaler) *autoscalingv1alpha1.FederatedHPA {
	return &autoscalingv1alpha1.FederatedHPA{
		ObjectMeta: h.ObjectMeta,
		Spec: autoscalingv1alpha1.FederatedHPASpec{
			ScaleTargetRef: h.Spec.ScaleTargetRef,
			MinReplicas:    h.Spec.MinReplicas,
			MaxReplicas:    h.Spec.MaxReplicas,
			Metrics:        h.Spec.Metrics,
			Behavior:       h.Spec.Behavior,
		},
		Status: h.Status,
	}
}
