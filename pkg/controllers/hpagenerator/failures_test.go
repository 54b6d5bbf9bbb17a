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

package hpagenerator

import (
	"errors"
	"testing"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"

	lwsv1 "github.com/scaleplane/scaleplane/pkg/apis/leaderworkerset/v1"
)

// An invalid HPA is reported and not retried: only a policy change can fix
// it.
func TestRejectedCreate(t *testing.T) {
	h := newHarness(t, lws("web", policy(nil, 10, cpuMetric(70))))
	h.server.createErr = apierrors.NewInvalid(schema.GroupKind{Group: "autoscaling", Kind: "HorizontalPodAutoscaler"}, "web",
		field.ErrorList{field.Invalid(field.NewPath("spec", "metrics").Index(0).Child("resource", "target", "averageUtilization"), 0, "must be greater than 0")})
	if err := h.trySync("web"); err != nil {
		t.Errorf("sync = %v, want nil: retrying cannot help", err)
	}
	h.expectEvent("Warning HPARejected", "web", string(metav1.StatusReasonInvalid), "must be greater than 0", "spec.scalePolicy")
}

// A Forbidden answer is not final: permissions get granted (update on
// leaderworkersets/finalizers, which OwnerReferencesPermissionEnforcement
// asks for blockOwnerDeletion) and quotas freed without any change the
// generator would see. It is reported and retried with backoff — issue 18,
// item 3.
func TestForbiddenWriteIsRetried(t *testing.T) {
	ownerRefDenied := apierrors.NewForbidden(hpaResource.GroupResource(), "web",
		errors.New(`cannot set blockOwnerDeletion if an ownerReference refers to a resource you can't set finalizers on: , <nil>`))
	for _, tc := range []struct {
		name  string
		setup func(h *harness, err error)
		verb  string
	}{
		{name: "create", verb: "create", setup: func(h *harness, err error) { h.server.createErr = err }},
		{name: "update", verb: "update", setup: func(h *harness, err error) {
			h.sync("web")
			h.updateLWS("web", func(l *lwsv1.LeaderWorkerSet) { l.Spec.ScalePolicy.MaxReplicas = 12 })
			h.server.updateErr = err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, lws("web", policy(nil, 10, cpuMetric(70))))
			tc.setup(h, ownerRefDenied)
			h.events()
			err := h.trySync("web")
			if !apierrors.IsForbidden(err) {
				t.Errorf("sync = %v, want the Forbidden error, to retry with backoff", err)
			}
			h.expectEvent("Warning HPARejected", "web", tc.verb, "Forbidden", "leaderworkersets/finalizers", "retrying")

			// Granted meanwhile: the retry goes through.
			h.server.createErr, h.server.updateErr = nil, nil
			h.refresh()
			h.sync("web")
			if got := h.getHPA("web"); got.Spec.MaxReplicas != h.getLWS("web").Spec.ScalePolicy.MaxReplicas {
				t.Errorf("after the retry maxReplicas = %d", got.Spec.MaxReplicas)
			}
		})
	}

	// The work loop backs the key off instead of forgetting it.
	h := newHarness(t, lws("web", policy(nil, 10, cpuMetric(70))))
	h.server.createErr = ownerRefDenied
	key := keys("web")[0]
	h.c.queue.Add(key)
	h.c.processNextWorkItem(h.ctx)
	if got := h.c.queue.NumRequeues(key); got != 1 {
		t.Errorf("requeues after a Forbidden create = %d, want 1", got)
	}
}

// AlreadyExists means the cache is behind: retry.
func TestCreateAlreadyExistsRetries(t *testing.T) {
	h := newHarness(t, lws("web", policy(nil, 10, cpuMetric(70))))
	h.server.createErr = apierrors.NewAlreadyExists(hpaResource.GroupResource(), "web")
	if err := h.trySync("web"); !apierrors.IsAlreadyExists(err) {
		t.Errorf("sync = %v, want an AlreadyExists error to retry", err)
	}
	h.expectNoEvents()
}

// An update from a stale cache conflicts and is retried; it never overwrites
// the newer object.
func TestUpdateFromStaleCacheConflicts(t *testing.T) {
	h := newHarness(t, lws("web", policy(nil, 10, cpuMetric(70))))
	h.sync("web")
	stale := h.getHPA("web")
	h.editHPA("web", func(hpa *autoscalingv2.HorizontalPodAutoscaler) { hpa.Annotations = map[string]string{"new": "yes"} })
	if err := h.hpaIndexer.Update(stale); err != nil {
		t.Fatal(err)
	}
	h.updateLWS("web", func(l *lwsv1.LeaderWorkerSet) { l.Spec.ScalePolicy.MaxReplicas = 11 })
	if err := h.hpaIndexer.Update(stale); err != nil {
		t.Fatal(err)
	}
	if err := h.trySync("web"); !apierrors.IsConflict(err) {
		t.Fatalf("sync = %v, want a conflict", err)
	}
	h.refresh()
	h.sync("web")
	got := h.getHPA("web")
	if got.Spec.MaxReplicas != 11 || got.Annotations["new"] != "yes" {
		t.Errorf("after the retry: maxReplicas %d, annotations %v", got.Spec.MaxReplicas, got.Annotations)
	}
}

func TestSyncRecoversFromPanics(t *testing.T) {
	h := newHarness(t)
	h.c.lwsLister = nil
	if err := h.trySync("web"); err == nil {
		t.Error("a panicking sync returned nil")
	}
}

// The work loop: a synced key is forgotten, a failed one is retried with
// backoff, and a shut-down queue ends the worker.
func TestProcessNextWorkItem(t *testing.T) {
	h := newHarness(t, lws("web", policy(nil, 10, cpuMetric(70))), lws("api", policy(nil, 10, cpuMetric(70))))
	web := keys("web")[0]
	h.c.queue.Add(web)
	if !h.c.processNextWorkItem(h.ctx) {
		t.Fatal("worker stopped")
	}
	if !h.hpaExists("web") || h.c.queue.NumRequeues(web) != 0 {
		t.Errorf("after a good sync: HPA exists %v, requeues %d", h.hpaExists("web"), h.c.queue.NumRequeues(web))
	}

	api := keys("api")[0]
	h.server.createErr = apierrors.NewAlreadyExists(hpaResource.GroupResource(), "api")
	h.c.queue.Add(api)
	h.c.processNextWorkItem(h.ctx)
	if got := h.c.queue.NumRequeues(api); got != 1 {
		t.Errorf("requeues after a failed sync = %d, want 1", got)
	}

	h.c.queue.ShutDown()
	for h.c.processNextWorkItem(h.ctx) {
	}
}
