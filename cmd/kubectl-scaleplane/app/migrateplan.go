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
	"io"
	"slices"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"sigs.k8s.io/yaml"

	scaleplanev1alpha1 "github.com/scaleplane/scaleplane/pkg/apis/scaleplane/v1alpha1"
)

// planMigration reads every nanny of the source's Deployment and builds the
// AddonResizers, the removal patch and the leftovers; any refusal fails the
// whole plan.
func planMigration(ctx context.Context, src *migrateSource, watchOnly, mapDelays bool, name string) (*Migration, []*scaleplanev1alpha1.AddonResizer, error) {
	d := src.deployment
	pod := &d.Spec.Template.Spec
	mig := &Migration{APIVersion: apiVersion, Kind: "AddonResizerMigration", Namespace: src.namespace,
		Workload: "Deployment/" + d.Name, From: src.from, WatchOnly: watchOnly, AddonResizers: []map[string]any{}}
	var nannies []*nanny
	var refused []string
	for i := range pod.Containers {
		c := &pod.Containers[i]
		if !isNanny(c) {
			continue
		}
		n, r := readNanny(c, i, src.namespace, d.Name, pod.Containers, pod.Volumes, src.configMap, mapDelays)
		for _, why := range r {
			refused = append(refused, fmt.Sprintf("container %s: %s", c.Name, why))
		}
		nannies = append(nannies, n)
	}
	sized := map[string]string{}
	for _, n := range nannies {
		if other, ok := sized[n.spec.ContainerName]; ok {
			refused = append(refused, fmt.Sprintf("container %s: --container=%s: nanny %s sizes it too; two sizers of one container undo each other", n.container.Name, n.spec.ContainerName, other))
		}
		sized[n.spec.ContainerName] = n.container.Name
	}
	if name != "" && len(nannies) > 1 {
		refused = append(refused, fmt.Sprintf("--name=%s: the Deployment has %d nannies, each gets its AddonResizer, named DEPLOYMENT-CONTAINER", name, len(nannies)))
	}
	if len(refused) > 0 {
		return nil, nil, fmt.Errorf("refused, nothing written: Deployment %s/%s's nanny cannot be mapped exactly:\n  %s", src.namespace, d.Name, strings.Join(refused, "\n  "))
	}

	var ars []*scaleplanev1alpha1.AddonResizer
	for _, n := range nannies {
		arName := d.Name
		switch {
		case name != "":
			arName = name
		case len(nannies) > 1:
			arName = d.Name + "-" + n.spec.ContainerName
		}
		spec := n.spec
		if watchOnly {
			spec.UpdateMode = scaleplanev1alpha1.UpdateModeOff
		}
		ar := &scaleplanev1alpha1.AddonResizer{
			TypeMeta:   metav1.TypeMeta{APIVersion: scaleplanev1alpha1.SchemeGroupVersion.String(), Kind: "AddonResizer"},
			ObjectMeta: metav1.ObjectMeta{Namespace: src.namespace, Name: arName},
			Spec:       spec,
		}
		ars = append(ars, ar)
		mig.AddonResizers = append(mig.AddonResizers, applyDocument(ar))
		var res []string
		for _, r := range spec.Resources {
			res = append(res, fmt.Sprintf("%s %s + %s per %s", r.Name, r.Base.String(), r.ExtraPerUnit.String(), unitOf(spec.ScalingMode)))
		}
		mig.Nannies = append(mig.Nannies, MigratedNanny{Container: n.container.Name, Image: n.container.Image,
			Sizes: fmt.Sprintf("container %s: %s", spec.ContainerName, strings.Join(res, ", ")), AddonResizer: arName})
		for _, note := range n.notes {
			mig.Notes = append(mig.Notes, fmt.Sprintf("container %s: %s", n.container.Name, note))
		}
	}
	only := nannyOnlyVolumes(pod, nannies)
	if !watchOnly {
		mig.RemovalPatch = removalPatch(pod, nannies, only)
	}
	mig.NoLongerNeeded = leftovers(ctx, src, nannies, only, mig)
	if d.Labels["app.kubernetes.io/managed-by"] == "Helm" {
		mig.Notes = append(mig.Notes, "the Deployment is managed by Helm: turn the nanny off in its values too (the metrics-server chart: addonResizer.enabled=false), or the next upgrade brings it back")
	}
	if mode := d.Labels["addonmanager.kubernetes.io/mode"]; mode == "Reconcile" {
		mig.Notes = append(mig.Notes, "the Deployment is reconciled by the addon manager (addonmanager.kubernetes.io/mode: Reconcile): remove the nanny from its manifest under the addons directory too, or the addon manager puts it back")
	}
	return mig, ars, nil
}

func unitOf(mode scaleplanev1alpha1.ScalingMode) string {
	if mode == scaleplanev1alpha1.ContainerProportional {
		return "container"
	}
	return "node"
}

// applyDocument is the AddonResizer as server-side apply sends it: the
// fields migrate sets, without status or empty metadata.
func applyDocument(ar *scaleplanev1alpha1.AddonResizer) map[string]any {
	data, _ := json.Marshal(struct {
		metav1.TypeMeta `json:",inline"`
		Metadata        map[string]string                   `json:"metadata"`
		Spec            scaleplanev1alpha1.AddonResizerSpec `json:"spec"`
	}{metav1.TypeMeta{APIVersion: scaleplanev1alpha1.SchemeGroupVersion.String(), Kind: "AddonResizer"}, map[string]string{"name": ar.Name, "namespace": ar.Namespace}, ar.Spec})
	var doc map[string]any
	_ = json.Unmarshal(data, &doc)
	return doc
}

// removalPatch removes the nannies and the volumes only they mount (only),
// from the highest index down, each after a test of its name: applied to a
// Deployment that changed since, it fails rather than remove another
// container.
func removalPatch(pod *corev1.PodSpec, nannies []*nanny, only sets.Set[string]) []PatchOp {
	var ops []PatchOp
	for i := len(pod.Containers) - 1; i >= 0; i-- {
		if slices.ContainsFunc(nannies, func(n *nanny) bool { return n.index == i }) {
			p := fmt.Sprintf("/spec/template/spec/containers/%d", i)
			ops = append(ops, PatchOp{Op: "test", Path: p + "/name", Value: pod.Containers[i].Name}, PatchOp{Op: "remove", Path: p})
		}
	}
	for i := len(pod.Volumes) - 1; i >= 0; i-- {
		if only.Has(pod.Volumes[i].Name) {
			p := fmt.Sprintf("/spec/template/spec/volumes/%d", i)
			ops = append(ops, PatchOp{Op: "test", Path: p + "/name", Value: pod.Volumes[i].Name}, PatchOp{Op: "remove", Path: p})
		}
	}
	return ops
}

// nannyOnlyVolumes are the pod volumes the nannies mount and no other
// container (init and ephemeral ones included) does.
func nannyOnlyVolumes(pod *corev1.PodSpec, nannies []*nanny) sets.Set[string] {
	byNanny, byOthers := sets.New[string](), sets.New[string]()
	isNannyIndex := func(i int) bool { return slices.ContainsFunc(nannies, func(n *nanny) bool { return n.index == i }) }
	for i := range pod.Containers {
		for _, m := range pod.Containers[i].VolumeMounts {
			if isNannyIndex(i) {
				byNanny.Insert(m.Name)
			} else {
				byOthers.Insert(m.Name)
			}
		}
	}
	for _, c := range pod.InitContainers {
		for _, m := range c.VolumeMounts {
			byOthers.Insert(m.Name)
		}
	}
	for _, c := range pod.EphemeralContainers {
		for _, m := range c.VolumeMounts {
			byOthers.Insert(m.Name)
		}
	}
	return byNanny.Difference(byOthers)
}

// leftovers are the ConfigMaps of --config-dir that nothing else in the pod
// uses (a volume of only, the nannies' own, does not count), and the RBAC of the pod's service account that grants only what a
// nanny uses (or the rules of a shared role that only a nanny uses).
func leftovers(ctx context.Context, src *migrateSource, nannies []*nanny, only sets.Set[string], mig *Migration) []Leftover {
	ns := src.namespace
	pod := &src.deployment.Spec.Template.Spec
	var out []Leftover
	for _, n := range nannies {
		if n.configMap == "" {
			continue
		}
		used := slices.ContainsFunc(pod.Volumes, func(v corev1.Volume) bool {
			return !only.Has(v.Name) && v.ConfigMap != nil && v.ConfigMap.Name == n.configMap
		})
		if !used {
			out = append(out, Leftover{Kind: "ConfigMap", Namespace: ns, Name: n.configMap,
				Why: fmt.Sprintf("the NannyConfiguration of %s's --config-dir; its values are in the AddonResizer", n.container.Name)})
		}
	}
	objs, err := src.rbac(ctx)
	if err != nil {
		mig.Notes = append(mig.Notes, fmt.Sprintf("the nanny's RBAC could not be read (%v): look for the RoleBindings of the Deployment's service account that grant deployments patch", err))
		return out
	}
	sa := pod.ServiceAccountName
	if sa == "" {
		sa = "default"
	}
	bindsSA := func(subjects []rbacv1.Subject) (bool, bool) {
		mine, others := false, false
		for _, s := range subjects {
			if s.Kind == rbacv1.ServiceAccountKind && s.Name == sa && (s.Namespace == ns || s.Namespace == "") {
				mine = true
			} else {
				others = true
			}
		}
		return mine, others
	}
	report := func(bindingKind, bindingNS, bindingName string, subjects []rbacv1.Subject, ref rbacv1.RoleRef, rules []rbacv1.PolicyRule, found bool) {
		mine, others := bindsSA(subjects)
		if !mine || !found {
			return
		}
		roleNS := ""
		if ref.Kind == "Role" {
			roleNS = bindingNS
		}
		var nannyRules, otherRules []rbacv1.PolicyRule
		for _, r := range rules {
			if nannyRule(r) {
				nannyRules = append(nannyRules, r)
			} else {
				otherRules = append(otherRules, r)
			}
		}
		if len(nannyRules) == 0 || !slices.ContainsFunc(nannyRules, nannySignature) {
			return
		}
		if len(otherRules) > 0 {
			out = append(out, Leftover{Kind: ref.Kind, Namespace: roleNS, Name: ref.Name,
				Why: fmt.Sprintf("its rules %s are what the nanny used; the others are the add-on's: remove those rules only", describeRules(nannyRules))})
			return
		}
		why := fmt.Sprintf("binds %s/%s to %s %s", ns, sa, ref.Kind, ref.Name)
		if others {
			why += ", and other subjects: remove service account " + sa + " from its subjects only"
		}
		out = append(out, Leftover{Kind: bindingKind, Namespace: bindingNS, Name: bindingName, Why: why})
		if !others && !roleBoundElsewhere(objs, ref, roleNS, bindingKind, bindingName) {
			out = append(out, Leftover{Kind: ref.Kind, Namespace: roleNS, Name: ref.Name,
				Why: fmt.Sprintf("grants only what the nanny used (%s)", describeRules(rules))})
		}
	}
	for _, b := range objs.roleBindings {
		if b.Namespace != ns {
			continue
		}
		var rules []rbacv1.PolicyRule
		found := false
		if b.RoleRef.Kind == "Role" {
			if r := objs.roles[b.RoleRef.Name]; r != nil {
				rules, found = r.Rules, true
			}
		} else if r := objs.clusterRoles[b.RoleRef.Name]; r != nil {
			rules, found = r.Rules, true
		}
		report("RoleBinding", b.Namespace, b.Name, b.Subjects, b.RoleRef, rules, found)
	}
	for _, b := range objs.clusterRoleBindings {
		r := objs.clusterRoles[b.RoleRef.Name]
		if r == nil {
			continue
		}
		report("ClusterRoleBinding", "", b.Name, b.Subjects, b.RoleRef, r.Rules, true)
	}
	return out
}

// nannyRule: a rule that grants only what Addon Resizer 1.8 calls: get of
// pods, list of nodes and pods, get and patch of deployments, get of
// configmaps, kube-apiserver's /metrics.
func nannyRule(r rbacv1.PolicyRule) bool {
	allowed := map[string]sets.Set[string]{
		"/pods": sets.New("get", "list"), "/nodes": sets.New("get", "list"), "/configmaps": sets.New("get"),
		"apps/deployments": sets.New("get", "patch", "update"), "extensions/deployments": sets.New("get", "patch", "update"),
	}
	if len(r.NonResourceURLs) > 0 {
		return len(r.APIGroups) == 0 && len(r.Resources) == 0 &&
			sets.New(r.NonResourceURLs...).Equal(sets.New("/metrics")) && sets.New("get").IsSuperset(sets.New(r.Verbs...))
	}
	for _, g := range r.APIGroups {
		for _, res := range r.Resources {
			verbs, ok := allowed[g+"/"+res]
			if !ok || !verbs.IsSuperset(sets.New(r.Verbs...)) {
				return false
			}
		}
	}
	return len(r.APIGroups) > 0 && len(r.Resources) > 0
}

// nannySignature: a rule only a nanny asks for (writing deployments, or
// reading kube-apiserver's /metrics for --use-metrics).
func nannySignature(r rbacv1.PolicyRule) bool {
	if len(r.NonResourceURLs) > 0 {
		return true
	}
	return slices.Contains(r.Resources, "deployments") && (slices.Contains(r.Verbs, "patch") || slices.Contains(r.Verbs, "update"))
}

func describeRules(rules []rbacv1.PolicyRule) string {
	var parts []string
	for _, r := range rules {
		if len(r.NonResourceURLs) > 0 {
			parts = append(parts, fmt.Sprintf("%s %s", strings.Join(r.Verbs, ","), strings.Join(r.NonResourceURLs, ",")))
			continue
		}
		res := strings.Join(r.Resources, ",")
		if len(r.ResourceNames) > 0 {
			res += "[" + strings.Join(r.ResourceNames, ",") + "]"
		}
		parts = append(parts, fmt.Sprintf("%s %s", strings.Join(r.Verbs, ","), res))
	}
	return strings.Join(parts, "; ")
}

// roleBoundElsewhere: another binding than the given one refers to the
// role.
func roleBoundElsewhere(objs *rbacObjects, ref rbacv1.RoleRef, roleNS, bindingKind, bindingName string) bool {
	for _, b := range objs.roleBindings {
		if (bindingKind != "RoleBinding" || b.Name != bindingName) && b.RoleRef.Kind == ref.Kind && b.RoleRef.Name == ref.Name && (ref.Kind == "ClusterRole" || b.Namespace == roleNS) {
			return true
		}
	}
	for _, b := range objs.clusterRoleBindings {
		if (bindingKind != "ClusterRoleBinding" || b.Name != bindingName) && b.RoleRef.Kind == ref.Kind && b.RoleRef.Name == ref.Name {
			return true
		}
	}
	return false
}

// alreadyMigrated answers a second run on a Deployment without a nanny:
// which AddonResizers size it; nothing is written.
func alreadyMigrated(ctx context.Context, c *Clients, ns, name, output string, w io.Writer) error {
	list, err := c.Scaleplane.ScaleplaneV1alpha1().AddonResizers(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("deployment %s/%s has no Addon Resizer nanny; listing AddonResizers: %w", ns, name, err)
	}
	var names []string
	for _, ar := range list.Items {
		if ar.Spec.TargetRef.Kind == scaleplanev1alpha1.TargetKindDeployment && ar.Spec.TargetRef.Name == name {
			names = append(names, fmt.Sprintf("AddonResizer %s (container %s, updateMode %s)", ar.Name, ar.Spec.ContainerName, orDefault(ar.Spec.UpdateMode, scaleplanev1alpha1.UpdateModeRollout)))
		}
	}
	if len(names) == 0 {
		return fmt.Errorf("deployment %s/%s has no Addon Resizer nanny (no container runs pod_nanny) and no AddonResizer sizes it", ns, name)
	}
	sort.Strings(names)
	mig := &Migration{APIVersion: apiVersion, Kind: "AddonResizerMigration", Namespace: ns, Workload: "Deployment/" + name, From: "cluster",
		Nannies: []MigratedNanny{}, AddonResizers: []map[string]any{},
		Notes: []string{"already migrated, nothing to do: the Deployment has no nanny; sized by " + strings.Join(names, ", ")}}
	if output == "json" || output == "yaml" {
		return printObject(w, output, mig)
	}
	_, err = fmt.Fprintf(w, "# Deployment %s/%s: %s\n", ns, name, mig.Notes[0])
	return err
}

// printMigration prints the plan as YAML with comments: the AddonResizers
// are documents (the output can be piped to kubectl apply --server-side),
// the rest comments.
func printMigration(w io.Writer, m *Migration, applied bool) error {
	var b strings.Builder
	fmt.Fprintf(&b, "# Addon Resizer -> scaleplane: %s in namespace %s (read from %s)\n", m.Workload, m.Namespace, m.From)
	for _, n := range m.Nannies {
		fmt.Fprintf(&b, "#   nanny %s (%s) sizes %s -> AddonResizer %s\n", n.Container, n.Image, n.Sizes, n.AddonResizer)
	}
	mode := "sizes the container as the nanny did (updateMode Rollout, setLimits true: requests and limits)"
	if m.WatchOnly {
		mode = "shows what it would set and writes nothing (updateMode Off); the nanny keeps sizing"
	}
	fmt.Fprintf(&b, "# 1. The AddonResizer, which %s; server-side apply, field manager %s:\n", mode, migrateFieldManager)
	for _, ar := range m.AddonResizers {
		data, err := yaml.Marshal(ar)
		if err != nil {
			return err
		}
		fmt.Fprintf(&b, "---\n%s", data)
	}
	b.WriteString("---\n")
	if m.WatchOnly {
		b.WriteString("# 2. The nanny stays (--watch-only). Compare the AddonResizer's status.recommendation with the nanny's sizes,\n#    then run migrate again without --watch-only to switch and remove it.\n")
	} else {
		patch, _ := json.Marshal(m.RemovalPatch)
		name := strings.TrimPrefix(m.Workload, "Deployment/")
		fmt.Fprintf(&b, "# 2. The nanny's removal (JSON patch; each remove is guarded by a test of the name at its index):\n#    kubectl -n %s patch deployment %s --type=json -p '%s'\n", m.Namespace, name, patch)
	}
	if len(m.NoLongerNeeded) > 0 {
		b.WriteString("# 3. No longer needed once the nanny is gone (migrate deletes none of them):\n")
		for _, l := range m.NoLongerNeeded {
			obj := l.Kind + " " + l.Name
			if l.Namespace != "" {
				obj = l.Kind + " " + l.Namespace + "/" + l.Name
			}
			fmt.Fprintf(&b, "#    %s: %s\n", obj, l.Why)
		}
	}
	for _, n := range m.Notes {
		fmt.Fprintf(&b, "# Note: %s\n", n)
	}
	switch {
	case applied && len(m.Applied) == 0:
		b.WriteString("# Applied: nothing to change, the cluster already holds this.\n")
	case applied:
		for _, a := range m.Applied {
			fmt.Fprintf(&b, "# Applied: %s\n", a)
		}
	default:
		b.WriteString("# Dry run: nothing was written. --apply writes it (--watch-only --apply: the AddonResizer alone, updateMode Off).\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}
