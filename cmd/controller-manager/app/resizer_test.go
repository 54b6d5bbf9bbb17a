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
	"reflect"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	kubeinformers "k8s.io/client-go/informers"
	kubefake "k8s.io/client-go/kubernetes/fake"
	metadatafake "k8s.io/client-go/metadata/fake"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2/ktesting"
	metricsfake "k8s.io/metrics/pkg/client/clientset/versioned/fake"
	"k8s.io/utils/clock"

	"github.com/scaleplane/scaleplane/cmd/controller-manager/app/options"
	"github.com/scaleplane/scaleplane/pkg/controllers/resizer"
	"github.com/scaleplane/scaleplane/pkg/generated/clientset/versioned/fake"
	"github.com/scaleplane/scaleplane/pkg/generated/informers/externalversions"
)

// The resizer is registered, on by default, and needs the AddonResizer
// resource: without the CRD the manager waits for it.
func TestResizerDescriptor(t *testing.T) {
	d, ok := NewControllerDescriptors()["resizer"]
	if !ok {
		t.Fatal("resizer is not in the registry")
	}
	if d.Name() != resizer.Name || d.IsDisabledByDefault() || len(d.Aliases()) != 0 {
		t.Errorf("descriptor: name %q, disabled by default %v, aliases %v", d.Name(), d.IsDisabledByDefault(), d.Aliases())
	}
	ars := schema.GroupVersionResource{Group: "autoscaling.scaleplane.io", Version: "v1alpha1", Resource: "addonresizers"}
	if got := d.RequiredResources(); !reflect.DeepEqual(got, []schema.GroupVersionResource{ars}) {
		t.Errorf("required resources = %v, want [%v]", got, ars)
	}
	missing, err := missingResources(discoveryWith(nil), d.RequiredResources())
	if err != nil || len(missing) != 1 || missing[0] != ars.String() {
		t.Errorf("without the CRD: missing = %v, %v; want [%s]", missing, err, ars)
	}
	missing, err = missingResources(discoveryWith(map[string][]string{"autoscaling.scaleplane.io/v1alpha1": {"addonresizers", "addonresizers/status"}}), d.RequiredResources())
	if err != nil || len(missing) != 0 {
		t.Errorf("with the CRD: missing = %v, %v; want none", missing, err)
	}
}

// The constructor builds the controller from the controller context and
// registers the workload informers with the shared factory; pods and nodes
// are not among them (the resizer starts those itself, when needed).
func TestResizerInit(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	kube := kubefake.NewClientset()
	client := fake.NewSimpleClientset()
	var recorderFor []string
	controllerCtx := ControllerContext{
		KubeClient:                kube,
		Client:                    client,
		MetadataClient:            metadatafake.NewSimpleMetadataClient(metadatafake.NewTestScheme()),
		MetricsClient:             metricsfake.NewSimpleClientset(),
		InformerFactory:           kubeinformers.NewSharedInformerFactory(kube, 0),
		ScaleplaneInformerFactory: externalversions.NewSharedInformerFactory(client, 0),
		EventRecorderFor: func(component string) record.EventRecorder {
			recorderFor = append(recorderFor, component)
			return record.NewFakeRecorder(10)
		},
		Clock:   clock.RealClock{},
		Options: options.NewOptions(),
	}
	c, err := NewControllerDescriptors()["resizer"].initFunc(ctx, controllerCtx)
	if err != nil {
		t.Fatalf("initFunc: %v", err)
	}
	if c.Name() != "resizer" {
		t.Errorf("controller name = %q", c.Name())
	}
	if !reflect.DeepEqual(recorderFor, []string{"resizer"}) {
		t.Errorf("event recorders asked for %v, want [resizer]", recorderFor)
	}
	controllerCtx.StartInformers(ctx)
	synced := controllerCtx.InformerFactory.WaitForCacheSync(ctx.Done())
	for _, obj := range []any{&appsv1.Deployment{}, &appsv1.StatefulSet{}, &appsv1.DaemonSet{}} {
		if !synced[reflect.TypeOf(obj)] {
			t.Errorf("no shared %T informer", obj)
		}
	}
	for _, obj := range []any{&corev1.Pod{}, &corev1.Node{}} {
		if _, ok := synced[reflect.TypeOf(obj)]; ok {
			t.Errorf("a shared %T informer was registered", obj)
		}
	}
}
