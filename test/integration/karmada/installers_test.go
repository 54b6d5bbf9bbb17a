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

package karmada

import (
	"context"
	"encoding/json"
	"os"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"sigs.k8s.io/yaml"

	"github.com/scaleplane/scaleplane/test/integration/framework"
)

// karmadaControllers are the controllers karmada-controller-manager v1.18.2
// registers (cmd/controller-manager/app/controllermanager.go), with whether
// "*" runs them (controllersDisabledByDefault): every one but the cron
// controller must run after the README's steps exactly as before.
var karmadaControllers = map[string]bool{
	"cluster": true, "clusterStatus": true, "binding": true, "bindingStatus": true, "execution": true,
	"workStatus": true, "namespace": true, "serviceExport": true, "endpointSlice": true, "serviceImport": true,
	"unifiedAuth": true, "federatedResourceQuotaSync": true, "federatedResourceQuotaStatus": true,
	"federatedResourceQuotaEnforcement": true, "gracefulEviction": true, "applicationFailover": true,
	"federatedHorizontalPodAutoscaler": true, "cronFederatedHorizontalPodAutoscaler": true,
	"hpaScaleTargetMarker": false, "deploymentReplicasSyncer": false, "multiclusterservice": true,
	"endpointsliceCollect": true, "endpointsliceDispatch": true, "remedy": true, "workloadRebalancer": true,
	"agentcsrapproving": true, "clustertaintpolicy": true,
}

// installer is one of Karmada's four installers as the tests play it.
type installer struct {
	name string
	// file is the Deployment it writes (testdata, transcribed from
	// Karmada's sources); cronOff the one it writes with its own setting
	// that switches the cron controller off ("" where it has none).
	file, cronOff string
	// readme holds the steps the test runs.
	readme string
	// webhook is Karmada's CronFederatedHPA webhook it registers on
	// karmada-apiserver ("" for Helm, which registers none).
	webhook string
}

var installers = []installer{
	{name: "helm", file: "testdata/helm.yaml", cronOff: "testdata/helm-cron-off.yaml", readme: "docs/karmada/helm.md"},
	{name: "karmadactl", file: "testdata/karmadactl.yaml", cronOff: "testdata/karmadactl-cron-off.yaml", readme: "docs/karmada/karmadactl.md", webhook: "testdata/karmadactl-webhook.yaml"},
	{name: "operator", file: "testdata/operator.yaml", cronOff: "testdata/operator-cron-off.yaml", readme: "docs/karmada/operator.md", webhook: "testdata/operator-webhook.yaml"},
	{name: "hack", file: "testdata/hack.yaml", readme: "docs/karmada/hack.md", webhook: "testdata/hack-webhook.yaml"},
}

func (in installer) deployment(t *testing.T) *appsv1.Deployment {
	t.Helper()
	return readDeployment(t, in.file)
}

func readDeployment(t *testing.T, file string) *appsv1.Deployment {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	d := &appsv1.Deployment{}
	if err := yaml.UnmarshalStrict(data, d); err != nil {
		t.Fatalf("decoding %s: %v", file, err)
	}
	return d
}

// helmOwnership is what Helm 3 adds to every object it installs or
// upgrades (action.setMetadataVisitor), and not to the manifest it keeps
// as the release's: the three-way merge's "original" lacks it.
func helmOwnership(d *appsv1.Deployment) *appsv1.Deployment {
	d = d.DeepCopy()
	if d.Labels == nil {
		d.Labels = map[string]string{}
	}
	if d.Annotations == nil {
		d.Annotations = map[string]string{}
	}
	d.Labels["app.kubernetes.io/managed-by"] = "Helm"
	d.Annotations["meta.helm.sh/release-name"] = "karmada"
	d.Annotations["meta.helm.sh/release-namespace"] = d.Namespace
	return d
}

// install creates the Deployment the way the installer does: Helm, karmadactl
// and the operator with a Create of the rendered object, the hack scripts
// with `kubectl apply`.
func (in installer) install(t *testing.T, cp *framework.ControlPlane) *appsv1.Deployment {
	t.Helper()
	d := in.deployment(t)
	ensureNamespace(t, cp, d.Namespace)
	// Each test starts from the installer's object, whatever ran before.
	err := cp.KubeClient().AppsV1().Deployments(d.Namespace).Delete(context.Background(), d.Name, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	switch in.name {
	case "hack":
		kubectl(t, cp, "apply", "-f", in.file)
	case "helm":
		d = helmOwnership(d)
		fallthrough
	default:
		if _, err := cp.KubeClient().AppsV1().Deployments(d.Namespace).Create(context.Background(), d, metav1.CreateOptions{}); err != nil {
			t.Fatalf("creating %s's Deployment: %v", in.name, err)
		}
	}
	return get(t, cp, d.Namespace, d.Name)
}

// upgrade is what the installer does to its existing Deployment when it
// runs again (its upgrade): from is the manifest it rendered last, to the
// one it renders now.
//   - Helm 3: a strategic merge patch made by a three-way merge of the last
//     release's manifest, the new one and the live object
//     (kube.Client.Update's createPatch);
//   - the hack scripts: `kubectl apply`, the same three-way merge with the
//     last-applied annotation as the original;
//   - karmada-operator: a full Update (PUT) of the rendered object
//     (CreateOrUpdateDeployment, operator/pkg/util/apiclient/idempotency.go);
//   - karmadactl init: a Create of the rendered object only
//     (CreateDeployAndWait, pkg/karmadactl/cmdinit/utils/deploy.go), whose
//     AlreadyExists it logs as a warning: the live object stays as it is.
//     (A re-run with the default --port does not even get there; see
//     testdata/karmadactl.yaml.)
func (in installer) upgrade(t *testing.T, cp *framework.ControlPlane, from, to string) *appsv1.Deployment {
	t.Helper()
	ctx := context.Background()
	target := readDeployment(t, to)
	deployments := cp.KubeClient().AppsV1().Deployments(target.Namespace)
	switch in.name {
	case "hack":
		kubectl(t, cp, "apply", "-f", to)
	case "karmadactl":
		_, err := deployments.Create(ctx, target, metav1.CreateOptions{})
		if !apierrors.IsAlreadyExists(err) {
			t.Fatalf("karmadactl's Create of an existing Deployment: %v, want AlreadyExists", err)
		}
	case "helm":
		original, err := json.Marshal(readDeployment(t, from))
		if err != nil {
			t.Fatal(err)
		}
		modified, err := json.Marshal(helmOwnership(target))
		if err != nil {
			t.Fatal(err)
		}
		live, err := deployments.Get(ctx, target.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		current, err := json.Marshal(live)
		if err != nil {
			t.Fatal(err)
		}
		meta, err := strategicpatch.NewPatchMetaFromStruct(&appsv1.Deployment{})
		if err != nil {
			t.Fatal(err)
		}
		patch, err := strategicpatch.CreateThreeWayMergePatch(original, modified, current, meta, true)
		if err != nil {
			t.Fatalf("helm upgrade's three-way merge: %v", err)
		}
		if _, err := deployments.Patch(ctx, target.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}); err != nil {
			t.Fatalf("helm upgrade's patch %s: %v", patch, err)
		}
	default:
		live, err := deployments.Get(ctx, target.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		target.ResourceVersion = live.ResourceVersion
		if _, err := deployments.Update(ctx, target, metav1.UpdateOptions{}); err != nil {
			t.Fatalf("%s's full update: %v", in.name, err)
		}
	}
	return get(t, cp, target.Namespace, target.Name)
}

func get(t *testing.T, cp *framework.ControlPlane, namespace, name string) *appsv1.Deployment {
	t.Helper()
	d, err := cp.KubeClient().AppsV1().Deployments(namespace).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func ensureNamespace(t *testing.T, cp *framework.ControlPlane, name string) {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	_, err := cp.KubeClient().CoreV1().Namespaces().Create(context.Background(), ns, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("creating namespace %s: %v", name, err)
	}
}

// stored is what "the same object" means for the byte-for-byte checks: the
// spec, labels and annotations as the apiserver stores them (not the
// resourceVersion, generation or managedFields a write changes).
func stored(t *testing.T, d *appsv1.Deployment) string {
	t.Helper()
	out, err := json.Marshal(struct {
		Labels      map[string]string     `json:"labels"`
		Annotations map[string]string     `json:"annotations"`
		Spec        appsv1.DeploymentSpec `json:"spec"`
	}{d.Labels, d.Annotations, d.Spec})
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}

// TestInstallers runs, for each installer's real Deployment, its README's
// steps and its upgrade, and checks what the README says of them.
func TestInstallers(t *testing.T) {
	cp := framework.Get(t)
	karmadaPatch(t)
	for _, in := range installers {
		t.Run(in.name, func(t *testing.T) {
			t.Run("cron-off-patch", func(t *testing.T) { testCronOffPatch(t, cp, in) })
			if in.name != "operator" {
				t.Run("sidecar", func(t *testing.T) { testSidecar(t, cp, in) })
			}
			t.Run("companion", func(t *testing.T) { testCompanion(t, cp, in) })
			t.Run("upgrade", func(t *testing.T) { testUpgrade(t, cp, in) })
		})
	}
}
