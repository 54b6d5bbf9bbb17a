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

package karmadainterpreter

import (
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
)

// PodRequirements is what Karmada's accuratePodRequirements computes for one
// pod of a template (helper.GenerateReplicaRequirements): the node claim of
// its node selector, tolerations and required node affinity, and its
// effective requests, or nil when it has neither.
//
// The effective requests follow Karmada's Resource.AddPodTemplateRequest:
// a container's limits stand in for the requests it does not set; the app
// containers are summed; every init container, restartable sidecars
// included, only raises a resource to its own request (the maximum, not the
// sum Kubernetes counts for sidecars); the pod overhead is added. CPU is
// kept in millicores, everything else is rounded up to whole units, and only
// cpu, memory, ephemeral-storage, pods and scalar resources (extended,
// hugepages-*, *kubernetes.io/*, attachable-volumes-*) are counted.
func PodRequirements(template *corev1.PodTemplateSpec) *ReplicaRequirements {
	claim := podNodeClaim(&template.Spec)
	request := podRequest(&template.Spec).list()
	if claim == nil && request == nil {
		return nil
	}
	return &ReplicaRequirements{NodeClaim: claim, ResourceRequest: request}
}

func podNodeClaim(spec *corev1.PodSpec) *NodeClaim {
	claim := &NodeClaim{NodeSelector: spec.NodeSelector, Tolerations: spec.Tolerations}
	if a := spec.Affinity; a != nil && a.NodeAffinity != nil && a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution != nil {
		claim.HardNodeAffinity = a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution
	}
	if claim.NodeSelector == nil && claim.HardNodeAffinity == nil && len(claim.Tolerations) == 0 {
		return nil
	}
	return claim
}

// amounts holds resources in Karmada's units: CPU in millicores, the rest in
// whole units.
type amounts struct {
	milliCPU, memory, ephemeralStorage, pods int64
	scalars                                  map[corev1.ResourceName]int64
}

func podRequest(spec *corev1.PodSpec) *amounts {
	a := &amounts{}
	for i := range spec.Containers {
		a.add(effectiveRequests(&spec.Containers[i]))
	}
	for i := range spec.InitContainers {
		a.raise(effectiveRequests(&spec.InitContainers[i]))
	}
	if spec.Overhead != nil {
		a.add(spec.Overhead)
	}
	return a
}

// effectiveRequests are a container's requests, each missing one taken from
// its limit.
func effectiveRequests(c *corev1.Container) corev1.ResourceList {
	if c.Resources.Limits == nil {
		return c.Resources.Requests
	}
	out := corev1.ResourceList{}
	for name, q := range c.Resources.Requests {
		out[name] = q
	}
	for name, q := range c.Resources.Limits {
		if _, ok := out[name]; !ok {
			out[name] = q
		}
	}
	return out
}

func (a *amounts) add(list corev1.ResourceList) {
	for name, q := range list {
		switch name {
		case corev1.ResourceCPU:
			a.milliCPU += q.MilliValue()
		case corev1.ResourceMemory:
			a.memory += q.Value()
		case corev1.ResourcePods:
			a.pods += q.Value()
		case corev1.ResourceEphemeralStorage:
			a.ephemeralStorage += q.Value()
		default:
			if isScalarResourceName(name) {
				a.setScalar(name, a.scalars[name]+q.Value())
			}
		}
	}
}

func (a *amounts) raise(list corev1.ResourceList) {
	for name, q := range list {
		switch name {
		case corev1.ResourceCPU:
			a.milliCPU = max(a.milliCPU, q.MilliValue())
		case corev1.ResourceMemory:
			a.memory = max(a.memory, q.Value())
		case corev1.ResourceEphemeralStorage:
			a.ephemeralStorage = max(a.ephemeralStorage, q.Value())
		case corev1.ResourcePods:
			a.pods = max(a.pods, q.Value())
		default:
			if isScalarResourceName(name) && q.Value() > a.scalars[name] {
				a.setScalar(name, q.Value())
			}
		}
	}
}

func (a *amounts) setScalar(name corev1.ResourceName, v int64) {
	if a.scalars == nil {
		a.scalars = map[corev1.ResourceName]int64{}
	}
	a.scalars[name] = v
}

// list is the amounts as a ResourceList with Karmada's formats, nil when
// nothing is positive.
func (a *amounts) list() corev1.ResourceList {
	out := corev1.ResourceList{}
	if a.milliCPU > 0 {
		out[corev1.ResourceCPU] = *resource.NewMilliQuantity(a.milliCPU, resource.DecimalSI)
	}
	if a.memory > 0 {
		out[corev1.ResourceMemory] = *resource.NewQuantity(a.memory, resource.BinarySI)
	}
	if a.ephemeralStorage > 0 {
		out[corev1.ResourceEphemeralStorage] = *resource.NewQuantity(a.ephemeralStorage, resource.BinarySI)
	}
	if a.pods > 0 {
		out[corev1.ResourcePods] = *resource.NewQuantity(a.pods, resource.DecimalSI)
	}
	for name, v := range a.scalars {
		if v <= 0 {
			continue
		}
		format := resource.DecimalSI
		if strings.HasPrefix(string(name), corev1.ResourceHugePagesPrefix) {
			format = resource.BinarySI
		}
		out[name] = *resource.NewQuantity(v, format)
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// isScalarResourceName: an extended resource, huge pages, a
// *kubernetes.io/ name or an attachable volume count.
func isScalarResourceName(name corev1.ResourceName) bool {
	s := string(name)
	return isExtendedResourceName(s) || strings.HasPrefix(s, corev1.ResourceHugePagesPrefix) ||
		strings.Contains(s, corev1.ResourceDefaultNamespacePrefix) || strings.HasPrefix(s, corev1.ResourceAttachableVolumesPrefix)
}

func isExtendedResourceName(s string) bool {
	native := !strings.Contains(s, "/") || strings.Contains(s, corev1.ResourceDefaultNamespacePrefix)
	if native || strings.HasPrefix(s, corev1.DefaultResourceRequestsPrefix) {
		return false
	}
	return len(validation.IsQualifiedName(corev1.DefaultResourceRequestsPrefix+s)) == 0
}

// PodDependencies is what Karmada's getPodDependencies reports for a pod
// spec in a namespace (helper.GetDependenciesFromPodTemplate): the
// ConfigMaps and Secrets its containers (init and ephemeral included) and
// volumes name, its image pull Secrets, its service account unless
// "default", and its PersistentVolumeClaims; nil when there are none.
// Karmada returns them in map order; they are sorted here.
func PodDependencies(spec *corev1.PodSpec, namespace string) []DependentObjectReference {
	configMaps, secrets, serviceAccounts, claims := sets.New[string](), sets.New[string](), sets.New[string](), sets.New[string]()
	for _, s := range spec.ImagePullSecrets {
		secrets.Insert(s.Name)
	}
	visit := func(c *corev1.Container) {
		for _, from := range c.EnvFrom {
			if from.ConfigMapRef != nil {
				configMaps.Insert(from.ConfigMapRef.Name)
			}
			if from.SecretRef != nil {
				secrets.Insert(from.SecretRef.Name)
			}
		}
		for _, env := range c.Env {
			if env.ValueFrom == nil {
				continue
			}
			if env.ValueFrom.ConfigMapKeyRef != nil {
				configMaps.Insert(env.ValueFrom.ConfigMapKeyRef.Name)
			}
			if env.ValueFrom.SecretKeyRef != nil {
				secrets.Insert(env.ValueFrom.SecretKeyRef.Name)
			}
		}
	}
	for i := range spec.InitContainers {
		visit(&spec.InitContainers[i])
	}
	for i := range spec.Containers {
		visit(&spec.Containers[i])
	}
	for i := range spec.EphemeralContainers {
		visit((*corev1.Container)(&spec.EphemeralContainers[i].EphemeralContainerCommon))
	}
	for i := range spec.Volumes {
		volumeSecrets(&spec.Volumes[i].VolumeSource, secrets)
		src := &spec.Volumes[i].VolumeSource
		switch {
		case src.Projected != nil:
			for _, p := range src.Projected.Sources {
				if p.ConfigMap != nil {
					configMaps.Insert(p.ConfigMap.Name)
				}
			}
		case src.ConfigMap != nil:
			configMaps.Insert(src.ConfigMap.Name)
		}
		if src.PersistentVolumeClaim != nil {
			claims.Insert(src.PersistentVolumeClaim.ClaimName)
		}
	}
	if spec.ServiceAccountName != "default" {
		serviceAccounts.Insert(spec.ServiceAccountName)
	}
	var refs []DependentObjectReference
	for _, kind := range []struct {
		kind  string
		names sets.Set[string]
	}{{"ConfigMap", configMaps}, {"Secret", secrets}, {"ServiceAccount", serviceAccounts}, {"PersistentVolumeClaim", claims}} {
		for _, name := range sets.List(kind.names) {
			if name == "" {
				continue // Karmada skips empty names
			}
			refs = append(refs, DependentObjectReference{APIVersion: "v1", Kind: kind.kind, Namespace: namespace, Name: name})
		}
	}
	return refs
}

// volumeSecrets adds the Secret a volume source names, if any.
func volumeSecrets(src *corev1.VolumeSource, secrets sets.Set[string]) {
	switch {
	case src.AzureFile != nil:
		secrets.Insert(src.AzureFile.SecretName)
	case src.CephFS != nil:
		if src.CephFS.SecretRef != nil {
			secrets.Insert(src.CephFS.SecretRef.Name)
		}
	case src.Cinder != nil:
		if src.Cinder.SecretRef != nil {
			secrets.Insert(src.Cinder.SecretRef.Name)
		}
	case src.FlexVolume != nil:
		if src.FlexVolume.SecretRef != nil {
			secrets.Insert(src.FlexVolume.SecretRef.Name)
		}
	case src.Projected != nil:
		for _, p := range src.Projected.Sources {
			if p.Secret != nil {
				secrets.Insert(p.Secret.Name)
			}
		}
	case src.RBD != nil:
		if src.RBD.SecretRef != nil {
			secrets.Insert(src.RBD.SecretRef.Name)
		}
	case src.Secret != nil:
		secrets.Insert(src.Secret.SecretName)
	case src.ScaleIO != nil:
		if src.ScaleIO.SecretRef != nil {
			secrets.Insert(src.ScaleIO.SecretRef.Name)
		}
	case src.ISCSI != nil:
		if src.ISCSI.SecretRef != nil {
			secrets.Insert(src.ISCSI.SecretRef.Name)
		}
	case src.StorageOS != nil:
		if src.StorageOS.SecretRef != nil {
			secrets.Insert(src.StorageOS.SecretRef.Name)
		}
	case src.CSI != nil:
		if src.CSI.NodePublishSecretRef != nil {
			secrets.Insert(src.CSI.NodePublishSecretRef.Name)
		}
	}
}
