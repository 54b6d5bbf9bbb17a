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

package main

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	scaleplanev1alpha1 "github.com/scaleplane/scaleplane/pkg/apis/scaleplane/v1alpha1"
	"github.com/scaleplane/scaleplane/pkg/generated/clientset/versioned"
	"github.com/scaleplane/scaleplane/test/bench/internal/benchutil"
)

const (
	// addonNamespace holds the two target Deployments and their
	// AddonResizers; nothing runs the Deployments, so it has no pods.
	addonNamespace = "addons"
	// podNamespaces is how many namespaces the pods are spread over.
	podNamespaces = 50

	// nodeTarget is sized by node count (cpu), containerTarget by
	// container count (memory); addonContainer is the container resized.
	nodeTarget      = "node-sized"
	containerTarget = "container-sized"
	addonContainer  = "addon"

	// The estimates: cpu = 10m + 1m per node; memory = 100Mi + 64Ki per
	// container.
	cpuBaseMilli       = 10
	cpuPerNodeMilli    = 1
	memBaseBytes       = 100 << 20
	memPerContainerKiB = 64
)

// Pod shapes (-pod-shape).
const (
	// shapeSmall: two containers, two labels, one env var: about 1.7 kB
	// of protobuf a pod.
	shapeSmall = "small"
	// shapeRealistic: a pod as a Deployment's ReplicaSet and admission
	// make it: an init container and three containers (app, proxy, log
	// shipper) with env, mounts and probes, ten labels, annotations, an
	// owner reference, four volumes (the service account token's projected
	// one included), tolerations and a security context: about 7 kB.
	shapeRealistic = "realistic"
)

// containersPerPod is how many containers every pod of shape has, init
// containers included (KEP-5546 counts them).
func containersPerPod(shape string) int {
	if shape == shapeRealistic {
		return 4
	}
	return 2
}

// nodeEstimate is the node-sized target's cpu request for nodes nodes, in
// millicores.
func nodeEstimate(nodes int) int64 { return cpuBaseMilli + cpuPerNodeMilli*int64(nodes) }

// containerEstimate is the container-sized target's memory request for pods
// pods, in bytes: none of the pods is the target's own (nothing runs it).
func containerEstimate(pods int, shape string) int64 {
	return memBaseBytes + (memPerContainerKiB<<10)*int64(pods)*int64(containersPerPod(shape))
}

func nodeName(i int) string { return fmt.Sprintf("node-%05d", i) }

func podNamespace(i int) string { return fmt.Sprintf("pods-%02d", i%podNamespaces) }

// node is a Node as a kubelet registers it, without conditions: the
// resizer counts every Node object, ready or not.
func node(i int) *corev1.Node {
	name := nodeName(i)
	capacity := corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse("16"),
		corev1.ResourceMemory: resource.MustParse("64Gi"),
		corev1.ResourcePods:   resource.MustParse("110"),
	}
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name: name,
			Labels: map[string]string{
				"kubernetes.io/hostname":           name,
				"kubernetes.io/os":                 "linux",
				"node.kubernetes.io/instance-type": "n2-standard-16",
				"topology.kubernetes.io/zone":      fmt.Sprintf("zone-%c", 'a'+i%3),
			},
		},
		Spec:   corev1.NodeSpec{PodCIDR: fmt.Sprintf("10.%d.%d.0/24", 64+i/256, i%256)},
		Status: corev1.NodeStatus{Capacity: capacity, Allocatable: capacity},
	}
}

// pod is an unscheduled pod with two containers: it stays Pending, a
// non-terminal pod that counts. prefix tells the first pods from the ones
// added later.
func pod(prefix string, i int) *corev1.Pod {
	app := fmt.Sprintf("app-%03d", i%300)
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name:      fmt.Sprintf("%s-%06d", prefix, i),
			Namespace: podNamespace(i),
			Labels:    map[string]string{"app": app, "tier": "backend"},
		},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{
				{
					Name:  "app",
					Image: "registry.example/" + app + ":1.0",
					Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}},
					Env:   []corev1.EnvVar{{Name: "APP", Value: app}},
					Resources: corev1.ResourceRequirements{
						Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("128Mi")},
						Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("256Mi")},
					},
				},
				{
					Name:  "sidecar",
					Image: "registry.example/proxy:2.3",
					Resources: corev1.ResourceRequirements{
						Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10m"), corev1.ResourceMemory: resource.MustParse("32Mi")},
					},
				},
			},
		},
	}
}

// realisticPod is an unscheduled pod shaped as a ReplicaSet of a
// Deployment and the API server's admission make one: what a cluster of
// 150,000 pods holds, rather than the smallest pod that counts.
func realisticPod(prefix string, i int) *corev1.Pod {
	app := fmt.Sprintf("app-%03d", i%300)
	hash := fmt.Sprintf("%010x", (i%300)*7919+1)
	labels := map[string]string{
		"app": app, "tier": "backend", "version": "v1.24.3", "pod-template-hash": hash,
		"team": fmt.Sprintf("team-%02d", i%40), "environment": "production",
		"app.kubernetes.io/name": app, "app.kubernetes.io/instance": app + "-prod",
		"app.kubernetes.io/part-of": "shop", "app.kubernetes.io/managed-by": "argocd",
	}
	env := []corev1.EnvVar{
		{Name: "APP", Value: app}, {Name: "ENVIRONMENT", Value: "production"},
		{Name: "LOG_LEVEL", Value: "info"}, {Name: "LOG_FORMAT", Value: "json"},
		{Name: "HTTP_PORT", Value: "8080"}, {Name: "METRICS_PORT", Value: "9090"},
		{Name: "DATABASE_URL", Value: "postgres://" + app + ".db.svc.cluster.local:5432/" + app + "?sslmode=require"},
		{Name: "CACHE_URL", Value: "redis://cache.shop.svc.cluster.local:6379/0"},
		{Name: "OTEL_EXPORTER_OTLP_ENDPOINT", Value: "http://otel-collector.observability.svc:4317"},
		{Name: "FEATURE_FLAGS", Value: "checkout-v2,search-ranking,new-cart,async-payments"},
		{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.name"}}},
		{Name: "POD_NAMESPACE", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.namespace"}}},
		{Name: "POD_IP", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "status.podIP"}}},
		{Name: "API_TOKEN", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: app + "-secrets"}, Key: "api-token"}}},
	}
	token := "kube-api-access-" + hash[:5]
	mounts := []corev1.VolumeMount{
		{Name: "config", MountPath: "/etc/" + app, ReadOnly: true},
		{Name: "tmp", MountPath: "/tmp"},
		{Name: token, MountPath: "/var/run/secrets/kubernetes.io/serviceaccount", ReadOnly: true},
	}
	probe := func(path string, delay int32) *corev1.Probe {
		return &corev1.Probe{
			ProbeHandler:        corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: path, Port: intstr.FromString("http"), Scheme: corev1.URISchemeHTTP}},
			InitialDelaySeconds: delay, TimeoutSeconds: 1, PeriodSeconds: 10, SuccessThreshold: 1, FailureThreshold: 3,
		}
	}
	restricted := &corev1.SecurityContext{
		AllowPrivilegeEscalation: ptr.To(false), ReadOnlyRootFilesystem: ptr.To(true), RunAsNonRoot: ptr.To(true),
		Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
	}
	requests := func(cpu, mem string) corev1.ResourceRequirements {
		return corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(mem)},
			Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse(mem)},
		}
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name:      fmt.Sprintf("%s-%06d", prefix, i),
			Namespace: podNamespace(i),
			Labels:    labels,
			Annotations: map[string]string{
				"prometheus.io/scrape": "true", "prometheus.io/port": "9090", "prometheus.io/path": "/metrics",
				"checksum/config":                   "5f3c2a1b9e8d7c6b5a4f3e2d1c0b9a8f7e6d5c4b3a2f1e0d9c8b7a6f5e4d3c2b",
				"kubectl.kubernetes.io/restartedAt": "2026-11-20T08:00:00Z",
			},
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: "apps/v1", Kind: "ReplicaSet", Name: app + "-" + hash,
				UID: types.UID(fmt.Sprintf("00000000-0000-4000-8000-%012d", i%300)), Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true),
			}},
		},
		Spec: corev1.PodSpec{
			InitContainers: []corev1.Container{{
				Name: "migrate", Image: "registry.example/" + app + "-migrate:1.24.3",
				Command: []string{"/bin/migrate", "--database-url=$(DATABASE_URL)", "--timeout=120s"},
				Env:     env[6:7], Resources: requests("50m", "64Mi"), SecurityContext: restricted,
				TerminationMessagePath: "/dev/termination-log", TerminationMessagePolicy: corev1.TerminationMessageReadFile, ImagePullPolicy: corev1.PullIfNotPresent,
			}},
			Containers: []corev1.Container{
				{
					Name: "app", Image: "registry.example/" + app + ":1.24.3",
					Args:  []string{"serve", "--config=/etc/" + app + "/config.yaml", "--port=8080"},
					Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080, Protocol: corev1.ProtocolTCP}, {Name: "metrics", ContainerPort: 9090, Protocol: corev1.ProtocolTCP}},
					Env:   env, Resources: requests("250m", "512Mi"), VolumeMounts: mounts,
					LivenessProbe: probe("/healthz", 10), ReadinessProbe: probe("/readyz", 5), SecurityContext: restricted,
					TerminationMessagePath: "/dev/termination-log", TerminationMessagePolicy: corev1.TerminationMessageReadFile, ImagePullPolicy: corev1.PullIfNotPresent,
				},
				{
					Name: "proxy", Image: "registry.example/envoy:1.31.2",
					Args:  []string{"--config-path", "/etc/envoy/envoy.yaml", "--service-cluster", app, "--log-level", "warn"},
					Ports: []corev1.ContainerPort{{Name: "proxy", ContainerPort: 15001, Protocol: corev1.ProtocolTCP}},
					Env:   env[10:13], Resources: requests("100m", "128Mi"), VolumeMounts: mounts[2:], SecurityContext: restricted,
					TerminationMessagePath: "/dev/termination-log", TerminationMessagePolicy: corev1.TerminationMessageReadFile, ImagePullPolicy: corev1.PullIfNotPresent,
				},
				{
					Name: "logs", Image: "registry.example/fluent-bit:3.1.9",
					Env: env[10:12], Resources: requests("20m", "48Mi"), VolumeMounts: mounts[1:], SecurityContext: restricted,
					TerminationMessagePath: "/dev/termination-log", TerminationMessagePolicy: corev1.TerminationMessageReadFile, ImagePullPolicy: corev1.PullIfNotPresent,
				},
			},
			Volumes: []corev1.Volume{
				{Name: "config", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: app + "-config"}, DefaultMode: ptr.To[int32](0o644)}}},
				{Name: "tmp", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{SizeLimit: ptr.To(resource.MustParse("1Gi"))}}},
				{Name: "secrets", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: app + "-secrets", DefaultMode: ptr.To[int32](0o400)}}},
				{Name: token, VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{DefaultMode: ptr.To[int32](0o644), Sources: []corev1.VolumeProjection{
					{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Path: "token", ExpirationSeconds: ptr.To[int64](3607)}},
					{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "kube-root-ca.crt"}, Items: []corev1.KeyToPath{{Key: "ca.crt", Path: "ca.crt"}}}},
					{DownwardAPI: &corev1.DownwardAPIProjection{Items: []corev1.DownwardAPIVolumeFile{{Path: "namespace", FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.namespace"}}}}},
				}}}},
			},
			ServiceAccountName:            app,
			TerminationGracePeriodSeconds: ptr.To[int64](30),
			SecurityContext:               &corev1.PodSecurityContext{RunAsUser: ptr.To[int64](10001), FSGroup: ptr.To[int64](10001), SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}},
			Tolerations: []corev1.Toleration{
				{Key: "node.kubernetes.io/not-ready", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr.To[int64](300)},
				{Key: "node.kubernetes.io/unreachable", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr.To[int64](300)},
			},
			TopologySpreadConstraints: []corev1.TopologySpreadConstraint{{
				MaxSkew: 1, TopologyKey: "topology.kubernetes.io/zone", WhenUnsatisfiable: corev1.ScheduleAnyway,
				LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}},
			}},
		},
	}
}

// deployment is a target: one container, requests at the base, which
// the first resize raises.
func deployment(name string) *appsv1.Deployment {
	labels := map[string]string{"app": name}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: addonNamespace},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](1),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{
					Name:  addonContainer,
					Image: "registry.example/addon:1.0",
					Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
						corev1.ResourceCPU:    *resource.NewMilliQuantity(cpuBaseMilli, resource.DecimalSI),
						corev1.ResourceMemory: *resource.NewQuantity(memBaseBytes, resource.BinarySI),
					}},
				}}},
			},
		},
	}
}

// addonResizer sizes target's container: linear, no threshold, no delays,
// requests only.
func addonResizer(target string, mode scaleplanev1alpha1.ScalingMode, r scaleplanev1alpha1.ResourceScaling) *scaleplanev1alpha1.AddonResizer {
	return &scaleplanev1alpha1.AddonResizer{
		ObjectMeta: metav1.ObjectMeta{Name: target, Namespace: addonNamespace},
		Spec: scaleplanev1alpha1.AddonResizerSpec{
			TargetRef:     scaleplanev1alpha1.TargetReference{Kind: scaleplanev1alpha1.TargetKindDeployment, Name: target},
			ContainerName: addonContainer,
			Resources:     []scaleplanev1alpha1.ResourceScaling{r},
			ScalingMode:   mode,
			Source:        scaleplanev1alpha1.SourceAPIServer,
			Estimator:     scaleplanev1alpha1.Estimator{Type: scaleplanev1alpha1.LinearEstimator},
			Threshold:     0,
			SetLimits:     ptr.To(false),
		},
	}
}

// createTargets creates the two Deployments and their AddonResizers.
func createTargets(ctx context.Context, kube kubernetes.Interface, client versioned.Interface) error {
	for _, name := range []string{nodeTarget, containerTarget} {
		if _, err := kube.AppsV1().Deployments(addonNamespace).Create(ctx, deployment(name), metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("creating Deployment %s: %w", name, err)
		}
	}
	for _, ar := range []*scaleplanev1alpha1.AddonResizer{
		addonResizer(nodeTarget, scaleplanev1alpha1.NodeProportional, scaleplanev1alpha1.ResourceScaling{
			Name:         corev1.ResourceCPU,
			Base:         *resource.NewMilliQuantity(cpuBaseMilli, resource.DecimalSI),
			ExtraPerUnit: *resource.NewMilliQuantity(cpuPerNodeMilli, resource.DecimalSI),
		}),
		addonResizer(containerTarget, scaleplanev1alpha1.ContainerProportional, scaleplanev1alpha1.ResourceScaling{
			Name:         corev1.ResourceMemory,
			Base:         *resource.NewQuantity(memBaseBytes, resource.BinarySI),
			ExtraPerUnit: *resource.NewQuantity(memPerContainerKiB<<10, resource.BinarySI),
		}),
	} {
		if _, err := client.ScaleplaneV1alpha1().AddonResizers(addonNamespace).Create(ctx, ar, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("creating AddonResizer %s: %w", ar.Name, err)
		}
	}
	return nil
}

func createNamespaces(ctx context.Context, kube kubernetes.Interface) error {
	names := []string{addonNamespace}
	for i := range podNamespaces {
		names = append(names, podNamespace(i))
	}
	for _, name := range names {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
		if _, err := kube.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("creating namespace %s: %w", name, err)
		}
	}
	return nil
}

// creation is when a bulk creation began (first request sent) and ended
// (last answer received).
type creation struct {
	n           int
	first, last time.Time
}

func (c creation) took() time.Duration { return c.last.Sub(c.first) }

func (c creation) rate() float64 { return float64(c.n) / c.took().Seconds() }

// createMany runs create(0..n-1) on workers goroutines, logging progress,
// and returns the first error.
func createMany(ctx context.Context, what string, n, workers int, create func(ctx context.Context, i int) error) (creation, error) {
	var done atomic.Int64
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		t := time.NewTicker(15 * time.Second)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				benchutil.Logf("  %d of %d %s created", done.Load(), n, what)
			}
		}
	}()
	c := creation{n: n, first: time.Now()}
	err := benchutil.Parallel(ctx, n, workers, func(i int) error {
		if err := create(ctx, i); err != nil {
			return err
		}
		done.Add(1)
		return nil
	})
	c.last = time.Now()
	return c, err
}

func createNodes(ctx context.Context, kube kubernetes.Interface, n, workers int) (creation, error) {
	return createMany(ctx, "nodes", n, workers, func(ctx context.Context, i int) error {
		if _, err := kube.CoreV1().Nodes().Create(ctx, node(i), metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("creating node %s: %w", nodeName(i), err)
		}
		return nil
	})
}

func createPods(ctx context.Context, kube kubernetes.Interface, prefix, shape string, n, workers int) (creation, error) {
	return createMany(ctx, prefix+" pods", n, workers, func(ctx context.Context, i int) error {
		p := pod(prefix, i)
		if shape == shapeRealistic {
			p = realisticPod(prefix, i)
		}
		if _, err := kube.CoreV1().Pods(p.Namespace).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("creating pod %s/%s: %w", p.Namespace, p.Name, err)
		}
		return nil
	})
}
