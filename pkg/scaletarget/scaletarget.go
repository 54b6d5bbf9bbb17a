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

// Package scaletarget indexes autoscalers (HorizontalPodAutoscalers and
// FederatedHPAs) by the object they scale, in their shared informers: the
// hpa-generator finds the HPAs that target a LeaderWorkerSet, and the
// cron-scaler the autoscalers that would undo a firing, by a lookup instead
// of a scan of every autoscaler.
package scaletarget

import (
	"fmt"
	"sync"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/cache"

	autoscalingv1alpha1 "github.com/scaleplane/scaleplane/pkg/apis/autoscaling/v1alpha1"
)

// Index is the name of the index.
const Index = "scaleplane.io/scale-target"

// Key is the index value of what ref names in namespace:
// namespace/group/Kind/name. The version is left out on purpose: two
// versions of a group name the same object.
func Key(namespace, group, kind, name string) string {
	return namespace + "/" + group + "/" + kind + "/" + name
}

// KeyOf is Key of a scaleTargetRef; ok is false when its apiVersion does not
// parse (such an autoscaler can scale nothing).
func KeyOf(namespace string, ref autoscalingv2.CrossVersionObjectReference) (key string, ok bool) {
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	if err != nil {
		return "", false
	}
	return Key(namespace, gv.Group, ref.Kind, ref.Name), true
}

// IndexFunc indexes an HPA or a FederatedHPA under its scale target.
func IndexFunc(obj any) ([]string, error) {
	var namespace string
	var ref autoscalingv2.CrossVersionObjectReference
	switch a := obj.(type) {
	case *autoscalingv2.HorizontalPodAutoscaler:
		namespace, ref = a.Namespace, a.Spec.ScaleTargetRef
	case *autoscalingv1alpha1.FederatedHPA:
		namespace, ref = a.Namespace, a.Spec.ScaleTargetRef
	default:
		return nil, nil
	}
	if key, ok := KeyOf(namespace, ref); ok {
		return []string{key}, nil
	}
	return nil, nil
}

// AddIndex adds the index to a shared autoscaler informer, once: every
// controller built on the same informer uses the same index. The controller
// manager builds its controllers at once, each on its own goroutine, and the
// cron-scaler and the hpa-generator share the HPA informer: the check and
// the add are one step under addIndexMu, or both controllers could find no
// index and the second add fail with an indexer conflict, leaving that
// controller unstarted.
func AddIndex(informer cache.SharedIndexInformer) error {
	addIndexMu.Lock()
	defer addIndexMu.Unlock()
	if _, ok := informer.GetIndexer().GetIndexers()[Index]; ok {
		return nil
	}
	if err := informer.AddIndexers(cache.Indexers{Index: IndexFunc}); err != nil {
		return fmt.Errorf("adding the scale target index: %w", err)
	}
	return nil
}

// addIndexMu makes AddIndex's check and add one step (see AddIndex).
var addIndexMu sync.Mutex
