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
	"errors"
	"fmt"
	"path"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
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
