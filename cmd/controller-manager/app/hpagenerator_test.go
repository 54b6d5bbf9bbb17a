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
	"errors"
	"reflect"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	kubeinformers "k8s.io/client-go/informers"
	kubefake "k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2/ktesting"

	"github.com/scaleplane/scaleplane/cmd/controller-manager/app/options"
	"github.com/scaleplane/scaleplane/pkg/controllers/hpagenerator"
	"github.com/scaleplane/scaleplane/pkg/generated/clientset/versioned/fake"
	"github.com/scaleplane/scaleplane/pkg/generated/informers/externalversions"
)

// The hpa-generator is registered, on by default, and needs the
// LeaderWorkerSet resource: on a cluster without the CRD the manager waits
// for it (startController) instead of building informers that cannot list.
func TestHPAGeneratorDescriptor(t *testing.T) {
	d, ok := NewControllerDescriptors()["hpa-generator"]
	if !ok {
		t.Fatal("hpa-generator is not in the registry")
	}
	if d.Name() != hpagenerator.Name || d.IsDisabledByDefault() || len(d.Aliases()) != 0 {
		t.Errorf("descriptor: name %q, disabled by default %v, aliases %v", d.Name(), d.IsDisabledByDefault(), d.Aliases())
	}
	lws := schema.GroupVersionResource{Group: "leaderworkerset.x-k8s.io", Version: "v1", Resource: "leaderworkersets"}
	if got := d.RequiredResources(); !reflect.DeepEqual(got, []schema.GroupVersionResource{lws}) {
		t.Errorf("required resources = %v, want [%v]", got, lws)
	}

	missing, err := missingResources(discoveryWith(nil), d.RequiredResources())
	if err != nil || len(missing) != 1 || missing[0] != lws.String() {
		t.Errorf("without the CRD: missing = %v, %v; want [%s]", missing, err, lws)
	}
	missing, err = missingResources(discoveryWith(map[string][]string{"leaderworkerset.x-k8s.io/v1": {"leaderworkersets", "leaderworkersets/scale"}}), d.RequiredResources())
	if err != nil || len(missing) != 0 {
		t.Errorf("with the CRD: missing = %v, %v; want none", missing, err)
	}
}

// Karmada is told by PropagationPolicies or Clusters being served, not by
// FederatedHPAs (scaleplane ships that CRD for plain clusters).
func TestIsKarmada(t *testing.T) {
	cases := []struct {
		name      string
		resources map[string][]string
		want      bool
	}{
		{"plain cluster", nil, false},
		{"plain cluster with scaleplane's CRDs", map[string][]string{"autoscaling.karmada.io/v1alpha1": {"cronfederatedhpas", "federatedhpas"}}, false},
		{"PropagationPolicies", map[string][]string{"policy.karmada.io/v1alpha1": {"propagationpolicies", "overridepolicies"}}, true},
		{"Clusters", map[string][]string{"cluster.karmada.io/v1alpha1": {"clusters", "clusters/status"}}, true},
	}
	for _, tc := range cases {
		got, err := isKarmada(discoveryWith(tc.resources))
		if err != nil || got != tc.want {
			t.Errorf("%s: isKarmada = %v, %v; want %v", tc.name, got, err, tc.want)
		}
	}
}

// A discovery that fails is not read as "no Karmada": the caller retries,
// and fails the start rather than pick an output from no answer.
func TestIsKarmadaDiscoveryFails(t *testing.T) {
	disc := discoveryWith(nil)
	disc.PrependReactor("get", "resource", func(clienttesting.Action) (bool, runtime.Object, error) {
		return true, nil, errors.New("the server is currently unable to handle the request")
	})
	if got, err := isKarmada(disc); err == nil {
		t.Errorf("isKarmada = %v, nil; want the discovery error", got)
	}
}

func TestChooseOutput(t *testing.T) {
	cases := []struct {
		flag    string
		karmada bool
		want    hpagenerator.Output
	}{
		{options.HPAGeneratorOutputAuto, false, hpagenerator.OutputHorizontalPodAutoscaler},
		{options.HPAGeneratorOutputAuto, true, hpagenerator.OutputFederatedHPA},
		{options.HPAGeneratorOutputHorizontalPodAutoscaler, true, hpagenerator.OutputHorizontalPodAutoscaler},
		{options.HPAGeneratorOutputFederatedHPA, false, hpagenerator.OutputFederatedHPA},
	}
	for _, tc := range cases {
		if got, why := chooseOutput(tc.flag, tc.karmada); got != tc.want || why == "" {
			t.Errorf("chooseOutput(%s, karmada %v) = %s (%q), want %s", tc.flag, tc.karmada, got, why, tc.want)
		}
	}
	o := options.NewHPAGeneratorOptions()
	if o.Output != options.HPAGeneratorOutputAuto {
		t.Errorf("default output %q, want Auto", o.Output)
	}
	o.Output = "HPA"
	if errs := o.Validate(); len(errs) != 1 {
		t.Errorf("Validate of --hpa-generator-output=HPA = %v, want one error", errs)
	}
}

// An explicit FederatedHPA output where FederatedHPAs are not served fails
// the controller's start, saying what to install; Auto on a plain cluster
// builds an HPA generator.
func TestHPAGeneratorInitFederatedHPAWithoutCRD(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	kube := kubefake.NewSimpleClientset()
	client := fake.NewSimpleClientset()
	opts := options.NewOptions()
	opts.HPAGenerator.Output = options.HPAGeneratorOutputFederatedHPA
	controllerCtx := ControllerContext{
		KubeClient:                kube,
		Client:                    client,
		InformerFactory:           kubeinformers.NewSharedInformerFactory(kube, 0),
		ScaleplaneInformerFactory: externalversions.NewSharedInformerFactory(client, 0),
		EventRecorderFor:          func(string) record.EventRecorder { return record.NewFakeRecorder(10) },
		Options:                   opts,
	}
	_, err := NewControllerDescriptors()["hpa-generator"].initFunc(ctx, controllerCtx)
	if err == nil || !strings.Contains(err.Error(), "does not serve autoscaling.karmada.io/v1alpha1, Resource=federatedhpas") {
		t.Errorf("initFunc = %v, want the missing FederatedHPAs named", err)
	}
}

// The constructor builds the controller from the controller context.
func TestHPAGeneratorInit(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	kube := kubefake.NewSimpleClientset()
	client := fake.NewSimpleClientset()
	var recorderFor []string
	controllerCtx := ControllerContext{
		KubeClient:                kube,
		Client:                    client,
		InformerFactory:           kubeinformers.NewSharedInformerFactory(kube, 0),
		ScaleplaneInformerFactory: externalversions.NewSharedInformerFactory(client, 0),
		EventRecorderFor: func(component string) record.EventRecorder {
			recorderFor = append(recorderFor, component)
			return record.NewFakeRecorder(10)
		},
		Options: options.NewOptions(),
	}
	c, err := NewControllerDescriptors()["hpa-generator"].initFunc(ctx, controllerCtx)
	if err != nil {
		t.Fatalf("initFunc: %v", err)
	}
	if c.Name() != "hpa-generator" {
		t.Errorf("controller name = %q", c.Name())
	}
	if !reflect.DeepEqual(recorderFor, []string{"hpa-generator"}) {
		t.Errorf("event recorders asked for %v, want [hpa-generator]", recorderFor)
	}
}
