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
package upgrade

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"

	"github.com/scaleplane/scaleplane/test/integration/framework"
)

// webhookCases are, per webhook of the chart, an object it refuses and the
// message it refuses it with. The schema accepts each one (before and after
// the upgrade): only the webhook refuses them.
var webhookCases = []struct {
	webhook, manifest, message string
}{
	{
		webhook: "cronfederatedhpa.validation.scaleplane.io",
		manifest: `
apiVersion: autoscaling.karmada.io/v1alpha1
kind: CronFederatedHPA
metadata: {name: never}
spec:
  scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: web}
  rules: [{name: never, schedule: "0 8 31 2 *", targetReplicas: 1}]
`,
		message: `spec.rules[0].schedule: Invalid value: "0 8 31 2 *": schedule "0 8 31 2 *" never fires`,
	},
	{
		webhook: "addonresizer.validation.scaleplane.io",
		manifest: `
apiVersion: autoscaling.scaleplane.io/v1alpha1
kind: AddonResizer
metadata: {name: nanny}
spec:
  targetRef: {kind: Deployment, name: metrics-server}
  containerName: pod.nanny
  resources: [{name: cpu, base: 40m, extraPerUnit: 500u}]
`,
		message: `spec.containerName: Invalid value: "pod.nanny": must not contain dots`,
	},
	{
		webhook: "leaderworkerset-scalepolicy.validation.scaleplane.io",
		manifest: `
apiVersion: leaderworkerset.x-k8s.io/v1
kind: LeaderWorkerSet
metadata: {name: slow}
spec:
  leaderWorkerTemplate:
    workerTemplate:
      spec:
        containers: [{name: server, image: registry.k8s.io/pause:3.10}]
  scalePolicy:
    maxReplicas: 4
    metrics: [{type: Resource, resource: {name: cpu, target: {type: Utilization, averageUtilization: 50}}}]
    behavior: {scaleDown: {stabilizationWindowSeconds: 7200}}
`,
		message: "spec.scalePolicy.behavior.scaleDown.stabilizationWindowSeconds: Invalid value: 7200: must be between 0 and 3600 seconds",
	},
}

// checkWebhook waits until each of the chart's webhooks refuses its invalid
// object with its message (the configuration the last helm command wrote
// may take a moment to reach the API server's admission chain).
func (u *user) checkWebhook(step string) {
	u.t.Helper()
	for _, c := range webhookCases {
		obj := object(u.t, c.manifest)
		gvr := map[string]schema.GroupVersionResource{"CronFederatedHPA": cronGVR, "AddonResizer": arGVR, "LeaderWorkerSet": lwsGVR}[obj.GetKind()]
		want := fmt.Sprintf("admission webhook %q denied the request: %s", c.webhook, c.message)
		framework.WaitObject(u.t, waitTimeout, step+": the webhook "+c.webhook,
			func(ctx context.Context) (error, error) {
				_, err := u.dyn.Resource(gvr).Namespace(u.ns).Create(ctx, obj.DeepCopy(), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
				return err, nil
			},
			func(err, _ error) string {
				if err == nil || !strings.Contains(err.Error(), want) || !apierrors.IsForbidden(err) {
					return fmt.Sprintf("creating %s %s: %v, want a Forbidden error with %q", obj.GetKind(), obj.GetName(), err, want)
				}
				return ""
			})
	}
}

// crd reads a CustomResourceDefinition.
func (u *user) crd(name string) *unstructured.Unstructured {
	u.t.Helper()
	crd, err := u.dyn.Resource(framework.CRDResource).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		u.t.Fatalf("reading CRD %s: %v", name, err)
	}
	return crd
}

// crdVersions returns every CRD's resourceVersion.
func (u *user) crdVersions() map[string]string {
	u.t.Helper()
	rv := map[string]string{}
	for _, name := range crdNames {
		rv[name] = u.crd(name).GetResourceVersion()
	}
	return rv
}

// schemaAt returns the schema of a field of the CRD's only version: path
// names properties, "[]" steps into a list's items.
func schemaAt(crd *unstructured.Unstructured, path ...string) map[string]any {
	versions, _, _ := unstructured.NestedSlice(crd.Object, "spec", "versions")
	if len(versions) != 1 {
		return nil
	}
	s, _, _ := unstructured.NestedMap(versions[0].(map[string]any), "schema", "openAPIV3Schema")
	for _, p := range path {
		var next map[string]any
		if p == "[]" {
			next, _ = s["items"].(map[string]any)
		} else {
			props, _ := s["properties"].(map[string]any)
			next, _ = props[p].(map[string]any)
		}
		if next == nil {
			return nil
		}
		s = next
	}
	return s
}

func enum(s map[string]any) []string {
	var values []string
	list, _ := s["enum"].([]any)
	for _, v := range list {
		values = append(values, fmt.Sprint(v))
	}
	return values
}

// schemaIs says which schemas the CRDs hold: "0.1.0" or "new", from the
// fields that tell them apart, or what is mixed.
func (u *user) schemaIs() string {
	u.t.Helper()
	ar, lws := u.crd(crdNames[0]), u.crd(crdNames[3])
	has := map[string]bool{
		"updateMode Off":                     slices.Contains(enum(schemaAt(ar, "spec", "updateMode")), "Off"),
		"resources[].minAllowed":             schemaAt(ar, "spec", "resources", "[]", "minAllowed") != nil,
		"resources[].maxAllowed":             schemaAt(ar, "spec", "resources", "[]", "maxAllowed") != nil,
		"clusters[].state Capped":            slices.Contains(enum(schemaAt(ar, "status", "clusters", "[]", "state")), "Capped"),
		"clusters[].state NotApplied":        slices.Contains(enum(schemaAt(ar, "status", "clusters", "[]", "state")), "NotApplied"),
		"clusters[].state Recommended":       slices.Contains(enum(schemaAt(ar, "status", "clusters", "[]", "state")), "Recommended"),
		"clusters[].recommendation":          schemaAt(ar, "status", "clusters", "[]", "recommendation") != nil,
		"LeaderWorkerSet observedGeneration": schemaAt(lws, "status", "observedGeneration") != nil,
	}
	var with, without []string
	for field, ok := range has {
		if ok {
			with = append(with, field)
		} else {
			without = append(without, field)
		}
	}
	switch {
	case len(with) == 0:
		return "0.1.0"
	case len(without) == 0:
		return "new"
	}
	slices.Sort(with)
	slices.Sort(without)
	return fmt.Sprintf("mixed: with %v, without %v", with, without)
}

// header returns the columns kubectl get addonresizers shows.
func (u *user) header(args ...string) []string {
	u.t.Helper()
	out := u.mustRun(nil, "kubectl", append([]string{"get", "addonresizers", "-n", u.ns}, args...)...)
	first, _, _ := strings.Cut(out, "\n")
	return strings.Fields(first)
}

// managers returns the field managers of an object, as manager/operation.
func managers(obj *unstructured.Unstructured) []string {
	var m []string
	for _, e := range obj.GetManagedFields() {
		m = append(m, e.Manager+"/"+string(e.Operation))
	}
	slices.Sort(m)
	return m
}

// waitServed waits until the API server serves an AddonResizer with the new
// fields (a CRD update reaches its handler a moment after the write), and
// returns how many tries it took.
func (u *user) waitServed() int {
	u.t.Helper()
	obj := object(u.t, addonResizerNew)
	obj.SetName("served")
	tries := 0
	framework.WaitObject(u.t, waitTimeout, "an AddonResizer with the new fields, strictly validated",
		func(ctx context.Context) (error, error) {
			tries++
			_, err := u.dyn.Resource(arGVR).Namespace(u.ns).Create(ctx, obj.DeepCopy(),
				metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}, FieldValidation: "Strict"})
			return err, nil
		},
		func(err, _ error) string {
			if err != nil {
				return err.Error()
			}
			return ""
		})
	return tries
}

// in returns the user for a subtest.
func (u *user) in(t *testing.T) *user {
	c := *u
	c.t = t
	return &c
}

// checkNewSpec checks that an AddonResizer reads back with addonResizerNew's
// new fields, unpruned.
func (u *user) checkNewSpec(name string) {
	u.t.Helper()
	obj := u.get(arGVR, name)
	want := object(u.t, addonResizerNew)
	for _, path := range [][]string{{"spec", "updateMode"}, {"spec", "resources"}} {
		got, _, _ := unstructured.NestedFieldNoCopy(obj.Object, path...)
		w, _, _ := unstructured.NestedFieldNoCopy(want.Object, path...)
		if !equalJSON(got, w) {
			u.t.Errorf("AddonResizer %s's %s reads %s, want %s", name, strings.Join(path, "."), mustJSON(got), mustJSON(w))
		}
	}
}

// checkStatus checks that an object's status reads as written.
func (u *user) checkStatus(gvr schema.GroupVersionResource, name, status string) {
	u.t.Helper()
	var want map[string]any
	if err := yaml.Unmarshal([]byte(status), &want); err != nil {
		u.t.Fatal(err)
	}
	got := u.get(gvr, name).Object["status"]
	if !equalJSON(got, want) {
		u.t.Errorf("%s %s's status reads %s, want %s", gvr.Resource, name, mustJSON(got), mustJSON(want))
	}
}

func mustJSON(v any) string {
	data, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprintf("<%v>", err)
	}
	return string(data)
}

// equalJSON compares two decoded objects by their JSON (numbers decoded from
// YAML and from the API server differ in Go type).
func equalJSON(a, b any) bool {
	var x, y any
	_ = json.Unmarshal([]byte(mustJSON(a)), &x)
	_ = json.Unmarshal([]byte(mustJSON(b)), &y)
	return mustJSON(x) == mustJSON(y)
}

func equalMaps(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// removeCRDs deletes the chart's CRDs (and with them every object of their
// kinds) left by an earlier test, so that helm install installs 0.1.0's.
//
// Each kind's watch cache must be ready first: a CRD deleted while it
// initializes (the first request for a kind, or any after a change of its
// CRD, starts it) is held by its finalizer, which cannot list the objects
// ("storage is (re)initializing"), for minutes.
func removeCRDs(t *testing.T) {
	t.Helper()
	cp := framework.Get(t)
	client := cp.DynamicClient().Resource(framework.CRDResource)
	for _, name := range crdNames {
		crd, err := client.Get(context.Background(), name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			t.Fatalf("reading CRD %s: %v", name, err)
		}
		group, _, _ := unstructured.NestedString(crd.Object, "spec", "group")
		plural, _, _ := unstructured.NestedString(crd.Object, "spec", "names", "plural")
		versions, _, _ := unstructured.NestedSlice(crd.Object, "spec", "versions")
		for _, v := range versions {
			version, _ := v.(map[string]any)["name"].(string)
			gvr := schema.GroupVersionResource{Group: group, Version: version, Resource: plural}
			// resourceVersion 0: served by the watch cache, refused while
			// it initializes.
			framework.WaitObject(t, waitTimeout, "the watch cache of "+gvr.String(),
				func(ctx context.Context) (error, error) {
					_, err := cp.DynamicClient().Resource(gvr).List(ctx, metav1.ListOptions{ResourceVersion: "0", Limit: 1})
					return err, nil
				},
				func(err, _ error) string {
					if err != nil {
						return err.Error()
					}
					return ""
				})
		}
		if err := client.Delete(context.Background(), name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			t.Fatalf("deleting CRD %s: %v", name, err)
		}
	}
	framework.WaitObject(t, 60*time.Second, "removing the CRDs of an earlier test",
		func(context.Context) ([]string, error) {
			var left []string
			for _, name := range crdNames {
				// Not the poll's context: its last read would fail
				// with its deadline instead of saying what is left.
				crd, err := client.Get(context.Background(), name, metav1.GetOptions{})
				if err == nil {
					conditions, _, _ := unstructured.NestedSlice(crd.Object, "status", "conditions")
					left = append(left, fmt.Sprintf("%s (conditions %v)", name, conditions))
				} else if !apierrors.IsNotFound(err) {
					return nil, err
				}
			}
			return left, nil
		},
		func(left []string, err error) string {
			switch {
			case err != nil:
				return err.Error()
			case len(left) > 0:
				return fmt.Sprintf("still there: %v", left)
			}
			return ""
		})
}
