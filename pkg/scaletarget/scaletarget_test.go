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

package scaletarget

import (
	"reflect"
	"testing"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	autoscalingv1alpha1 "github.com/scaleplane/scaleplane/pkg/apis/autoscaling/v1alpha1"
)

func TestIndexFunc(t *testing.T) {
	ref := autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"}
	cases := []struct {
		name string
		obj  any
		want []string
	}{
		{"HPA", &autoscalingv2.HorizontalPodAutoscaler{ObjectMeta: metav1.ObjectMeta{Namespace: "ns"}, Spec: autoscalingv2.HorizontalPodAutoscalerSpec{ScaleTargetRef: ref}}, []string{"ns/apps/Deployment/web"}},
		{"FederatedHPA", &autoscalingv1alpha1.FederatedHPA{ObjectMeta: metav1.ObjectMeta{Namespace: "ns"}, Spec: autoscalingv1alpha1.FederatedHPASpec{ScaleTargetRef: ref}}, []string{"ns/apps/Deployment/web"}},
		{"apiVersion that does not parse", &autoscalingv2.HorizontalPodAutoscaler{Spec: autoscalingv2.HorizontalPodAutoscalerSpec{
			ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "a/b/c", Kind: "X", Name: "y"}}}, nil},
		{"something else", "not an autoscaler", nil},
	}
	for _, tc := range cases {
		got, err := IndexFunc(tc.obj)
		if err != nil || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: %q, %v; want %q", tc.name, got, err, tc.want)
		}
	}
	// Two versions of a group name the same object.
	v1, _ := KeyOf("ns", autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"})
	v1beta1, _ := KeyOf("ns", autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1beta1", Kind: "Deployment", Name: "web"})
	if v1 != v1beta1 {
		t.Errorf("keys %q and %q differ by version", v1, v1beta1)
	}
}
