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

package resourceoverride

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"

	policyv1alpha1 "github.com/scaleplane/scaleplane/pkg/apis/policy/v1alpha1"
)

func op(operator policyv1alpha1.OverriderOperator, path, value string) policyv1alpha1.PlaintextOverrider {
	return policyv1alpha1.PlaintextOverrider{Path: path, Operator: operator, Value: runtime.RawExtension{Raw: []byte(value)}}
}

func TestRead(t *testing.T) {
	const c1 = "/spec/template/spec/containers/1"
	ops := []policyv1alpha1.PlaintextOverrider{
		op(policyv1alpha1.OverriderOpAdd, c1+"/resources/requests/cpu", `"48m"`),
		op(policyv1alpha1.OverriderOpAdd, c1+"/resources/limits", `{"memory":"1Gi"}`),
		op(policyv1alpha1.OverriderOpReplace, c1+"/resources/requests/example.com~1gpu", `"1"`),
		op(policyv1alpha1.OverriderOpRemove, c1+"/resources/requests/memory", ``),
		op(policyv1alpha1.OverriderOpAdd, "/spec/template/spec/containers/0/resources/requests/cpu", `"5m"`),
		op(policyv1alpha1.OverriderOpAdd, c1+"/image", `"x"`),
		op(policyv1alpha1.OverriderOpAdd, c1+"/resources/requests/memory", `"not a quantity"`),
	}
	for name, tc := range map[string]struct {
		index int
		want  string
	}{
		"container 1":   {1, "requests cpu=48m example.com/gpu=1; limits memory=1Gi"},
		"container 0":   {0, "requests cpu=5m; limits"},
		"any container": {-1, "requests cpu=5m example.com/gpu=1; limits memory=1Gi"}, // the later op wins
		"container 2":   {2, "<nil>"},
	} {
		r := Read(ops, tc.index)
		got := "<nil>"
		if r != nil {
			got = "requests"
			for _, n := range []string{"cpu", "example.com/gpu", "memory"} {
				if q, ok := r.Requests[corev1.ResourceName(n)]; ok {
					got += " " + n + "=" + q.String()
				}
			}
			got += "; limits"
			if q, ok := r.Limits["memory"]; ok {
				got += " memory=" + q.String()
			}
		}
		if got != tc.want {
			t.Errorf("%s: %s, want %s", name, got, tc.want)
		}
	}
	if ContainerPath(3) != "/spec/template/spec/containers/3" {
		t.Errorf("ContainerPath(3) = %s", ContainerPath(3))
	}
}
