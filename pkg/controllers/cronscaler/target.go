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
	"errors"
	"fmt"
	"net"
	"strings"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/client-go/util/retry"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	autoscalingv1alpha1 "github.com/scaleplane/scaleplane/pkg/apis/autoscaling/v1alpha1"
)

// targetKind is how a scaleTargetRef is acted on.
type targetKind int

const (
	// targetScale is any resource with a scale subresource: its replicas
	// are set from targetReplicas.
	targetScale targetKind = iota
	// targetFederatedHPA and targetHPA get minReplicas and maxReplicas from
	// targetMinReplicas and targetMaxReplicas.
	targetFederatedHPA
	targetHPA
	// targetLeaderWorkerSet is scaled like targetScale by targetReplicas,
	// and its spec.scalePolicy (the hpa-generator's input) gets minReplicas
	// and maxReplicas from targetMinReplicas and targetMaxReplicas, so the
	// HPA generated from it follows.
	targetLeaderWorkerSet
)

// The LeaderWorkerSet kind, whose scalePolicy the hpa-generator turns into an
// HPA.
const (
	leaderWorkerSetGroup = "leaderworkerset.x-k8s.io"
	leaderWorkerSetKind  = "LeaderWorkerSet"
)

// target is a parsed scaleTargetRef.
type target struct {
	kind targetKind
	gv   schema.GroupVersion
	ref  autoscalingv2.CrossVersionObjectReference
}

func (t target) String() string { return t.ref.Kind + "/" + t.ref.Name }

func parseTarget(ref autoscalingv2.CrossVersionObjectReference) (target, error) {
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	if err != nil {
		return target{}, permanent(fmt.Errorf("scaleTargetRef.apiVersion %q is not a valid API version: %w", ref.APIVersion, err))
	}
	if ref.Kind == "" || ref.Name == "" {
		return target{}, permanent(errors.New("scaleTargetRef needs a kind and a name"))
	}
	t := target{kind: targetScale, gv: gv, ref: ref}
	switch {
	case gv.Group == autoscalingv1alpha1.SchemeGroupVersion.Group && ref.Kind == "FederatedHPA":
		t.kind = targetFederatedHPA
	case gv.Group == autoscalingv2.SchemeGroupVersion.Group && ref.Kind == "HorizontalPodAutoscaler":
		t.kind = targetHPA
	case gv.Group == leaderWorkerSetGroup && ref.Kind == leaderWorkerSetKind:
		t.kind = targetLeaderWorkerSet
	}
	return t, nil
}

// values are what one write sets on a target; nil leaves a field alone.
type values struct {
	replicas *int32
	min      *int32
	max      *int32
}

// ruleValues returns what a rule sets on the target, or an error a user can
// act on when the rule does not fit the target's kind.
func ruleValues(t target, rule *autoscalingv1alpha1.CronFederatedHPARule) (values, error) {
	if t.kind == targetLeaderWorkerSet {
		v := values{replicas: rule.TargetReplicas, min: rule.TargetMinReplicas, max: rule.TargetMaxReplicas}
		if v == (values{}) {
			return values{}, fmt.Errorf("set targetReplicas (the replicas of %s) or targetMinReplicas/targetMaxReplicas (the bounds of its spec.scalePolicy)", t.ref.Kind)
		}
		return v, nil
	}
	if t.kind == targetScale {
		if rule.TargetReplicas == nil {
			return values{}, fmt.Errorf("targetReplicas is not set; it is required to scale %s", t.ref.Kind)
		}
		return values{replicas: rule.TargetReplicas}, nil
	}
	if rule.TargetMinReplicas == nil && rule.TargetMaxReplicas == nil {
		return values{}, fmt.Errorf("targetMinReplicas and targetMaxReplicas are both unset; set at least one to adjust %s", t.ref.Kind)
	}
	return values{min: rule.TargetMinReplicas, max: rule.TargetMaxReplicas}, nil
}

// permanentError marks a failure that retrying the same firing cannot fix
// (missing or forbidden target, unknown kind, invalid values): the firing is
// recorded as failed. Other errors are retried while the firing may still run.
type permanentError struct{ err error }

func (e *permanentError) Error() string { return e.err.Error() }
func (e *permanentError) Unwrap() error { return e.err }

func permanent(err error) error { return &permanentError{err: err} }

// isPermanent reports whether err should fail the firing rather than be
// retried.
func isPermanent(err error) bool {
	var p *permanentError
	if errors.As(err, &p) || meta.IsNoMatchError(err) {
		return true
	}
	return apierrors.IsNotFound(err) || apierrors.IsForbidden(err) || apierrors.IsInvalid(err) ||
		apierrors.IsBadRequest(err) || apierrors.IsMethodNotSupported(err) || apierrors.IsUnauthorized(err)
}

// isUnreachable reports whether err means the request got no answer from
// the apiserver: the connection could not be made (refused, no route, name
// not resolved, dial or TLS handshake timeout) or broke before an answer
// (reset, EOF, an HTTP/2 connection lost). The control plane is down or
// restarting, so the firing did not fail on its target; it could not be
// tried (a request cut after it was sent may have been applied: setting
// the same value again is harmless). An answer from the apiserver (any API
// status, such as a webhook's "connection refused" wrapped in a 500) is not
// this, nor is a TLS alert (a certificate problem, which retrying does not
// fix).
func isUnreachable(err error) bool {
	if err == nil {
		return false
	}
	var late *pastDeadlineError
	if errors.As(err, &late) {
		return true
	}
	var status apierrors.APIStatus
	if errors.As(err, &status) {
		return false
	}
	var opErr *net.OpError
	if errors.As(err, &opErr) && opErr.Op == "dial" {
		return true
	}
	return utilnet.IsConnectionRefused(err) || utilnet.IsConnectionReset(err) || utilnet.IsProbableEOF(err) ||
		utilnet.IsHTTP2ConnectionLost(err) || strings.Contains(err.Error(), "TLS handshake timeout")
}

// mayHaveCommitted reports whether a write that failed with err may have
// been stored all the same: the apiserver answered with a server error (an
// etcd timeout after the commit, a 504), or the connection broke after the
// request was sent (reset, EOF, a timeout). An answer that rejects the
// request (4xx), a connection that could not be made, and a refused one
// mean it was not stored.
func mayHaveCommitted(err error) bool {
	if err == nil {
		return false
	}
	var status apierrors.APIStatus
	if errors.As(err, &status) {
		return status.Status().Code >= 500
	}
	var opErr *net.OpError
	if errors.As(err, &opErr) && opErr.Op == "dial" {
		return false
	}
	var late *pastDeadlineError
	if errors.As(err, &late) {
		// Not sent (see inTime).
		return false
	}
	return !utilnet.IsConnectionRefused(err)
}

// apply writes v to the target and returns the error with a reason a user
// can act on. Conflicts are retried with a fresh read; a write that would
// change nothing is skipped. inherited, when set, is the scheduled time of
// an inherited firing: the target's managedFields are checked first, and
// when they decide (see priorWrite) nothing is written.
func (c *Controller) apply(ctx context.Context, namespace string, t target, v values, inherited time.Time) (priorWrite, error) {
	var prior priorWrite
	var err error
	switch t.kind {
	case targetFederatedHPA:
		prior, err = c.applyFederatedHPA(ctx, namespace, t, v, inherited)
	case targetHPA:
		prior, err = c.applyHPA(ctx, namespace, t, v, inherited)
	case targetLeaderWorkerSet:
		prior, err = c.applyLeaderWorkerSet(ctx, namespace, t, v, inherited)
	default:
		prior, err = c.applyScale(ctx, namespace, t, v, inherited)
	}
	switch {
	case err == nil:
		return prior, nil
	case apierrors.IsNotFound(err):
		return prior, fmt.Errorf("%s %s not found in namespace %s: %w", t.ref.APIVersion, t, namespace, err)
	case apierrors.IsForbidden(err):
		return prior, fmt.Errorf("the cron-scaler may not update %s %s (check its RBAC): %w", t.ref.APIVersion, t, err)
	}
	return prior, fmt.Errorf("updating %s %s: %w", t.ref.APIVersion, t, err)
}

// applyScale sets replicas through the scale subresource with one merge
// patch of spec.replicas. A patch needs no read first, so a firing costs one
// request instead of a GET and an UPDATE, which matters when thousands of
// rules fire in the same minute; the apiserver applies it atomically, and a
// patch that changes nothing writes nothing. It works from 0 replicas, where
// the Scale's spec is empty, because it never reads the spec at all.
func (c *Controller) applyScale(ctx context.Context, namespace string, t target, v values, inherited time.Time) (priorWrite, error) {
	gvr, err := c.groupVersionResource(t)
	if err != nil {
		return priorWrite{}, err
	}
	if !inherited.IsZero() && c.metadata != nil {
		// One read, for inherited firings only (see priorWrite).
		m, err := c.metadata.Resource(gvr).Namespace(namespace).Get(ctx, t.ref.Name, metav1.GetOptions{})
		switch {
		case apierrors.IsForbidden(err):
			// A custom resource whose scale subresource was granted without
			// get on the resource: the firing is applied unchecked, as
			// before the check existed.
			klog.FromContext(ctx).Info("May not read the target to check an inherited firing (grant get on it); applying it unchecked", "target", t.String(), "err", err)
		case err != nil:
			return priorWrite{}, err
		default:
			// The metadata read does not say what replicas hold: the
			// cron-scaler's own entry is not taken as applied (patching the
			// value it holds changes nothing), another manager's still is.
			if prior := confirmed(inspectManagedFields(m.ManagedFields, fieldPaths(t, values{replicas: v.replicas}), inherited), false); prior.decided() {
				return prior, nil
			}
		}
	}
	patch := fmt.Appendf(nil, `{"spec":{"replicas":%d}}`, *v.replicas)
	return priorWrite{}, retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := c.inTime(ctx); err != nil {
			return err
		}
		_, err := c.scales.Scales(namespace).Patch(ctx, gvr, t.ref.Name, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: FieldManager})
		return err
	})
}

// groupVersionResource maps the target's kind to its resource. A kind the mapper
// does not know may belong to a CRD installed after discovery was cached:
// reset the mapper and ask once more.
func (c *Controller) groupVersionResource(t target) (schema.GroupVersionResource, error) {
	gk := schema.GroupKind{Group: t.gv.Group, Kind: t.ref.Kind}
	mapping, err := c.mapper.RESTMapping(gk, t.gv.Version)
	if meta.IsNoMatchError(err) {
		c.mapper.Reset()
		mapping, err = c.mapper.RESTMapping(gk, t.gv.Version)
	}
	if err != nil {
		if meta.IsNoMatchError(err) {
			return schema.GroupVersionResource{}, permanent(fmt.Errorf("the API server serves no kind %s in %s (is its CRD installed?): %w", t.ref.Kind, t.ref.APIVersion, err))
		}
		return schema.GroupVersionResource{}, err
	}
	return mapping.Resource, nil
}

// setBounds applies min and max to an autoscaler's bounds and reports whether
// anything changed. A nil minReplicas on the target is set, not compared.
func setBounds(min **int32, max *int32, v values) bool {
	changed := false
	if v.min != nil && (*min == nil || **min != *v.min) {
		*min = ptr.To(*v.min)
		changed = true
	}
	if v.max != nil && *max != *v.max {
		*max = *v.max
		changed = true
	}
	return changed
}

func (c *Controller) applyFederatedHPA(ctx context.Context, namespace string, t target, v values, inherited time.Time) (priorWrite, error) {
	client := c.client.AutoscalingV1alpha1().FederatedHPAs(namespace)
	var prior priorWrite
	// owner is set when the autoscaler is generated by the hpa-generator:
	// the bounds then go to its LeaderWorkerSet (applyGenerated).
	var owner *metav1.OwnerReference
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		fhpa, err := client.Get(ctx, t.ref.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if owner = generatedFrom(fhpa); owner != nil {
			return nil
		}
		prior = confirmed(inspectInherited(fhpa.ManagedFields, fieldPaths(t, v), inherited), boundsHold(fhpa.Spec.MinReplicas, fhpa.Spec.MaxReplicas, v))
		if prior.decided() {
			return nil
		}
		if !setBounds(&fhpa.Spec.MinReplicas, &fhpa.Spec.MaxReplicas, v) {
			return nil
		}
		if err := c.inTime(ctx); err != nil {
			return err
		}
		_, err = client.Update(ctx, fhpa, metav1.UpdateOptions{FieldManager: FieldManager})
		return err
	})
	if err == nil && owner != nil {
		return c.applyGenerated(ctx, namespace, "FederatedHPA", t.ref.Name, owner, v, inherited)
	}
	return prior, err
}

// boundsHold says whether an autoscaler's bounds already hold what v sets.
func boundsHold(min *int32, max int32, v values) bool {
	return (v.min == nil || min != nil && *min == *v.min) && (v.max == nil || max == *v.max)
}

// inspectInherited is inspectManagedFields for an autoscaler target, read
// anyway before it is updated; nothing to inspect for a firing that is not
// inherited.
func inspectInherited(entries []metav1.ManagedFieldsEntry, paths []string, inherited time.Time) priorWrite {
	if inherited.IsZero() {
		return priorWrite{}
	}
	return inspectManagedFields(entries, paths, inherited)
}

// applyLeaderWorkerSet sets the LeaderWorkerSet's replicas through its scale
// subresource and the bounds of its spec.scalePolicy, whichever v sets: the
// hpa-generator then moves the HPA it keeps for it to the new bounds (an HPA
// generated from a policy would put back bounds set on it directly).
func (c *Controller) applyLeaderWorkerSet(ctx context.Context, namespace string, t target, v values, inherited time.Time) (priorWrite, error) {
	if v.replicas != nil {
		if prior, err := c.applyScale(ctx, namespace, t, values{replicas: v.replicas}, inherited); err != nil || prior.decided() {
			return prior, err
		}
	}
	if v.min == nil && v.max == nil {
		return priorWrite{}, nil
	}
	client := c.client.LeaderworkersetV1().LeaderWorkerSets(namespace)
	var prior priorWrite
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		lws, err := client.Get(ctx, t.ref.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		policy := lws.Spec.ScalePolicy
		if policy == nil {
			return permanent(fmt.Errorf("LeaderWorkerSet %s has no spec.scalePolicy: targetMinReplicas/targetMaxReplicas set its bounds, targetReplicas its replicas", lws.Name))
		}
		prior = confirmed(inspectInherited(lws.ManagedFields, fieldPaths(t, values{min: v.min, max: v.max}), inherited), boundsHold(policy.MinReplicas, policy.MaxReplicas, v))
		if prior.decided() {
			return nil
		}
		if !setBounds(&policy.MinReplicas, &policy.MaxReplicas, v) {
			return nil
		}
		if err := c.inTime(ctx); err != nil {
			return err
		}
		_, err = client.Update(ctx, lws, metav1.UpdateOptions{FieldManager: FieldManager})
		return err
	})
	return prior, err
}

func (c *Controller) applyHPA(ctx context.Context, namespace string, t target, v values, inherited time.Time) (priorWrite, error) {
	client := c.kubeClient.AutoscalingV2().HorizontalPodAutoscalers(namespace)
	var prior priorWrite
	// owner is set when the autoscaler is generated by the hpa-generator:
	// the bounds then go to its LeaderWorkerSet (applyGenerated).
	var owner *metav1.OwnerReference
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		hpa, err := client.Get(ctx, t.ref.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if owner = generatedFrom(hpa); owner != nil {
			return nil
		}
		prior = confirmed(inspectInherited(hpa.ManagedFields, fieldPaths(t, v), inherited), boundsHold(hpa.Spec.MinReplicas, hpa.Spec.MaxReplicas, v))
		if prior.decided() {
			return nil
		}
		if !setBounds(&hpa.Spec.MinReplicas, &hpa.Spec.MaxReplicas, v) {
			return nil
		}
		if err := c.inTime(ctx); err != nil {
			return err
		}
		_, err = client.Update(ctx, hpa, metav1.UpdateOptions{FieldManager: FieldManager})
		return err
	})
	if err == nil && owner != nil {
		return c.applyGenerated(ctx, namespace, "HorizontalPodAutoscaler", t.ref.Name, owner, v, inherited)
	}
	return prior, err
}

// firingDeadlineKey carries, in the context of a sync's target write, the
// earliest deadline of the firings it applies.
type firingDeadlineKey struct{}

// withFiringDeadline gives the target write of fire the deadline of its
// firings: a request of the same sync that hangs (a read before the write,
// the target's managedFields, the object read fresh) can outlast it, and a
// firing decided in time must not be written after its deadline (issue 36,
// seeds 9100648, 9101178, 9101473 of -sim.edges -sim.model: a GET of an HPA
// hung past maxDelaySeconds, then the update was sent).
func withFiringDeadline(ctx context.Context, deadline time.Time) context.Context {
	return context.WithValue(ctx, firingDeadlineKey{}, deadline)
}

// inTime is checked right before each target write: past the firings'
// deadline (on the controller's clock) the write is not sent, and the
// attempt counts as one the apiserver did not answer in time, so the slot
// is given up as not reached (see retryFiring).
func (c *Controller) inTime(ctx context.Context) error {
	deadline, ok := ctx.Value(firingDeadlineKey{}).(time.Time)
	if ok && !deadline.IsZero() && c.clock.Now().After(deadline) {
		return &pastDeadlineError{deadline: deadline}
	}
	return nil
}

// pastDeadlineError says a target write was not sent: its firing's deadline
// passed while the sync waited for the apiserver.
type pastDeadlineError struct{ deadline time.Time }

func (e *pastDeadlineError) Error() string {
	return fmt.Sprintf("not written: the firing's deadline %s passed while waiting for the apiserver", e.deadline.UTC().Format(time.RFC3339))
}
