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
	"fmt"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/cache"
)

// scaleTargetIndex indexes HPAs by what they scale, so that finding the HPAs
// that target a LeaderWorkerSet is a lookup, not a scan of every HPA.
const scaleTargetIndex = "hpagenerator.scaleplane.io/scale-target"

// scaleTargetKey is the index value of a scale target:
// namespace/group/Kind/name. The version is left out on purpose: two
// versions of a group name the same object.
func scaleTargetKey(namespace, group, kind, name string) string {
	return namespace + "/" + group + "/" + kind + "/" + name
}

// scaleTargetIndexFunc indexes an HPA under its scale target. An HPA whose
// apiVersion does not parse targets nothing (the HPA controller cannot scale
// it either).
func scaleTargetIndexFunc(obj any) ([]string, error) {
	hpa, ok := obj.(*autoscalingv2.HorizontalPodAutoscaler)
	if !ok {
		return nil, nil
	}
	ref := hpa.Spec.ScaleTargetRef
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	if err != nil {
		return nil, nil
	}
	return []string{scaleTargetKey(hpa.Namespace, gv.Group, ref.Kind, ref.Name)}, nil
}

// addScaleTargetIndex adds the index to the shared HPA informer, once: a
// second controller built on the same informer (tests, a restarted
// controller in the same process) reuses it.
func addScaleTargetIndex(informer cache.SharedIndexInformer) error {
	if _, ok := informer.GetIndexer().GetIndexers()[scaleTargetIndex]; ok {
		return nil
	}
	if err := informer.AddIndexers(cache.Indexers{scaleTargetIndex: scaleTargetIndexFunc}); err != nil {
		return fmt.Errorf("adding the scale target index to the HorizontalPodAutoscaler informer: %w", err)
	}
	return nil
}

// lwsTarget returns the name of the LeaderWorkerSet the HPA scales, if it
// scales one.
func lwsTarget(hpa *autoscalingv2.HorizontalPodAutoscaler) (string, bool) {
	ref := hpa.Spec.ScaleTargetRef
	if !isLWSRef(ref.APIVersion, ref.Kind) {
		return "", false
	}
	return ref.Name, true
}
