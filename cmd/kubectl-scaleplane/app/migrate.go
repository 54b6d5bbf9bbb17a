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
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
)

// migrateFieldManager is the field manager of migrate's writes.
const migrateFieldManager = "kubectl-scaleplane-migrate"

// Migration is what `migrate addon-resizer` prints (-o json and -o yaml).
type Migration struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Namespace  string `json:"namespace"`
	// Workload is the Deployment the nanny runs in and sizes.
	Workload string `json:"workload"`
	// From is "cluster" (the live Deployment) or the manifest read.
	From      string `json:"from"`
	WatchOnly bool   `json:"watchOnly,omitempty"`
	// Nannies are the Addon Resizer containers found.
	Nannies []MigratedNanny `json:"nannies"`
	// AddonResizers are the objects written (server-side apply).
	AddonResizers []map[string]any `json:"addonResizers"`
	// RemovalPatch is the JSON patch (RFC 6902) that removes the nannies
	// and the volumes only they mount from the Deployment; each remove is
	// preceded by a test of the name at that index. None with watchOnly.
	RemovalPatch []PatchOp `json:"removalPatch,omitempty"`
	// NoLongerNeeded are the objects the nanny alone used; migrate does not
	// delete them.
	NoLongerNeeded []Leftover `json:"noLongerNeeded,omitempty"`
	Notes          []string   `json:"notes,omitempty"`
	// Applied says what --apply wrote, in order; empty in a dry run.
	Applied []string `json:"applied,omitempty"`
}

// MigratedNanny is one nanny container and what it sized.
type MigratedNanny struct {
	Container    string `json:"container"`
	Image        string `json:"image"`
	Sizes        string `json:"sizes"`
	AddonResizer string `json:"addonResizer"`
}

// PatchOp is one JSON patch operation.
type PatchOp struct {
	Op    string `json:"op"`
	Path  string `json:"path"`
	Value any    `json:"value,omitempty"`
}

// Leftover is an object (or a rule of one) only the nanny needed.
type Leftover struct {
	Kind      string `json:"kind"`
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name"`
	Why       string `json:"why"`
}

type migrateOptions struct {
	*options
	file      string
	apply     bool
	watchOnly bool
	mapDelays bool
	name      string
}

func newMigrateCommand(o *options) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "migrate",
		Short: "Move an add-on's sizing from another tool to scaleplane",
	}
	cmd.AddCommand(newMigrateAddonResizerCommand(o))
	return cmd
}

func newMigrateAddonResizerCommand(o *options) *cobra.Command {
	m := &migrateOptions{options: o}
	cmd := &cobra.Command{
		Use:   "addon-resizer (deployment/NAME | -f FILE [deployment/NAME])",
		Short: "Replace an Addon Resizer nanny with the AddonResizer that sizes the same",
		Long: `Reads the Addon Resizer 1.8 nanny containers of a Deployment (live, or from a manifest: -f FILE, -f - for
stdin, several documents allowed) and prints the AddonResizer that sizes the container as the nanny does, the
JSON patch that removes the nanny (and the volumes only it mounts), and the objects only the nanny needed (its
RBAC, its configuration ConfigMap), which migrate does not delete.

A flag that cannot be mapped exactly is refused before anything is written, with the flag and the reason.
Nothing is written without --apply. --apply writes the AddonResizer by server-side apply (field manager
kubectl-scaleplane-migrate) and then removes the nanny; both are checked by a server-side dry run first, so a
refusal writes nothing. Run twice, it changes nothing the second time.

--watch-only writes the AddonResizer with updateMode Off and leaves the nanny in place: the AddonResizer shows
what it would set while the nanny still sizes. Run migrate --apply again to switch.`,
		Example: `  kubectl scaleplane migrate addon-resizer -n kube-system deployment/metrics-server
  helm template metrics-server metrics-server/metrics-server --set addonResizer.enabled=true | kubectl scaleplane migrate addon-resizer -f -
  kubectl scaleplane migrate addon-resizer -n kube-system deployment/metrics-server --watch-only --apply
  kubectl scaleplane migrate addon-resizer -n kube-system deployment/metrics-server --apply`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return m.run(cmd.Context(), args)
		},
	}
	cmd.Flags().StringVarP(&m.file, "filename", "f", "", "A manifest (several YAML documents or a List) holding the Deployment, and its ConfigMaps and RBAC; - reads stdin.")
	cmd.Flags().BoolVar(&m.apply, "apply", false, "Write: the AddonResizer (server-side apply), then the nanny's removal. Without it, nothing is written.")
	cmd.Flags().BoolVar(&m.watchOnly, "watch-only", false, "Write the AddonResizer with updateMode Off and keep the nanny: step 1, watch side by side.")
	cmd.Flags().BoolVar(&m.mapDelays, "map-delays", false, "Map --scale-up-delay and --scale-down-delay although an AddonResizer counts them from when the estimate leaves the band, not from the last change.")
	cmd.Flags().StringVar(&m.name, "name", "", "The AddonResizer's name (one nanny only). Default: the Deployment's name; with several nannies, DEPLOYMENT-CONTAINER.")
	return cmd
}

func (m *migrateOptions) run(ctx context.Context, args []string) error {
	if m.allNamespaces {
		return fmt.Errorf("migrate works in one namespace: drop --all-namespaces")
	}
	var kind, name string
	if len(args) == 1 {
		var err error
		if kind, name, err = splitKindName(args[0]); err != nil {
			return err
		}
		if k, _ := resolveKind(kind); k != "Deployment" {
			return fmt.Errorf("%s: Addon Resizer sizes Deployments only (kubernetes_client.go:230-245); give deployment/NAME", args[0])
		}
	} else if m.file == "" {
		return fmt.Errorf("give deployment/NAME, or -f FILE")
	}
	var c *Clients
	ns := ""
	if m.file == "" || m.apply {
		var err error
		if c, ns, err = m.complete(); err != nil {
			return err
		}
	} else {
		ns = m.offlineNamespace()
	}
	var src *migrateSource
	var err error
	if m.file != "" {
		if src, err = m.readManifest(ns, name); err != nil {
			return err
		}
	} else if src, err = liveSource(ctx, c, ns, name); err != nil {
		return err
	}
	if !slices.ContainsFunc(src.deployment.Spec.Template.Spec.Containers, func(ct corev1.Container) bool { return isNanny(&ct) }) {
		if c == nil {
			return fmt.Errorf("deployment %s/%s has no Addon Resizer nanny (no container runs pod_nanny)", ns, src.deployment.Name)
		}
		return alreadyMigrated(ctx, c, ns, src.deployment.Name, m.output, m.streams.Out)
	}
	mig, ars, err := planMigration(ctx, src, m.watchOnly, m.mapDelays, m.name)
	if err != nil {
		return err
	}
	if m.apply {
		if err := applyMigration(ctx, c, mig, ars, src, m); err != nil {
			return err
		}
	}
	if m.output == "json" || m.output == "yaml" {
		return printObject(m.streams.Out, m.output, mig)
	}
	return printMigration(m.streams.Out, mig, m.apply)
}

// offlineNamespace is -n, else the kubeconfig's, else default, without
// contacting a cluster (a manifest is migrated offline).
func (m *migrateOptions) offlineNamespace() string {
	if f := m.configFlags.Namespace; f != nil && *f != "" {
		return *f
	}
	if m.clients != nil && m.clients.Namespace != "" {
		return m.clients.Namespace
	}
	if ns, _, err := m.configFlags.ToRawKubeConfigLoader().Namespace(); err == nil && ns != "" {
		return ns
	}
	return "default"
}

// migrateSource is a Deployment and what migrate looks up next to it: its
// namespace's ConfigMaps and the RBAC of its service account.
type migrateSource struct {
	from       string
	namespace  string
	deployment *appsv1.Deployment
	configMap  func(name string) (*corev1.ConfigMap, error)
	// rbac lists the bindings and roles; an error is reported as a note.
	rbac func(ctx context.Context) (*rbacObjects, error)
}

type rbacObjects struct {
	roleBindings        []rbacv1.RoleBinding
	clusterRoleBindings []rbacv1.ClusterRoleBinding
	roles               map[string]*rbacv1.Role
	clusterRoles        map[string]*rbacv1.ClusterRole
}

func liveSource(ctx context.Context, c *Clients, ns, name string) (*migrateSource, error) {
	d, err := c.Kube.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("reading Deployment %s/%s: %w", ns, name, err)
	}
	return &migrateSource{
		from: "cluster", namespace: ns, deployment: d,
		configMap: func(n string) (*corev1.ConfigMap, error) {
			cm, err := c.Kube.CoreV1().ConfigMaps(ns).Get(ctx, n, metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				return nil, nil
			}
			return cm, err
		},
		rbac: func(ctx context.Context) (*rbacObjects, error) { return liveRBAC(ctx, c, ns) },
	}, nil
}

func liveRBAC(ctx context.Context, c *Clients, ns string) (*rbacObjects, error) {
	out := &rbacObjects{roles: map[string]*rbacv1.Role{}, clusterRoles: map[string]*rbacv1.ClusterRole{}}
	rbs, err := c.Kube.RbacV1().RoleBindings(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	crbs, err := c.Kube.RbacV1().ClusterRoleBindings().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	out.roleBindings, out.clusterRoleBindings = rbs.Items, crbs.Items
	roles, err := c.Kube.RbacV1().Roles(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	for i := range roles.Items {
		out.roles[roles.Items[i].Name] = &roles.Items[i]
	}
	crs, err := c.Kube.RbacV1().ClusterRoles().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	for i := range crs.Items {
		out.clusterRoles[crs.Items[i].Name] = &crs.Items[i]
	}
	return out, nil
}

// readManifest reads -f: the Deployment with a nanny (named, or the only
// one), and the ConfigMaps and RBAC beside it.
func (m *migrateOptions) readManifest(ns, name string) (*migrateSource, error) {
	var r io.Reader = m.streams.In
	if m.file != "-" {
		f, err := os.Open(m.file)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		r = f
	}
	if r == nil {
		return nil, fmt.Errorf("-f -: no standard input")
	}
	var deployments []*appsv1.Deployment
	configMaps := map[string]*corev1.ConfigMap{}
	objs := &rbacObjects{roles: map[string]*rbacv1.Role{}, clusterRoles: map[string]*rbacv1.ClusterRole{}}
	dec := utilyaml.NewYAMLOrJSONDecoder(r, 4096)
	var docs []map[string]any
	for {
		var doc map[string]any
		if err := dec.Decode(&doc); err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			return nil, fmt.Errorf("reading %s: %w", m.file, err)
		}
		if doc == nil {
			continue
		}
		if items, ok := doc["items"].([]any); ok && strings.HasSuffix(fmt.Sprint(doc["kind"]), "List") {
			for _, it := range items {
				if d, ok := it.(map[string]any); ok {
					docs = append(docs, d)
				}
			}
			continue
		}
		docs = append(docs, doc)
	}
	for _, doc := range docs {
		apiVersion, kind := fmt.Sprint(doc["apiVersion"]), fmt.Sprint(doc["kind"])
		data, _ := json.Marshal(doc)
		var into any
		switch {
		case kind == "Deployment" && slices.Contains([]string{"apps/v1", "apps/v1beta1", "apps/v1beta2", "extensions/v1beta1"}, apiVersion):
			d := &appsv1.Deployment{}
			deployments, into = append(deployments, d), d
		case kind == "ConfigMap" && apiVersion == "v1":
			into = &corev1.ConfigMap{}
		case strings.HasPrefix(apiVersion, rbacv1.GroupName+"/") && kind == "Role":
			into = &rbacv1.Role{}
		case strings.HasPrefix(apiVersion, rbacv1.GroupName+"/") && kind == "ClusterRole":
			into = &rbacv1.ClusterRole{}
		case strings.HasPrefix(apiVersion, rbacv1.GroupName+"/") && kind == "RoleBinding":
			objs.roleBindings = append(objs.roleBindings, rbacv1.RoleBinding{})
			into = &objs.roleBindings[len(objs.roleBindings)-1]
		case strings.HasPrefix(apiVersion, rbacv1.GroupName+"/") && kind == "ClusterRoleBinding":
			objs.clusterRoleBindings = append(objs.clusterRoleBindings, rbacv1.ClusterRoleBinding{})
			into = &objs.clusterRoleBindings[len(objs.clusterRoleBindings)-1]
		default:
			continue
		}
		if err := json.Unmarshal(data, into); err != nil {
			return nil, fmt.Errorf("reading %s %s from %s: %w", kind, fmt.Sprint(doc["metadata"]), m.file, err)
		}
		if o, ok := into.(metav1.Object); ok && o.GetNamespace() == "" && kind != "ClusterRole" && kind != "ClusterRoleBinding" {
			o.SetNamespace(ns)
		}
		switch o := into.(type) {
		case *corev1.ConfigMap:
			configMaps[o.Namespace+"/"+o.Name] = o
		case *rbacv1.Role:
			if o.Namespace == ns {
				objs.roles[o.Name] = o
			}
		case *rbacv1.ClusterRole:
			objs.clusterRoles[o.Name] = o
		}
	}
	var candidates []*appsv1.Deployment
	for _, d := range deployments {
		if d.Namespace != ns {
			continue
		}
		hasNanny := slices.ContainsFunc(d.Spec.Template.Spec.Containers, func(c corev1.Container) bool { return isNanny(&c) })
		if name != "" && d.Name == name || name == "" && hasNanny {
			candidates = append(candidates, d)
		}
	}
	switch {
	case len(candidates) == 0 && name != "":
		return nil, fmt.Errorf("%s has no Deployment %s in namespace %s", m.file, name, ns)
	case len(candidates) == 0:
		return nil, fmt.Errorf("%s has no Deployment with an Addon Resizer nanny in namespace %s (no container runs pod_nanny)", m.file, ns)
	case len(candidates) > 1:
		var names []string
		for _, d := range candidates {
			names = append(names, "deployment/"+d.Name)
		}
		return nil, fmt.Errorf("%s has several Deployments with a nanny; name one: %s", m.file, strings.Join(names, ", "))
	}
	return &migrateSource{
		from: m.file, namespace: ns, deployment: candidates[0],
		configMap: func(n string) (*corev1.ConfigMap, error) { return configMaps[ns+"/"+n], nil },
		rbac:      func(context.Context) (*rbacObjects, error) { return objs, nil },
	}, nil
}
