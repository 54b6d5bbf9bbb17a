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

// The Karmada rendering oracle's world applied to the harness: members,
// placement, the template and the AddonResizers written through the fake
// clientsets, a controller restart, and the reactor that answers
// OverridePolicy writes as an API server does and injects the faults.

import (
	"fmt"
	"sort"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	clienttesting "k8s.io/client-go/testing"

	clusterv1alpha1 "github.com/scaleplane/scaleplane/pkg/apis/cluster/v1alpha1"
	policyv1alpha1 "github.com/scaleplane/scaleplane/pkg/apis/policy/v1alpha1"
	clusterlisters "github.com/scaleplane/scaleplane/pkg/generated/listers/cluster/v1alpha1"
	policylisters "github.com/scaleplane/scaleplane/pkg/generated/listers/policy/v1alpha1"
	worklisters "github.com/scaleplane/scaleplane/pkg/generated/listers/work/v1alpha2"
)

// Applying the world to the harness.

func (o *oracleRun) applyClusters() {
	var cs []*clusterv1alpha1.Cluster
	for _, n := range sortedKeys(o.clusters) {
		c := o.clusters[n]
		cl := member(n, c.total, c.total, c.ready)
		if !c.summary {
			cl.Status.NodeSummary = nil
		}
		cs = append(cs, cl)
	}
	o.k.setClusters(cs...)
	if len(o.placement) == 0 {
		o.k.setPlacement()
	} else {
		o.k.setPlacement(o.placement...)
	}
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func (o *oracleRun) applyTemplate() {
	d, err := o.k.kube.AppsV1().Deployments(ns).Get(o.k.ctx, addonName, metav1.GetOptions{})
	o.check1(err)
	d.Labels = map[string]string{addonLabel: addonName}
	d.Generation++
	d.Spec.Template.Spec.Containers = nil
	for _, c := range o.containers {
		d.Spec.Template.Spec.Containers = append(d.Spec.Template.Spec.Containers, corev1.Container{
			Name: c.name, Image: c.image,
			Resources: corev1.ResourceRequirements{Requests: c.req.DeepCopy(), Limits: c.lim.DeepCopy()},
		})
	}
	_, err = o.k.kube.AppsV1().Deployments(ns).Update(o.k.ctx, d, metav1.UpdateOptions{})
	o.check1(err)
	o.k.refresh()
}

func (o *oracleRun) createAR(a *oAR) {
	ar := addonResizer(a.name)
	ar.UID = a.uid()
	ar.Spec = *a.spec.DeepCopy()
	_, err := o.k.client.ScaleplaneV1alpha1().AddonResizers(ns).Create(o.k.ctx, ar, metav1.CreateOptions{})
	o.check1(err)
	o.k.refresh()
}

func (o *oracleRun) updateAR(a *oAR) {
	ar, err := o.k.client.ScaleplaneV1alpha1().AddonResizers(ns).Get(o.k.ctx, a.name, metav1.GetOptions{})
	o.check1(err)
	ar.Spec = *a.spec.DeepCopy()
	ar.Generation++
	_, err = o.k.client.ScaleplaneV1alpha1().AddonResizers(ns).Update(o.k.ctx, ar, metav1.UpdateOptions{})
	o.check1(err)
	o.k.refresh()
}

func (o *oracleRun) check1(err error) {
	o.t.Helper()
	if err != nil {
		o.t.Fatalf("step %d: %v", o.step, err)
	}
}

// restart builds a new controller, as a restarted process: state from
// status only, caches listed afresh.
func (o *oracleRun) restart() {
	o.k.newController()
	kc := o.k.harness.c.karmada
	kc.started = true
	kc.clusters = clusterlisters.NewClusterLister(o.k.clusters)
	kc.bindings = worklisters.NewResourceBindingLister(o.k.bindings)
	kc.policies = policylisters.NewOverridePolicyLister(o.k.policies)
}

// installReactor makes the fake clientset answer OverridePolicy writes as an
// API server does (resourceVersions and uids, 409 on a stale update or
// delete precondition, AlreadyExists) and injects the faults.
func (o *oracleRun) installReactor() {
	tracker := o.k.client.Tracker()
	gvr := policyv1alpha1.SchemeGroupVersion.WithResource("overridepolicies")
	gr := policyv1alpha1.Resource("overridepolicies")
	o.k.client.PrependReactor("*", "overridepolicies", func(action clienttesting.Action) (bool, runtime.Object, error) {
		verb := action.GetVerb()
		if verb != "create" && verb != "update" && verb != "delete" {
			return false, nil, nil
		}
		if o.forbid {
			o.faultFired = true
			return true, nil, apierrors.NewForbidden(gr, "", fmt.Errorf("RBAC: %s is not allowed", verb))
		}
		if o.failNext > 0 {
			o.failNext--
			o.faultFired = true
			return true, nil, apierrors.NewInternalError(fmt.Errorf("etcdserver: request timed out (injected, not applied)"))
		}
		lose := o.loseNext > 0
		if lose {
			o.loseNext--
		}
		obj, err := o.applyPolicyWrite(tracker, gvr, gr, action)
		if err == nil {
			o.applied++
		}
		if lose && err == nil {
			o.faultFired = true
			return true, nil, apierrors.NewTimeoutError("the write was applied, its answer lost (injected)", 1)
		}
		return true, obj, err
	})
}

func (o *oracleRun) applyPolicyWrite(tracker clienttesting.ObjectTracker, gvr schema.GroupVersionResource, gr schema.GroupResource, action clienttesting.Action) (runtime.Object, error) {
	// By verb: an UpdateAction is a CreateAction too, by its methods.
	switch action.GetVerb() {
	case "create":
		p := action.(clienttesting.CreateAction).GetObject().(*policyv1alpha1.OverridePolicy).DeepCopy()
		if _, err := tracker.Get(gvr, p.Namespace, p.Name); err == nil {
			return nil, apierrors.NewAlreadyExists(gr, p.Name)
		}
		o.rvCounter++
		o.uidCounter++
		p.ResourceVersion = strconv.Itoa(o.rvCounter)
		p.UID = types.UID(fmt.Sprintf("op-uid-%d", o.uidCounter))
		return p, tracker.Create(gvr, p, p.Namespace)
	case "update":
		p := action.(clienttesting.UpdateAction).GetObject().(*policyv1alpha1.OverridePolicy).DeepCopy()
		cur, err := tracker.Get(gvr, p.Namespace, p.Name)
		if err != nil {
			return nil, err
		}
		c := cur.(*policyv1alpha1.OverridePolicy)
		if p.ResourceVersion != "" && p.ResourceVersion != c.ResourceVersion {
			return nil, apierrors.NewConflict(gr, p.Name, fmt.Errorf("the object has been modified; please apply your changes to the latest version and try again"))
		}
		o.rvCounter++
		p.ResourceVersion = strconv.Itoa(o.rvCounter)
		p.UID = c.UID
		return p, tracker.Update(gvr, p, p.Namespace)
	case "delete":
		a := action.(clienttesting.DeleteAction)
		cur, err := tracker.Get(gvr, a.GetNamespace(), a.GetName())
		if err != nil {
			return nil, err
		}
		c := cur.(*policyv1alpha1.OverridePolicy)
		if pre := a.GetDeleteOptions().Preconditions; pre != nil && pre.UID != nil && *pre.UID != c.UID {
			return nil, apierrors.NewConflict(gr, c.Name, fmt.Errorf("precondition failed: UID in precondition: %s, UID in object meta: %s", *pre.UID, c.UID))
		}
		return nil, tracker.Delete(gvr, a.GetNamespace(), a.GetName())
	}
	return nil, fmt.Errorf("unexpected action %v", action)
}
