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
	"path/filepath"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/restmapper"

	autoscalingv1alpha1 "github.com/scaleplane/scaleplane/pkg/apis/autoscaling/v1alpha1"
	"github.com/scaleplane/scaleplane/pkg/cronschedule"
	"github.com/scaleplane/scaleplane/test/integration/framework"
	"k8s.io/apimachinery/pkg/runtime"
)

// TestExamplesApply creates every object of artifacts/examples/cronfederatedhpa
// on the real apiserver (CRD schemas included), and checks that every rule's
// schedule and time zone parse with the cron-scaler's parser: `make local-up`
// applies these files, so they must be valid.
func TestExamplesApply(t *testing.T) {
	ctx := context.Background()
	cp := framework.Get(t)
	ns := cp.CreateNamespace(t)
	root, err := framework.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	disc, err := discovery.NewDiscoveryClientForConfig(cp.Config())
	if err != nil {
		t.Fatal(err)
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(disc))
	files, err := filepath.Glob(filepath.Join(root, "artifacts", "examples", "cronfederatedhpa", "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no examples found: %v", err)
	}
	for _, file := range files {
		objs, err := framework.DecodeManifests(file)
		if err != nil {
			t.Fatal(err)
		}
		for _, obj := range objs {
			gvk := obj.GroupVersionKind()
			mapping, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
			if err != nil {
				t.Fatalf("%s: %s: %v", file, gvk, err)
			}
			if _, err := cp.DynamicClient().Resource(mapping.Resource).Namespace(ns).Create(ctx, obj, metav1.CreateOptions{}); err != nil {
				t.Errorf("%s: creating %s %s: %v", filepath.Base(file), gvk.Kind, obj.GetName(), err)
			}
			if gvk.Kind == "CronFederatedHPA" {
				checkSchedules(t, file, obj)
			}
		}
	}
	// Nothing here should fire while later tests run.
	_ = cp.Client().AutoscalingV1alpha1().CronFederatedHPAs(ns).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{})
}

func checkSchedules(t *testing.T, file string, obj *unstructured.Unstructured) {
	t.Helper()
	cron := &autoscalingv1alpha1.CronFederatedHPA{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, cron); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	for _, r := range cron.Spec.Rules {
		zone := ""
		if r.TimeZone != nil {
			zone = *r.TimeZone
		}
		loc, err := cronschedule.LoadLocation(zone)
		if err != nil {
			t.Errorf("%s: rule %s: %v", file, r.Name, err)
			continue
		}
		if _, err := cronschedule.Parse(r.Schedule, loc); err != nil {
			t.Errorf("%s: rule %s: %v", file, r.Name, err)
		}
	}
}
