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

package karmadainterpreter

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

func container(name string, requests, limits corev1.ResourceList) corev1.Container {
	return corev1.Container{Name: name, Image: "registry.k8s.io/pause:3.10",
		Resources: corev1.ResourceRequirements{Requests: requests, Limits: limits}}
}

func list(pairs ...string) corev1.ResourceList {
	out := corev1.ResourceList{}
	for i := 0; i < len(pairs); i += 2 {
		out[corev1.ResourceName(pairs[i])] = resource.MustParse(pairs[i+1])
	}
	return out
}

// TestPodRequirements checks the reproduction of Karmada's
// GenerateReplicaRequirements on the rules its v1.18.2 code follows.
func TestPodRequirements(t *testing.T) {
	always := corev1.ContainerRestartPolicyAlways
	sidecar := container("proxy", list("cpu", "300m", "memory", "64Mi"), nil)
	sidecar.RestartPolicy = &always
	for _, tc := range []struct {
		name      string
		spec      corev1.PodSpec
		want      corev1.ResourceList
		wantClaim *NodeClaim
		wantNil   bool
	}{{
		name: "app containers are summed",
		spec: corev1.PodSpec{Containers: []corev1.Container{
			container("a", list("cpu", "1", "memory", "1Gi"), nil),
			container("b", list("cpu", "250m", "memory", "512Mi"), nil),
		}},
		want: list("cpu", "1250m", "memory", "1536Mi"),
	}, {
		name: "limits stand in for missing requests only",
		spec: corev1.PodSpec{Containers: []corev1.Container{
			container("a", list("cpu", "100m"), list("cpu", "2", "memory", "1Gi")),
		}},
		want: list("cpu", "100m", "memory", "1Gi"),
	}, {
		name: "an init container raises each resource to its own request",
		spec: corev1.PodSpec{
			InitContainers: []corev1.Container{container("init", list("cpu", "2", "memory", "256Mi"), nil)},
			Containers:     []corev1.Container{container("a", list("cpu", "1", "memory", "1Gi"), nil)},
		},
		want: list("cpu", "2", "memory", "1Gi"),
	}, {
		name: "a restartable sidecar counts as an init container (maximum, not sum)",
		spec: corev1.PodSpec{
			InitContainers: []corev1.Container{sidecar},
			Containers:     []corev1.Container{container("a", list("cpu", "1", "memory", "32Mi"), nil)},
		},
		want: list("cpu", "1", "memory", "64Mi"),
	}, {
		name: "init containers' limits stand in too",
		spec: corev1.PodSpec{
			InitContainers: []corev1.Container{container("init", nil, list("cpu", "3"))},
			Containers:     []corev1.Container{container("a", list("cpu", "1"), nil)},
		},
		want: list("cpu", "3"),
	}, {
		name: "the overhead is added after the init maximum",
		spec: corev1.PodSpec{
			Overhead:       list("cpu", "100m", "memory", "128Mi"),
			InitContainers: []corev1.Container{container("init", list("cpu", "2"), nil)},
			Containers:     []corev1.Container{container("a", list("cpu", "1", "memory", "1Gi"), nil)},
		},
		want: list("cpu", "2100m", "memory", "1152Mi"),
	}, {
		name: "millicores and whole bytes, rounded up",
		spec: corev1.PodSpec{Containers: []corev1.Container{
			container("a", list("cpu", "100u", "memory", "1.5"), nil),
			container("b", list("cpu", "100u", "memory", "1.5"), nil),
		}},
		want: list("cpu", "2m", "memory", "4"),
	}, {
		name: "scalar resources counted, unqualified unknown names dropped",
		spec: corev1.PodSpec{Containers: []corev1.Container{container("a", list(
			"nvidia.com/gpu", "2", "hugepages-2Mi", "64Mi", "example.kubernetes.io/thing", "3",
			"attachable-volumes-csi-x", "1", "widgets", "5", "ephemeral-storage", "1Gi", "pods", "1"), nil)}},
		want: list("nvidia.com/gpu", "2", "hugepages-2Mi", "64Mi", "example.kubernetes.io/thing", "3",
			"attachable-volumes-csi-x", "1", "ephemeral-storage", "1Gi", "pods", "1"),
	}, {
		name:      "node selector and tolerations claim nodes",
		spec:      corev1.PodSpec{NodeSelector: map[string]string{"a": "b"}, Tolerations: []corev1.Toleration{{Key: "k", Operator: corev1.TolerationOpExists}}},
		wantClaim: &NodeClaim{NodeSelector: map[string]string{"a": "b"}, Tolerations: []corev1.Toleration{{Key: "k", Operator: corev1.TolerationOpExists}}},
	}, {
		name: "a preferred node affinity claims nothing",
		spec: corev1.PodSpec{Affinity: &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
			PreferredDuringSchedulingIgnoredDuringExecution: []corev1.PreferredSchedulingTerm{{Weight: 1}},
		}}},
		wantNil: true,
	}, {
		name:    "nothing requested, nothing claimed",
		spec:    corev1.PodSpec{Containers: []corev1.Container{container("a", nil, nil)}},
		wantNil: true,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			got := PodRequirements(&corev1.PodTemplateSpec{Spec: tc.spec})
			if tc.wantNil {
				if got != nil {
					t.Fatalf("want nil, got %s", mustJSON(got))
				}
				return
			}
			if got == nil {
				t.Fatal("want requirements, got nil")
			}
			if !quantities.DeepEqual(tc.want, got.ResourceRequest) {
				t.Errorf("requests: want %s, got %s", mustJSON(tc.want), mustJSON(got.ResourceRequest))
			}
			if !reflect.DeepEqual(tc.wantClaim, got.NodeClaim) {
				t.Errorf("claim: want %s, got %s", mustJSON(tc.wantClaim), mustJSON(got.NodeClaim))
			}
		})
	}
}

// TestPodRequirementsFormats checks the JSON Karmada hands back to Lua: CPU
// in decimal SI, memory and huge pages in binary SI, counts in decimal.
func TestPodRequirementsFormats(t *testing.T) {
	got := PodRequirements(&corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{
		container("a", list("cpu", "1500m", "memory", "1536Mi", "hugepages-1Gi", "2Gi", "nvidia.com/gpu", "1"), nil),
	}}})
	data, err := json.Marshal(got.ResourceRequest)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"cpu":"1500m","hugepages-1Gi":"2Gi","memory":"1536Mi","nvidia.com/gpu":"1"}`
	if string(data) != want {
		t.Errorf("want %s, got %s", want, data)
	}
}

// TestPodDependencies checks the reproduction of Karmada's
// GetDependenciesFromPodTemplate.
func TestPodDependencies(t *testing.T) {
	spec := corev1.PodSpec{
		ServiceAccountName: "runner",
		ImagePullSecrets:   []corev1.LocalObjectReference{{Name: "pull"}, {Name: ""}},
		InitContainers: []corev1.Container{{Name: "i", EnvFrom: []corev1.EnvFromSource{
			{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "init-env"}}}}}},
		Containers: []corev1.Container{{Name: "c", Env: []corev1.EnvVar{
			{Name: "A", ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "cm-env"}, Key: "a"}}},
			{Name: "B", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
		}}},
		EphemeralContainers: []corev1.EphemeralContainer{{EphemeralContainerCommon: corev1.EphemeralContainerCommon{Name: "e",
			EnvFrom: []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "debug-env"}}}}}}},
		Volumes: []corev1.Volume{
			{Name: "p", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
				{Secret: &corev1.SecretProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "proj-secret"}}},
				{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "proj-cm"}}},
			}}}},
			{Name: "csi", VolumeSource: corev1.VolumeSource{CSI: &corev1.CSIVolumeSource{Driver: "d",
				NodePublishSecretRef: &corev1.LocalObjectReference{Name: "csi-secret"}}}},
			{Name: "claim", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data"}}},
			{Name: "empty", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
		},
	}
	var got []string
	for _, ref := range PodDependencies(&spec, "ns") {
		if ref.APIVersion != "v1" || ref.Namespace != "ns" {
			t.Errorf("unexpected reference %+v", ref)
		}
		got = append(got, ref.Kind+"/"+ref.Name)
	}
	want := []string{"ConfigMap/cm-env", "ConfigMap/debug-env", "ConfigMap/proj-cm",
		"Secret/csi-secret", "Secret/init-env", "Secret/proj-secret", "Secret/pull",
		"ServiceAccount/runner", "PersistentVolumeClaim/data"}
	if !reflect.DeepEqual(want, got) {
		t.Errorf("want %v, got %v", want, got)
	}
	if deps := PodDependencies(&corev1.PodSpec{ServiceAccountName: "default"}, "ns"); deps != nil {
		t.Errorf("the default service account is no dependency, got %v", deps)
	}
}

// runLua runs a chunk that defines Test() and returns its result as JSON, or
// the error.
func runLua(t *testing.T, chunk string) (string, error) {
	t.Helper()
	l, rets, err := call(chunk, "Test", 1)
	if err != nil {
		return "", err
	}
	defer l.Close()
	data, err := encodeLua(rets[0])
	return string(data), err
}

// TestKubeModule runs the kube helpers from Lua, with the results and the
// errors Karmada's give.
func TestKubeModule(t *testing.T) {
	for _, tc := range []struct {
		name, body, want, wantErr string
	}{
		{name: "resourceAdd keeps the first operand's format", body: `return kube.resourceAdd("1Gi", "512Mi")`, want: `"1536Mi"`},
		{name: "resourceAdd of several", body: `return kube.resourceAdd("100m", "200m", "0.7")`, want: `"1"`},
		{name: "resourceAdd counts nil as zero", body: `return kube.resourceAdd(nil, "250m")`, want: `"250m"`},
		{name: "resourceAdd of nothing", body: `return kube.resourceAdd()`, want: `"0"`},
		{name: "resourceAdd refuses a number", body: `return kube.resourceAdd(1)`, wantErr: "string expected"},
		{name: "resourceAdd panics on a malformed quantity", body: `return kube.resourceAdd("lots")`, wantErr: "quantities must match"},
		{name: "getResourceQuantity", body: `return kube.getResourceQuantity("1500m")`, want: `1.5`},
		{name: "getResourceQuantity of nil", body: `return kube.getResourceQuantity(nil)`, want: `0`},
		{name: "getResourceQuantity refuses negatives", body: `return kube.getResourceQuantity("-1")`, wantErr: "negative value"},
		{name: "accuratePodRequirements of a template",
			body: `return kube.accuratePodRequirements({spec = {containers = {{name = "a", resources = {limits = {cpu = "2"}}}}}})`,
			want: `{"resourceRequest":{"cpu":"2"}}`},
		{name: "accuratePodRequirements of an empty template is nil",
			body: `return kube.accuratePodRequirements({spec = {containers = {{name = "a", resources = {}}}}}) == nil`, want: `true`},
		{name: "accuratePodRequirements takes one argument", body: `return kube.accuratePodRequirements({}, {})`, wantErr: "only accepts one argument"},
		{name: "getPodDependencies defaults the namespace",
			body: `return kube.getPodDependencies({spec = {serviceAccountName = "sa"}}, nil)`,
			want: `[{"apiVersion":"v1","kind":"ServiceAccount","name":"sa","namespace":"default"}]`},
		{name: "getPodDependencies of none is nil", body: `return kube.getPodDependencies({spec = {}}, "ns") == nil`, want: `true`},
		{name: "getPodDependencies takes two arguments", body: `return kube.getPodDependencies({})`, wantErr: "only accepts two argument"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := runLua(t, "local kube = require(\"kube\")\nfunction Test()\n"+tc.body+"\nend")
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("want an error with %q, got %v (%s)", tc.wantErr, err, got)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("want %s, got %s", tc.want, got)
			}
		})
	}
}

// TestSandbox checks the libraries a script gets, as in Karmada's VM.
func TestSandbox(t *testing.T) {
	for _, tc := range []struct {
		name, body, want, wantErr string
	}{
		{name: "table, string and math are open", body: `return table.concat({string.upper("a"), tostring(math.max(1, 2))}, ",")`, want: `"A,2"`},
		{name: "os keeps time", body: `return type(os.time())`, want: `"number"`},
		{name: "os has no execute", body: `return os.execute == nil and os.getenv == nil`, want: `true`},
		{name: "no io library", body: `return io == nil`, want: `true`},
		{name: "require finds preloaded modules only", body: `return require("io")`, wantErr: "module io not found"},
		{name: "unsafe functions fail", body: `return getmetatable("")`, wantErr: "call function getmetatable is not supported in karmada customized resourceinterpreter."},
		{name: "rawset fails", body: `local t = {} rawset(t, "a", 1) return t`, wantErr: "call function rawset is not supported"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := runLua(t, "function Test()\n"+tc.body+"\nend")
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("want an error with %q, got %v (%s)", tc.wantErr, err, got)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("want %s, got %s", tc.want, got)
			}
		})
	}
}
