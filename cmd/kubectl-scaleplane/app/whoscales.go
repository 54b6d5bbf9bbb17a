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
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	autoscalingv1alpha1 "github.com/scaleplane/scaleplane/pkg/apis/autoscaling/v1alpha1"
	lwsv1 "github.com/scaleplane/scaleplane/pkg/apis/leaderworkerset/v1"
)

// ScalerList is what `who-scales -o json` prints.
type ScalerList struct {
	APIVersion string    `json:"apiVersion"`
	Kind       string    `json:"kind"`
	Namespace  string    `json:"namespace"`
	Target     TargetRef `json:"target"`
	Items      []Scaler  `json:"items"`
	// Warnings name the objects that fight over the target.
	Warnings []string `json:"warnings,omitempty"`
}

// Scaler is one object that sets the target's replicas, its bounds, or its
// containers' resources.
type Scaler struct {
	Kind string `json:"kind"`
	Name string `json:"name"`
	// Sets is what it sets: replicas, minReplicas/maxReplicas (of Via), or
	// the resources of a container.
	Sets string `json:"sets"`
	// Via is the autoscaler whose bounds a CronFederatedHPA moves, when it
	// does not target the workload itself.
	Via string `json:"via,omitempty"`
	// MinReplicas, MaxReplicas and CurrentReplicas are an autoscaler's.
	MinReplicas     *int32 `json:"minReplicas,omitempty"`
	MaxReplicas     *int32 `json:"maxReplicas,omitempty"`
	CurrentReplicas *int32 `json:"currentReplicas,omitempty"`
	DesiredReplicas *int32 `json:"desiredReplicas,omitempty"`
	// GeneratedBy names the object an HPA or FederatedHPA was generated
	// for (the hpa-generator's LeaderWorkerSet).
	GeneratedBy string `json:"generatedBy,omitempty"`
	// NextFiring is a CronFederatedHPA's next firing of any rule.
	NextFiring *Firing `json:"nextFiring,omitempty"`
	Details    string  `json:"details,omitempty"`
}

// canonicalKinds maps what a user types (kubectl's names, plural and short
// forms) to a kind and its API group.
var canonicalKinds = map[string][2]string{
	"deployment": {"Deployment", "apps"}, "deployments": {"Deployment", "apps"}, "deploy": {"Deployment", "apps"},
	"statefulset": {"StatefulSet", "apps"}, "statefulsets": {"StatefulSet", "apps"}, "sts": {"StatefulSet", "apps"},
	"daemonset": {"DaemonSet", "apps"}, "daemonsets": {"DaemonSet", "apps"}, "ds": {"DaemonSet", "apps"},
	"replicaset": {"ReplicaSet", "apps"}, "replicasets": {"ReplicaSet", "apps"}, "rs": {"ReplicaSet", "apps"},
	"leaderworkerset": {"LeaderWorkerSet", "leaderworkerset.x-k8s.io"}, "leaderworkersets": {"LeaderWorkerSet", "leaderworkerset.x-k8s.io"}, "lws": {"LeaderWorkerSet", "leaderworkerset.x-k8s.io"},
	"horizontalpodautoscaler": {"HorizontalPodAutoscaler", "autoscaling"}, "horizontalpodautoscalers": {"HorizontalPodAutoscaler", "autoscaling"}, "hpa": {"HorizontalPodAutoscaler", "autoscaling"},
	"federatedhpa": {"FederatedHPA", "autoscaling.karmada.io"}, "federatedhpas": {"FederatedHPA", "autoscaling.karmada.io"}, "fhpa": {"FederatedHPA", "autoscaling.karmada.io"},
}

// objectRef is a kind in a group, and a name; the version does not matter
// for matching references.
type objectRef struct {
	group, kind, name string
}

func (r objectRef) String() string { return r.kind + "/" + r.name }

func refOf(apiVersion, kind, name string) objectRef {
	gv, _ := schema.ParseGroupVersion(apiVersion)
	return objectRef{group: gv.Group, kind: kind, name: name}
}

// matches compares a reference with the target; a kind typed without a
// known group (a custom resource) matches any group.
func (r objectRef) matches(target objectRef) bool {
	return strings.EqualFold(r.kind, target.kind) && r.name == target.name && (target.group == "*" || r.group == target.group)
}

func resolveKind(kind string) (string, string) {
	if c, ok := canonicalKinds[strings.ToLower(kind)]; ok {
		return c[0], c[1]
	}
	return kind, "*"
}

func newWhoScalesCommand(o *options) *cobra.Command {
	return &cobra.Command{
		Use:   "who-scales KIND/NAME",
		Short: "List every object that sets a workload's replicas, bounds or resources, and where they fight",
		Long: `List every object that sets the replicas or the bounds of a workload, or the resources of its containers:
CronFederatedHPAs (with their next firing), HorizontalPodAutoscalers and FederatedHPAs (min, max, current), a
LeaderWorkerSet's scalePolicy and the autoscaler the hpa-generator keeps for it (an HPA, or a FederatedHPA on
Karmada), CronFederatedHPAs that move those autoscalers' bounds, and AddonResizers on its containers. Objects that fight over one field are named in a warning.`,
		Example: `  kubectl scaleplane who-scales deployment/nginx
  kubectl scaleplane who-scales lws/leaderworkerset-sample -n inference -o json`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, ns, err := o.complete()
			if err != nil {
				return err
			}
			if ns == "" {
				return fmt.Errorf("who-scales looks in one namespace: drop --all-namespaces")
			}
			kind, name, err := splitKindName(args[0])
			if err != nil {
				return err
			}
			list, err := whoScales(cmd.Context(), c, ns, kind, name)
			if err != nil {
				return err
			}
			if o.output == "json" || o.output == "yaml" {
				return printObject(o.streams.Out, o.output, list)
			}
			return printScalers(o.streams.Out, list)
		},
	}
}

// whoScales finds what scales ns/kind/name.
func whoScales(ctx context.Context, c *Clients, ns, kindArg, name string) (ScalerList, error) {
	kind, group := resolveKind(kindArg)
	target := objectRef{group: group, kind: kind, name: name}
	list := ScalerList{APIVersion: apiVersion, Kind: "ScalerList", Namespace: ns, Target: TargetRef{Kind: kind, Name: name}, Items: []Scaler{}}
	now := c.Clock.Now()

	// Autoscalers of the workload; a CronFederatedHPA aimed at one of them
	// moves the workload's bounds through it.
	autoscalers := map[objectRef]bool{}
	hpas, err := c.Kube.AutoscalingV2().HorizontalPodAutoscalers(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return list, fmt.Errorf("listing HorizontalPodAutoscalers: %w", err)
	}
	// The autoscalers the hpa-generator keeps, an HPA or (on Karmada) a
	// FederatedHPA, and the LeaderWorkerSet each is generated for.
	generated := map[objectRef]string{}
	for i := range hpas.Items {
		h := &hpas.Items[i]
		self := objectRef{group: "autoscaling", kind: "HorizontalPodAutoscaler", name: h.Name}
		if lws := generatedFor(h); lws != "" {
			generated[self] = lws
		}
		ref := h.Spec.ScaleTargetRef
		if !refOf(ref.APIVersion, ref.Kind, ref.Name).matches(target) {
			continue
		}
		autoscalers[self] = true
		list.Items = append(list.Items, autoscalerScaler(self.kind, h.Name, h.Spec.MinReplicas, &h.Spec.MaxReplicas, h.Status, lwsName(generated[self])))
	}
	fhpas, err := c.Scaleplane.AutoscalingV1alpha1().FederatedHPAs(ns).List(ctx, metav1.ListOptions{})
	switch {
	case apierrors.IsNotFound(err):
		// FederatedHPAs are not served here (no Karmada).
	case err != nil:
		return list, fmt.Errorf("listing FederatedHPAs: %w", err)
	default:
		for i := range fhpas.Items {
			f := &fhpas.Items[i]
			self := objectRef{group: "autoscaling.karmada.io", kind: "FederatedHPA", name: f.Name}
			if lws := generatedFor(f); lws != "" {
				generated[self] = lws
			}
			ref := f.Spec.ScaleTargetRef
			if !refOf(ref.APIVersion, ref.Kind, ref.Name).matches(target) {
				continue
			}
			autoscalers[self] = true
			list.Items = append(list.Items, autoscalerScaler(self.kind, f.Name, f.Spec.MinReplicas, &f.Spec.MaxReplicas, f.Status, lwsName(generated[self])))
		}
	}

	// scalePolicies reads a LeaderWorkerSet's scalePolicy once (nil: none,
	// or no such LeaderWorkerSet).
	scalePolicies := map[string]*lwsv1.ScalePolicy{}
	scalePolicy := func(lws string) (*lwsv1.ScalePolicy, error) {
		if p, ok := scalePolicies[lws]; ok {
			return p, nil
		}
		obj, err := c.Scaleplane.LeaderworkersetV1().LeaderWorkerSets(ns).Get(ctx, lws, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			scalePolicies[lws] = nil
		case err != nil:
			return nil, fmt.Errorf("reading LeaderWorkerSet %s: %w", lws, err)
		default:
			scalePolicies[lws] = obj.Spec.ScalePolicy
		}
		return scalePolicies[lws], nil
	}
	if kind == "LeaderWorkerSet" {
		policy, err := scalePolicy(name)
		if err != nil {
			return list, err
		}
		if policy != nil {
			s := Scaler{Kind: "LeaderWorkerSet", Name: name, Sets: "minReplicas/maxReplicas of the generated autoscaler",
				MinReplicas: policy.MinReplicas, MaxReplicas: ptrInt32(policy.MaxReplicas)}
			var kept []string
			for r, owner := range generated {
				if owner == name {
					kept = append(kept, r.String())
				}
			}
			sort.Strings(kept)
			s.Details = "spec.scalePolicy; the hpa-generator keeps " + strings.Join(kept, ", ")
			if len(kept) == 0 {
				s.Details = "spec.scalePolicy; the hpa-generator has not written its autoscaler yet (an HPA, or a FederatedHPA on Karmada)"
			}
			list.Items = append(list.Items, s)
		}
	}

	crons, err := c.Scaleplane.AutoscalingV1alpha1().CronFederatedHPAs(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return list, fmt.Errorf("listing CronFederatedHPAs: %w", err)
	}
	var cronReplicas []string
	for i := range crons.Items {
		cr := &crons.Items[i]
		ref := cr.Spec.ScaleTargetRef
		r := refOf(ref.APIVersion, ref.Kind, ref.Name)
		s := Scaler{Kind: "CronFederatedHPA", Name: cr.Name}
		switch {
		case r.matches(target):
			fields := cronFields(cr)
			s.Sets = strings.Join(fields, ", ")
			if slices.Contains(fields, "replicas") {
				cronReplicas = append(cronReplicas, cr.Name)
			}
		case autoscalers[r]:
			s.Sets, s.Via = strings.Join(cronFields(cr), ", "), r.String()
		default:
			continue
		}
		if lws, ok := generated[r]; ok {
			// The cron-scaler never writes a generated autoscaler, which
			// the hpa-generator would put back: a rule's bounds go to the
			// scalePolicy the generator builds it from.
			s.Details = fmt.Sprintf("bounds written to the scalePolicy of LeaderWorkerSet/%s, which the hpa-generator copies to %s", lws, r)
			policy, err := scalePolicy(lws)
			if err != nil {
				return list, err
			}
			if policy == nil {
				list.Warnings = append(list.Warnings, fmt.Sprintf("CronFederatedHPA %s targets %s, generated for LeaderWorkerSet/%s, but LeaderWorkerSet/%s has no scalePolicy: "+
					"its firings fail until it has one (the hpa-generator deletes %s meanwhile)", cr.Name, r, lws, lws, r))
				list.Items = append(list.Items, s)
				continue
			}
		}
		firings := planFirings([]autoscalingv1alpha1.CronFederatedHPA{*cr}, now, 1, time.UTC)
		for j := range firings.Items {
			if f := firings.Items[j]; f.Time != nil && (f.State == StateScheduled || f.State == StateDue) {
				s.NextFiring = &f
				break
			}
		}
		list.Items = append(list.Items, s)
	}

	resizers, err := c.Scaleplane.ScaleplaneV1alpha1().AddonResizers(ns).List(ctx, metav1.ListOptions{})
	switch {
	case apierrors.IsNotFound(err):
	case err != nil:
		return list, fmt.Errorf("listing AddonResizers: %w", err)
	default:
		byContainer := map[string][]string{}
		for i := range resizers.Items {
			ar := &resizers.Items[i]
			if !strings.EqualFold(string(ar.Spec.TargetRef.Kind), kind) || ar.Spec.TargetRef.Name != name {
				continue
			}
			var res []string
			for _, r := range ar.Spec.Resources {
				res = append(res, string(r.Name))
			}
			byContainer[ar.Spec.ContainerName] = append(byContainer[ar.Spec.ContainerName], ar.Name)
			list.Items = append(list.Items, Scaler{Kind: "AddonResizer", Name: ar.Name,
				Sets:    fmt.Sprintf("%s of container %s", strings.Join(res, ", "), ar.Spec.ContainerName),
				Details: resizerDetails(ar.Status.ClusterSize, ar.Status.PendingResize)})
		}
		for container, names := range byContainer {
			if len(names) > 1 {
				sort.Strings(names)
				list.Warnings = append(list.Warnings, fmt.Sprintf("AddonResizers %s all size container %s: they fight; keep one", strings.Join(names, ", "), container))
			}
		}
	}

	if len(autoscalers) > 1 {
		var names []string
		for r := range autoscalers {
			names = append(names, r.String())
		}
		sort.Strings(names)
		list.Warnings = append(list.Warnings, fmt.Sprintf("%d autoscalers scale %s: %s; they fight over its replicas, keep one", len(names), target, strings.Join(names, ", ")))
	}
	if len(autoscalers) > 0 && len(cronReplicas) > 0 {
		var names []string
		for r := range autoscalers {
			names = append(names, r.String())
		}
		sort.Strings(names)
		list.Warnings = append(list.Warnings, fmt.Sprintf("CronFederatedHPA %s sets the replicas of %s, which %s also scales: the autoscaler undoes each firing; move the autoscaler's bounds instead (targetMinReplicas/targetMaxReplicas on it)", strings.Join(cronReplicas, ", "), target, strings.Join(names, ", ")))
	}
	sort.SliceStable(list.Items, func(i, j int) bool {
		if list.Items[i].Kind != list.Items[j].Kind {
			return list.Items[i].Kind < list.Items[j].Kind
		}
		return list.Items[i].Name < list.Items[j].Name
	})
	sort.Strings(list.Warnings)
	return list, nil
}

func ptrInt32(v int32) *int32 { return &v }

// generatedFor returns the name of the LeaderWorkerSet an autoscaler is
// generated for by the hpa-generator, told by its controller reference as
// the cron-scaler tells it; "" for any other autoscaler.
func generatedFor(obj metav1.Object) string {
	owner := metav1.GetControllerOfNoCopy(obj)
	if owner == nil || owner.Kind != "LeaderWorkerSet" || !strings.HasPrefix(owner.APIVersion, lwsv1.GroupName+"/") {
		return ""
	}
	return owner.Name
}

// lwsName is "LeaderWorkerSet/NAME", or "" for no name.
func lwsName(name string) string {
	if name == "" {
		return ""
	}
	return "LeaderWorkerSet/" + name
}

func autoscalerScaler(kind, name string, min, max *int32, status autoscalingv2.HorizontalPodAutoscalerStatus, generatedBy string) Scaler {
	s := Scaler{Kind: kind, Name: name, Sets: "replicas", MinReplicas: min, MaxReplicas: max,
		CurrentReplicas: ptrInt32(status.CurrentReplicas), DesiredReplicas: ptrInt32(status.DesiredReplicas), GeneratedBy: generatedBy}
	lo := int32(1)
	if min != nil {
		lo = *min
	}
	var hi int32
	if max != nil {
		hi = *max
	}
	s.Details = fmt.Sprintf("between %d and %d; current %d, desired %d", lo, hi, status.CurrentReplicas, status.DesiredReplicas)
	if generatedBy != "" {
		s.Details += "; generated for " + generatedBy
	}
	return s
}

// cronFields says which fields a CronFederatedHPA's rules set.
func cronFields(cr *autoscalingv1alpha1.CronFederatedHPA) []string {
	fields := map[string]bool{}
	for i := range cr.Spec.Rules {
		v, _ := ruleValues(cr.Spec.ScaleTargetRef, &cr.Spec.Rules[i])
		for f := range v.fields() {
			fields[f] = true
		}
	}
	var out []string
	for _, f := range []string{"replicas", "minReplicas", "maxReplicas"} {
		if fields[f] {
			out = append(out, f)
		}
	}
	return out
}

// printScalers prints the target's scalers as a table, then the warnings.
func printScalers(w io.Writer, list ScalerList) error {
	if _, err := fmt.Fprintf(w, "%s in namespace %s is scaled by:\n", list.Target, list.Namespace); err != nil {
		return err
	}
	if len(list.Items) == 0 {
		_, err := fmt.Fprintln(w, "nothing: no CronFederatedHPA, HPA, FederatedHPA, scalePolicy or AddonResizer refers to it.")
		return err
	}
	headers := []string{"KIND", "NAME", "SETS", "VIA", "DETAILS"}
	t := newTable(w, headers...)
	for _, s := range list.Items {
		details := s.Details
		if f := s.NextFiring; f != nil {
			next := fmt.Sprintf("next: rule %s sets %s at %s (%s)", f.Rule, f.Sets, f.Time.Format("2006-01-02 15:04:05Z"), f.LocalTime)
			details = strings.TrimSuffix(next+"; "+details, "; ")
		}
		t.row(s.Kind, s.Name, s.Sets, s.Via, details)
	}
	if err := t.flush(); err != nil {
		return err
	}
	for _, warning := range list.Warnings {
		if _, err := fmt.Fprintf(w, "WARNING: %s\n", warning); err != nil {
			return err
		}
	}
	return nil
}
