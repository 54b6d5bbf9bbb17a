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
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"syscall"
	"time"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	kubefake "k8s.io/client-go/kubernetes/fake"
	metadatafake "k8s.io/client-go/metadata/fake"
	scalefake "k8s.io/client-go/scale/fake"
	clienttesting "k8s.io/client-go/testing"

	autoscalingv1alpha1 "github.com/scaleplane/scaleplane/pkg/apis/autoscaling/v1alpha1"
	lwsv1 "github.com/scaleplane/scaleplane/pkg/apis/leaderworkerset/v1"
	"github.com/scaleplane/scaleplane/pkg/generated/clientset/versioned/fake"
)

// The simulated apiserver's answers to the processes' requests, with the
// faults in force (the model they act on: sim_server_test.go).

// Errors of requests that get no answer.
var (
	errRefused  = &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
	errReset    = &net.OpError{Op: "read", Net: "tcp", Err: os.NewSyscallError("read", syscall.ECONNRESET)}
	errTimedOut = apierrors.NewTimeoutError("etcdserver: request timed out", 0)
)

// clients returns the clients of process p, answered by the server.
func (srv *simServer) clients(p *simProc) (*fake.Clientset, *kubefake.Clientset, *scalefake.FakeScaleClient, *metadatafake.FakeMetadataClient) {
	client := fake.NewSimpleClientset()
	client.PrependReactor("*", "*", srv.react(p, false))
	kube := kubefake.NewSimpleClientset()
	kube.PrependReactor("*", "*", srv.react(p, false))
	scales := &scalefake.FakeScaleClient{}
	scales.AddReactor("*", "*", srv.react(p, false))
	meta := metadatafake.NewSimpleMetadataClient(runtime.NewScheme())
	meta.PrependReactor("*", "*", srv.react(p, true))
	return client, kube, scales, meta
}

// react answers a request of process p, with the faults in force; metadata
// says it is p's metadata client.
func (srv *simServer) react(p *simProc, metadata bool) clienttesting.ReactionFunc {
	answer := srv.answer(p, metadata)
	if !*simTrace {
		return answer
	}
	return func(action clienttesting.Action) (bool, runtime.Object, error) {
		handled, obj, err := answer(action)
		fmt.Printf("request %s p%d %s %s/%s: %v\n", srv.s.clock.Now().UTC().Format(time.RFC3339Nano), p.id,
			action.GetVerb(), action.GetResource().Resource, action.GetSubresource(), err)
		return handled, obj, err
	}
}

// answer is react without the trace.
func (srv *simServer) answer(p *simProc, metadata bool) clienttesting.ReactionFunc {
	return func(action clienttesting.Action) (bool, runtime.Object, error) {
		srv.mu.Lock()
		defer srv.mu.Unlock()
		s := srv.s
		now := s.clock.Now()
		write := action.GetVerb() != "get" && action.GetVerb() != "list"
		switch {
		case p.dead:
			return true, nil, errRefused
		case p.cancelled:
			return true, nil, context.Canceled
		case s.scenario.outage(now):
			s.stats.refused++
			return true, nil, errRefused
		case p.crashInRequest(now):
			// The process dies inside the request: the write commits or
			// not, and nobody reads the answer.
			if write && s.rng.IntN(2) == 0 {
				_, _ = srv.serve(p, action, metadata)
			}
			p.die(now)
			s.stats.crashesInRequest++
			return true, nil, errReset
		}
		if handled, obj, err := srv.modelFault(p, action, metadata, write, now); handled {
			return true, obj, err
		}
		if f := s.scenario.flaky(now); f != nil {
			r := s.rng.Float64()
			switch {
			case r < f.fail:
				s.stats.failed++
				return true, nil, apierrors.NewInternalError(fmt.Errorf("simulated: %w", errTimedOut))
			case r < f.fail+f.lost && write:
				srv.answerLost = true
				obj, err := srv.serve(p, action, metadata)
				srv.answerLost = false
				s.stats.lost++
				if u, ok := obj.(interface{ GetUID() types.UID }); ok && err == nil && action.GetSubresource() == "status" {
					srv.lostStatus = append(srv.lostStatus, lostWrite{at: now, proc: p, uid: u.GetUID()})
				}
				if err == nil && obj != nil {
					if s.rng.IntN(2) == 0 {
						return true, nil, errReset
					}
					return true, nil, errTimedOut
				}
				return true, obj, err
			}
		}
		obj, err := srv.serve(p, action, metadata)
		return true, obj, err
	}
}

// serve answers a request as the apiserver does.
func (srv *simServer) serve(p *simProc, action clienttesting.Action, metadata bool) (runtime.Object, error) {
	res := action.GetResource()
	gr := res.GroupResource()
	verb, sub := action.GetVerb(), action.GetSubresource()
	name := ""
	if a, ok := action.(interface{ GetName() string }); ok {
		name = a.GetName()
	}
	switch {
	case metadata && verb == "get" && res.Resource == "deployments":
		return srv.metadataOf(simTarget("Deployment/"+name), name), nil
	case metadata && verb == "get" && res.Resource == "leaderworkersets":
		return srv.metadataOf(simTarget("LeaderWorkerSet/"+name), name), nil
	case res.Resource == "cronfederatedhpas" && verb == "get":
		obj, ok := srv.crons[name]
		if !ok {
			return nil, apierrors.NewNotFound(gr, name)
		}
		return obj.DeepCopy(), nil
	case res.Resource == "cronfederatedhpas" && verb == "update":
		return srv.updateCron(p, action.(clienttesting.UpdateAction), gr)
	case res.Resource == "federatedhpas" && verb == "get":
		h := srv.fhpas[name].DeepCopy()
		h.ManagedFields = srv.managedFields(simTarget("FederatedHPA/" + name))
		return h, nil
	case res.Resource == "horizontalpodautoscalers" && verb == "get":
		h := srv.hpas[name].DeepCopy()
		h.ManagedFields = srv.managedFields(simTarget("HorizontalPodAutoscaler/" + name))
		return h, nil
	case res.Resource == "leaderworkersets" && verb == "get":
		l := srv.lwss[name].DeepCopy()
		l.ManagedFields = srv.managedFields(simTarget("LeaderWorkerSet/" + name))
		return l, nil
	case verb == "update" && (res.Resource == "federatedhpas" || res.Resource == "horizontalpodautoscalers" || res.Resource == "leaderworkersets"):
		return srv.updateTarget(p, action.(clienttesting.UpdateAction), gr)
	case verb == "patch" && sub == "scale":
		return srv.patchScale(p, action.(clienttesting.PatchAction), gr)
	}
	return nil, apierrors.NewBadRequest(fmt.Sprintf("simulated apiserver: unexpected %s %s/%s %s", verb, res.Resource, sub, name))
}

func (srv *simServer) metadataOf(t simTarget, name string) runtime.Object {
	return &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, ManagedFields: srv.managedFields(t)}}
}

func (srv *simServer) updateCron(p *simProc, update clienttesting.UpdateAction, gr schema.GroupResource) (runtime.Object, error) {
	obj := update.GetObject().(*autoscalingv1alpha1.CronFederatedHPA)
	stored, ok := srv.crons[obj.Name]
	if !ok {
		return nil, apierrors.NewNotFound(gr, obj.Name)
	}
	if obj.ResourceVersion != "" && obj.ResourceVersion != stored.ResourceVersion {
		return nil, apierrors.NewConflict(gr, obj.Name, fmt.Errorf("the object has been modified; please apply your changes to the latest version and try again"))
	}
	if update.GetSubresource() != "status" {
		return nil, apierrors.NewBadRequest("simulated apiserver: the cron-scaler does not write a CronFederatedHPA's spec")
	}
	if sameStatus(obj.Status, stored.Status) {
		return stored.DeepCopy(), nil
	}
	next := stored.DeepCopy()
	next.Status = *normalizeStored(obj.Status)
	next.ResourceVersion = srv.nextRV()
	now := srv.s.clock.Now()
	manager := update.(clienttesting.UpdateActionImpl).UpdateOptions.FieldManager
	touchManagedFields(&next.ObjectMeta, manager, "status", now)
	srv.commitCron(next.Name, next, false)
	srv.statuses = append(srv.statuses, statusCommit{at: now, uid: next.UID, name: next.Name, manager: manager, status: *next.Status.DeepCopy()})
	return next.DeepCopy(), nil
}

// normalizeStored is status as the apiserver stores it: times in seconds.
func normalizeStored(s autoscalingv1alpha1.CronFederatedHPAStatus) *autoscalingv1alpha1.CronFederatedHPAStatus {
	out := normalize(s)
	return &out
}

func (srv *simServer) updateTarget(p *simProc, update clienttesting.UpdateAction, gr schema.GroupResource) (runtime.Object, error) {
	manager := update.(clienttesting.UpdateActionImpl).UpdateOptions.FieldManager
	var t simTarget
	var rv string
	var min *int32
	var max int32
	var replicas *int32
	switch obj := update.GetObject().(type) {
	case *autoscalingv2.HorizontalPodAutoscaler:
		t, rv, min, max = simTarget("HorizontalPodAutoscaler/"+obj.Name), srv.hpas[obj.Name].ResourceVersion, obj.Spec.MinReplicas, obj.Spec.MaxReplicas
		if obj.ResourceVersion != rv {
			return nil, apierrors.NewConflict(gr, obj.Name, fmt.Errorf("the object has been modified"))
		}
	case *autoscalingv1alpha1.FederatedHPA:
		t, rv, min, max = simTarget("FederatedHPA/"+obj.Name), srv.fhpas[obj.Name].ResourceVersion, obj.Spec.MinReplicas, obj.Spec.MaxReplicas
		if obj.ResourceVersion != rv {
			return nil, apierrors.NewConflict(gr, obj.Name, fmt.Errorf("the object has been modified"))
		}
	case *lwsv1.LeaderWorkerSet:
		t, rv = simTarget("LeaderWorkerSet/"+obj.Name), srv.lwss[obj.Name].ResourceVersion
		if obj.ResourceVersion != rv {
			return nil, apierrors.NewConflict(gr, obj.Name, fmt.Errorf("the object has been modified"))
		}
		min, max, replicas = obj.Spec.ScalePolicy.MinReplicas, obj.Spec.ScalePolicy.MaxReplicas, obj.Spec.Replicas
	default:
		return nil, apierrors.NewBadRequest("simulated apiserver: unexpected update")
	}
	if replicas != nil {
		srv.setValue(t, fieldReplicas, *replicas, manager, "", p)
	}
	if min != nil {
		srv.setValue(t, fieldMin, *min, manager, "", p)
	}
	srv.setValue(t, fieldMax, max, manager, "", p)
	switch t.kind() {
	case "HorizontalPodAutoscaler":
		return srv.hpas[t.name()].DeepCopy(), nil
	case "FederatedHPA":
		return srv.fhpas[t.name()].DeepCopy(), nil
	}
	return srv.lwss[t.name()].DeepCopy(), nil
}

func (srv *simServer) patchScale(p *simProc, patch clienttesting.PatchAction, gr schema.GroupResource) (runtime.Object, error) {
	var body struct {
		Spec struct {
			Replicas *int32 `json:"replicas"`
		} `json:"spec"`
	}
	if err := json.Unmarshal(patch.GetPatch(), &body); err != nil || body.Spec.Replicas == nil {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("patch %s does not set spec.replicas", patch.GetPatch()))
	}
	var t simTarget
	switch patch.GetResource().Resource {
	case "deployments":
		t = simTarget("Deployment/" + patch.GetName())
	case "leaderworkersets":
		t = simTarget("LeaderWorkerSet/" + patch.GetName())
	default:
		return nil, apierrors.NewNotFound(gr, patch.GetName())
	}
	// The fake scale client drops the patch options: every scale patch
	// the clients send is the cron-scaler's.
	srv.setValue(t, fieldReplicas, *body.Spec.Replicas, FieldManager, "scale", p)
	sc := &autoscalingv1.Scale{ObjectMeta: metav1.ObjectMeta{Name: patch.GetName(), Namespace: ns}}
	sc.Spec.Replicas = *body.Spec.Replicas
	return sc, nil
}
