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

package resizer

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clienttesting "k8s.io/client-go/testing"

	scaleplanev1alpha1 "github.com/scaleplane/scaleplane/pkg/apis/scaleplane/v1alpha1"
)

func TestConflictRereadsAndRetries(t *testing.T) {
	h := newHarness(t, addonResizer("ar"), deployment(addonName, resources("cpu=100m", "memory=100Mi", "limit:cpu=100m", "limit:memory=100Mi")))
	h.setNodes(10)
	conflicts := 1
	h.kube.PrependReactor("patch", "deployments", func(clienttesting.Action) (bool, runtime.Object, error) {
		if conflicts > 0 {
			conflicts--
			return true, nil, apierrors.NewConflict(deploymentsResource, addonName, nil)
		}
		return false, nil, nil
	})
	h.syncAt(t0, "ar")
	var verbs []string
	for _, a := range h.kube.Actions() {
		if a.GetResource().Resource == "deployments" && a.GetVerb() != "list" {
			verbs = append(verbs, a.GetVerb())
		}
	}
	if strings.Join(verbs, ",") != "patch,get,patch" {
		t.Errorf("actions %v; want patch, get (from the API, not the cache), patch", verbs)
	}
	mustQuantity(t, h.deploymentResources(addonName).Requests, corev1.ResourceCPU, "200m")
	h.expectCondition("ar", scaleplanev1alpha1.ConditionUpToDate, metav1.ConditionTrue, reasonResized)
}

// After a conflict the decision is made again from the fresh object: if it
// is now within the band, nothing is written.
func TestConflictRecomputes(t *testing.T) {
	h := newHarness(t, addonResizer("ar"), deployment(addonName, resources("cpu=100m", "memory=100Mi", "limit:cpu=100m", "limit:memory=100Mi")))
	h.setNodes(10)
	h.kube.PrependReactor("patch", "deployments", func(clienttesting.Action) (bool, runtime.Object, error) {
		// Another writer set the estimate first. (The tracker, not the
		// clientset: the fake holds its lock while a reactor runs.)
		updated := deployment(addonName, resources("cpu=200m", "memory=200Mi", "limit:cpu=200m", "limit:memory=200Mi"))
		updated.ResourceVersion = "8"
		h.check(h.kube.Tracker().Update(deploymentsResource.WithVersion("v1"), updated, ns))
		return true, nil, apierrors.NewConflict(deploymentsResource, addonName, nil)
	})
	h.syncAt(t0, "ar")
	if n := len(h.patches()); n != 1 {
		t.Errorf("%d patches; want the one that conflicted", n)
	}
	h.expectCondition("ar", scaleplanev1alpha1.ConditionUpToDate, metav1.ConditionTrue, reasonWithinThreshold)
	h.expectEvents()
}

func TestConflictGivesUpAfterAFewTries(t *testing.T) {
	h := newHarness(t, addonResizer("ar"), deployment(addonName, resources()))
	h.setNodes(10)
	h.kube.PrependReactor("patch", "deployments", func(clienttesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewConflict(deploymentsResource, addonName, nil)
	})
	if _, err := h.trySyncAt(t0, "ar"); err == nil {
		t.Errorf("no error after repeated conflicts")
	}
	if n := len(h.patches()); n != maxPatchAttempts {
		t.Errorf("%d patches; want %d", n, maxPatchAttempts)
	}
}

func TestForbidden(t *testing.T) {
	h := newHarness(t, addonResizer("ar"), deployment(addonName, resources()))
	h.setNodes(10)
	h.kube.PrependReactor("patch", "deployments", func(clienttesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(deploymentsResource, addonName, nil)
	})
	if _, err := h.trySyncAt(t0, "ar"); err == nil {
		t.Errorf("no error: a forbidden patch is retried with backoff")
	}
	h.expectCondition("ar", scaleplanev1alpha1.ConditionUpToDate, metav1.ConditionFalse, reasonResizeForbidden)
	h.expectEvents("Warning ResizeForbidden")
	if _, err := h.trySyncAt(t0.Add(time.Minute), "ar"); err == nil {
		t.Errorf("no error on retry")
	}
	h.expectEvents() // once, on the transition
}

// A sync that runs before the target's cache shows the resizer's own patch
// waits instead of deciding again from the old resources.
func TestWaitsForOwnPatchInCache(t *testing.T) {
	h := newHarness(t, addonResizer("ar", withDelays(time.Minute, time.Minute)), deployment(addonName, resources("cpu=100m", "memory=100Mi", "limit:cpu=100m", "limit:memory=100Mi")))
	h.setNodes(10)
	h.syncAt(t0, "ar")
	h.syncAt(t0.Add(time.Minute), "ar")
	if target, _ := h.writes(); target != 1 {
		t.Fatalf("%d target writes; want 1", target)
	}
	// The cache goes back to the old object, as if its watch lagged; the
	// resizer wrote generation 2.
	h.c.patched.wrote(targetKey(ns, scaleplanev1alpha1.TargetKindDeployment, addonName), "uid-"+addonName, 2)
	h.check(h.deployIndexer.Update(deployment(addonName, resources("cpu=100m", "memory=100Mi", "limit:cpu=100m", "limit:memory=100Mi"))))
	_, status := h.writes()
	d, err := h.c.syncRecovered(h.ctx, keyOf("ar"))
	if err != nil || d != cacheRetry {
		t.Errorf("sync with a stale cache: %v, %v; want a wait of %v", d, err, cacheRetry)
	}
	if target, s := h.writes(); target != 1 || s != status {
		t.Errorf("wrote with a stale cache")
	}
}
