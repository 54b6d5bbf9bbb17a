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
	"sync"
	"testing"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"

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

// TestAddIndexConcurrently: the controller manager starts its controllers at
// once, and the cron-scaler and the hpa-generator both add the index to the
// one shared HPA informer. Both must succeed, whichever comes first; the
// loser of a check-then-add race used to fail with "indexer conflict" and
// that controller never started (a CI run of the rbac integration test).
func TestAddIndexConcurrently(t *testing.T) {
	const controllers = 4
	for round := range 200 {
		informer := informers.NewSharedInformerFactory(fake.NewClientset(), 0).Autoscaling().V2().HorizontalPodAutoscalers().Informer()
		start := make(chan struct{})
		errs := make([]error, controllers)
		var wg sync.WaitGroup
		for i := range controllers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				errs[i] = AddIndex(informer)
			}()
		}
		close(start)
		wg.Wait()
		for i, err := range errs {
			if err != nil {
				t.Fatalf("round %d: AddIndex of controller %d of %d adding it at once: %v", round, i, controllers, err)
			}
		}
		if _, ok := informer.GetIndexer().GetIndexers()[Index]; !ok {
			t.Fatalf("round %d: the informer has no %s index", round, Index)
		}
	}
}
