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

package cronscaler

import (
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/scaleplane/scaleplane/pkg/scaletarget"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/cache"

	autoscalingv1alpha1 "github.com/scaleplane/scaleplane/pkg/apis/autoscaling/v1alpha1"
)

// A firing that sets the replicas of a workload an HPA or FederatedHPA also
// scales is undone by that autoscaler at its next sync (15 s for an HPA),
// and the two fight at every slot; Karmada's documentation calls it
// unexpected and leaves it to the user. The cron-scaler applies the firing
// all the same (the user asked for it), and says so: a Warning event
// AutoscalerConflict naming the autoscaler and what to target instead (its
// bounds, or a LeaderWorkerSet's scalePolicy), at most every
// conflictReportInterval per object, and the gauge
// cron_scaler_autoscaler_conflicts. The autoscalers are found through an
// index of the shared HPA and FederatedHPA informers by what they scale
// (pkg/scaletarget, shared with the hpa-generator).

// conflictReportInterval bounds the AutoscalerConflict events per object.
const conflictReportInterval = 6 * time.Hour

// autoscalers finds the HPAs and FederatedHPAs that scale a target.
type autoscalers struct {
	indexers []cache.Indexer
	kinds    []string

	mu sync.Mutex
	// reported is when each object's conflict was last reported; an
	// object is in it while its last firing conflicted.
	reported map[cache.ObjectName]time.Time
}

// add indexes an autoscaler informer, of the kind named, by scale target.
func (a *autoscalers) add(informer cache.SharedIndexInformer, kind string) error {
	if err := scaletarget.AddIndex(informer); err != nil {
		return fmt.Errorf("indexing %ss: %w", kind, err)
	}
	a.indexers = append(a.indexers, informer.GetIndexer())
	a.kinds = append(a.kinds, kind)
	return nil
}

// of returns "Kind/name" of every autoscaler that scales t in namespace.
func (a *autoscalers) of(namespace string, t target) []string {
	var out []string
	key := scaletarget.Key(namespace, t.gv.Group, t.ref.Kind, t.ref.Name)
	for i, indexer := range a.indexers {
		objs, _ := indexer.ByIndex(scaletarget.Index, key)
		for _, obj := range objs {
			if m, ok := obj.(interface{ GetName() string }); ok {
				out = append(out, a.kinds[i]+"/"+m.GetName())
			}
		}
	}
	sort.Strings(out)
	return out
}

// conflict records that the object's firing conflicts, and says whether to
// report it now.
func (a *autoscalers) conflict(key cache.ObjectName, now time.Time) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.reported == nil {
		a.reported = map[cache.ObjectName]time.Time{}
	}
	last, ok := a.reported[key]
	if ok && now.Sub(last) < conflictReportInterval {
		return false
	}
	a.reported[key] = now
	autoscalerConflicts.Set(float64(len(a.reported)))
	return true
}

// clear forgets the object's conflict.
func (a *autoscalers) clear(key cache.ObjectName) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if _, ok := a.reported[key]; ok {
		delete(a.reported, key)
		autoscalerConflicts.Set(float64(len(a.reported)))
	}
}

// checkAutoscalers reports the autoscalers that will undo a firing setting
// t's replicas.
func (c *Controller) checkAutoscalers(obj *autoscalingv1alpha1.CronFederatedHPA, t target, v values) {
	key := cache.MetaObjectToName(obj)
	if v.replicas == nil || (t.kind != targetScale && t.kind != targetLeaderWorkerSet) {
		c.autoscalers.clear(key)
		return
	}
	others := c.autoscalers.of(obj.Namespace, t)
	if len(others) == 0 {
		c.autoscalers.clear(key)
		return
	}
	if !c.autoscalers.conflict(key, c.clock.Now()) {
		return
	}
	instead := "set targetMinReplicas/targetMaxReplicas on the autoscaler instead (a CronFederatedHPA can target it)"
	if t.kind == targetLeaderWorkerSet {
		instead = "set targetMinReplicas/targetMaxReplicas instead, aimed at the LeaderWorkerSet or at the autoscaler the hpa-generator keeps for it " +
			"(on Karmada, whose webhook admits them only for a FederatedHPA target, at the FederatedHPA): they move its scalePolicy's bounds, which the autoscaler follows"
	}
	verb := "also scales"
	if len(others) > 1 {
		verb = "also scale"
	}
	c.recorder.Eventf(obj, corev1.EventTypeWarning, reasonAutoscalerConflict,
		"%s %s %s and will undo targetReplicas at its next sync: the two fight at every slot; %s", strings.Join(others, ", "), verb, t, instead)
}
