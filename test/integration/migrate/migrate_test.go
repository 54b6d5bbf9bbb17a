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

package migrate

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"

	"github.com/scaleplane/scaleplane/cmd/kubectl-scaleplane/app"
	scaleplanev1alpha1 "github.com/scaleplane/scaleplane/pkg/apis/scaleplane/v1alpha1"
	"github.com/scaleplane/scaleplane/test/integration/framework"
)

const waitTimeout = 60 * time.Second

// migrate runs `kubectl scaleplane migrate addon-resizer args...` in
// process, with the cluster admin's clients (migrate runs with the user's
// own permissions, not the plugin's read-only role).
func migrate(cp *framework.ControlPlane, args ...string) (string, error) {
	var out, errOut bytes.Buffer
	cmd := app.NewCommand(genericiooptions.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut},
		&app.Clients{Kube: cp.KubeClient(), Scaleplane: cp.Client(), Clock: clock.RealClock{}})
	cmd.SetArgs(append([]string{"migrate", "addon-resizer"}, args...))
	cmd.SetOut(&errOut)
	cmd.SetErr(&errOut)
	if err := cmd.ExecuteContext(context.Background()); err != nil {
		return out.String(), fmt.Errorf("migrate addon-resizer %s: %w\n%s", strings.Join(args, " "), err, errOut.String())
	}
	return out.String(), nil
}

func migrateJSON(t *testing.T, cp *framework.ControlPlane, args ...string) app.Migration {
	t.Helper()
	out, err := migrate(cp, append(args, "-o", "json")...)
	if err != nil {
		t.Fatal(err)
	}
	var m app.Migration
	if err := json.Unmarshal([]byte(out), &m); err != nil {
		t.Fatalf("decoding migrate's output: %v\n%s", err, out)
	}
	return m
}

// kubectl runs the real kubectl as the cluster admin, stdin on its input.
func kubectl(t *testing.T, cp *framework.ControlPlane, stdin string, args ...string) string {
	t.Helper()
	bin, err := framework.Binary("kubectl")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, append([]string{"--kubeconfig", cp.KubeconfigPath()}, args...)...)
	cmd.Stdin = strings.NewReader(stdin)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// printedPatch is the kubectl command migrate prints for the removal.
var printedPatch = regexp.MustCompile(`(?m)^#\s+kubectl -n (\S+) patch deployment (\S+) --type=json -p '([^']*)'$`)

func isNanny(c corev1.Container) bool {
	return len(c.Command) > 0 && strings.HasSuffix(c.Command[0], "pod_nanny") || strings.Contains(c.Image, "addon-resizer")
}

// versions are the resourceVersions of the Deployment and of every
// AddonResizer in ns: what a write would change.
func versions(t *testing.T, cp *framework.ControlPlane, ns, deployment string) map[string]string {
	t.Helper()
	ctx := context.Background()
	d, err := cp.KubeClient().AppsV1().Deployments(ns).Get(ctx, deployment, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{"Deployment " + d.Name: d.ResourceVersion}
	ars, err := cp.Client().ScaleplaneV1alpha1().AddonResizers(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, ar := range ars.Items {
		out["AddonResizer "+ar.Name] = ar.ResourceVersion
	}
	return out
}

// migrateShape migrates the live Deployment of s in ns: a dry run first
// (nothing written; the AddonResizers, the removal patch and the objects
// only the nanny needed), then the switch, by the printed output applied
// with kubectl or by --apply (after --watch-only --apply, which writes the
// AddonResizers with updateMode Off and leaves the Deployment, for
// watchFirst), then --apply again, which must change nothing.
func migrateShape(t *testing.T, cp *framework.ControlPlane, ns string, s shape) (*appsv1.Deployment, app.Migration) {
	t.Helper()
	ctx := context.Background()
	target := "deployment/" + s.deployment
	before, err := cp.KubeClient().AppsV1().Deployments(ns).Get(ctx, s.deployment, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	untouched := versions(t, cp, ns, s.deployment)
	plan := migrateJSON(t, cp, "-n", ns, target)
	if got := versions(t, cp, ns, s.deployment); len(plan.Applied) > 0 || !reflect.DeepEqual(got, untouched) {
		t.Fatalf("%s: the dry run wrote: applied %v; versions %v, before %v", s.name, plan.Applied, got, untouched)
	}
	var planned []string
	for _, n := range plan.Nannies {
		planned = append(planned, n.AddonResizer)
	}
	var want []string
	for _, n := range s.nannies {
		want = append(want, n.addonResizer)
	}
	if !slices.Equal(planned, want) || len(plan.AddonResizers) != len(want) || len(plan.RemovalPatch) == 0 {
		t.Fatalf("%s: migrate plans AddonResizers %v (%d objects), patch %v; want %v and a patch", s.name, planned, len(plan.AddonResizers), plan.RemovalPatch, want)
	}
	var leftovers []string
	for _, l := range plan.NoLongerNeeded {
		leftovers = append(leftovers, l.Kind+" "+l.Name)
	}
	var wantLeft []string
	for _, l := range s.leftovers {
		if strings.HasSuffix(l, "+") {
			l = strings.TrimSuffix(l, "+") + "-" + ns
		}
		wantLeft = append(wantLeft, l)
	}
	slices.Sort(leftovers)
	if slices.Sort(wantLeft); !slices.Equal(leftovers, wantLeft) {
		t.Errorf("%s: no longer needed, read from the cluster: %q; want %q", s.name, leftovers, wantLeft)
	}

	if s.printed {
		// As a user would: the printed YAML piped to kubectl apply
		// --server-side, then the printed kubectl patch.
		text, err := migrate(cp, "-n", ns, target)
		if err != nil {
			t.Fatal(err)
		}
		m := printedPatch.FindStringSubmatch(text)
		if m == nil || m[1] != ns || m[2] != s.deployment {
			t.Fatalf("%s: no kubectl patch of deployment %s in namespace %s printed:\n%s", s.name, s.deployment, ns, text)
		}
		var printed []app.PatchOp
		if err := json.Unmarshal([]byte(m[3]), &printed); err != nil || !reflect.DeepEqual(printed, plan.RemovalPatch) {
			t.Fatalf("%s: the printed patch %s (%v) is not -o json's %v", s.name, m[3], err, plan.RemovalPatch)
		}
		t.Logf("%s: %s", s.name, strings.TrimSpace(kubectl(t, cp, text, "apply", "--server-side", "-f", "-")))
		t.Logf("%s: %s", s.name, strings.TrimSpace(kubectl(t, cp, "", "-n", ns, "patch", "deployment", s.deployment, "--type=json", "-p", m[3])))
	} else {
		if s.watchFirst {
			deploymentVersion := untouched["Deployment "+s.deployment]
			watching := migrateJSON(t, cp, "-n", ns, target, "--watch-only", "--apply")
			if len(watching.Applied) != len(want) || len(watching.RemovalPatch) != 0 {
				t.Errorf("%s: --watch-only --apply wrote %q, patch %v; want the AddonResizers alone", s.name, watching.Applied, watching.RemovalPatch)
			}
			if got := versions(t, cp, ns, s.deployment); got["Deployment "+s.deployment] != deploymentVersion {
				t.Errorf("%s: --watch-only wrote the Deployment", s.name)
			}
			for _, n := range s.nannies {
				ar, err := cp.Client().ScaleplaneV1alpha1().AddonResizers(ns).Get(ctx, n.addonResizer, metav1.GetOptions{})
				if err != nil || ar.Spec.UpdateMode != scaleplanev1alpha1.UpdateModeOff {
					t.Fatalf("%s: AddonResizer %s after --watch-only: %v, %+v", s.name, n.addonResizer, err, ar)
				}
			}
		}
		applied := migrateJSON(t, cp, "-n", ns, target, "--apply")
		if len(applied.Applied) != len(want)+1 {
			t.Errorf("%s: --apply wrote %q; want the AddonResizers then the Deployment", s.name, applied.Applied)
		}
		if !reflect.DeepEqual(applied.AddonResizers, plan.AddonResizers) || !reflect.DeepEqual(applied.RemovalPatch, plan.RemovalPatch) {
			t.Errorf("%s: --apply wrote another plan than the dry run printed:\n%v\n%v", s.name, applied, plan)
		}
	}

	after, err := cp.KubeClient().AppsV1().Deployments(ns).Get(ctx, s.deployment, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var kept []corev1.Container
	for _, c := range before.Spec.Template.Spec.Containers {
		if !isNanny(c) {
			kept = append(kept, c)
		}
	}
	if !reflect.DeepEqual(after.Spec.Template.Spec.Containers, kept) {
		t.Errorf("%s: containers after the migration %v; want the add-on's, unchanged, and no nanny", s.name, names(after.Spec.Template.Spec.Containers))
	}
	for _, v := range after.Spec.Template.Spec.Volumes {
		if v.ConfigMap != nil && slices.Contains(s.leftovers, "ConfigMap "+v.ConfigMap.Name) {
			t.Errorf("%s: volume %s of the nanny's ConfigMap %s is left", s.name, v.Name, v.ConfigMap.Name)
		}
	}
	for _, n := range s.nannies {
		ar, err := cp.Client().ScaleplaneV1alpha1().AddonResizers(ns).Get(ctx, n.addonResizer, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		if ar.Spec.TargetRef.Name != s.deployment || ar.Spec.ContainerName != n.container || ar.Spec.UpdateMode != scaleplanev1alpha1.UpdateModeRollout || !ptr.Deref(ar.Spec.SetLimits, false) {
			t.Errorf("%s: AddonResizer %s: %+v", s.name, ar.Name, ar.Spec)
		}
	}

	// --apply again: already migrated, nothing written.
	written := versions(t, cp, ns, s.deployment)
	again := migrateJSON(t, cp, "-n", ns, target, "--apply")
	if got := versions(t, cp, ns, s.deployment); len(again.Applied) > 0 || !reflect.DeepEqual(got, written) {
		t.Errorf("%s: the second --apply wrote: applied %v; versions %v, before %v", s.name, again.Applied, got, written)
	}
	if len(again.Notes) != 1 || !strings.Contains(again.Notes[0], "already migrated") {
		t.Errorf("%s: the second --apply says %q; want already migrated", s.name, again.Notes)
	}
	return before, plan
}

// rollBack undoes the migration as docs/migrate-from-addon-resizer.md says:
// the AddonResizers to updateMode Off, the nannies and the volumes removed
// with them added back from the Deployment as it was, the AddonResizers
// deleted. migrate then plans the same AddonResizers again.
func rollBack(t *testing.T, cp *framework.ControlPlane, ns string, s shape, before *appsv1.Deployment, plan app.Migration) {
	t.Helper()
	ctx := context.Background()
	ars := cp.Client().ScaleplaneV1alpha1().AddonResizers(ns)
	for _, n := range s.nannies {
		if _, err := ars.Patch(ctx, n.addonResizer, types.MergePatchType, []byte(`{"spec":{"updateMode":"Off"}}`), metav1.PatchOptions{}); err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
	}
	now, err := cp.KubeClient().AppsV1().Deployments(ns).Get(ctx, s.deployment, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// A strategic merge patch, as kubectl patch sends by default: both
	// lists merge by name, and it works where the migration left no
	// volumes at all (heapster), which a JSON patch adding to
	// /spec/template/spec/volumes/- does not.
	var put corev1.PodSpec
	for _, c := range before.Spec.Template.Spec.Containers {
		if isNanny(c) {
			put.Containers = append(put.Containers, c)
		}
	}
	for _, v := range before.Spec.Template.Spec.Volumes {
		if !slices.ContainsFunc(now.Spec.Template.Spec.Volumes, func(w corev1.Volume) bool { return w.Name == v.Name }) {
			put.Volumes = append(put.Volumes, v)
		}
	}
	body, _ := json.Marshal(map[string]any{"spec": map[string]any{"template": map[string]any{"spec": put}}})
	if _, err := cp.KubeClient().AppsV1().Deployments(ns).Patch(ctx, s.deployment, types.StrategicMergePatchType, body, metav1.PatchOptions{}); err != nil {
		t.Fatalf("%s: putting the nanny back: %v", s.name, err)
	}
	back, err := cp.KubeClient().AppsV1().Deployments(ns).Get(ctx, s.deployment, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(back.Spec.Template.Spec.Containers) != len(before.Spec.Template.Spec.Containers) || len(back.Spec.Template.Spec.Volumes) != len(before.Spec.Template.Spec.Volumes) {
		t.Errorf("%s: after the rollback containers %v and %d volumes; before the migration %v and %d", s.name,
			names(back.Spec.Template.Spec.Containers), len(back.Spec.Template.Spec.Volumes), names(before.Spec.Template.Spec.Containers), len(before.Spec.Template.Spec.Volumes))
	}
	for _, n := range s.nannies {
		if err := ars.Delete(ctx, n.addonResizer, metav1.DeleteOptions{}); err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
	}
	again := migrateJSON(t, cp, "-n", ns, "deployment/"+s.deployment)
	if !reflect.DeepEqual(again.AddonResizers, plan.AddonResizers) || len(again.RemovalPatch) != len(plan.RemovalPatch) {
		t.Errorf("%s: after the rollback migrate plans\n%v\n%v; before the migration\n%v\n%v", s.name, again.AddonResizers, again.RemovalPatch, plan.AddonResizers, plan.RemovalPatch)
	}
}

func names(cs []corev1.Container) []string {
	var out []string
	for _, c := range cs {
		out = append(out, c.Name)
	}
	return out
}

// waitSizedAsNanny waits until every AddonResizer of s has counted nodes
// and the add-on's containers request, and are limited to, what the nanny
// would set at that count, as the scheduler reads both. The count is the
// manager's metric: status is written at once when the resources change,
// but a count alone only every 10 seconds (observationInterval).
func waitSizedAsNanny(t *testing.T, cp *framework.ControlPlane, m *framework.Manager, ns string, s shape, nodes int) {
	t.Helper()
	var last string
	err := wait.PollUntilContextTimeout(context.Background(), 250*time.Millisecond, waitTimeout, true, func(ctx context.Context) (bool, error) {
		d, err := cp.KubeClient().AppsV1().Deployments(ns).Get(ctx, s.deployment, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		for _, n := range s.nannies {
			got, ok, err := m.Metric("resizer_cluster_size", `namespace="`+ns+`"`, `name="`+n.addonResizer+`"`)
			if err != nil || !ok || got != float64(nodes) {
				last = fmt.Sprintf("AddonResizer %s counts %v nodes (%v, %v)", n.addonResizer, got, ok, err)
				return false, nil
			}
			c := containerOf(d, n.container)
			if c == nil {
				return false, fmt.Errorf("container %s is gone", n.container)
			}
			for name, theirs := range n.sizes(uint64(nodes)) {
				want := asScheduled(name, theirs)
				req, lim := c.Resources.Requests[name], c.Resources.Limits[name]
				if req.Cmp(want) != 0 || lim.Cmp(want) != 0 {
					last = fmt.Sprintf("container %s: %s request %s limit %s; the nanny's %s, scheduled as %s", n.container, name, req.String(), lim.String(), theirs.String(), want.String())
					return false, nil
				}
			}
		}
		return true, nil
	})
	if err != nil {
		t.Fatalf("%s at %d nodes: not sized as the nanny would: %v; last: %s", s.name, nodes, err, last)
	}
}

func containerOf(d *appsv1.Deployment, name string) *corev1.Container {
	for i := range d.Spec.Template.Spec.Containers {
		if d.Spec.Template.Spec.Containers[i].Name == name {
			return &d.Spec.Template.Spec.Containers[i]
		}
	}
	return nil
}

// TestMigrateRealShapes: each transcribed shape, created as it runs today
// with its nanny, RBAC and ConfigMaps, is migrated (see migrateShape); the
// Deployment is left without a nanny; then the resizer, the real
// scaleplane-controller-manager, sizes each add-on container at 3, 16, 100
// and 1,000 Node objects to the nanny's requests and limits there, rounded
// up to a whole millicore or byte as the scheduler reads them.
func TestMigrateRealShapes(t *testing.T) {
	cp := framework.Get(t)
	start := time.Now()
	growNodes(t, cp, 0, 3)
	nss := map[string]string{}
	befores := map[string]*appsv1.Deployment{}
	plans := map[string]app.Migration{}
	for _, s := range shapes {
		ns := cp.CreateNamespace(t)
		nss[s.name] = ns
		createShape(t, cp, ns, s.name)
		befores[s.name], plans[s.name] = migrateShape(t, cp, ns, s)
	}
	t.Logf("the three shapes created and migrated in %s", time.Since(start).Round(time.Millisecond))

	m := framework.StartManager(t, cp.KubeconfigPath(), "resizer")
	nodes := 3
	for _, n := range []int{3, 16, 100, 1000} {
		step := time.Now()
		growNodes(t, cp, nodes, n)
		created := time.Since(step)
		nodes = n
		for _, s := range shapes {
			waitSizedAsNanny(t, cp, m, nss[s.name], s, n)
		}
		t.Logf("%d nodes: created in %s, all sized as the nanny in %s", n, created.Round(time.Millisecond), time.Since(step).Round(time.Millisecond))
	}
	// Status says so too, once its count is written.
	for _, s := range shapes {
		for _, n := range s.nannies {
			waitStatus(t, cp, nss[s.name], n, nodes)
		}
	}
	for _, s := range shapes {
		rollBack(t, cp, nss[s.name], s, befores[s.name], plans[s.name])
	}
}

// waitStatus waits until the AddonResizer's status counts nodes and
// recommends the nanny's sizes there, as the scheduler reads them.
func waitStatus(t *testing.T, cp *framework.ControlPlane, ns string, n nanny, nodes int) {
	t.Helper()
	var last string
	err := wait.PollUntilContextTimeout(context.Background(), 250*time.Millisecond, waitTimeout, true, func(ctx context.Context) (bool, error) {
		ar, err := cp.Client().ScaleplaneV1alpha1().AddonResizers(ns).Get(ctx, n.addonResizer, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		st := ar.Status
		last = fmt.Sprintf("clusterSize %d recommendation %v", ptr.Deref(st.ClusterSize, -1), st.Recommendation)
		if ptr.Deref(st.ClusterSize, -1) != int32(nodes) || st.Recommendation == nil {
			return false, nil
		}
		for name, theirs := range n.sizes(uint64(nodes)) {
			want := asScheduled(name, theirs)
			req, lim := st.Recommendation.Requests[name], st.Recommendation.Limits[name]
			if req.Cmp(want) != 0 || lim.Cmp(want) != 0 {
				return false, fmt.Errorf("%s recommended %s (limit %s); the nanny's %s, scheduled as %s", name, req.String(), lim.String(), theirs.String(), want.String())
			}
		}
		return true, nil
	})
	if err != nil {
		t.Errorf("AddonResizer %s/%s: status at %d nodes: %v; last: %s", ns, n.addonResizer, nodes, err, last)
	}
}
