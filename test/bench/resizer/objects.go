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
	// containersPerPod: every pod has an app and a sidecar container.
	containersPerPod = 2

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

// nodeEstimate is the node-sized target's cpu request for nodes nodes, in
// millicores.
func nodeEstimate(nodes int) int64 { return cpuBaseMilli + cpuPerNodeMilli*int64(nodes) }

// containerEstimate is the container-sized target's memory request for pods
// pods, in bytes: none of the pods is the target's own (nothing runs it).
func containerEstimate(pods int) int64 {
	return memBaseBytes + (memPerContainerKiB<<10)*int64(pods)*containersPerPod
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

func createPods(ctx context.Context, kube kubernetes.Interface, prefix string, n, workers int) (creation, error) {
	return createMany(ctx, prefix+" pods", n, workers, func(ctx context.Context, i int) error {
		p := pod(prefix, i)
		if _, err := kube.CoreV1().Pods(p.Namespace).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("creating pod %s/%s: %w", p.Namespace, p.Name, err)
		}
		return nil
	})
}
