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
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	scaleplanev1alpha1 "github.com/scaleplane/scaleplane/pkg/apis/scaleplane/v1alpha1"
)

// fieldManager names the resizer in the managedFields of the workloads it
// patches, so that `kubectl get -o yaml --show-managed-fields` tells who set
// the resources.
const fieldManager = "scaleplane-resizer"

// workload is the part of a Deployment, StatefulSet or DaemonSet the
// resizer reads: its identity, pod template and selector.
type workload struct {
	kind            scaleplanev1alpha1.TargetKind
	namespace, name string
	uid             types.UID
	generation      int64
	resourceVersion string
	template        *corev1.PodTemplateSpec
	selector        *metav1.LabelSelector
}

func (w *workload) String() string { return string(w.kind) + " " + w.namespace + "/" + w.name }

// container returns the named container of the pod template, or nil.
func (w *workload) container(name string) *corev1.Container {
	for i := range w.template.Spec.Containers {
		if w.template.Spec.Containers[i].Name == name {
			return &w.template.Spec.Containers[i]
		}
	}
	return nil
}

// errUnsupportedKind is a target kind the resizer cannot read; the webhook
// and the CRD schema keep it out.
type errUnsupportedKind struct{ kind scaleplanev1alpha1.TargetKind }

func (e errUnsupportedKind) Error() string {
	return fmt.Sprintf("target kind %q is not supported: use Deployment, StatefulSet or DaemonSet", e.kind)
}

func fromDeployment(d *appsv1.Deployment) *workload {
	return &workload{kind: scaleplanev1alpha1.TargetKindDeployment, namespace: d.Namespace, name: d.Name,
		uid: d.UID, generation: d.Generation, resourceVersion: d.ResourceVersion, template: &d.Spec.Template, selector: d.Spec.Selector}
}

func fromStatefulSet(s *appsv1.StatefulSet) *workload {
	return &workload{kind: scaleplanev1alpha1.TargetKindStatefulSet, namespace: s.Namespace, name: s.Name,
		uid: s.UID, generation: s.Generation, resourceVersion: s.ResourceVersion, template: &s.Spec.Template, selector: s.Spec.Selector}
}

func fromDaemonSet(d *appsv1.DaemonSet) *workload {
	return &workload{kind: scaleplanev1alpha1.TargetKindDaemonSet, namespace: d.Namespace, name: d.Name,
		uid: d.UID, generation: d.Generation, resourceVersion: d.ResourceVersion, template: &d.Spec.Template, selector: d.Spec.Selector}
}

// cachedTarget reads the target from the informer caches. The workload is
// shared with the cache: read it, never change it.
func (c *Controller) cachedTarget(namespace string, ref scaleplanev1alpha1.TargetReference) (*workload, error) {
	switch ref.Kind {
	case scaleplanev1alpha1.TargetKindDeployment:
		d, err := c.deployments.Deployments(namespace).Get(ref.Name)
		if err != nil {
			return nil, err
		}
		return fromDeployment(d), nil
	case scaleplanev1alpha1.TargetKindStatefulSet:
		s, err := c.statefulSets.StatefulSets(namespace).Get(ref.Name)
		if err != nil {
			return nil, err
		}
		return fromStatefulSet(s), nil
	case scaleplanev1alpha1.TargetKindDaemonSet:
		d, err := c.daemonSets.DaemonSets(namespace).Get(ref.Name)
		if err != nil {
			return nil, err
		}
		return fromDaemonSet(d), nil
	}
	return nil, errUnsupportedKind{kind: ref.Kind}
}

// freshTarget reads the target from the API server, after a conflict showed
// that the cache is behind.
func (c *Controller) freshTarget(ctx context.Context, w *workload) (*workload, error) {
	apps := c.kubeClient.AppsV1()
	switch w.kind {
	case scaleplanev1alpha1.TargetKindDeployment:
		d, err := apps.Deployments(w.namespace).Get(ctx, w.name, metav1.GetOptions{})
		if err != nil {
			return nil, err
		}
		return fromDeployment(d), nil
	case scaleplanev1alpha1.TargetKindStatefulSet:
		s, err := apps.StatefulSets(w.namespace).Get(ctx, w.name, metav1.GetOptions{})
		if err != nil {
			return nil, err
		}
		return fromStatefulSet(s), nil
	case scaleplanev1alpha1.TargetKindDaemonSet:
		d, err := apps.DaemonSets(w.namespace).Get(ctx, w.name, metav1.GetOptions{})
		if err != nil {
			return nil, err
		}
		return fromDaemonSet(d), nil
	}
	return nil, errUnsupportedKind{kind: w.kind}
}

// patchTarget sends the resize as one strategic merge patch of the one
// container, by name. Containers merge by name, and requests and limits
// merge key by key, so every other container, and every resource the
// AddonResizer does not manage, is left as it is. The resourceVersion the
// change was computed from makes the patch conditional: if the workload
// changed meanwhile, the API server answers 409 Conflict instead of
// applying a change computed from an old template.
func (c *Controller) patchTarget(ctx context.Context, w *workload, container string, changes []resourceChange, setLimits bool) error {
	body, err := resizePatch(w.resourceVersion, container, changes, setLimits)
	if err != nil {
		return err
	}
	writes.WithLabelValues(writeTarget).Inc()
	apps := c.kubeClient.AppsV1()
	opts := metav1.PatchOptions{FieldManager: fieldManager}
	var patched metav1.Object
	switch w.kind {
	case scaleplanev1alpha1.TargetKindDeployment:
		patched, err = apps.Deployments(w.namespace).Patch(ctx, w.name, types.StrategicMergePatchType, body, opts)
	case scaleplanev1alpha1.TargetKindStatefulSet:
		patched, err = apps.StatefulSets(w.namespace).Patch(ctx, w.name, types.StrategicMergePatchType, body, opts)
	case scaleplanev1alpha1.TargetKindDaemonSet:
		patched, err = apps.DaemonSets(w.namespace).Patch(ctx, w.name, types.StrategicMergePatchType, body, opts)
	default:
		err = errUnsupportedKind{kind: w.kind}
	}
	if err != nil {
		return err
	}
	c.patched.wrote(targetKey(w.namespace, w.kind, w.name), patched.GetUID(), patched.GetGeneration())
	return nil
}

// The shape of the patch, spelled out so that it cannot carry more than
// the one container's managed resources.
type (
	resizePatchBody struct {
		Metadata patchMetadata `json:"metadata"`
		Spec     patchSpec     `json:"spec"`
	}
	patchMetadata struct {
		ResourceVersion string `json:"resourceVersion"`
	}
	patchSpec struct {
		Template patchTemplate `json:"template"`
	}
	patchTemplate struct {
		Spec patchPodSpec `json:"spec"`
	}
	patchPodSpec struct {
		Containers []patchContainer `json:"containers"`
	}
	patchContainer struct {
		Name      string         `json:"name"`
		Resources patchResources `json:"resources"`
	}
	patchResources struct {
		Requests corev1.ResourceList `json:"requests,omitempty"`
		Limits   corev1.ResourceList `json:"limits,omitempty"`
	}
)

func resizePatch(resourceVersion, container string, changes []resourceChange, setLimits bool) ([]byte, error) {
	res := patchResources{Requests: corev1.ResourceList{}}
	if setLimits {
		res.Limits = corev1.ResourceList{}
	}
	for _, ch := range changes {
		res.Requests[ch.name] = ch.to
		if setLimits {
			res.Limits[ch.name] = ch.to
		}
	}
	body := resizePatchBody{
		Metadata: patchMetadata{ResourceVersion: resourceVersion},
		Spec: patchSpec{Template: patchTemplate{Spec: patchPodSpec{
			Containers: []patchContainer{{Name: container, Resources: res}},
		}}},
	}
	out, err := json.Marshal(body)
	if err != nil {
		return nil, fmt.Errorf("encoding the patch: %w", err)
	}
	return out, nil
}

// isGone reports whether err says the target is not there.
func isGone(err error) bool {
	var unsupported errUnsupportedKind
	return apierrors.IsNotFound(err) || errors.As(err, &unsupported)
}

// patchedGenerations remembers the generation of each workload this process
// patched until the cache shows it. A sync that runs before the cache has
// caught up (the AddonResizer's own status write enqueues one at once)
// would see the old resources and decide the same resize again: it would
// start a delay that is not due, or send a patch bound to conflict.
type patchedGenerations struct {
	mu sync.Mutex
	m  map[string]patchedGeneration
}

type patchedGeneration struct {
	uid        types.UID
	generation int64
}

func newPatchedGenerations() *patchedGenerations {
	return &patchedGenerations{m: map[string]patchedGeneration{}}
}

func (p *patchedGenerations) wrote(key string, uid types.UID, generation int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.m[key] = patchedGeneration{uid: uid, generation: generation}
}

// behind reports whether the cached workload is older than the one this
// process wrote. Once the cache caught up, or the workload was re-created,
// the memory is dropped.
func (p *patchedGenerations) behind(w *workload) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	key := targetKey(w.namespace, w.kind, w.name)
	g, ok := p.m[key]
	if !ok {
		return false
	}
	if g.uid == w.uid && w.generation < g.generation {
		return true
	}
	delete(p.m, key)
	return false
}
