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
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	scaleplanev1alpha1 "github.com/scaleplane/scaleplane/pkg/apis/scaleplane/v1alpha1"
)

// arWrite is one AddonResizer migrate writes, and what it replaces (nil:
// it creates it).
type arWrite struct {
	ar       *scaleplanev1alpha1.AddonResizer
	previous *scaleplanev1alpha1.AddonResizer
}

// applyMigration writes the plan: every check first (the live Deployment,
// AddonResizers already there, a server-side dry run of every write), then
// the AddonResizers, then the nanny's removal. If the removal fails, the
// AddonResizers are put back as they were, so the nanny alone sizes.
func applyMigration(ctx context.Context, c *Clients, mig *Migration, ars []*scaleplanev1alpha1.AddonResizer, src *migrateSource, m *migrateOptions) error {
	ns, name := src.namespace, src.deployment.Name
	patch := mig.RemovalPatch
	if src.from != "cluster" {
		// A manifest: the writes go to the live Deployment, which must
		// hold the same nannies, or none (removed by an earlier run).
		live, err := liveSource(ctx, c, ns, name)
		if apierrors.IsNotFound(err) {
			return fmt.Errorf("refused, nothing written: Deployment %s/%s is not in the cluster; apply the manifest first, or edit the manifest by the dry run's patch", ns, name)
		} else if err != nil {
			return err
		}
		if slices.ContainsFunc(live.deployment.Spec.Template.Spec.Containers, func(ct corev1.Container) bool { return isNanny(&ct) }) {
			liveMig, liveARs, err := planMigration(ctx, live, m.watchOnly, m.mapDelays, m.name)
			if err != nil {
				return fmt.Errorf("the live Deployment: %w", err)
			}
			if len(liveARs) != len(ars) || slices.ContainsFunc(ars, func(ar *scaleplanev1alpha1.AddonResizer) bool {
				return !slices.ContainsFunc(liveARs, func(l *scaleplanev1alpha1.AddonResizer) bool {
					return l.Name == ar.Name && reflect.DeepEqual(applyDocument(l), applyDocument(ar))
				})
			}) {
				return fmt.Errorf("refused, nothing written: the nanny of the live Deployment %s/%s is not configured as in %s; migrate the live one (deployment/%s without -f)", ns, name, src.from, name)
			}
			patch = liveMig.RemovalPatch
		} else if m.watchOnly {
			return fmt.Errorf("refused, nothing written: --watch-only: the live Deployment %s/%s has no nanny any more, and updateMode Off would leave it unsized", ns, name)
		} else {
			patch = nil
		}
	}

	var writes []arWrite
	arClient := c.Scaleplane.ScaleplaneV1alpha1().AddonResizers(ns)
	all, err := arClient.List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("listing AddonResizers: %w", err)
	}
	for _, ar := range ars {
		for i := range all.Items {
			o := &all.Items[i]
			if o.Name != ar.Name && o.Spec.TargetRef == ar.Spec.TargetRef && o.Spec.ContainerName == ar.Spec.ContainerName {
				return fmt.Errorf("refused, nothing written: AddonResizer %s already sizes container %s of %s; two would undo each other (delete it, or pass --name=%s)", o.Name, ar.Spec.ContainerName, mig.Workload, o.Name)
			}
		}
		existing, err := arClient.Get(ctx, ar.Name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			writes = append(writes, arWrite{ar: ar})
		case err != nil:
			return fmt.Errorf("reading AddonResizer %s: %w", ar.Name, err)
		case jsonSubset(applyDocument(ar)["spec"], specDocument(existing)):
			// Already as migrate writes it: nothing to send.
		case !slices.ContainsFunc(existing.ManagedFields, func(f metav1.ManagedFieldsEntry) bool { return f.Manager == migrateFieldManager }):
			return fmt.Errorf("refused, nothing written: AddonResizer %s/%s exists, differs, and was not written by migrate; compare it with this dry run's, then delete it or pass --name", ns, ar.Name)
		default:
			writes = append(writes, arWrite{ar: ar, previous: existing})
		}
	}
	if len(writes) == 0 && len(patch) == 0 {
		return nil
	}

	depClient := c.Kube.AppsV1().Deployments(ns)
	patchBody, _ := json.Marshal(patch)
	// The server-side dry run: admission (the webhook), RBAC, conflicts.
	for _, w := range writes {
		if err := applyAddonResizer(ctx, c, w.ar, true); err != nil {
			return fmt.Errorf("refused by the API server (dry run), nothing written: AddonResizer %s/%s: %w", ns, w.ar.Name, err)
		}
	}
	if len(patch) > 0 {
		if _, err := depClient.Patch(ctx, name, types.JSONPatchType, patchBody, metav1.PatchOptions{FieldManager: migrateFieldManager, DryRun: []string{metav1.DryRunAll}}); err != nil {
			return fmt.Errorf("refused by the API server (dry run), nothing written: removing the nanny from Deployment %s/%s: %w", ns, name, err)
		}
	}

	var done []arWrite
	for _, w := range writes {
		if err := applyAddonResizer(ctx, c, w.ar, false); err != nil {
			return fmt.Errorf("writing AddonResizer %s/%s: %w%s", ns, w.ar.Name, err, undo(ctx, c, ns, done))
		}
		done = append(done, w)
		verb := "created"
		if w.previous != nil {
			verb = fmt.Sprintf("updated (updateMode %s -> %s)", orDefault(w.previous.Spec.UpdateMode, scaleplanev1alpha1.UpdateModeRollout), w.ar.Spec.UpdateMode)
		}
		mig.Applied = append(mig.Applied, fmt.Sprintf("AddonResizer %s/%s %s by server-side apply (field manager %s)", ns, w.ar.Name, verb, migrateFieldManager))
	}
	if len(patch) > 0 {
		if _, err := depClient.Patch(ctx, name, types.JSONPatchType, patchBody, metav1.PatchOptions{FieldManager: migrateFieldManager}); err != nil {
			return fmt.Errorf("removing the nanny from Deployment %s/%s: %w%s", ns, name, err, undo(ctx, c, ns, done))
		}
		var removed []string
		for _, op := range patch {
			if op.Op == "test" {
				removed = append(removed, fmt.Sprint(op.Value))
			}
		}
		mig.Applied = append(mig.Applied, fmt.Sprintf("Deployment %s/%s: removed %s (JSON patch)", ns, name, strings.Join(removed, ", ")))
	}
	return nil
}

// undo puts the AddonResizers written back as they were: deletes those
// created, re-applies the spec of those updated. It says what it did.
func undo(ctx context.Context, c *Clients, ns string, done []arWrite) string {
	if len(done) == 0 {
		return "; nothing was written"
	}
	var said []string
	for i := len(done) - 1; i >= 0; i-- {
		w := done[i]
		var err error
		if w.previous == nil {
			err = c.Scaleplane.ScaleplaneV1alpha1().AddonResizers(ns).Delete(ctx, w.ar.Name, metav1.DeleteOptions{})
			said = append(said, "deleted AddonResizer "+w.ar.Name+" again")
		} else {
			err = applyAddonResizer(ctx, c, w.previous, false)
			said = append(said, "put AddonResizer "+w.ar.Name+" back as it was")
		}
		if err != nil {
			said[len(said)-1] = fmt.Sprintf("could not undo AddonResizer %s (%v): check it by hand", w.ar.Name, err)
		}
	}
	return "; the nanny still sizes: " + strings.Join(said, ", ")
}

// applyAddonResizer writes ar's applyDocument by server-side apply, as
// migrate's field manager; dryRun only checks it.
func applyAddonResizer(ctx context.Context, c *Clients, ar *scaleplanev1alpha1.AddonResizer, dryRun bool) error {
	body, _ := json.Marshal(applyDocument(ar))
	opts := metav1.PatchOptions{FieldManager: migrateFieldManager}
	if dryRun {
		opts.DryRun = []string{metav1.DryRunAll}
	}
	_, err := c.Scaleplane.ScaleplaneV1alpha1().AddonResizers(ar.Namespace).Patch(ctx, ar.Name, types.ApplyPatchType, body, opts)
	return err
}

// specDocument is an AddonResizer's spec as JSON values.
func specDocument(ar *scaleplanev1alpha1.AddonResizer) any {
	data, _ := json.Marshal(ar.Spec)
	var out any
	_ = json.Unmarshal(data, &out)
	return out
}

// jsonSubset: every field of want is in have with the same value (have may
// hold more: the CRD's defaults).
func jsonSubset(want, have any) bool {
	switch w := want.(type) {
	case map[string]any:
		h, ok := have.(map[string]any)
		if !ok {
			return false
		}
		for k, v := range w {
			if !jsonSubset(v, h[k]) {
				return false
			}
		}
		return true
	case []any:
		h, ok := have.([]any)
		if !ok || len(h) != len(w) {
			return false
		}
		for i := range w {
			if !jsonSubset(w[i], h[i]) {
				return false
			}
		}
		return true
	default:
		return reflect.DeepEqual(want, have)
	}
}
