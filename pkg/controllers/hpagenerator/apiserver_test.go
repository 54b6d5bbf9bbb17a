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
	"encoding/json"
	"fmt"
	"strconv"
	"sync"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	kubefake "k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"
)

// apiserver models what kube-apiserver does to HPA writes that matters here:
// a JSON round trip (omitempty, canonical quantities), its defaults, UIDs,
// resourceVersions with optimistic concurrency, status kept on update, the
// writer's field manager in managedFields, and the UID and resourceVersion
// preconditions of delete. createErr, when set, fails creates (and
// updateErr updates); dropTolerance plays a server that does not keep
// behavior's tolerance (the HPAConfigurableTolerance gate off).
type apiserver struct {
	mu            sync.Mutex
	kube          *kubefake.Clientset
	rv            int
	uids          int
	createErr     error
	updateErr     error
	dropTolerance bool
}

func newAPIServer(kube *kubefake.Clientset) *apiserver {
	s := &apiserver{kube: kube, rv: 100}
	kube.PrependReactor("*", "horizontalpodautoscalers", s.react)
	return s
}

func (s *apiserver) react(action clienttesting.Action) (bool, runtime.Object, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	tracker := s.kube.Tracker()
	// Switch on the verb: create and update actions have the same methods.
	switch action.GetVerb() {
	case "create":
		a := action.(clienttesting.CreateAction)
		if s.createErr != nil {
			return true, nil, s.createErr
		}
		hpa := s.stored(a.GetObject().(*autoscalingv2.HorizontalPodAutoscaler))
		recordManager(hpa, action.(clienttesting.CreateActionImpl).GetCreateOptions().FieldManager)
		if _, err := tracker.Get(hpaResource, a.GetNamespace(), hpa.Name); err == nil {
			return true, nil, apierrors.NewAlreadyExists(hpaResource.GroupResource(), hpa.Name)
		}
		s.uids++
		hpa.UID = types.UID(fmt.Sprintf("hpa-uid-%d", s.uids))
		hpa.ResourceVersion = s.nextRV()
		hpa.Status = autoscalingv2.HorizontalPodAutoscalerStatus{}
		return true, hpa, tracker.Create(hpaResource, hpa, a.GetNamespace())
	case "update":
		a := action.(clienttesting.UpdateAction)
		if s.updateErr != nil && a.GetSubresource() == "" {
			return true, nil, s.updateErr
		}
		hpa := s.stored(a.GetObject().(*autoscalingv2.HorizontalPodAutoscaler))
		recordManager(hpa, action.(clienttesting.UpdateActionImpl).GetUpdateOptions().FieldManager)
		obj, err := tracker.Get(hpaResource, a.GetNamespace(), hpa.Name)
		if err != nil {
			return true, nil, err
		}
		old := obj.(*autoscalingv2.HorizontalPodAutoscaler)
		if hpa.ResourceVersion != old.ResourceVersion {
			return true, nil, apierrors.NewConflict(hpaResource.GroupResource(), hpa.Name, fmt.Errorf("resourceVersion %s is not %s", hpa.ResourceVersion, old.ResourceVersion))
		}
		hpa.UID = old.UID
		if a.GetSubresource() == "status" {
			old.Status = hpa.Status
			hpa = old
		} else {
			hpa.Status = old.Status
		}
		hpa.ResourceVersion = s.nextRV()
		return true, hpa, tracker.Update(hpaResource, hpa, a.GetNamespace())
	case "delete":
		a := action.(clienttesting.DeleteAction)
		obj, err := tracker.Get(hpaResource, a.GetNamespace(), a.GetName())
		if err != nil {
			return true, nil, err
		}
		have := obj.(*autoscalingv2.HorizontalPodAutoscaler)
		if pre := a.GetDeleteOptions().Preconditions; pre != nil {
			if pre.UID != nil && *pre.UID != have.UID {
				return true, nil, apierrors.NewConflict(hpaResource.GroupResource(), a.GetName(), fmt.Errorf("precondition failed: UID in precondition: %s", *pre.UID))
			}
			if pre.ResourceVersion != nil && *pre.ResourceVersion != have.ResourceVersion {
				return true, nil, apierrors.NewConflict(hpaResource.GroupResource(), a.GetName(), fmt.Errorf("precondition failed: ResourceVersion in precondition: %s", *pre.ResourceVersion))
			}
		}
		return true, nil, tracker.Delete(hpaResource, a.GetNamespace(), a.GetName())
	}
	return false, nil, nil
}

func (s *apiserver) nextRV() string {
	s.rv++
	return strconv.Itoa(s.rv)
}

// recordManager adds the writer's field manager to managedFields, as the
// apiserver does (without the field sets, which nothing here reads).
func recordManager(hpa *autoscalingv2.HorizontalPodAutoscaler, manager string) {
	if manager == "" {
		return
	}
	for _, e := range hpa.ManagedFields {
		if e.Manager == manager {
			return
		}
	}
	hpa.ManagedFields = append(hpa.ManagedFields, metav1.ManagedFieldsEntry{Manager: manager, Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "autoscaling/v2"})
}

// stored is the package's stored, with what this server drops dropped.
func (s *apiserver) stored(in *autoscalingv2.HorizontalPodAutoscaler) *autoscalingv2.HorizontalPodAutoscaler {
	out := stored(in)
	if b := out.Spec.Behavior; s.dropTolerance && b != nil {
		for _, rules := range []*autoscalingv2.HPAScalingRules{b.ScaleUp, b.ScaleDown} {
			if rules != nil {
				rules.Tolerance = nil
			}
		}
	}
	return out
}

// stored returns the HPA as kube-apiserver would store it: through JSON, then
// defaulted. The defaults are written out here independently of the
// controller's withDefaults, from the apiserver's documented behaviour.
func stored(in *autoscalingv2.HorizontalPodAutoscaler) *autoscalingv2.HorizontalPodAutoscaler {
	data, err := json.Marshal(in)
	if err != nil {
		panic(err)
	}
	out := &autoscalingv2.HorizontalPodAutoscaler{}
	if err := json.Unmarshal(data, out); err != nil {
		panic(err)
	}
	spec := &out.Spec
	if spec.MinReplicas == nil {
		spec.MinReplicas = ptr.To[int32](1)
	}
	if len(spec.Metrics) == 0 {
		spec.Metrics = []autoscalingv2.MetricSpec{cpuMetric(80)}
	}
	if b := spec.Behavior; b != nil {
		if b.ScaleUp == nil {
			b.ScaleUp = &autoscalingv2.HPAScalingRules{}
		}
		if b.ScaleUp.StabilizationWindowSeconds == nil {
			b.ScaleUp.StabilizationWindowSeconds = ptr.To[int32](0)
		}
		if b.ScaleUp.SelectPolicy == nil {
			b.ScaleUp.SelectPolicy = ptr.To(autoscalingv2.MaxChangePolicySelect)
		}
		if b.ScaleUp.Policies == nil {
			b.ScaleUp.Policies = []autoscalingv2.HPAScalingPolicy{
				{Type: autoscalingv2.PodsScalingPolicy, Value: 4, PeriodSeconds: 15},
				{Type: autoscalingv2.PercentScalingPolicy, Value: 100, PeriodSeconds: 15},
			}
		}
		if b.ScaleDown == nil {
			b.ScaleDown = &autoscalingv2.HPAScalingRules{}
		}
		// The scale-down window stays unset: the HPA controller's flag.
		if b.ScaleDown.SelectPolicy == nil {
			b.ScaleDown.SelectPolicy = ptr.To(autoscalingv2.MaxChangePolicySelect)
		}
		if b.ScaleDown.Policies == nil {
			b.ScaleDown.Policies = []autoscalingv2.HPAScalingPolicy{
				{Type: autoscalingv2.PercentScalingPolicy, Value: 100, PeriodSeconds: 15},
			}
		}
	}
	return out
}
