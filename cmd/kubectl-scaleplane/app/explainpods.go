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
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	scaleplanev1alpha1 "github.com/scaleplane/scaleplane/pkg/apis/scaleplane/v1alpha1"
	"github.com/scaleplane/scaleplane/pkg/inplaceresize"
	"github.com/scaleplane/scaleplane/pkg/resizeestimate"
	"github.com/scaleplane/scaleplane/pkg/resourceoverride"
)

// PodExplanation is one pod of an InPlace AddonResizer's target, as the
// resizer sees it (pkg/inplaceresize, the rule it decides by).
type PodExplanation struct {
	Name  string `json:"name"`
	Node  string `json:"node,omitempty"`
	Phase string `json:"phase"`
	// State is the resizer's: at_size, outdated, resizing, deferred,
	// infeasible, error, unreported or node_not_ready from the pod and its
	// node; rejected, forbidden or conflicted where the controller's
	// InPlaceResized condition names the pod (the controller keeps these
	// in memory); not_resized for a pod it does not resize.
	State string `json:"state"`
	// Current is the container's resources in the pod's spec, Applied what
	// its kubelet reports (status.containerStatuses[].resources), Target
	// the size the resizer holds this pod at: status.inPlace's, each
	// request capped at the pod's own limit (Capped says which).
	Current *corev1.ResourceRequirements `json:"current,omitempty"`
	Applied *corev1.ResourceRequirements `json:"applied,omitempty"`
	Target  *corev1.ResourceRequirements `json:"target,omitempty"`
	Capped  []string                     `json:"capped,omitempty"`
	// MidResize: not at the size, and its kubelet has not applied a size
	// sent before; it holds a place of the pacing and is sent first.
	MidResize bool `json:"midResize,omitempty"`
	// Paced: to be resized, but inplaceresize.MaxInFlight pods are
	// mid-resize; it waits for a place.
	Paced bool `json:"paced,omitempty"`
	// Next says what the resizer does with the pod at its next sync.
	Next string `json:"next"`
	// Message is the kubelet's, the node's or the controller's word.
	Message string `json:"message,omitempty"`
}

// ClusterExplanation is one Karmada member cluster of an AddonResizer in
// Karmada mode: the count, the estimate from it, the size the resizer holds
// (status.clusters) and what its OverridePolicy sets for the cluster.
type ClusterExplanation struct {
	Name string `json:"name"`
	// Nodes is the count (the Cluster's status.nodeSummary.totalNum, as the
	// controller last read it), Units what the estimate is computed for
	// (Nodes, or its bucket).
	Nodes    *int32            `json:"nodes,omitempty"`
	Units    int64             `json:"units,omitempty"`
	Estimate map[string]string `json:"estimate,omitempty"`
	// Held is status.clusters[].resources; OverridePolicy the values the
	// OverridePolicy's rule for the cluster sets (nil: no rule, the
	// cluster runs the template).
	Held           *corev1.ResourceRequirements `json:"held,omitempty"`
	OverridePolicy *corev1.ResourceRequirements `json:"overridePolicy,omitempty"`
	// PolicyDiffers: the OverridePolicy's rule for the cluster does not set
	// the size held (someone edited or removed it, or the resizer has not
	// written it yet); the resizer writes it again on its next sync.
	PolicyDiffers bool                `json:"policyDiffers,omitempty"`
	State         string              `json:"state,omitempty"`
	Pending       *PendingExplanation `json:"pending,omitempty"`
	Message       string              `json:"message,omitempty"`
}

// controllerPodStates are the InPlaceResized reasons that name one pod the
// controller holds back from its memory, and the state it gives that pod.
var controllerPodStates = map[string]string{
	"ResizeRejected":  "rejected",
	"ResizeForbidden": "forbidden",
	"ResizeConflict":  "conflicted",
}

// explainPods lists the target's pods as the in-place resizer sees them at
// the size status.inPlace holds: each pod classified by the resizer's rule,
// its node's readiness, and the pacing (at most inplaceresize.MaxInFlight
// mid-resize, pods taken by name, a pod mid-resize at an older size first).
//
// It warns when the nodes cannot be read (a RoleBinding of the plugin's
// ClusterRole grants no cluster-scoped Nodes): their pods are then shown as
// on Ready nodes, which may not be what the resizer sees.
func explainPods(ctx context.Context, c *Clients, ns string, ar *scaleplanev1alpha1.AddonResizer, selector *metav1.LabelSelector) ([]PodExplanation, []string, error) {
	held := ar.Status.InPlace
	if held == nil || selector == nil {
		return nil, nil, nil
	}
	sel, err := metav1.LabelSelectorAsSelector(selector)
	if err != nil {
		return nil, nil, fmt.Errorf("the target's selector: %w", err)
	}
	list, err := c.Kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: sel.String()})
	if err != nil {
		return nil, nil, fmt.Errorf("listing the target's pods: %w", err)
	}
	pods := list.Items
	sort.Slice(pods, func(i, j int) bool { return pods[i].Name < pods[j].Name })
	size := inplaceresize.Size{Requests: held.Resources.Requests, Limits: held.Resources.Limits}
	cond := meta.FindStatusCondition(ar.Status.Conditions, scaleplanev1alpha1.ConditionInPlaceResized)
	nodes := map[string]*corev1.NodeCondition{}
	var unreadable error
	notReady := func(name string) *corev1.NodeCondition {
		if cached, ok := nodes[name]; ok || unreadable != nil {
			// Refused once, every node is: no request per node.
			return cached
		}
		var out *corev1.NodeCondition
		// A node that cannot be read counts as Ready, as one unknown to the
		// resizer does.
		if node, err := c.Kube.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{}); err == nil {
			for i := range node.Status.Conditions {
				if cd := node.Status.Conditions[i]; cd.Type == corev1.NodeReady && inplaceresize.NodeNotReady(cd.Status) {
					out = &cd
				}
			}
		} else if apierrors.IsForbidden(err) {
			unreadable = err
		} else if !apierrors.IsNotFound(err) {
			return nil
		}
		nodes[name] = out
		return out
	}

	out := make([]PodExplanation, 0, len(pods))
	inFlight := 0
	for i := range pods {
		pod := &pods[i]
		x := PodExplanation{Name: pod.Name, Node: pod.Spec.NodeName, Phase: string(pod.Status.Phase)}
		a, ok := inplaceresize.Classify(pod, ar.Spec.ContainerName, size)
		if !ok {
			x.State, x.Next = "not_resized", "nothing: "+notResizedWhy(pod, ar.Spec.ContainerName)
			out = append(out, x)
			continue
		}
		x.State, x.Message, x.MidResize = string(a.State), a.Message, a.MidResize
		x.Current, x.Applied = a.Spec, a.Applied
		x.Target = &corev1.ResourceRequirements{Requests: a.Size.Requests, Limits: a.Size.Limits}
		for _, cp := range a.Capped {
			x.Capped = append(x.Capped, fmt.Sprintf("%s %s capped at the pod's limit %s", cp.Name, cp.Estimate.String(), cp.Limit.String()))
		}
		if a.State == inplaceresize.Outdated && cond != nil && cond.Status == metav1.ConditionFalse && namesPod(cond.Message, pod.Name) {
			if st, ok := controllerPodStates[cond.Reason]; ok {
				x.State, x.Message = st, cond.Message
			}
		}
		if a.State != inplaceresize.AtSize {
			if nr := notReady(pod.Spec.NodeName); nr != nil {
				x.State, x.MidResize = "node_not_ready", false
				x.Message = fmt.Sprintf("node %s Ready %s since %s", pod.Spec.NodeName, nr.Status, nr.LastTransitionTime.UTC().Format(time.RFC3339))
				if nr.Reason != "" {
					x.Message += ", " + nr.Reason
				}
			}
		}
		if inplaceresize.State(x.State).InFlight() || x.MidResize {
			inFlight++
		}
		out = append(out, x)
	}
	for i := range out {
		x := &out[i]
		switch x.State {
		case "not_resized":
		case "outdated", "forbidden", "conflicted":
			if !x.MidResize && inFlight >= inplaceresize.MaxInFlight {
				x.Paced = true
				x.Next = fmt.Sprintf("waits for a place: %d pods are mid-resize, at most %d at a time", inFlight, inplaceresize.MaxInFlight)
				continue
			}
			switch x.State {
			case "outdated":
				// Resized at the next sync: it takes a place.
				if !x.MidResize {
					inFlight++
				}
				x.Next = "resized at the next sync (pods/resize, no restart)"
				if x.MidResize {
					x.Next += ", first: it is mid-resize at an older size and holds its place"
				}
			// The controller takes a place only for a resize that goes
			// through (resizePods), and this pod's next attempt waits for
			// its backoff, which the next sync most likely falls within:
			// it leaves its place to the next pod.
			case "forbidden":
				x.Next = fmt.Sprintf("tried again with backoff, up to every %s: the API server forbade its resize (holds no place until one goes through)", 5*time.Minute)
			default:
				x.Next = fmt.Sprintf("tried again with backoff, up to every %s: its resizes keep conflicting (holds no place until one goes through)", 5*time.Minute)
			}
		default:
			x.Next = podNext(x.State, x.Node)
		}
	}
	var warnings []string
	if unreadable != nil {
		warnings = append(warnings, fmt.Sprintf("nodes cannot be read (%v): every pod's node is shown as Ready; "+
			"a ClusterRoleBinding of scaleplane:kubectl-plugin grants get on Nodes", unreadable))
	}
	return out, warnings, nil
}

// podNext says what the resizer does with a pod in state, as docs/resizer.md
// lists the answers.
func podNext(state, node string) string {
	switch state {
	case "at_size":
		return "nothing: at the size"
	case "resizing":
		return "waits for its kubelet to apply the size (holds a place)"
	case "deferred":
		return "waits: its kubelet deferred the resize until the node has room, and retries by itself (holds a place)"
	case "infeasible":
		return "nothing at this size: the node will never fit it (abandoned, holds no place)"
	case "error":
		return "waits: its kubelet failed to apply the resize and retries (holds a place)"
	case "unreported":
		return "waits for its kubelet to report the container's resources: the API server would refuse a resize before"
	case "node_not_ready":
		return fmt.Sprintf("waits for node %s to be Ready (holds no place)", node)
	case "rejected":
		return "nothing at this size: the API server refused its resize (abandoned, holds no place)"
	}
	return "nothing"
}

func notResizedWhy(pod *corev1.Pod, container string) string {
	switch {
	case pod.DeletionTimestamp != nil:
		return "being deleted"
	case pod.Spec.NodeName == "":
		return "not bound to a node yet"
	case pod.Status.Phase != corev1.PodRunning:
		return "not running; it is resized once it runs"
	}
	return fmt.Sprintf("no container %s", container)
}

// namesPod reports whether a condition message names pod ("pod NAME " or
// "pod NAME," ...), as the resizer's InPlaceResized messages do.
func namesPod(msg, pod string) bool {
	for i := 0; ; {
		j := strings.Index(msg[i:], "pod "+pod)
		if j < 0 {
			return false
		}
		end := i + j + len("pod "+pod)
		if end == len(msg) || !isNameChar(msg[end]) {
			return true
		}
		i = end
	}
}

func isNameChar(b byte) bool {
	return b >= 'a' && b <= 'z' || b >= '0' && b <= '9' || b == '-' || b == '.'
}

// targetTemplate returns the AddonResizer's target's pod template, its pod
// selector and the index of the AddonResizer's container in it.
func targetTemplate(ctx context.Context, c *Clients, ns string, spec *scaleplanev1alpha1.AddonResizerSpec) (*corev1.PodTemplateSpec, *metav1.LabelSelector, int, error) {
	var tmpl *corev1.PodTemplateSpec
	var selector *metav1.LabelSelector
	name := spec.TargetRef.Name
	switch spec.TargetRef.Kind {
	case scaleplanev1alpha1.TargetKindDeployment:
		d, err := c.Kube.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return nil, nil, 0, fmt.Errorf("reading its target: %w", err)
		}
		tmpl, selector = &d.Spec.Template, d.Spec.Selector
	case scaleplanev1alpha1.TargetKindStatefulSet:
		s, err := c.Kube.AppsV1().StatefulSets(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return nil, nil, 0, fmt.Errorf("reading its target: %w", err)
		}
		tmpl, selector = &s.Spec.Template, s.Spec.Selector
	case scaleplanev1alpha1.TargetKindDaemonSet:
		d, err := c.Kube.AppsV1().DaemonSets(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return nil, nil, 0, fmt.Errorf("reading its target: %w", err)
		}
		tmpl, selector = &d.Spec.Template, d.Spec.Selector
	default:
		return nil, nil, 0, fmt.Errorf("target kind %q is not one the resizer sizes", spec.TargetRef.Kind)
	}
	for i := range tmpl.Spec.Containers {
		if tmpl.Spec.Containers[i].Name == spec.ContainerName {
			return tmpl, selector, i, nil
		}
	}
	return nil, nil, 0, fmt.Errorf("%s/%s has no container %q", spec.TargetRef.Kind, name, spec.ContainerName)
}

// explainClusters lists, in Karmada mode, each member cluster of
// status.clusters with the estimate for its count and what the
// AddonResizer's OverridePolicy sets for it.
//
// The resizer's rules address the container by its index in the template;
// a rule at another index (written before the containers moved, and not
// rewritten since: a refused write) sets nothing of the container. When
// the template cannot be read every index is taken, with a warning.
func explainClusters(ctx context.Context, c *Clients, ns string, ar *scaleplanev1alpha1.AddonResizer, estimatorUnits func(int64) int64, warnings *[]string) ([]ClusterExplanation, error) {
	status := &ar.Status
	policy := map[string]*corev1.ResourceRequirements{}
	index := -1 // any container
	if _, _, i, err := targetTemplate(ctx, c, ns, &ar.Spec); err != nil {
		*warnings = append(*warnings, fmt.Sprintf("the OverridePolicy's values are read for any container: %v", err))
	} else {
		index = i
	}
	if status.OverridePolicy != "" {
		op, err := c.Scaleplane.PolicyV1alpha1().OverridePolicies(ns).Get(ctx, status.OverridePolicy, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
		case err != nil:
			return nil, fmt.Errorf("reading OverridePolicy %s: %w", status.OverridePolicy, err)
		default:
			for _, rule := range op.Spec.OverrideRules {
				if rule.TargetCluster == nil {
					continue
				}
				r := resourceoverride.Read(rule.Overriders.Plaintext, index)
				for _, name := range rule.TargetCluster.ClusterNames {
					policy[name] = r
				}
			}
		}
	}
	out := make([]ClusterExplanation, 0, len(status.Clusters))
	for _, m := range status.Clusters {
		x := ClusterExplanation{Name: m.Name, Nodes: m.Nodes, Held: m.Resources, OverridePolicy: policy[m.Name], State: string(m.State), Message: m.Message}
		// Without a policy in status (not written, or its name taken) the
		// conditions say why; a named policy that is gone differs.
		x.PolicyDiffers = status.OverridePolicy != "" && !sameRequirements(x.Held, x.OverridePolicy)
		if m.Nodes != nil {
			x.Units = estimatorUnits(int64(*m.Nodes))
			x.Estimate = map[string]string{}
			for _, r := range ar.Spec.Resources {
				q := resizeestimate.Estimate(r, x.Units).Value
				x.Estimate[string(r.Name)] = q.String()
			}
		}
		if p := m.PendingResize; p != nil {
			delay := durationOf(ar.Spec.ScaleDownDelay)
			if p.Direction == scaleplanev1alpha1.ResizeUp {
				delay = durationOf(ar.Spec.ScaleUpDelay)
			}
			x.Pending = &PendingExplanation{Direction: string(p.Direction), Since: p.Since.UTC(), Delay: delay.String(), Until: p.Since.Add(delay).UTC()}
		}
		out = append(out, x)
	}
	return out, nil
}

// sameRequirements reports whether a and b set the same quantities (nil
// sets none).
func sameRequirements(a, b *corev1.ResourceRequirements) bool {
	if a == nil {
		a = &corev1.ResourceRequirements{}
	}
	if b == nil {
		b = &corev1.ResourceRequirements{}
	}
	return sameResourceList(a.Requests, b.Requests) && sameResourceList(a.Limits, b.Limits)
}

func sameResourceList(a, b corev1.ResourceList) bool {
	if len(a) != len(b) {
		return false
	}
	for name, q := range a {
		if other, ok := b[name]; !ok || other.Cmp(q) != 0 {
			return false
		}
	}
	return true
}

// describeResources is "requests cpu=48m,memory=104Mi; limits memory=1Gi".
func describeResources(r *corev1.ResourceRequirements) string {
	if r == nil {
		return "<none>"
	}
	var parts []string
	if len(r.Requests) > 0 {
		parts = append(parts, "requests "+inplaceresize.ResourceListString(r.Requests))
	}
	if len(r.Limits) > 0 {
		parts = append(parts, "limits "+inplaceresize.ResourceListString(r.Limits))
	}
	if len(parts) == 0 {
		return "<none>"
	}
	return strings.Join(parts, "; ")
}

// printPods prints the in-place pods for people.
func printPods(w io.Writer, e Explanation) error {
	if _, err := fmt.Fprintf(w, "\nPods (in place, at most %d resized at a time, taken by name):\n", inplaceresize.MaxInFlight); err != nil {
		return err
	}
	t := newTable(w, "POD", "NODE", "STATE", "CURRENT", "KUBELET", "TARGET", "NEXT")
	for _, p := range e.Pods {
		next := p.Next
		if len(p.Capped) > 0 {
			next += " (" + strings.Join(p.Capped, ", ") + ")"
		}
		if p.Message != "" {
			next += ": " + p.Message
		}
		t.row(p.Name, orNone(p.Node), p.State, describeResources(p.Current), describeResources(p.Applied), describeResources(p.Target), next)
	}
	return t.flush()
}

// policyDiffersWhy is said of a cluster whose OverridePolicy value is not
// the size held.
const policyDiffersWhy = "the OverridePolicy does not set the size held (edited by someone else, or not written yet): the resizer writes it again on its next sync"

// printClusters prints the member clusters for people.
func printClusters(w io.Writer, e Explanation) error {
	if _, err := fmt.Fprintf(w, "\nMember clusters (Karmada; OverridePolicy %s):\n", orNone(e.OverridePolicy)); err != nil {
		return err
	}
	t := newTable(w, "CLUSTER", "NODES", "UNITS", "ESTIMATE", "HELD", "OVERRIDEPOLICY", "STATE", "WHY")
	for _, m := range e.Clusters {
		nodes := "<unknown>"
		if m.Nodes != nil {
			nodes = fmt.Sprint(*m.Nodes)
		}
		names := make([]string, 0, len(m.Estimate))
		for n := range m.Estimate {
			names = append(names, n)
		}
		sort.Strings(names)
		est := make([]string, 0, len(names))
		for _, n := range names {
			est = append(est, n+"="+m.Estimate[n])
		}
		why := m.Message
		if p := m.Pending; p != nil {
			why = fmt.Sprintf("%s pending since %s, until %s; %s", p.Direction, p.Since.Format(time.RFC3339), p.Until.Format(time.RFC3339), why)
		}
		if m.PolicyDiffers {
			why = strings.TrimPrefix(why+"; "+policyDiffersWhy, "; ")
		}
		t.row(m.Name, nodes, fmt.Sprint(m.Units), orNone(strings.Join(est, ",")), describeResources(m.Held), describeResources(m.OverridePolicy), orNone(m.State), why)
	}
	return t.flush()
}

func orNone(s string) string {
	if s == "" {
		return "<none>"
	}
	return s
}
