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
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	policyv1alpha1 "github.com/scaleplane/scaleplane/pkg/apis/policy/v1alpha1"
	scaleplanev1alpha1 "github.com/scaleplane/scaleplane/pkg/apis/scaleplane/v1alpha1"
)

// policyOutcome is what writing the OverridePolicy came to.
type policyOutcome struct {
	// applied is the policy the members render afterwards: nil when none
	// of this AddonResizer's is stored.
	applied *policyv1alpha1.OverridePolicy
	// problem, when set, is why the policy does not hold what is desired,
	// for UpToDate.
	problem *policyProblem
}

// policyProblem is the reason and message of UpToDate=False when the
// OverridePolicy cannot be written.
type policyProblem struct {
	reason, message string
}

// writeOverridePolicy creates, updates or deletes the AddonResizer's
// OverridePolicy so that it holds each member at its size; it writes
// nothing when the stored policy already says so.
//
// The policy cache can be behind the resizer's own last write (the sync
// its own status write triggers comes at once): a create refused with
// AlreadyExists, or an update refused with a conflict, is decided again on
// the policy read from the API server, and is no failure when that
// policy already says what is desired.
func (c *Controller) writeOverridePolicy(ctx context.Context, ar *scaleplanev1alpha1.AddonResizer, desired *policyv1alpha1.OverridePolicy, status *scaleplanev1alpha1.AddonResizerStatus) (policyOutcome, error) {
	name := overridePolicyName(ar)
	stored, err := c.karmada.policies.OverridePolicies(ar.Namespace).Get(name)
	if err != nil && !apierrors.IsNotFound(err) {
		return policyOutcome{}, err
	}
	if err != nil {
		stored = nil
	}
	for attempt := 1; ; attempt++ {
		out, err := c.writePolicyOnce(ctx, ar, stored, desired, status)
		if err == nil {
			return out, nil
		}
		if attempt == maxPatchAttempts || !(apierrors.IsAlreadyExists(err) || apierrors.IsConflict(err)) {
			return policyFailed(ar, stored, err)
		}
		klog.FromContext(ctx).V(2).Info("OverridePolicy cache behind the API server; reading it again", "overridePolicy", klog.KRef(ar.Namespace, name), "attempt", attempt, "err", err.Error())
		stored, err = c.client.PolicyV1alpha1().OverridePolicies(ar.Namespace).Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			stored = nil
		} else if err != nil {
			return policyOutcome{}, fmt.Errorf("reading OverridePolicy %s/%s again: %w", ar.Namespace, name, err)
		}
	}
}

// writePolicyOnce brings stored to desired with one write, or none.
func (c *Controller) writePolicyOnce(ctx context.Context, ar *scaleplanev1alpha1.AddonResizer, stored, desired *policyv1alpha1.OverridePolicy, status *scaleplanev1alpha1.AddonResizerStatus) (policyOutcome, error) {
	name := overridePolicyName(ar)
	if stored != nil && leftByPredecessor(stored, ar) {
		// Its controller was an AddonResizer of this name that is gone (the
		// resizer could not delete the policy then, and the garbage
		// collector has not yet): the members must not wait for it.
		if err := c.client.PolicyV1alpha1().OverridePolicies(ar.Namespace).Delete(ctx, name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &stored.UID}}); err != nil && !apierrors.IsNotFound(err) {
			return policyOutcome{}, fmt.Errorf("deleting OverridePolicy %s/%s, left by a deleted AddonResizer of this name: %w", ar.Namespace, name, err)
		}
		klog.FromContext(ctx).Info("Deleted the OverridePolicy a deleted AddonResizer of this name left", "overridePolicy", klog.KRef(ar.Namespace, name))
		stored = nil
	}
	if stored != nil && !metav1.IsControlledBy(stored, ar) {
		status.OverridePolicy = ""
		return policyOutcome{problem: &policyProblem{reasonOverridePolicyTaken, fmt.Sprintf(
			"OverridePolicy %s/%s exists and is not controlled by this AddonResizer; the resizer does not write it, and no member is held at its size. Delete or rename it", ar.Namespace, name)}}, nil
	}
	policies := c.client.PolicyV1alpha1().OverridePolicies(ar.Namespace)
	var written *policyv1alpha1.OverridePolicy
	var err error
	switch {
	case desired == nil && stored == nil:
		status.OverridePolicy = ""
		return policyOutcome{}, nil
	case desired == nil:
		status.OverridePolicy = ""
		if err := c.deleteOverridePolicy(ctx, ar, "no member cluster holds a size of its own"); err != nil {
			status.OverridePolicy = name // it stays, and status names it while it exists
			return policyOutcome{applied: stored}, err
		}
		return policyOutcome{}, nil
	case stored == nil:
		writes.WithLabelValues(writeOverridePolicy).Inc()
		written, err = policies.Create(ctx, desired, metav1.CreateOptions{FieldManager: fieldManager})
	case needsUpdate(stored, desired):
		updated := stored.DeepCopy()
		updated.Spec = desired.Spec
		if updated.Labels == nil {
			updated.Labels = map[string]string{}
		}
		updated.Labels[managedByLabel] = managedByValue
		updated.OwnerReferences = desired.OwnerReferences
		writes.WithLabelValues(writeOverridePolicy).Inc()
		written, err = policies.Update(ctx, updated, metav1.UpdateOptions{FieldManager: fieldManager})
	default:
		status.OverridePolicy = name
		return policyOutcome{applied: stored}, nil
	}
	if err != nil {
		return policyOutcome{}, err
	}
	status.OverridePolicy = name
	c.recorder.Eventf(ar, corev1.EventTypeNormal, eventOverridePolicyWritten, "OverridePolicy %s holds %d member clusters at their size", name, len(desired.Spec.OverrideRules))
	return policyOutcome{applied: written}, nil
}

// leftByPredecessor tells whether p's controller is an AddonResizer of
// ar's name that is not ar: one deleted and created again.
func leftByPredecessor(p *policyv1alpha1.OverridePolicy, ar *scaleplanev1alpha1.AddonResizer) bool {
	ref := metav1.GetControllerOf(p)
	return ref != nil && ref.Kind == "AddonResizer" && ref.APIVersion == scaleplanev1alpha1.SchemeGroupVersion.String() &&
		ref.Name == ar.Name && ref.UID != ar.UID
}

// policyFailed records a write of the OverridePolicy that failed: the
// members render the stored policy. A forbidden or invalid write is not
// retried with backoff (nothing changes until someone acts; the condition
// says why); others are.
func policyFailed(ar *scaleplanev1alpha1.AddonResizer, stored *policyv1alpha1.OverridePolicy, err error) (policyOutcome, error) {
	msg := fmt.Sprintf("Writing OverridePolicy %s/%s failed: %v", ar.Namespace, overridePolicyName(ar), err)
	out := policyOutcome{applied: stored, problem: &policyProblem{reasonOverridePolicyFailed, msg}}
	if stored != nil && !metav1.IsControlledBy(stored, ar) {
		out.applied = nil
	}
	if apierrors.IsForbidden(err) || apierrors.IsInvalid(err) {
		return out, nil
	}
	return out, fmt.Errorf("%s: %w", msg, err)
}

// settleMembers returns the members as status shows them, and how many are
// sized: held at their recommendation by the policy the members render
// (applied), not only by the one desired. A member whose rule the applied
// policy does not carry (the write failed or was refused) is NotApplied:
// its resources are what that policy holds it at, its last change and a
// pending change stay as they were, and its message says what was decided.
func settleMembers(members []scaleplanev1alpha1.MemberClusterStatus, prev map[string]*scaleplanev1alpha1.MemberClusterStatus, desired, applied *policyv1alpha1.OverridePolicy, index int) ([]scaleplanev1alpha1.MemberClusterStatus, *int32) {
	var sized int32
	wanted, stored := rulesByCluster(desired), rulesByCluster(applied)
	for i := range members {
		m := &members[i]
		rule := stored[m.Name]
		if sameRule(wanted[m.Name], rule) {
			if m.State == scaleplanev1alpha1.MemberSized {
				sized++
			}
			continue
		}
		m.Resources = heldOfRule(rule, index)
		m.LastChangeTime = nil
		if p := prev[m.Name]; p != nil {
			m.LastChangeTime = p.LastChangeTime
			if m.PendingResize == nil {
				m.PendingResize = p.PendingResize
			}
		}
		if m.State != scaleplanev1alpha1.MemberNotApplied {
			m.Message = fmt.Sprintf("%s (state %s), but not applied: the OverridePolicy does not hold this size (see the UpToDate condition)", m.Message, m.State)
			m.State = scaleplanev1alpha1.MemberNotApplied
		}
	}
	if len(members) == 0 {
		members = nil
	}
	return members, ptr.To(sized)
}

// deleteOverridePolicy deletes the AddonResizer's OverridePolicy if it
// exists and the AddonResizer controls it. Garbage collection removes it
// too when the AddonResizer is deleted; this covers a change of mode or
// placement, and a control plane without a garbage collector.
func (c *Controller) deleteOverridePolicy(ctx context.Context, ar *scaleplanev1alpha1.AddonResizer, why string) error {
	name := overridePolicyName(ar)
	stored, err := c.karmada.policies.OverridePolicies(ar.Namespace).Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if !metav1.IsControlledBy(stored, ar) {
		return nil
	}
	writes.WithLabelValues(writeOverridePolicy).Inc()
	err = c.client.PolicyV1alpha1().OverridePolicies(ar.Namespace).Delete(ctx, name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &stored.UID}})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting OverridePolicy %s/%s (%s): %w", ar.Namespace, name, why, err)
	}
	c.recorder.Eventf(ar, corev1.EventTypeNormal, eventOverridePolicyDeleted, "OverridePolicy %s deleted: %s", name, why)
	return nil
}

// forgetFederated deletes the OverridePolicy of a deleted AddonResizer when
// its controller is an AddonResizer of that name (none exists any more):
// garbage collection does it too where a garbage collector runs.
func (c *Controller) forgetFederated(ctx context.Context, key cache.ObjectName) error {
	k := c.karmada
	k.mu.Lock()
	started := k.started
	k.mu.Unlock()
	if !started {
		return nil
	}
	name := policyNameFor(key.Name)
	stored, err := k.policies.OverridePolicies(key.Namespace).Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	ref := metav1.GetControllerOf(stored)
	if ref == nil || ref.Kind != "AddonResizer" || ref.Name != key.Name || ref.APIVersion != scaleplanev1alpha1.SchemeGroupVersion.String() {
		return nil
	}
	writes.WithLabelValues(writeOverridePolicy).Inc()
	err = c.client.PolicyV1alpha1().OverridePolicies(key.Namespace).Delete(ctx, name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &stored.UID}})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return fmt.Errorf("deleting OverridePolicy %s/%s of a deleted AddonResizer: %w", key.Namespace, name, err)
	}
	return nil
}
