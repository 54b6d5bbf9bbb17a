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
	"slices"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	scaleplanev1alpha1 "github.com/scaleplane/scaleplane/pkg/apis/scaleplane/v1alpha1"
)

// Reasons of the Karmada mode's conditions.
const (
	reasonKarmada              = "Karmada"
	reasonLocal                = "Local"
	reasonNoNodesOnKarmada     = "NoNodesOnKarmada"
	reasonUnsupportedOnKarmada = "UnsupportedOnKarmada"
	reasonKarmadaAPIsMissing   = "KarmadaAPIsMissing"
	reasonNotScheduled         = "NotScheduled"
	reasonClustersNotCurrent   = "ClustersNotCurrent"
	reasonAllClustersSized     = "AllClustersSized"
	reasonOverridePolicyFailed = "OverridePolicyFailed"
	reasonOverridePolicyTaken  = "OverridePolicyNameTaken"
	reasonForeignOverride      = "ForeignOverride"
	reasonExclusive            = "Exclusive"
)

// Event reasons of the Karmada mode (Normal).
const (
	eventOverridePolicyWritten = "OverridePolicyWritten"
	eventOverridePolicyDeleted = "OverridePolicyDeleted"
)

// policyRetry is how soon a refused OverridePolicy write is tried again.
const policyRetry = time.Minute

// writeOverridePolicy labels the OverridePolicy writes of resizer_writes.
const writeOverridePolicy = "override_policy"

// indexMember maps a member cluster name to the AddonResizers whose status
// lists it, so that a Cluster's change enqueues only those.
const indexMember = "resizer.scaleplane.io/member"

func indexByMember(obj any) ([]string, error) {
	ar, ok := obj.(*scaleplanev1alpha1.AddonResizer)
	if !ok {
		return nil, nil
	}
	out := make([]string, 0, len(ar.Status.Clusters))
	for _, m := range ar.Status.Clusters {
		out = append(out, m.Name)
	}
	return out, nil
}

// bindingName is the name Karmada gives the ResourceBinding of a template
// (pkg/util/names/names.go, GenerateBindingName, v1.18.2).
func bindingName(kind scaleplanev1alpha1.TargetKind, name string) string {
	return strings.ToLower(strings.ReplaceAll(name, ":", ".") + "-" + string(kind))
}

// reconcileFederated decides the federation mode. It returns done when the
// AddonResizer is handled here (Karmada mode, or refused); otherwise the
// plain-cluster path goes on. On a cluster that serves none of Karmada's
// APIs it changes nothing in status, so existing AddonResizers there see no
// difference.
func (c *Controller) reconcileFederated(ctx context.Context, ar *scaleplanev1alpha1.AddonResizer, s settings, status *scaleplanev1alpha1.AddonResizerStatus, now time.Time) (result, bool) {
	apis, err := c.detector.apis(ctx)
	if err != nil {
		return result{outcome: outcomeError, err: err}, true
	}
	if !apis.any() && c.wouldCountNoNodes(s) {
		// Zero Nodes is what karmada-apiserver has: make sure Karmada was
		// not installed since discovery was last read, rather than size
		// the add-on to its base from a remembered answer.
		if apis, err = c.detector.fresh(ctx); err != nil {
			return result{outcome: outcomeError, err: err}, true
		}
	}
	mode := federationOf(&ar.Spec, apis)
	if mode == scaleplanev1alpha1.FederationKarmada {
		status.Federation = mode
		if !apis.all() {
			msg := "Karmada mode needs Karmada's APIs; the API server does not serve " + apis.missing()
			setCondition(status, scaleplanev1alpha1.ConditionFederation, metav1.ConditionFalse, reasonKarmadaAPIsMissing, msg, ar.Generation, now)
			setCondition(status, scaleplanev1alpha1.ConditionUpToDate, metav1.ConditionFalse, reasonKarmadaAPIsMissing, msg+"; nothing is written", ar.Generation, now)
			return result{outcome: outcomeError, requeue: discoveryInterval}, true
		}
		ok, err := c.karmadaReady()
		if err != nil {
			return result{outcome: outcomeError, err: err}, true
		}
		if !ok {
			return result{wait: cacheRetry}, true
		}
		return c.reconcileKarmada(ctx, ar, s, status, now), true
	}
	if !apis.any() {
		return result{}, false
	}
	// Federation None on a Karmada control plane: counted here, as asked,
	// but never from an API server with no Nodes, and what Karmada mode
	// wrote is removed.
	status.Federation = mode
	clearKarmadaStatus(status)
	if apis.all() {
		ok, err := c.karmadaReady()
		if err != nil {
			return result{outcome: outcomeError, err: err}, true
		}
		if !ok {
			return result{wait: cacheRetry}, true
		}
		if err := c.deleteOverridePolicy(ctx, ar, "federation is None"); err != nil {
			return result{outcome: outcomeError, err: err}, true
		}
	}
	if s.mode == scaleplanev1alpha1.NodeProportional && s.source == scaleplanev1alpha1.SourceAPIServer {
		ready, err := c.counts.ready(s.mode)
		if err != nil {
			return result{outcome: outcomeError, err: err}, true
		}
		if !ready {
			return result{wait: cacheRetry}, true
		}
		if c.counts.size(s.mode, ar.Namespace, nil) == 0 {
			msg := "This API server serves Karmada's APIs and has no Nodes: federation None would size the add-on to its base; resources left as they are. Use federation Karmada (or Auto) to size it per member cluster"
			setCondition(status, scaleplanev1alpha1.ConditionFederation, metav1.ConditionFalse, reasonNoNodesOnKarmada, msg, ar.Generation, now)
			setCondition(status, scaleplanev1alpha1.ConditionUpToDate, metav1.ConditionFalse, reasonNoNodesOnKarmada, msg, ar.Generation, now)
			return result{outcome: outcomeError}, true
		}
	}
	setCondition(status, scaleplanev1alpha1.ConditionFederation, metav1.ConditionTrue, reasonLocal,
		"Sized from this API server's own "+s.unit()+", as federation None asks, although it serves Karmada's APIs", ar.Generation, now)
	return result{}, false
}

// clearKarmadaStatus drops what Karmada mode records.
func clearKarmadaStatus(status *scaleplanev1alpha1.AddonResizerStatus) {
	status.MemberClusters, status.SizedClusters, status.OverridePolicy, status.Clusters = nil, nil, "", nil
	meta.RemoveStatusCondition(&status.Conditions, scaleplanev1alpha1.ConditionOverrideExclusive)
}

// reconcileKarmada sizes the target per member cluster it is scheduled to
// and writes the sizes as the AddonResizer's OverridePolicy. The template is
// never written.
func (c *Controller) reconcileKarmada(ctx context.Context, ar *scaleplanev1alpha1.AddonResizer, s settings, status *scaleplanev1alpha1.AddonResizerStatus, now time.Time) result {
	status.ClusterSize, status.Recommendation, status.PendingResize = nil, nil, nil
	refusal := karmadaRefusal(ar, s)
	if refusal != "" {
		setCondition(status, scaleplanev1alpha1.ConditionFederation, metav1.ConditionFalse, reasonUnsupportedOnKarmada, refusal, ar.Generation, now)
	}
	w, err := c.cachedTarget(ar.Namespace, s.target)
	if err != nil {
		if !isGone(err) {
			return result{outcome: outcomeError, err: fmt.Errorf("reading the target of %s: %w", klog.KObj(ar), err)}
		}
		targetMissing(status, ar, s.target, err, now)
		return result{outcome: outcomeError}
	}
	setCondition(status, scaleplanev1alpha1.ConditionTargetFound, metav1.ConditionTrue, reasonFound, w.String()+" found", ar.Generation, now)
	index := containerIndex(w.template, s.container)
	if index < 0 {
		containerMissing(status, ar, s, w, now)
		return c.containerGone(ctx, ar, s, status)
	}
	setCondition(status, scaleplanev1alpha1.ConditionContainerFound, metav1.ConditionTrue, reasonFound, fmt.Sprintf("Container %q found", s.container), ar.Generation, now)
	if refusal != "" {
		setCondition(status, scaleplanev1alpha1.ConditionUpToDate, metav1.ConditionFalse, reasonUnsupportedOnKarmada, refusal, ar.Generation, now)
		return c.holdPolicy(ctx, ar, s, w, index, status, now)
	}
	if rivals := c.rivals(ar, s); len(rivals) > 0 {
		ambiguousCondition(status, ar, s, w, rivals, now)
		return c.holdPolicy(ctx, ar, s, w, index, status, now)
	}
	placed, err := c.placement(ar.Namespace, s.target)
	if err != nil {
		return result{outcome: outcomeError, err: err}
	}
	if recommendOnly(ar) {
		return c.recommendMembers(ctx, ar, s, w, index, placed, status, now)
	}
	return c.sizeMembers(ctx, ar, s, w, index, placed, status, now)
}

// karmadaRefusal says why the spec cannot be served on Karmada; empty when
// it can.
func karmadaRefusal(ar *scaleplanev1alpha1.AddonResizer, s settings) string {
	switch {
	case s.mode == scaleplanev1alpha1.ContainerProportional:
		return "ContainerProportional cannot be sized per member cluster: Karmada keeps no per-cluster container count (a Cluster's status counts nodes and resources, not containers); use NodeProportional. The members keep the sizes they hold"
	case inPlace(ar):
		return "updateMode InPlace cannot work on Karmada: the control plane runs no pods to resize, and the sizes reach the members through an OverridePolicy, as a rollout of each member's copy; use updateMode Rollout. The members keep the sizes they hold"
	}
	return ""
}

// sizeMembers sizes each member the template is placed on, writes the
// OverridePolicy and records what the members render.
func (c *Controller) sizeMembers(ctx context.Context, ar *scaleplanev1alpha1.AddonResizer, s settings, w *workload, index int, placed []string, status *scaleplanev1alpha1.AddonResizerStatus, now time.Time) result {
	base := w.template.Spec.Containers[index].Resources
	prev := previousMembers(status)
	var (
		members   []scaleplanev1alpha1.MemberClusterStatus
		requeue   time.Duration
		summaries = map[string]string{}
		hits      = map[string][]boundHit{}
	)
	for _, name := range placed {
		cluster, err := c.karmada.clusters.Get(name)
		if err != nil && !apierrors.IsNotFound(err) {
			return result{outcome: outcomeError, err: err}
		}
		if err != nil {
			cluster = nil
		}
		d := decideMember(name, prev[name], cluster, base, s, now)
		if len(d.hits) > 0 {
			hits[name] = d.hits
		}
		members = append(members, d.status)
		requeue = minPositive(requeue, d.requeue)
		if sum := d.summary(s.setLimits); sum != "" {
			summaries[name] = sum
		}
	}
	status.MemberClusters = ptr.To(int32(len(placed)))
	setCondition(status, scaleplanev1alpha1.ConditionFederation, metav1.ConditionTrue, reasonKarmada,
		"Sized per member cluster from its Cluster's status.nodeSummary.totalNum, through an OverridePolicy", ar.Generation, now)
	c.foreignCondition(ar, w, s, index, status, now)
	boundedCondition(status, s, hits, ar.Generation, now)

	out, err := c.holdMembers(ctx, ar, w, index, members, prev, status)
	if out.problem != nil {
		// Forbidden, invalid, failed or someone else's name: retried with
		// backoff, or looked at again in a while (no event says when it is
		// fixed).
		setCondition(status, scaleplanev1alpha1.ConditionUpToDate, metav1.ConditionFalse, out.problem.reason, out.problem.message, ar.Generation, now)
		return result{outcome: outcomeError, err: err, requeue: minPositive(requeue, policyRetry)}
	}
	if err != nil {
		return result{outcome: outcomeError, err: err, requeue: requeue}
	}
	upToDateOfMembers(ar, status, status.Clusters, now)
	var changed []string
	for _, m := range status.Clusters {
		if sum, ok := summaries[m.Name]; ok && m.State != scaleplanev1alpha1.MemberNotApplied {
			changed = append(changed, m.Name+": "+sum)
			status.LastChangeTime = m.LastChangeTime
		}
	}
	if len(changed) == 0 {
		return result{outcome: outcomeWithinThreshold, requeue: requeue}
	}
	c.recorder.Eventf(ar, corev1.EventTypeNormal, eventResized, "Resized %s %q per member cluster: %s", w, s.container, strings.Join(changed, "; "))
	return result{outcome: outcomeResized, requeue: requeue}
}

// previousMembers indexes the members of the last status by name.
func previousMembers(status *scaleplanev1alpha1.AddonResizerStatus) map[string]*scaleplanev1alpha1.MemberClusterStatus {
	prev := map[string]*scaleplanev1alpha1.MemberClusterStatus{}
	for i := range status.Clusters {
		prev[status.Clusters[i].Name] = status.Clusters[i].DeepCopy()
	}
	return prev
}

// holdPolicy keeps the members at the sizes they hold while they cannot be
// re-sized (a mode Karmada cannot serve, another AddonResizer on the same
// resources), but fitted to the spec and the template: the OverridePolicy
// follows the container's index and never renders a request above its
// limit, so that the template keeps reaching the members. UpToDate keeps
// the reason they are not re-sized.
func (c *Controller) holdPolicy(ctx context.Context, ar *scaleplanev1alpha1.AddonResizer, s settings, w *workload, index int, status *scaleplanev1alpha1.AddonResizerStatus, now time.Time) result {
	base := w.template.Spec.Containers[index].Resources
	prev := previousMembers(status)
	members := make([]scaleplanev1alpha1.MemberClusterStatus, 0, len(status.Clusters))
	for _, m := range status.Clusters {
		held := *m.DeepCopy()
		held.Resources, _ = fitHeld(held.Resources, base, s)
		members = append(members, held)
	}
	c.foreignCondition(ar, w, s, index, status, now)
	sized := status.SizedClusters
	_, err := c.holdMembers(ctx, ar, w, index, members, prev, status)
	if len(members) == 0 {
		status.SizedClusters = sized
	}
	return result{outcome: outcomeError, err: err}
}

// holdMembers writes the OverridePolicy that holds members at the sizes
// their status holds, and records in status what they render afterwards
// (settleMembers): status.clusters and sizedClusters.
func (c *Controller) holdMembers(ctx context.Context, ar *scaleplanev1alpha1.AddonResizer, w *workload, index int, members []scaleplanev1alpha1.MemberClusterStatus, prev map[string]*scaleplanev1alpha1.MemberClusterStatus, status *scaleplanev1alpha1.AddonResizerStatus) (policyOutcome, error) {
	desired := desiredOverridePolicy(ar, w, index, members)
	out, err := c.writeOverridePolicy(ctx, ar, desired, status)
	status.Clusters, status.SizedClusters = settleMembers(members, prev, desired, out.applied, index)
	return out, err
}

// containerGone removes the OverridePolicy of an AddonResizer whose
// container is no longer in the template: its rules address the container
// by index, and a JSON patch at an index the template no longer has fails,
// so that Karmada's override fails and no new template would reach the
// sized members. The members run the template until the container is back.
func (c *Controller) containerGone(ctx context.Context, ar *scaleplanev1alpha1.AddonResizer, s settings, status *scaleplanev1alpha1.AddonResizerStatus) result {
	for i := range status.Clusters {
		m := &status.Clusters[i]
		m.Resources, m.PendingResize = nil, nil
		m.State = scaleplanev1alpha1.MemberUnknown
		m.Message = fmt.Sprintf("Container %q is not in the template; the cluster runs the template's resources", s.container)
	}
	if status.MemberClusters != nil {
		status.SizedClusters = ptr.To(int32(0))
	}
	status.OverridePolicy = ""
	if err := c.deleteOverridePolicy(ctx, ar, fmt.Sprintf("container %q is not in the template", s.container)); err != nil {
		// It stays: status names it while it exists (explain reads it).
		status.OverridePolicy = overridePolicyName(ar)
		return result{outcome: outcomeError, err: err}
	}
	return result{outcome: outcomeError}
}

// placement returns the member clusters the template is scheduled to, in
// name order, from its ResourceBinding; none when it has no binding (not
// propagated yet, or no longer).
func (c *Controller) placement(namespace string, ref scaleplanev1alpha1.TargetReference) ([]string, error) {
	rb, err := c.karmada.bindings.ResourceBindings(namespace).Get(bindingName(ref.Kind, ref.Name))
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if rb.Spec.Resource.Kind != string(ref.Kind) || rb.Spec.Resource.Name != ref.Name {
		return nil, nil
	}
	var names []string
	for _, tc := range rb.Spec.Clusters {
		if tc.Name != "" && !slices.Contains(names, tc.Name) {
			names = append(names, tc.Name)
		}
	}
	sort.Strings(names)
	return names, nil
}

// upToDateOfMembers sets UpToDate from the members' states.
func upToDateOfMembers(ar *scaleplanev1alpha1.AddonResizer, status *scaleplanev1alpha1.AddonResizerStatus, members []scaleplanev1alpha1.MemberClusterStatus, now time.Time) {
	if len(members) == 0 {
		setCondition(status, scaleplanev1alpha1.ConditionUpToDate, metav1.ConditionTrue, reasonNotScheduled,
			"The template has no ResourceBinding with scheduled clusters: nothing to size", ar.Generation, now)
		return
	}
	var postponed, notCurrent, capped []string
	for _, m := range members {
		switch m.State {
		case scaleplanev1alpha1.MemberPostponed:
			postponed = append(postponed, m.Name)
		case scaleplanev1alpha1.MemberCapped:
			capped = append(capped, m.Name+" ("+m.Message+")")
		case scaleplanev1alpha1.MemberStale, scaleplanev1alpha1.MemberUnknown:
			notCurrent = append(notCurrent, m.Name+" ("+m.Message+")")
		}
	}
	switch {
	case len(notCurrent) > 0:
		setCondition(status, scaleplanev1alpha1.ConditionUpToDate, metav1.ConditionFalse, reasonClustersNotCurrent,
			"Not resized while their status is not current: "+strings.Join(notCurrent, "; "), ar.Generation, now)
	case len(postponed) > 0:
		setCondition(status, scaleplanev1alpha1.ConditionUpToDate, metav1.ConditionFalse, reasonPostponed,
			"A delay holds changes back for "+strings.Join(postponed, ", ")+" (status.clusters says until when)", ar.Generation, now)
	case len(capped) > 0:
		// As a plain cluster's container in that state (cappedCondition).
		setCondition(status, scaleplanev1alpha1.ConditionUpToDate, metav1.ConditionFalse, reasonCappedAtLimit,
			"Held below their estimate by the template's limits: "+strings.Join(capped, "; ")+"; raise the template's limits, or set setLimits: true to size them too", ar.Generation, now)
	default:
		setCondition(status, scaleplanev1alpha1.ConditionUpToDate, metav1.ConditionTrue, reasonAllClustersSized,
			fmt.Sprintf("All %d member clusters are held at their recommendation", len(members)), ar.Generation, now)
	}
}

// foreignCondition reports OverridePolicies of others that override the
// same container's resources.
func (c *Controller) foreignCondition(ar *scaleplanev1alpha1.AddonResizer, w *workload, s settings, index int, status *scaleplanev1alpha1.AddonResizerStatus, now time.Time) {
	policies, err := c.karmada.policies.OverridePolicies(ar.Namespace).List(labels.Everything())
	if err != nil {
		return
	}
	tmplLabels := c.targetLabels(w)
	mine := overriddenPaths(w.template.Spec.Containers[index].Resources, index, s)
	var foreign []string
	for _, p := range policies {
		if metav1.IsControlledBy(p, ar) {
			continue
		}
		if foreignOverride(p, w, tmplLabels, mine) {
			foreign = append(foreign, p.Name)
		}
	}
	sort.Strings(foreign)
	old := meta.FindStatusCondition(status.Conditions, scaleplanev1alpha1.ConditionOverrideExclusive)
	if len(foreign) == 0 {
		setCondition(status, scaleplanev1alpha1.ConditionOverrideExclusive, metav1.ConditionTrue, reasonExclusive,
			"No other OverridePolicy overrides the container's resources", ar.Generation, now)
		return
	}
	msg := describeForeign(foreign)
	if old == nil || old.Status != metav1.ConditionFalse || old.Message != msg {
		c.recorder.Event(ar, corev1.EventTypeWarning, reasonForeignOverride, msg)
	}
	setCondition(status, scaleplanev1alpha1.ConditionOverrideExclusive, metav1.ConditionFalse, reasonForeignOverride, msg, ar.Generation, now)
}

// targetLabels returns the template object's own labels, which resource
// selectors match.
func (c *Controller) targetLabels(w *workload) map[string]string {
	var m metav1.Object
	var err error
	switch w.kind {
	case scaleplanev1alpha1.TargetKindDeployment:
		m, err = c.deployments.Deployments(w.namespace).Get(w.name)
	case scaleplanev1alpha1.TargetKindStatefulSet:
		m, err = c.statefulSets.StatefulSets(w.namespace).Get(w.name)
	case scaleplanev1alpha1.TargetKindDaemonSet:
		m, err = c.daemonSets.DaemonSets(w.namespace).Get(w.name)
	}
	if err != nil || m == nil {
		return nil
	}
	return m.GetLabels()
}

// setUpFederation adds what the Karmada mode needs to a new controller: the
// discovery reader and the (not yet started) Karmada caches, and the member
// index on the AddonResizer informer.
func (c *Controller) setUpFederation(arInformer cache.SharedIndexInformer, d discovery.DiscoveryInterface) error {
	c.detector = newAPIDetector(d, c.clock)
	c.karmada = &karmadaCaches{client: c.client}
	if err := arInformer.AddIndexers(cache.Indexers{indexMember: indexByMember}); err != nil {
		return fmt.Errorf("adding the AddonResizer member index: %w", err)
	}
	return nil
}

// The Karmada mode's reasons of UpToDate=False that a user must act on are
// Warning events too, sent when the condition turns to them (status.go).
func init() {
	warningReasons = append(warningReasons, reasonNoNodesOnKarmada, reasonUnsupportedOnKarmada, reasonKarmadaAPIsMissing,
		reasonOverridePolicyFailed, reasonOverridePolicyTaken, reasonClustersNotCurrent)
}

// wouldCountNoNodes tells whether the plain-cluster path would size s from
// zero Nodes (false while the node count is not known yet).
func (c *Controller) wouldCountNoNodes(s settings) bool {
	if s.mode != scaleplanev1alpha1.NodeProportional || s.source != scaleplanev1alpha1.SourceAPIServer {
		return false
	}
	ready, err := c.counts.ready(s.mode)
	return err == nil && ready && c.counts.size(s.mode, "", nil) == 0
}
