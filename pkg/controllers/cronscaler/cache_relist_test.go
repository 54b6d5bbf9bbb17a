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
	"net/http"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2/ktesting"
	testingclock "k8s.io/utils/clock/testing"

	autoscalingv1alpha1 "github.com/scaleplane/scaleplane/pkg/apis/autoscaling/v1alpha1"
	"github.com/scaleplane/scaleplane/pkg/generated/clientset/versioned/fake"
	listers "github.com/scaleplane/scaleplane/pkg/generated/listers/autoscaling/v1alpha1"
)

// A relist after 410 Gone streams every object again (client-go's
// watch-list, on by default) into a store beside the cache. The objects
// whose resourceVersion did not change must come out of the transform as
// the cached objects themselves, so that the relist holds no second copy of
// them; a changed or re-created object gets a cached form of its own. The
// informer and its reflector are client-go's, as in production; only the
// apiserver is played (streamed initial events, then a 410 on the watch).
// The informer's transform is the one NewController installs.
func TestRelistKeepsOneCopyOfUnchangedObjects(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	unchanged, changed, recreated := cron("unchanged"), cron("changed"), cron("recreated")
	unchanged.ResourceVersion, changed.ResourceVersion, recreated.ResourceVersion = "10", "11", "12"
	server := &watchListServer{objects: []*autoscalingv1alpha1.CronFederatedHPA{unchanged, changed, recreated}, resourceVersion: "12"}
	lw := &cache.ListWatch{ListWithContextFunc: server.ListWithContext, WatchFuncWithContext: server.WatchWithContext}
	informer := cache.NewSharedIndexInformer(lw, &autoscalingv1alpha1.CronFederatedHPA{}, 0,
		cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	c, err := NewController(ctx, Config{
		Informer: playedInformer{informer},
		Client:   fake.NewSimpleClientset(),
		Recorder: record.NewFakeRecorder(100),
		Clock:    testingclock.NewFakeClock(time.Now()),
		Workers:  1,
	})
	if err != nil {
		t.Fatal(err)
	}
	// Its handlers queue the objects; nothing runs the queues.
	defer c.queue.ShutDown()
	defer c.records.ShutDown()
	updates := &seenUpdates{news: map[string]any{}}
	if _, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{UpdateFunc: updates.record}); err != nil {
		t.Fatal(err)
	}
	go informer.RunWithContext(ctx)
	if !cache.WaitForCacheSync(ctx.Done(), informer.HasSynced) {
		t.Fatal("the informer did not sync")
	}
	before := map[string]any{}
	for _, name := range []string{"unchanged", "changed", "recreated"} {
		item, _, _ := informer.GetIndexer().GetByKey(ns + "/" + name)
		if _, ok := item.(*cachedCron); !ok {
			t.Fatalf("cached %s is a %T; want the cached form", name, item)
		}
		before[name] = item
	}

	// While the watch was away: one object changed, one was deleted and
	// made again under its name (a new uid, at the same resourceVersion:
	// an apiserver never gives one twice, a fake clientset's store can);
	// then the watch is too old.
	changed2, recreated2 := changed.DeepCopy(), cron("recreated")
	changed2.ResourceVersion, changed2.Spec.ScaleTargetRef.Name = "13", "api"
	recreated2.UID, recreated2.ResourceVersion, recreated2.Spec.ScaleTargetRef.Name = types.UID("uid-recreated-2"), "12", "db"
	server.relist([]*autoscalingv1alpha1.CronFederatedHPA{unchanged, changed2, recreated2}, "14")

	if err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		return updates.count() == 3, nil
	}); err != nil {
		t.Fatalf("the relist delivered %d of 3 updates: %v", updates.count(), err)
	}
	if server.watches() < 2 || !server.allStreamed() {
		t.Fatalf("watches %d, all streamed %v; want a second watch-list after the 410", server.watches(), server.allStreamed())
	}
	if got := updates.get("unchanged"); got != before["unchanged"] {
		t.Errorf("the unchanged object was cached again (%p, was %p); want the cached object reused", got, before["unchanged"])
	}
	for name, want := range map[string]struct{ rv, uid, target string }{
		"changed":   {"13", "uid-changed", "api"},
		"recreated": {"12", "uid-recreated-2", "db"},
	} {
		got := updates.get(name)
		if got == before[name] {
			t.Errorf("%s: the old cached object was kept; want a cached form of the new one", name)
			continue
		}
		obj, ok := cronOf(got)
		if !ok || obj.ResourceVersion != want.rv || string(obj.UID) != want.uid || obj.Spec.ScaleTargetRef.Name != want.target {
			t.Errorf("%s after the relist: %+v; want resourceVersion %s, uid %s, target %s", name, obj, want.rv, want.uid, want.target)
		}
	}
}

// playedInformer is a CronFederatedHPA informer on a played apiserver.
type playedInformer struct{ informer cache.SharedIndexInformer }

func (p playedInformer) Informer() cache.SharedIndexInformer { return p.informer }

func (p playedInformer) Lister() listers.CronFederatedHPALister {
	return listers.NewCronFederatedHPALister(p.informer.GetIndexer())
}

// seenUpdates keeps the new object of the last update of each name.
type seenUpdates struct {
	sync.Mutex
	news map[string]any
}

func (s *seenUpdates) record(_, newObj any) {
	s.Lock()
	defer s.Unlock()
	if m, ok := newObj.(metav1.Object); ok {
		s.news[m.GetName()] = newObj
	}
}

func (s *seenUpdates) count() int {
	s.Lock()
	defer s.Unlock()
	return len(s.news)
}

func (s *seenUpdates) get(name string) any {
	s.Lock()
	defer s.Unlock()
	return s.news[name]
}

// watchListServer plays the apiserver's side of client-go's watch-list: a
// watch with sendInitialEvents streams every object as added, then a
// bookmark that marks the end of the initial events. relist changes the
// objects and ends the open watch with 410 Gone.
type watchListServer struct {
	mu              sync.Mutex
	objects         []*autoscalingv1alpha1.CronFederatedHPA
	resourceVersion string
	open            *watch.RaceFreeFakeWatcher
	started         int
	streamed        bool
}

func (s *watchListServer) ListWithContext(context.Context, metav1.ListOptions) (runtime.Object, error) {
	// The reflector lists only when the watch-list is refused.
	s.mu.Lock()
	defer s.mu.Unlock()
	list := &autoscalingv1alpha1.CronFederatedHPAList{ListMeta: metav1.ListMeta{ResourceVersion: s.resourceVersion}}
	for _, o := range s.objects {
		list.Items = append(list.Items, *o.DeepCopy())
	}
	s.streamed = false
	return list, nil
}

func (s *watchListServer) WatchWithContext(_ context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.started++
	w := watch.NewRaceFreeFake()
	s.open = w
	if opts.SendInitialEvents == nil || !*opts.SendInitialEvents {
		return w, nil
	}
	for _, o := range s.objects {
		w.Add(o.DeepCopy())
	}
	w.Action(watch.Bookmark, &autoscalingv1alpha1.CronFederatedHPA{ObjectMeta: metav1.ObjectMeta{
		ResourceVersion: s.resourceVersion,
		Annotations:     map[string]string{metav1.InitialEventsAnnotationKey: "true"},
	}})
	s.streamed = true
	return w, nil
}

func (s *watchListServer) relist(objects []*autoscalingv1alpha1.CronFederatedHPA, resourceVersion string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.objects, s.resourceVersion, s.streamed = objects, resourceVersion, false
	s.open.Error(&metav1.Status{Status: metav1.StatusFailure, Code: http.StatusGone, Reason: metav1.StatusReasonExpired,
		Message: "too old resource version: 12 (13)"})
}

func (s *watchListServer) watches() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.started
}

// allStreamed says whether the last objects went out as a watch-list's
// initial events (not as a list).
func (s *watchListServer) allStreamed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.streamed
}
