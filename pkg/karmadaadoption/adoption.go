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

// Package karmadaadoption derives, from the karmada-controller-manager
// Deployment an installer wrote, the patches and values that put scaleplane
// next to it: switching Karmada's own CronFederatedHPA controller off (and
// back on) without touching any other flag, adding scaleplane's controller
// manager as a sidecar that reuses Karmada's kubeconfig mount, or the values
// of a companion Deployment mounting the same Secret.
//
// It reads the live object instead of carrying a copy of Karmada's command:
// the four installers (Helm chart, karmadactl init, karmada-operator, the
// hack scripts) and every user's extra flags write different commands, and a
// copy would silently change whatever it does not match.
package karmadaadoption

import (
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"slices"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
)

const (
	// CronController is Karmada's name for its CronFederatedHPA controller.
	CronController = "cronFederatedHorizontalPodAutoscaler"
	// CronOffFlag is appended to Karmada's command. --controllers is a
	// pflag string slice: a repeated flag appends to the list, and Karmada
	// takes the first entry naming a controller, so this switches only the
	// cron controller off. The "*" keeps the others as they were when the
	// command had no --controllers (a list without "*" enables nothing).
	CronOffFlag = "--controllers=*,-" + CronController

	// CronScaler is scaleplane's cron controller, which takes the place of
	// Karmada's: the sidecar and the companion run it, whatever else.
	CronScaler = "cron-scaler"

	// SidecarName is the container the sidecar patch adds.
	SidecarName = "scaleplane-controller-manager"
	// DefaultImage is the name `make images` gives the image. It is not
	// published to any registry: karmada-patch takes the image the host
	// cluster pulls as an argument.
	DefaultImage = "ghcr.io/scaleplane/scaleplane-controller-manager:v0.1.0"
	// SidecarPort serves /healthz, /readyz and /metrics. The pod's
	// containers share a network, and Karmada's serve 10357 and 8080.
	SidecarPort = 10358
	// LeaseName is scaleplane's Lease, next to Karmada's own
	// karmada-controller-manager Lease.
	LeaseName = "scaleplane-controller-manager"
	// DefaultContainerAnnotation names the container `kubectl logs`,
	// `exec` and `attach` reach without -c (k8s.io/kubectl's podcmd);
	// without it they reach container 0, which a strategic merge patch
	// adding a container makes the sidecar.
	DefaultContainerAnnotation = "kubectl.kubernetes.io/default-container"

	karmadaBinary        = "/bin/karmada-controller-manager"
	operatorInstanceKey  = "app.kubernetes.io/instance"
	defaultLeaseNS       = "karmada-system"
	helmReleaseNameAnnot = "meta.helm.sh/release-name"
)

// Installer names which of Karmada's installers wrote a Deployment.
type Installer string

// The installers, as Inspect recognises them.
const (
	Helm       Installer = "helm"
	Karmadactl Installer = "karmadactl"
	Operator   Installer = "operator"
	Hack       Installer = "hack"
	Unknown    Installer = "unknown"
)

// Install is what Inspect reads from a karmada-controller-manager Deployment.
type Install struct {
	Deployment *appsv1.Deployment
	Installer  Installer
	// HelmRelease is the Helm release that owns the Deployment, if any;
	// KarmadaObject the karmada-operator Karmada object that renders it.
	HelmRelease   string
	KarmadaObject string

	// ContainerIndex is the position of Karmada's container in the pod.
	ContainerIndex int
	Container      *corev1.Container

	// Kubeconfig is the path of Karmada's --kubeconfig, Mount the volume
	// mount that holds it (SubPath included), SecretName and SecretKey the
	// Secret and key behind it.
	Kubeconfig string
	Mount      corev1.VolumeMount
	SecretName string
	SecretKey  string

	// LeaseNamespace is where Karmada's own leader election runs on
	// karmada-apiserver; scaleplane's Lease goes next to it.
	LeaseNamespace string

	// Controllers is Karmada's effective --controllers list, CronEnabled
	// whether that list runs its CronFederatedHPA controller.
	Controllers []string
	CronEnabled bool
	// CronOffAppended: the command ends with CronOffFlag (CronOffPatch was
	// applied, or an installer appended the same flag), which CronOnPatch
	// then removes.
	CronOffAppended bool
	// HasSidecar: the pod already has scaleplane's container.
	HasSidecar bool
	// DefaultContainer is the pod template's DefaultContainerAnnotation
	// ("" without one). None of Karmada's v1.18.2 installers sets it.
	DefaultContainer string
}

// Inspect finds Karmada's container, its kubeconfig and its controllers in d.
func Inspect(d *appsv1.Deployment) (*Install, error) {
	in := &Install{Deployment: d, Installer: installerOf(d), ContainerIndex: -1}
	in.HelmRelease = d.Annotations[helmReleaseNameAnnot]
	if in.Installer == Operator {
		in.KarmadaObject = d.Labels[operatorInstanceKey]
	}
	for i := range d.Spec.Template.Spec.Containers {
		c := &d.Spec.Template.Spec.Containers[i]
		if len(c.Command) > 0 && c.Command[0] == karmadaBinary {
			in.ContainerIndex, in.Container = i, c
			break
		}
	}
	if in.Container == nil {
		return nil, fmt.Errorf("deployment %s/%s has no container running %s: not Karmada's controller manager", d.Namespace, d.Name, karmadaBinary)
	}
	if len(in.Container.Args) > 0 {
		// Every installer puts Karmada's flags in command; a list in args
		// would come after anything appended to command and is not a shape
		// this package was checked against.
		return nil, fmt.Errorf("container %s has args %v: Karmada's installers put its flags in command only", in.Container.Name, in.Container.Args)
	}
	for _, c := range d.Spec.Template.Spec.Containers {
		// A Deployment already adopted is read again after an installer's
		// re-run (which may reorder the containers) and for the undo.
		in.HasSidecar = in.HasSidecar || c.Name == SidecarName
	}
	in.DefaultContainer = d.Spec.Template.Annotations[DefaultContainerAnnotation]

	in.Kubeconfig = lastFlag(in.Container.Command, "kubeconfig")
	if in.Kubeconfig == "" {
		return nil, errors.New("karmada's command has no --kubeconfig")
	}
	if err := in.findSecret(); err != nil {
		return nil, err
	}
	in.LeaseNamespace = lastFlag(in.Container.Command, "leader-elect-resource-namespace")
	if in.LeaseNamespace == "" {
		in.LeaseNamespace = defaultLeaseNS
	}
	in.Controllers = ControllersOf(in.Container.Command)
	in.CronEnabled = Enabled(in.Controllers, CronController, true)
	in.CronOffAppended = !in.CronEnabled && in.Container.Command[len(in.Container.Command)-1] == CronOffFlag
	return in, nil
}

func installerOf(d *appsv1.Deployment) Installer {
	switch {
	case d.Labels["app.kubernetes.io/managed-by"] == "karmada-operator":
		return Operator
	case d.Annotations[helmReleaseNameAnnot] != "" || d.Labels["app.kubernetes.io/managed-by"] == "Helm":
		return Helm
	case d.Labels["karmada.io/bootstrapping"] == "app-defaults":
		return Karmadactl
	case d.Annotations["kubectl.kubernetes.io/last-applied-configuration"] != "":
		return Hack
	}
	return Unknown
}

// findSecret follows --kubeconfig to the mount, the volume and the Secret's
// key: Helm mounts one key by subPath, the others the whole Secret.
func (in *Install) findSecret() error {
	var mount *corev1.VolumeMount
	rel := ""
	for i := range in.Container.VolumeMounts {
		m := &in.Container.VolumeMounts[i]
		if m.SubPath != "" && path.Clean(m.MountPath) == path.Clean(in.Kubeconfig) {
			mount, rel = m, m.SubPath
			break
		}
		dir := strings.TrimSuffix(m.MountPath, "/") + "/"
		if m.SubPath == "" && strings.HasPrefix(in.Kubeconfig, dir) {
			mount, rel = m, strings.TrimPrefix(in.Kubeconfig, dir)
			break
		}
	}
	if mount == nil {
		return fmt.Errorf("no volume mount of container %s holds its --kubeconfig=%s", in.Container.Name, in.Kubeconfig)
	}
	in.Mount = *mount
	for _, v := range in.Deployment.Spec.Template.Spec.Volumes {
		if v.Name != mount.Name {
			continue
		}
		if v.Secret == nil {
			return fmt.Errorf("volume %s holding the kubeconfig is not a Secret", v.Name)
		}
		in.SecretName, in.SecretKey = v.Secret.SecretName, rel
		for _, item := range v.Secret.Items {
			if item.Path == rel {
				in.SecretKey = item.Key
			}
		}
		return nil
	}
	return fmt.Errorf("the pod has no volume %s", mount.Name)
}

// HelmChartLayout says whether Karmada's kubeconfig reaches its container
// the way Karmada's Helm chart mounts it (v1.18.2,
// charts/karmada/templates/karmada-controller-manager.yaml: volume
// kubeconfig-secret, one key by subPath), which no other installer does. It
// recognises the chart's Deployment applied without Helm's labels, as
// Argo CD applies rendered charts.
func (in *Install) HelmChartLayout() bool {
	return in.Mount.Name == "kubeconfig-secret" && in.Mount.SubPath != ""
}

// lastFlag returns the value of the last --name=value in args: pflag's
// reading of a scalar flag given twice.
func lastFlag(args []string, name string) string {
	value := ""
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, "--"+name+"="); ok {
			value = v
		}
	}
	return value
}

// ControllersOf is Karmada's --controllers as pflag builds it from args:
// the default ["*"] until the flag is given, then every occurrence appended.
func ControllersOf(args []string) []string {
	var list []string
	seen := false
	for _, a := range args {
		v, ok := strings.CutPrefix(a, "--controllers=")
		if !ok {
			continue
		}
		seen = true
		if v != "" {
			list = append(list, strings.Split(v, ",")...)
		}
	}
	if !seen {
		return []string{"*"}
	}
	return list
}

// Enabled is Karmada's decision whether a controller runs: the first entry
// naming it (name or -name) wins, otherwise "*" runs the controllers that
// are on by default.
func Enabled(list []string, name string, onByDefault bool) bool {
	star := false
	for _, c := range list {
		switch c {
		case name:
			return true
		case "-" + name:
			return false
		case "*":
			star = true
		}
	}
	return star && onByDefault
}

// CanAppend says whether CronOffFlag switches the cron controller off: not
// when an earlier entry enables it by name.
func (in *Install) CanAppend() error {
	if !in.CronEnabled {
		return errors.New("karmada's CronFederatedHPA controller is already off")
	}
	if Enabled(append(append([]string{}, in.Controllers...), strings.Split(strings.TrimPrefix(CronOffFlag, "--controllers="), ",")...), CronController, true) {
		return fmt.Errorf("karmada's --controllers (%s) enables %s by name, which an appended flag cannot override: remove that entry from your installer's settings", strings.Join(in.Controllers, ","), CronController)
	}
	return nil
}

type jsonPatchOp struct {
	Op    string `json:"op"`
	Path  string `json:"path"`
	Value any    `json:"value,omitempty"`
}

func (in *Install) commandPath() string {
	return fmt.Sprintf("/spec/template/spec/containers/%d/command", in.ContainerIndex)
}

// CronOffPatch is the JSON patch that appends CronOffFlag to Karmada's
// command. Its test operations make the apiserver refuse it, whole, if the
// Deployment is no longer the one inspected (another container at that
// index, or a command of another length).
func (in *Install) CronOffPatch() ([]byte, error) {
	if err := in.CanAppend(); err != nil {
		return nil, err
	}
	n := len(in.Container.Command)
	return marshalPatch([]jsonPatchOp{
		{Op: "test", Path: fmt.Sprintf("/spec/template/spec/containers/%d/name", in.ContainerIndex), Value: in.Container.Name},
		{Op: "test", Path: fmt.Sprintf("%s/%d", in.commandPath(), n-1), Value: in.Container.Command[n-1]},
		{Op: "add", Path: in.commandPath() + "/-", Value: CronOffFlag},
	})
}

// CronOnPatch is the exact reverse of CronOffPatch: it removes the element
// CronOffPatch adds (read before it is applied) or added (read after), and
// nothing if that element is not where it was put.
func (in *Install) CronOnPatch() ([]byte, error) {
	n := len(in.Container.Command)
	if !in.CronOffAppended {
		if err := in.CanAppend(); err != nil {
			return nil, err
		}
		n++
	}
	at := fmt.Sprintf("%s/%d", in.commandPath(), n-1)
	return marshalPatch([]jsonPatchOp{
		{Op: "test", Path: fmt.Sprintf("/spec/template/spec/containers/%d/name", in.ContainerIndex), Value: in.Container.Name},
		{Op: "test", Path: at, Value: CronOffFlag},
		{Op: "remove", Path: at},
	})
}

func marshalPatch(ops []jsonPatchOp) ([]byte, error) {
	out, err := json.MarshalIndent(ops, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("encoding the JSON patch: %w", err)
	}
	return append(out, '\n'), nil
}

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

// controllersSetting is the value of --controllers the installer's own
// setting holds now ("" when the command has none), and the value that
// keeps it and switches the cron controller off: "-name" appended is the
// first entry naming the cron controller (CanAppend checked that no earlier
// entry does), and a list without "*" would switch every controller off.
func (in *Install) controllersSetting() (now, off string, err error) {
	if err := in.CanAppend(); err != nil {
		return "", "", err
	}
	now = lastFlag(in.Container.Command, "controllers")
	if strings.Count(strings.Join(in.Container.Command, "\n"), "--controllers=") > 1 {
		return "", "", errors.New("karmada's command has --controllers more than once: not one setting of the installer")
	}
	if now == "" {
		return "", "*,-" + CronController, nil
	}
	return now, now + ",-" + CronController, nil
}

// HelmValues are the values files for `helm upgrade --reuse-values -f`:
// controllerManager.controllers switching the cron controller off, and the
// one giving the current setting back.
func (in *Install) HelmValues() (off, undo []byte, err error) {
	now, value, err := in.controllersSetting()
	if err != nil {
		return nil, nil, err
	}
	const format = "# Karmada's Helm chart (charts/karmada): controllerManager.controllers%s\ncontrollerManager:\n  controllers: %q\n"
	return fmt.Appendf(nil, format, ", with its CronFederatedHPA controller off", value),
		fmt.Appendf(nil, format, " as it was before", now), nil
}

// OperatorPatches are JSON merge patches of the Karmada object: its
// spec.components.karmadaControllerManager.extraArgs.controllers (the
// operator does not wire the typed controllers field) switching the cron
// controller off, and the one giving the current setting back.
func (in *Install) OperatorPatches() (off, undo []byte, err error) {
	now, value, err := in.controllersSetting()
	if err != nil {
		return nil, nil, err
	}
	patch := func(v any) ([]byte, error) {
		out, err := json.Marshal(map[string]any{"spec": map[string]any{"components": map[string]any{
			"karmadaControllerManager": map[string]any{"extraArgs": map[string]any{"controllers": v}}}}})
		if err != nil {
			return nil, fmt.Errorf("encoding the Karmada object's patch: %w", err)
		}
		return append(out, '\n'), nil
	}
	var previous any // null deletes the key: there was no setting
	if now != "" {
		previous = now
	}
	if off, err = patch(value); err != nil {
		return nil, nil, err
	}
	if undo, err = patch(previous); err != nil {
		return nil, nil, err
	}
	return off, undo, nil
}
