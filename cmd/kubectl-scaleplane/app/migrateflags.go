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
	"fmt"
	"math"
	"path"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	scaleplanev1alpha1 "github.com/scaleplane/scaleplane/pkg/apis/scaleplane/v1alpha1"
)

// This file reads an Addon Resizer nanny's command line as Addon Resizer 1.8
// does, and maps it onto an AddonResizer spec, or refuses. The facts come
// from kubernetes/autoscaler, tag addon-resizer-1.8.24 (commit a7a842b55d19),
// addon-resizer/nanny/main/pod_nanny.go: the flags (lines 46-82, pflag, no
// short forms, no klog flags), their checks (97-107, 159-165), the
// configuration file (202-223) and the resources it sizes (250-280).

// nannyFlagKind is how pflag reads a flag: a bool takes "--f" alone or
// "--f=v"; any other takes "--f=v" or "--f v".
type nannyFlagKind int

const (
	flagString nannyFlagKind = iota
	flagBool
)

// nannyFlags is every flag pod_nanny.go defines (lines 46-82).
var nannyFlags = map[string]nannyFlagKind{
	"config-dir": flagString, "cpu": flagString, "extra-cpu": flagString, "memory": flagString,
	"extra-memory": flagString, "storage": flagString, "extra-storage": flagString,
	"scale-down-delay": flagString, "scale-up-delay": flagString, "threshold": flagString,
	"namespace": flagString, "deployment": flagString, "pod": flagString, "container": flagString,
	"poll-period": flagString, "estimator": flagString, "minClusterSize": flagString,
	"use-metrics": flagBool, "healthcheck-address": flagString, "scaling-mode": flagString,
	"run-on-control-plane": flagBool, "kubeconfig": flagString, "nanny-config-map-name": flagString,
	"leader-election-enable": flagBool, "leader-election-lease-duration": flagString,
	"leader-election-renew-deadline": flagString, "leader-election-retry-period": flagString,
	"address": flagString, "expose-metrics": flagBool,
}

// noValue is nannyconfig.NoValue (nanny/apis/nannyconfig/register.go:35):
// a base of "MISSING" is a base not set.
const noValue = "MISSING"

// refusals collects why a nanny cannot be mapped exactly, each naming its
// flag.
type refusals []string

func (r *refusals) add(flag, format string, args ...any) {
	*r = append(*r, flag+": "+fmt.Sprintf(format, args...))
}

// nanny is one Addon Resizer container of a workload, read.
type nanny struct {
	// container is the nanny's own container, index its place in the pod
	// template.
	container corev1.Container
	index     int
	// spec is what it maps to.
	spec scaleplanev1alpha1.AddonResizerSpec
	// configMap is the ConfigMap its --config-dir mounts, "" for none.
	configMap string
	notes     []string
}

// isNanny tells a nanny container: its command runs pod_nanny, or, with no
// command, its image is addon-resizer's (whose entrypoint is /pod_nanny).
func isNanny(c *corev1.Container) bool {
	if len(c.Command) > 0 {
		return path.Base(c.Command[0]) == "pod_nanny"
	}
	return strings.Contains(c.Image, "addon-resizer")
}

// nannyArgv is the nanny's command line after the program: the command's
// arguments then args, or args alone when the image's entrypoint runs.
func nannyArgv(c *corev1.Container) []string {
	if len(c.Command) > 0 {
		return append(append([]string{}, c.Command[1:]...), c.Args...)
	}
	return append([]string{}, c.Args...)
}

// parseNannyFlags reads argv as pflag does: "--name=value", "--name value"
// (not for bools), the last occurrence winning.
func parseNannyFlags(argv []string, r *refusals) map[string]string {
	values := map[string]string{}
	for i := 0; i < len(argv); i++ {
		a := argv[i]
		if !strings.HasPrefix(a, "--") || a == "--" {
			r.add(a, "not a --flag: the nanny takes --name=value only (pflag; a single dash is a short form it does not define, and it exits)")
			continue
		}
		name, value, hasValue := strings.Cut(a[2:], "=")
		kind, known := nannyFlags[name]
		if !known {
			r.add("--"+name, "unknown flag: Addon Resizer 1.8's nanny does not define it (pod_nanny.go:46-82) and exits at start; remove it")
			continue
		}
		if !hasValue {
			if kind == flagBool {
				value = "true"
			} else if i+1 < len(argv) {
				i++
				value = argv[i]
			} else {
				r.add("--"+name, "has no value")
				continue
			}
		}
		values[name] = value
	}
	return values
}

// envRef is where a container's environment variable comes from.
type envRef struct {
	set       bool
	literal   *string
	fieldPath string
}

func containerEnv(c *corev1.Container, name string) envRef {
	for i := len(c.Env) - 1; i >= 0; i-- {
		e := c.Env[i]
		if e.Name != name {
			continue
		}
		switch {
		case e.ValueFrom == nil:
			v := e.Value
			return envRef{set: true, literal: &v}
		case e.ValueFrom.FieldRef != nil:
			return envRef{set: true, fieldPath: e.ValueFrom.FieldRef.FieldPath}
		default:
			return envRef{set: true}
		}
	}
	return envRef{}
}

// readNanny maps one nanny container of Deployment ns/deployment onto an
// AddonResizer spec. configMap looks a ConfigMap of ns up (nil, nil: none).
func readNanny(c *corev1.Container, index int, ns, deployment string, containers []corev1.Container,
	volumes []corev1.Volume, configMap func(string) (*corev1.ConfigMap, error), mapDelays bool) (*nanny, refusals) {
	var r refusals
	n := &nanny{container: *c, index: index}
	if len(c.Command) == 0 && len(c.Args) > 0 && strings.HasPrefix(c.Args[0], "/") {
		r.add(c.Args[0], "args start with a program, not a flag: the image's entrypoint /pod_nanny would get it as an argument")
	}
	argv := nannyArgv(c)
	for i, a := range argv {
		if !strings.Contains(a, "$(") {
			continue
		}
		// Kubernetes expands $(VAR) from the container's env; only a
		// literal value is certain here.
		for _, e := range c.Env {
			if e.ValueFrom == nil {
				a = strings.ReplaceAll(a, "$("+e.Name+")", e.Value)
			}
		}
		if strings.Contains(a, "$(") {
			r.add(argv[i], "refers to an environment variable that is not a literal value; write the value in the flag")
		}
		argv[i] = a
	}
	v := parseNannyFlags(argv, &r)
	flag := func(name string) (string, bool) { s, ok := v[name]; return s, ok }

	// What it sizes: --deployment in --namespace (MY_POD_NAMESPACE), its
	// --container, read from --pod (MY_POD_NAME) or the Deployment.
	if d, ok := flag("deployment"); !ok || d == "" {
		r.add("--deployment", "not set: the nanny exits at start (pod_nanny.go:97), so it sizes nothing")
	} else if d != deployment {
		r.add("--deployment="+d, "sizes another Deployment than its own (%s); an AddonResizer sizes the workload it names, run migrate on %s's manifest instead", deployment, d)
	}
	if len(c.EnvFrom) > 0 {
		r.add("envFrom", "the nanny's environment comes from a ConfigMap or Secret too, which may set MY_POD_NAMESPACE or MY_POD_NAME; migrate cannot tell where it looks")
	}
	if s, ok := flag("namespace"); ok {
		if s != ns {
			r.add("--namespace="+s, "sizes a Deployment in another namespace than its own (%s)", ns)
		}
	} else {
		switch e := containerEnv(c, "MY_POD_NAMESPACE"); {
		case !e.set:
			r.add("--namespace", "not set and no MY_POD_NAMESPACE in the environment: the nanny looks in no namespace and sizes nothing")
		case e.fieldPath == "metadata.namespace":
		case e.literal != nil && *e.literal == ns:
		default:
			r.add("MY_POD_NAMESPACE", "is not the pod's own namespace (fieldRef metadata.namespace), so the nanny may size a Deployment elsewhere")
		}
	}
	if s, ok := flag("pod"); ok && s != "" {
		r.add("--pod="+s, "reads the resources of a named pod, not its own; migrate cannot map it")
	} else if !ok {
		if e := containerEnv(c, "MY_POD_NAME"); e.set && e.fieldPath != "metadata.name" && (e.literal == nil || *e.literal != "") {
			r.add("MY_POD_NAME", "is not the pod's own name (fieldRef metadata.name): the nanny reads another pod's resources")
		}
	}
	target, ok := flag("container")
	if !ok {
		target = "pod-nanny"
	}
	found := false
	for i := range containers {
		if containers[i].Name != target {
			continue
		}
		found = true
		if isNanny(&containers[i]) {
			r.add("--container="+target, "names a nanny container (the default is pod-nanny: the nanny sizes itself); removing the nanny would remove what it sizes")
		}
	}
	if !found {
		r.add("--container="+target, "no such container in Deployment %s (the nanny would only log an error each poll)", deployment)
	}
	n.spec.TargetRef = scaleplanev1alpha1.TargetReference{Kind: scaleplanev1alpha1.TargetKindDeployment, Name: deployment}
	n.spec.ContainerName = target

	// Control-plane mode and another API server are not a nanny beside
	// its add-on.
	if s, ok := flag("kubeconfig"); ok && s != "" {
		r.add("--kubeconfig="+s, "the nanny talks to the API server in that file, which may be another cluster's")
	}
	if b, _ := strconv.ParseBool(v["run-on-control-plane"]); b {
		r.add("--run-on-control-plane", "control-plane mode (bases re-read from a ConfigMap every poll, leader election) has no AddonResizer equivalent")
	}
	if s, ok := flag("nanny-config-map-name"); ok && s != "" {
		r.add("--nanny-config-map-name="+s, "the bases come from the API each poll (control-plane mode); migrate maps a fixed configuration only")
	}

	n.spec.Resources = nannyResources(c, v, volumes, configMap, n, &r)

	// How it estimates and decides.
	switch e := v["estimator"]; e {
	case "", "linear":
		n.spec.Estimator = scaleplanev1alpha1.Estimator{Type: scaleplanev1alpha1.LinearEstimator}
	case "exponential":
		n.spec.Estimator = scaleplanev1alpha1.Estimator{Type: scaleplanev1alpha1.ExponentialEstimator, MinClusterSize: 16}
	default:
		r.add("--estimator="+e, "not linear or exponential: the nanny exits at start (pod_nanny.go:159-161)")
	}
	if s, ok := flag("minClusterSize"); ok {
		m, err := strconv.ParseUint(s, 0, 64)
		switch {
		case err != nil:
			r.add("--minClusterSize="+s, "not a number: the nanny exits at start")
		case m < 2:
			r.add("--minClusterSize="+s, "below 2: the nanny exits at start (pod_nanny.go:105-107)")
		case m > math.MaxInt32:
			r.add("--minClusterSize="+s, "above %d, the largest spec.estimator.minClusterSize", math.MaxInt32)
		case n.spec.Estimator.Type == scaleplanev1alpha1.ExponentialEstimator:
			n.spec.Estimator.MinClusterSize = int32(m)
		default:
			n.notes = append(n.notes, fmt.Sprintf("--minClusterSize=%s is not used by the linear estimator (as in the nanny)", s))
		}
	}
	if s, ok := flag("threshold"); ok {
		t, err := strconv.Atoi(s)
		switch {
		case err != nil:
			r.add("--threshold="+s, "not a whole number: the nanny exits at start")
		case t < 0 || t > 100:
			r.add("--threshold="+s, "outside 0..100: the nanny exits at start (pod_nanny.go:101-103)")
		default:
			n.spec.Threshold = int32(t)
		}
	}
	useMetrics := false
	if s, ok := flag("use-metrics"); ok {
		b, err := strconv.ParseBool(s)
		if err != nil {
			r.add("--use-metrics="+s, "not a bool: the nanny exits at start")
		}
		useMetrics = b
	}
	switch m := v["scaling-mode"]; m {
	case "", "node-proportional":
		n.spec.ScalingMode = scaleplanev1alpha1.NodeProportional
		if useMetrics {
			n.notes = append(n.notes, "--use-metrics: the nanny counted Node objects from kube-apiserver's object-count metric; the AddonResizer counts the same Node objects from a watch")
		}
	case "container-proportional":
		n.spec.ScalingMode = scaleplanev1alpha1.ContainerProportional
		if useMetrics {
			r.add("--use-metrics", "with container-proportional the nanny counts pods, not containers (kube-apiserver's object count of pods, kubernetes_client.go:79-84); no AddonResizer source counts pods")
		}
	default:
		r.add("--scaling-mode="+m, "not node-proportional or container-proportional: the nanny exits at start (pod_nanny.go:163-165)")
	}
	n.spec.SetLimits = ptrBool(true)
	n.spec.UpdateMode = scaleplanev1alpha1.UpdateModeRollout
	if s, ok := flag("poll-period"); ok {
		if _, err := strconv.Atoi(s); err != nil {
			r.add("--poll-period="+s, "not a whole number: the nanny exits at start")
		} else {
			n.notes = append(n.notes, fmt.Sprintf("--poll-period=%s has no equivalent: the AddonResizer sizes from watches, as the count changes", s))
		}
	}
	for _, name := range []string{"scale-up-delay", "scale-down-delay"} {
		s, ok := flag(name)
		if !ok {
			continue
		}
		d, err := time.ParseDuration(s)
		switch {
		case err != nil:
			r.add("--"+name+"="+s, "not a duration: the nanny exits at start")
		case d != 0 && mapDelays:
			md := &metav1.Duration{Duration: d}
			if name == "scale-up-delay" {
				n.spec.ScaleUpDelay = md
			} else {
				n.spec.ScaleDownDelay = md
			}
			n.notes = append(n.notes, fmt.Sprintf("--%s=%s mapped by --map-delays: the AddonResizer counts it from when the estimate leaves the band, the nanny from its start or last change", name, s))
		case d != 0:
			r.add("--"+name+"="+s, "the nanny counts it from its start or its last change (nanny_lib.go:181-182), an AddonResizer from when the estimate left the band (kept in status); pass --map-delays to map it all the same")
		}
	}
	return n, r
}

// nannyResources is the nanny's updateResources (pod_nanny.go:250-280)
// after loadNannyConfiguration (202-223): cpu and memory, each when its
// base is set, from the flags overridden by the file at
// --config-dir/NannyConfiguration.
func nannyResources(c *corev1.Container, v map[string]string, volumes []corev1.Volume,
	configMap func(string) (*corev1.ConfigMap, error), n *nanny, r *refusals) []scaleplanev1alpha1.ResourceScaling {
	// The flags, defaulted as SetDefaults_NannyConfiguration does
	// (nannyconfig/v1alpha1/defaults.go:28-41).
	baseCPU, cpuPer := orDefault(v["cpu"], noValue), orDefault(v["extra-cpu"], "0")
	baseMem, memPer := orDefault(v["memory"], noValue), orDefault(v["extra-memory"], "0")
	if dir, ok := v["config-dir"]; ok && dir != noValue {
		file, cm, err := nannyConfigFile(c, dir, volumes, configMap)
		switch {
		case err != nil:
			r.add("--config-dir="+dir, "%v", err)
		case file != nil:
			n.configMap = cm
			// FillInDefaults_NannyConfiguration (defaults.go:43-56): the
			// file wins where it sets a value; a per-node "0" is not set.
			baseCPU = fileOr(file.BaseCPU, noValue, baseCPU)
			cpuPer = fileOr(file.CPUPerNode, "0", cpuPer)
			baseMem = fileOr(file.BaseMemory, noValue, baseMem)
			memPer = fileOr(file.MemoryPerNode, "0", memPer)
		default:
			n.configMap = cm
		}
	}
	if s, ok := v["storage"]; ok && s != noValue {
		r.add("--storage="+s, "the nanny sizes a container resource named \"storage\", which the API server refuses for containers, with --extra-memory as its per-node extra (pod_nanny.go:270-276); ephemeral-storage is not what it did")
	}
	if s, ok := v["extra-storage"]; ok && s != "0Gi" {
		n.notes = append(n.notes, fmt.Sprintf("--extra-storage=%s is never used by the nanny (storage takes --extra-memory)", s))
	}
	var out []scaleplanev1alpha1.ResourceScaling
	for _, res := range []struct {
		name              corev1.ResourceName
		base, per         string
		baseFlag, perFlag string
	}{
		{corev1.ResourceCPU, baseCPU, cpuPer, "--cpu", "--extra-cpu"},
		{corev1.ResourceMemory, baseMem, memPer, "--memory", "--extra-memory"},
	} {
		if res.base == noValue {
			if res.per != "0" {
				r.add(res.perFlag+"="+res.per, "set without %s: the nanny leaves %s alone when it has no base; remove it or add %s", res.baseFlag, res.name, res.baseFlag)
			}
			continue
		}
		base, err1 := resource.ParseQuantity(res.base)
		per, err2 := resource.ParseQuantity(res.per)
		switch {
		case err1 != nil:
			r.add(res.baseFlag+"="+res.base, "not a quantity: the nanny crashes at start (resource.MustParse)")
		case err2 != nil:
			r.add(res.perFlag+"="+res.per, "not a quantity: the nanny crashes at start (resource.MustParse)")
		case base.Sign() < 0 || per.Sign() < 0:
			r.add(res.baseFlag, "a negative base or extra has no AddonResizer equivalent (base and extraPerUnit are at least 0)")
		default:
			out = append(out, scaleplanev1alpha1.ResourceScaling{Name: res.name, Base: base, ExtraPerUnit: per})
		}
	}
	if len(out) == 0 && baseCPU == noValue && baseMem == noValue {
		r.add("--cpu/--memory", "no base is set (neither flag nor configuration file): the nanny sizes nothing")
	}
	return out
}

// fileOr is the file's value unless it is empty (defaulted to unset) or
// unset, then the flag's.
func fileOr(file, unset, flag string) string {
	if file == "" || file == unset {
		return flag
	}
	return file
}

// nannyConfiguration is nannyconfig/v1alpha1's NannyConfiguration
// (nanny/apis/nannyconfig/v1alpha1/types.go:26-36).
type nannyConfiguration struct {
	APIVersion    string `json:"apiVersion"`
	Kind          string `json:"kind"`
	BaseCPU       string `json:"baseCPU"`
	CPUPerNode    string `json:"cpuPerNode"`
	BaseMemory    string `json:"baseMemory"`
	MemoryPerNode string `json:"memoryPerNode"`
}

// nannyConfigFile finds the file the nanny reads at dir/NannyConfiguration:
// a ConfigMap volume mounted at dir. nil without error: no such file (the
// nanny then uses its flags). It returns the ConfigMap's name.
func nannyConfigFile(c *corev1.Container, dir string, volumes []corev1.Volume,
	configMap func(string) (*corev1.ConfigMap, error)) (*nannyConfiguration, string, error) {
	dir = path.Clean(dir)
	var mount *corev1.VolumeMount
	for i := range c.VolumeMounts {
		m := &c.VolumeMounts[i]
		mp := path.Clean(m.MountPath)
		if mp == dir && m.SubPath == "" && m.SubPathExpr == "" {
			mount = m
		} else if mp == dir || strings.HasPrefix(dir, mp+"/") || strings.HasPrefix(mp, dir+"/") {
			return nil, "", fmt.Errorf("a volume mount at %s (with a sub-path, or above or below the directory) may hold the configuration; migrate reads a ConfigMap mounted at the directory only", m.MountPath)
		}
	}
	if mount == nil {
		return nil, "", fmt.Errorf("no volume is mounted at %s; the nanny would find no configuration there and use its flags: drop --config-dir to say so", dir)
	}
	var vol *corev1.Volume
	for i := range volumes {
		if volumes[i].Name == mount.Name {
			vol = &volumes[i]
		}
	}
	if vol == nil || vol.ConfigMap == nil {
		return nil, "", fmt.Errorf("volume %s mounted there is not a ConfigMap; migrate cannot read what the nanny reads", mount.Name)
	}
	name := vol.ConfigMap.Name
	key := "NannyConfiguration"
	if len(vol.ConfigMap.Items) > 0 {
		key = ""
		for _, it := range vol.ConfigMap.Items {
			if path.Clean(it.Path) == "NannyConfiguration" {
				key = it.Key
			}
		}
		if key == "" {
			return nil, name, nil
		}
	}
	cm, err := configMap(name)
	if err != nil {
		return nil, name, fmt.Errorf("reading ConfigMap %s: %w", name, err)
	}
	if cm == nil {
		if vol.ConfigMap.Optional != nil && *vol.ConfigMap.Optional {
			return nil, name, nil
		}
		return nil, name, fmt.Errorf("ConfigMap %s (mounted at %s) not found: give it in the manifest too, or migrate the live Deployment", name, dir)
	}
	data, ok := cm.Data[key]
	if !ok {
		return nil, name, nil
	}
	var file nannyConfiguration
	if err := yaml.Unmarshal([]byte(data), &file); err != nil || file.APIVersion != "nannyconfig/v1alpha1" || file.Kind != "NannyConfiguration" {
		return nil, name, fmt.Errorf("ConfigMap %s key %s is not a nannyconfig/v1alpha1 NannyConfiguration the nanny can decode (it would fall back to its flags); fix or remove it", name, key)
	}
	return &file, name, nil
}

func ptrBool(b bool) *bool { return &b }
