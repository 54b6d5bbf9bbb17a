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

package karmadaadoption

// scaleplane's controller manager next to Karmada's: the controllers it
// runs (ParseControllers), the sidecar container and the patches that add
// and remove it, and the values of a companion Deployment instead.

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
)

// Controllers are the controllers of scaleplane's controller manager, as its
// --controllers names them (a test holds them to its registry).
var Controllers = []string{CronScaler, "hpa-generator", "resizer"}

// ParseControllers reads karmada-patch's -controllers: a comma-separated
// list of Controllers, the cron-scaler among them, since the patches switch
// Karmada's cron controller off and something must run in its place. The
// list comes back in the order of Controllers, without repeats.
func ParseControllers(list string) ([]string, error) {
	asked := map[string]bool{}
	for _, name := range strings.Split(list, ",") {
		name = strings.TrimSpace(name)
		if !slices.Contains(Controllers, name) {
			return nil, fmt.Errorf("-controllers: unknown controller %q: the controllers are %s", name, strings.Join(Controllers, ", "))
		}
		asked[name] = true
	}
	if !asked[CronScaler] {
		return nil, fmt.Errorf("-controllers=%s leaves out %s: the patches switch Karmada's cron controller off, and %s runs in its place", list, CronScaler, CronScaler)
	}
	var out []string
	for _, name := range Controllers {
		if asked[name] {
			out = append(out, name)
		}
	}
	return out, nil
}

// SidecarContainer is scaleplane's controller manager as a second
// container of Karmada's pod: Karmada's kubeconfig through Karmada's own
// volume (same mount path and subPath, read-only), the controllers given
// (see ParseControllers), its own Lease next to Karmada's, a port of its
// own, the restricted Pod Security settings on the container since the
// pod's are Karmada's.
func (in *Install) SidecarContainer(image string, controllers []string) corev1.Container {
	mount := in.Mount
	mount.ReadOnly = true
	return corev1.Container{
		Name:            SidecarName,
		Image:           image,
		ImagePullPolicy: corev1.PullIfNotPresent,
		Args: []string{
			"--kubeconfig=" + in.Kubeconfig,
			"--controllers=" + strings.Join(controllers, ","),
			"--leader-elect=true",
			"--leader-elect-resource-namespace=" + in.LeaseNamespace,
			"--leader-elect-resource-name=" + LeaseName,
			"--bind-address=$(POD_IP)",
			fmt.Sprintf("--port=%d", SidecarPort),
			"--v=2",
		},
		// env is per container: Karmada's POD_IP is not visible here.
		Env: []corev1.EnvVar{{
			Name:      "POD_IP",
			ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "status.podIP"}},
		}},
		Ports: []corev1.ContainerPort{{Name: "sp-http-metrics", ContainerPort: SidecarPort, Protocol: corev1.ProtocolTCP}},
		// Liveness only: a readiness probe would let this container hold
		// up rollouts of Karmada's.
		LivenessProbe: &corev1.Probe{
			ProbeHandler:        corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromInt32(SidecarPort)}},
			InitialDelaySeconds: 10,
			PeriodSeconds:       10,
			FailureThreshold:    3,
		},
		Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("50m"), corev1.ResourceMemory: resource.MustParse("64Mi")},
			Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("256Mi")},
		},
		SecurityContext: &corev1.SecurityContext{
			RunAsNonRoot:             ptr.To(true),
			RunAsUser:                ptr.To[int64](65532),
			RunAsGroup:               ptr.To[int64](65532),
			AllowPrivilegeEscalation: ptr.To(false),
			ReadOnlyRootFilesystem:   ptr.To(true),
			Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
			SeccompProfile:           &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
		},
		VolumeMounts: []corev1.VolumeMount{mount},
	}
}

// ownsDefaultContainer says whether the sidecar patches set and remove the
// pod's DefaultContainerAnnotation: yes unless the pod had one before the
// sidecar (the user's own, kept as it is). Read again with the sidecar in
// the pod, an annotation naming Karmada's container is taken for the one
// the sidecar patch set: no installer writes it.
func (in *Install) ownsDefaultContainer() bool {
	return in.DefaultContainer == "" || (in.HasSidecar && in.DefaultContainer == in.Container.Name)
}

// SidecarPatch is a strategic merge patch that only adds the sidecar and
// keeps Karmada's container the one kubectl reaches without -c: the
// containers list merges by name, so Karmada's container, its command and
// the pod's volumes are left as they are, and a later Helm 3 upgrade or
// `kubectl apply` (three-way merges that only delete what their own last
// manifest had) keeps both the container and the annotation.
//
// The patch cannot keep the sidecar last instead: applied, a strategic
// merge puts the containers only the patch has first, and a three-way merge
// of an installer's manifest that changed Karmada's container reorders the
// list again (kubectl apply of the hack manifest does: see
// test/integration/karmada). The annotation does not depend on the order.
func (in *Install) SidecarPatch(image string, controllers []string) ([]byte, error) {
	template := map[string]any{"spec": map[string]any{
		"containers": []corev1.Container{in.SidecarContainer(image, controllers)},
	}}
	if in.ownsDefaultContainer() {
		template["metadata"] = map[string]any{"annotations": map[string]string{DefaultContainerAnnotation: in.Container.Name}}
	}
	out, err := json.MarshalIndent(map[string]any{"spec": map[string]any{"template": template}}, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("encoding the sidecar patch: %w", err)
	}
	return append(out, '\n'), nil
}

// SidecarRemovePatch removes the sidecar and the annotation SidecarPatch
// set, and nothing else.
func (in *Install) SidecarRemovePatch() []byte {
	metadata := ""
	if in.ownsDefaultContainer() {
		metadata = `"metadata":{"annotations":{"` + DefaultContainerAnnotation + `":null}},`
	}
	return []byte(`{"spec":{"template":{` + metadata + `"spec":{"containers":[{"name":"` + SidecarName + `","$patch":"delete"}]}}}}` + "\n")
}

// SplitImage splits repository:tag the way charts/scaleplane's
// image.repository and image.tag take it. A digest is refused: the chart
// has no field for one.
func SplitImage(image string) (repository, tag string, err error) {
	if strings.Contains(image, "@") {
		return "", "", fmt.Errorf("image %q: give it as repository:tag (charts/scaleplane takes no digest)", image)
	}
	i := strings.LastIndex(image, ":")
	if i <= 0 || strings.Contains(image[i:], "/") || i == len(image)-1 {
		return "", "", fmt.Errorf("image %q has no tag: give it as repository:tag", image)
	}
	return image[:i], image[i+1:], nil
}

// CompanionValues are the values of charts/scaleplane for a companion
// Deployment: installed in the Deployment's namespace (where the Secret is),
// running image, talking to karmada-apiserver with Karmada's kubeconfig, its
// Lease next to Karmada's on karmada-apiserver.
func (in *Install) CompanionValues(image string, controllers []string) ([]byte, error) {
	repository, tag, err := SplitImage(image)
	if err != nil {
		return nil, err
	}
	return fmt.Appendf(nil, `# charts/scaleplane values for a companion Deployment next to %s/%s
# (install the chart in namespace %s, where the Secret is).
controllerManager:
  enabled: true
  image:
    repository: %q
    tag: %q
  controllers: [%s]
  kubeconfig:
    secretName: %s
    key: %s
  leaderElection:
    namespace: %s
`, in.Deployment.Namespace, in.Deployment.Name, in.Deployment.Namespace, repository, tag, strings.Join(controllers, ", "), in.SecretName, in.SecretKey, in.LeaseNamespace), nil
}
