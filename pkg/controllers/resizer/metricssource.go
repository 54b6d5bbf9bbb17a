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

package resizer

import (
	"context"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	metricsclientset "k8s.io/metrics/pkg/client/clientset/versioned"
	"k8s.io/utils/clock"

	scaleplanev1alpha1 "github.com/scaleplane/scaleplane/pkg/apis/scaleplane/v1alpha1"
)

// metricsSource is the cluster size of source Metrics, read from the
// resource metrics API (metrics.k8s.io) as KEP-5546 describes: the node
// count from NodeMetrics, the container count from the containers of
// PodMetrics. The API cannot be watched, so it is read at most once per
// interval, and one read serves every AddonResizer of the mode until it is
// interval old: n AddonResizers cost one list per interval, not n, and a
// failing API is asked once per interval too.
type metricsSource struct {
	client   metricsclientset.Interface
	clock    clock.PassiveClock
	interval time.Duration

	nodes snapshot[int64]
	pods  snapshot[*containerCounter]
}

func newMetricsSource(client metricsclientset.Interface, clk clock.PassiveClock, interval time.Duration) *metricsSource {
	return &metricsSource{client: client, clock: clk, interval: interval}
}

// size returns the cluster size of mode, leaving out the target's pods
// (selector in namespace) when counting containers, and when the value was
// read. PodMetrics carry their pod's labels, so the selector applies to
// them as to pods.
func (m *metricsSource) size(ctx context.Context, mode scaleplanev1alpha1.ScalingMode, namespace string, selector labels.Selector) (int64, time.Time, error) {
	if mode == scaleplanev1alpha1.ContainerProportional {
		pods, at, err := m.pods.get(ctx, m.clock.Now(), m.interval, m.readPods)
		if err != nil {
			return 0, at, err
		}
		return pods.excluding(namespace, selector), at, nil
	}
	return m.nodes.get(ctx, m.clock.Now(), m.interval, m.readNodes)
}

// nextRead returns how long until a value read at at is stale.
func (m *metricsSource) nextRead(at time.Time) time.Duration {
	if d := at.Add(m.interval).Sub(m.clock.Now()); d > 0 {
		return d
	}
	return m.interval
}

func (m *metricsSource) readNodes(ctx context.Context) (int64, error) {
	list, err := m.client.MetricsV1beta1().NodeMetricses().List(ctx, metav1.ListOptions{})
	if err != nil {
		return 0, fmt.Errorf("listing NodeMetrics from metrics.k8s.io (is metrics-server running and its APIService available?): %w", err)
	}
	// A cluster that runs metrics-server has nodes: an empty list means
	// metrics-server has not scraped yet (it has just started), not a
	// cluster of size 0, which would cut the add-on to its base.
	if len(list.Items) == 0 {
		return 0, errNoMetricsYet("NodeMetrics")
	}
	return int64(len(list.Items)), nil
}

func (m *metricsSource) readPods(ctx context.Context) (*containerCounter, error) {
	list, err := m.client.MetricsV1beta1().PodMetricses(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("listing PodMetrics from metrics.k8s.io (is metrics-server running and its APIService available?): %w", err)
	}
	if len(list.Items) == 0 {
		return nil, errNoMetricsYet("PodMetrics")
	}
	counter := newContainerCounter()
	for i := range list.Items {
		pm := &list.Items[i]
		// Only running pods have metrics; their containers count.
		counter.add(&countedPod{
			Namespace:  pm.Namespace,
			Name:       pm.Name,
			Labels:     pm.Labels,
			Phase:      corev1.PodRunning,
			Containers: int32(len(pm.Containers)),
		})
	}
	return counter, nil
}

// snapshot is the last read of one list, shared until it is interval old.
// Its lock is held during a read, so concurrent syncs wait for one read
// instead of sending their own.
type snapshot[T any] struct {
	mu    sync.Mutex
	at    time.Time
	value T
	err   error
}

func (s *snapshot[T]) get(ctx context.Context, now time.Time, interval time.Duration, read func(context.Context) (T, error)) (T, time.Time, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.at.IsZero() || now.Sub(s.at) >= interval {
		s.value, s.err = read(ctx)
		s.at = now
	}
	return s.value, s.at, s.err
}

// errNoMetricsYet is an empty answer of the metrics API, taken as no answer.
func errNoMetricsYet(kind string) error {
	return fmt.Errorf("metrics.k8s.io returned no %s: metrics-server has not scraped the kubelets yet (it does every --metric-resolution after it starts), or cannot reach them; resources are left as they are", kind)
}
