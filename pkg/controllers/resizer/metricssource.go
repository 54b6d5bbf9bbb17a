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
	"k8s.io/client-go/tools/cache"
	metricsclientset "k8s.io/metrics/pkg/client/clientset/versioned"
	"k8s.io/utils/clock"
)

// metricsSource is the container count of source Metrics, read from the
// resource metrics API (metrics.k8s.io) as KEP-5546 describes: the
// containers of PodMetrics. (Nodes are counted from the API server with
// either source: see countSource.) The API cannot be watched, so it is read
// at most once per interval, and one read serves every AddonResizer until it
// is interval old: n AddonResizers cost one list per interval, not n, and a
// failing API is asked once per interval too.
//
// metrics-server leaves out a pod whose kubelet it failed to scrape: a pod
// missing from a read but present in the one before is counted once more,
// so a scrape gap does not resize; a pod that is really gone stops counting
// one read later.
type metricsSource struct {
	client   metricsclientset.Interface
	clock    clock.PassiveClock
	interval time.Duration

	pods snapshot[*containerCounter]
	// last is the pods of the last read that answered, and whether each
	// was held over from the read before it. Only readPods uses it, under
	// the snapshot's lock.
	last map[cache.ObjectName]heldPod
}

// heldPod is a pod of a PodMetrics read.
type heldPod struct {
	pod *countedPod
	// held says the pod was missing from the read and counted from the
	// read before.
	held bool
}

func newMetricsSource(client metricsclientset.Interface, clk clock.PassiveClock, interval time.Duration) *metricsSource {
	return &metricsSource{client: client, clock: clk, interval: interval}
}

// size returns the container count, leaving out the target's pods (selector
// in namespace), and when the value was read. PodMetrics carry their pod's
// labels, so the selector applies to them as to pods.
func (m *metricsSource) size(ctx context.Context, namespace string, selector labels.Selector) (int64, time.Time, error) {
	pods, at, err := m.pods.get(ctx, m.clock.Now(), m.interval, m.readPods)
	if err != nil {
		return 0, at, err
	}
	return pods.excluding(namespace, selector), at, nil
}

// nextRead returns how long until a value read at at is stale.
func (m *metricsSource) nextRead(at time.Time) time.Duration {
	if d := at.Add(m.interval).Sub(m.clock.Now()); d > 0 {
		return d
	}
	return m.interval
}

func (m *metricsSource) readPods(ctx context.Context) (*containerCounter, error) {
	list, err := m.client.MetricsV1beta1().PodMetricses(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("listing PodMetrics from metrics.k8s.io (is metrics-server running and its APIService available?): %w", err)
	}
	// A cluster that runs metrics-server has pods: an empty list means
	// metrics-server has not scraped yet (it has just started), not a
	// cluster of size 0, which would cut the add-on to its base.
	if len(list.Items) == 0 {
		return nil, errNoMetricsYet("PodMetrics")
	}
	read := make(map[cache.ObjectName]heldPod, len(list.Items))
	for i := range list.Items {
		pm := &list.Items[i]
		// Only running pods have metrics; their containers count.
		read[cache.ObjectName{Namespace: pm.Namespace, Name: pm.Name}] = heldPod{pod: &countedPod{
			Namespace:  pm.Namespace,
			Name:       pm.Name,
			Labels:     pm.Labels,
			Phase:      corev1.PodRunning,
			Containers: int32(len(pm.Containers)),
		}}
	}
	for key, p := range m.last {
		if _, ok := read[key]; !ok && !p.held {
			read[key] = heldPod{pod: p.pod, held: true}
		}
	}
	m.last = read
	counter := newContainerCounter()
	for _, p := range read {
		counter.add(p.pod)
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
