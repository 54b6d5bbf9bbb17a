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

package hpagenerator

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	metricsclientset "k8s.io/metrics/pkg/client/clientset/versioned"

	"github.com/scaleplane/scaleplane/test/integration/framework"
)

// TestMetricsAPIServesKwokUsage: what `kubectl top nodes` and `kubectl top
// pods` read works — metrics-server, registered as metrics.k8s.io, scrapes
// kwok's emulated kubelet of a fake node and reports the usage a pod's
// annotation sets.
func TestMetricsAPIServesKwokUsage(t *testing.T) {
	cp := framework.Get(t)
	ns := cp.CreateNamespace(t)
	ctx := context.Background()
	node := "top-" + ns
	if err := cp.CreateFakeNode(ctx, node); err != nil {
		t.Fatal(err)
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "busy", Namespace: ns, Annotations: map[string]string{
			framework.UsageCPUAnnotation: "300m", framework.UsageMemoryAnnotation: "64Mi",
		}},
		Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "main", Image: "registry.example/busy:1"}}},
	}
	if _, err := cp.KubeClient().CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	metrics := metricsclientset.NewForConfigOrDie(cp.Config())
	var last string
	err := wait.PollUntilContextTimeout(ctx, time.Second, 90*time.Second, true, func(ctx context.Context) (bool, error) {
		nm, err := metrics.MetricsV1beta1().NodeMetricses().Get(ctx, node, metav1.GetOptions{})
		if err != nil {
			last = "node metrics: " + err.Error()
			return false, nil
		}
		pm, err := metrics.MetricsV1beta1().PodMetricses(ns).Get(ctx, "busy", metav1.GetOptions{})
		if err != nil {
			last = "pod metrics: " + err.Error()
			return false, nil
		}
		if len(pm.Containers) != 1 {
			last = fmt.Sprintf("pod metrics have %d containers", len(pm.Containers))
			return false, nil
		}
		cpu, mem := pm.Containers[0].Usage[corev1.ResourceCPU], pm.Containers[0].Usage[corev1.ResourceMemory]
		last = fmt.Sprintf("node cpu %s, pod cpu %s memory %s", nm.Usage.Cpu(), cpu.String(), mem.String())
		// CPU is a rate over the scrape window: allow for rounding.
		lo, hi := resource.MustParse("250m"), resource.MustParse("350m")
		return cpu.Cmp(lo) >= 0 && cpu.Cmp(hi) <= 0 && mem.Cmp(resource.MustParse("64Mi")) == 0, nil
	})
	if err != nil {
		t.Fatalf("the metrics API did not report the pod's emulated usage (300m CPU, 64Mi): %s", last)
	}
	t.Log(last)
}
