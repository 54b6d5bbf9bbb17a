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
	"context"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	autoscalingv1alpha1 "github.com/scaleplane/scaleplane/pkg/apis/autoscaling/v1alpha1"
	"github.com/scaleplane/scaleplane/pkg/generated/clientset/versioned/fake"
	"github.com/scaleplane/scaleplane/pkg/generated/informers/externalversions"
)

// The cron-scaler's informer keeps no namespace index, is the one the
// factory shares and starts, and its lister still finds objects by key.
func TestCronInformerHasNoNamespaceIndex(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	client := fake.NewSimpleClientset(&autoscalingv1alpha1.CronFederatedHPA{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "c"}})
	factory := externalversions.NewSharedInformerFactory(client, 0)
	informer := cronInformer(factory)
	if indexers := informer.Informer().GetIndexer().GetIndexers(); len(indexers) != 0 {
		t.Errorf("indexers %v; want none", indexers)
	}
	if shared := factory.Autoscaling().V1alpha1().CronFederatedHPAs().Informer(); shared.GetIndexer() != informer.Informer().GetIndexer() {
		t.Error("the factory hands out another CronFederatedHPA informer")
	}
	factory.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), informer.Informer().HasSynced) {
		t.Fatal("cache never synced")
	}
	if _, err := informer.Lister().CronFederatedHPAs("team-a").Get("c"); err != nil {
		t.Errorf("lister Get: %v", err)
	}
}
