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
	"os"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/klog/v2/ktesting"
	"sigs.k8s.io/yaml"

	"github.com/scaleplane/scaleplane/pkg/controllers/cronscaler"
)

func projectCronCRD(t *testing.T) *unstructured.Unstructured {
	t.Helper()
	data, err := os.ReadFile("../../../artifacts/deploy/crds/autoscaling.karmada.io_cronfederatedhpas.yaml")
	if err != nil {
		t.Fatal(err)
	}
	crd := &unstructured.Unstructured{}
	if err := yaml.Unmarshal(data, &crd.Object); err != nil {
		t.Fatal(err)
	}
	return crd
}

// Issue 12, item 1: at start-up the manager reads which of scaleplane's added
// fields the installed CRD stores; Karmada's CRD (scaleplane's without the
// two fields) stores neither, and a CRD it may not read is assumed to store
// neither.
func TestReadCronSchema(t *testing.T) {
	karmada := projectCronCRD(t)
	versions, _, _ := unstructured.NestedSlice(karmada.Object, "spec", "versions")
	for _, v := range versions {
		s := v.(map[string]any)["schema"].(map[string]any)["openAPIV3Schema"].(map[string]any)
		unstructured.RemoveNestedField(s, "properties", "spec", "properties", "rules", "items", "properties", "maxDelaySeconds")
		unstructured.RemoveNestedField(s, "properties", "status", "properties", "executionHistories", "items", "properties", "lastScheduleTime")
	}
	_ = unstructured.SetNestedSlice(karmada.Object, versions, "spec", "versions")

	listKinds := map[schema.GroupVersionResource]string{crdResource: "CustomResourceDefinitionList"}
	tests := []struct {
		name      string
		crd       *unstructured.Unstructured
		forbidden bool
		want      cronscaler.StoredFields
	}{
		{name: "scaleplane's CRD", crd: projectCronCRD(t), want: cronscaler.AllStoredFields},
		{name: "Karmada's CRD", crd: karmada, want: cronscaler.StoredFields{}},
		{name: "not installed", want: cronscaler.StoredFields{}},
		{name: "forbidden", crd: projectCronCRD(t), forbidden: true, want: cronscaler.StoredFields{}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			var objs []runtime.Object
			if tc.crd != nil {
				objs = append(objs, tc.crd)
			}
			client := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), listKinds, objs...)
			if tc.forbidden {
				client.PrependReactor("get", "customresourcedefinitions", func(clienttesting.Action) (bool, runtime.Object, error) {
					return true, nil, apierrors.NewForbidden(crdResource.GroupResource(), cronscaler.CRDName, errors.New("RBAC"))
				})
			}
			if got := readCronSchema(ctx, client); got != tc.want {
				t.Errorf("stored fields = %+v; want %+v", got, tc.want)
			}
		})
	}
}
