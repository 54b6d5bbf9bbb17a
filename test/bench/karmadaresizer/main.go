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

// Command karmadaresizer benchmarks the resizer's Karmada mode against a real
// kube-apiserver and etcd (started with the integration test framework), with
// Karmada's OverridePolicy and ResourceBinding CRDs and the Cluster stand-in
// of test/integration/resizer/karmada/testdata, and the real
// scaleplane-controller-manager binary with only the resizer.
//
// It creates N member Clusters of different node counts, a template
// Deployment scheduled to all of them (its ResourceBinding), then the
// AddonResizer, and measures: the time from the AddonResizer's creation to
// the first OverridePolicy with every member's rule correct; the
// OverridePolicy writes per member whose node count changes (one member at a
// time, each change waited for); and the OverridePolicy writes in a steady
// state of -steady while every Cluster's status is rewritten every -churn
// without a change of its count, as Karmada's cluster status controller
// rewrites it. Writes are counted twice: the manager's
// resizer_writes_total{kind="override_policy"} and the policy's
// resourceVersion changes seen by a watch.
//
//	make build && go run ./test/bench/karmadaresizer
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"syscall"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"

	clusterv1alpha1 "github.com/scaleplane/scaleplane/pkg/apis/cluster/v1alpha1"
	policyv1alpha1 "github.com/scaleplane/scaleplane/pkg/apis/policy/v1alpha1"
	scaleplanev1alpha1 "github.com/scaleplane/scaleplane/pkg/apis/scaleplane/v1alpha1"
	workv1alpha2 "github.com/scaleplane/scaleplane/pkg/apis/work/v1alpha2"
	"github.com/scaleplane/scaleplane/pkg/generated/clientset/versioned"
	"github.com/scaleplane/scaleplane/test/bench/internal/benchutil"
	"github.com/scaleplane/scaleplane/test/integration/framework"
)

const (
	ns   = "addons"
	name = "metrics-server"
)

type config struct {
	clusters, changes int
	steady, churn     time.Duration
	bin               string
}

func main() {
	var cfg config
	flag.IntVar(&cfg.clusters, "clusters", 100, "member Clusters")
	flag.IntVar(&cfg.changes, "changes", 10, "member node-count changes, one at a time")
	flag.DurationVar(&cfg.steady, "steady", 5*time.Minute, "steady-state window")
	flag.DurationVar(&cfg.churn, "churn", 10*time.Second, "how often every Cluster's status is rewritten in the steady state")
	flag.StringVar(&cfg.bin, "controller-manager", "_output/bin/scaleplane-controller-manager", "the controller manager binary")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, cfg); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}

// nodesOf is member i's node count: 3 to 500, all different buckets.
func nodesOf(i int) int32 { return int32(3 + (i*37)%498) }

// expect is the cpu request a member of n nodes gets: 100m + 1m per node.
func expect(n int32) string {
	return resource.NewMilliQuantity(100+int64(n), resource.DecimalSI).String()
}

func run(ctx context.Context, cfg config) error {
	bin, err := filepath.Abs(cfg.bin)
	if err != nil {
		return err
	}
	if _, err := os.Stat(bin); err != nil {
		return fmt.Errorf("%s: %w (run make build)", bin, err)
	}
	root, err := framework.RepoRoot()
	if err != nil {
		return err
	}
	benchutil.Logf("starting etcd and kube-apiserver; load %s", benchutil.LoadAvg())
	cp, err := framework.Start(ctx, framework.Options{})
	if err != nil {
		return err
	}
	defer cp.Stop()
	if _, err := framework.InstallCRDs(ctx, cp.DynamicClient(), filepath.Join(root, "test/integration/resizer/karmada/testdata"), time.Minute); err != nil {
		return err
	}
	restCfg := cp.Config()
	restCfg.QPS, restCfg.Burst = 1000, 2000
	client, err := versioned.NewForConfig(restCfg)
	if err != nil {
		return err
	}
	kube := cp.KubeClient()
	if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		return err
	}
	labels := map[string]string{"app": name}
	if _, err := kube.AppsV1().Deployments(ns).Create(ctx, &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: labels},
		Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: corev1.PodSpec{Containers: []corev1.Container{{
				Name: name, Image: "registry.k8s.io/metrics-server/metrics-server:v0.8.0",
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")}},
			}}}},
		},
	}, metav1.CreateOptions{}); err != nil {
		return err
	}
	benchutil.Logf("creating %d member Clusters", cfg.clusters)
	members := make([]workv1alpha2.TargetCluster, cfg.clusters)
	for i := range cfg.clusters {
		members[i] = workv1alpha2.TargetCluster{Name: fmt.Sprintf("member-%03d", i), Replicas: 1}
		if err := setCluster(ctx, client, members[i].Name, nodesOf(i), ""); err != nil {
			return err
		}
	}
	if _, err := client.WorkV1alpha2().ResourceBindings(ns).Create(ctx, &workv1alpha2.ResourceBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name + "-deployment", Namespace: ns},
		Spec: workv1alpha2.ResourceBindingSpec{
			Resource: workv1alpha2.ObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Namespace: ns, Name: name},
			Clusters: members,
		},
	}, metav1.CreateOptions{}); err != nil {
		return err
	}

	port, err := framework.FreePort()
	if err != nil {
		return err
	}
	args := []string{"--kubeconfig=" + cp.KubeconfigPath(), "--controllers=resizer", "--leader-elect=false",
		"--bind-address=127.0.0.1", "--port=" + strconv.Itoa(port), "-v=2"}
	p, err := framework.StartProcess(cp.Dir(), "controller-manager", bin, args)
	if err != nil {
		return err
	}
	defer p.Stop(10 * time.Second)
	benchutil.Logf("controller manager pid %d, log %s", p.Pid(), p.LogPath())

	// Every stored change of the policy, from a watch.
	var stored atomic.Int64
	w, err := client.PolicyV1alpha1().OverridePolicies(ns).Watch(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	defer w.Stop()
	go func() {
		for ev := range w.ResultChan() {
			if ev.Type == watch.Added || ev.Type == watch.Modified || ev.Type == watch.Deleted {
				stored.Add(1)
			}
		}
	}()

	want := map[string]string{}
	for i := range cfg.clusters {
		want[members[i].Name] = expect(nodesOf(i))
	}
	created := time.Now()
	if _, err := client.ScaleplaneV1alpha1().AddonResizers(ns).Create(ctx, &scaleplanev1alpha1.AddonResizer{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: scaleplanev1alpha1.AddonResizerSpec{
			TargetRef:     scaleplanev1alpha1.TargetReference{Kind: scaleplanev1alpha1.TargetKindDeployment, Name: name},
			ContainerName: name,
			Resources:     []scaleplanev1alpha1.ResourceScaling{{Name: corev1.ResourceCPU, Base: resource.MustParse("100m"), ExtraPerUnit: resource.MustParse("1m")}},
			SetLimits:     ptr.To(false),
		},
	}, metav1.CreateOptions{}); err != nil {
		return err
	}
	if err := waitRules(ctx, client, want); err != nil {
		return err
	}
	first := time.Since(created)
	benchutil.Logf("first correct OverridePolicy (%d rules) %v after the AddonResizer was created", cfg.clusters, first)

	// One member at a time grows by 50 nodes.
	w0, err := policyWrites(ctx, port)
	if err != nil {
		return err
	}
	s0 := stored.Load()
	var changeTimes []time.Duration
	for k := range cfg.changes {
		i := (k * 7) % cfg.clusters
		n := nodesOf(i) + 50
		at := time.Now()
		if err := setCluster(ctx, client, members[i].Name, n, ""); err != nil {
			return err
		}
		want[members[i].Name] = expect(n)
		if err := waitRules(ctx, client, want); err != nil {
			return err
		}
		changeTimes = append(changeTimes, time.Since(at))
	}
	w1, err := policyWrites(ctx, port)
	if err != nil {
		return err
	}
	s1 := stored.Load()
	benchutil.Logf("%d member changes: %v OverridePolicy writes sent, %d stored; each re-sized in %v", cfg.changes, w1-w0, s1-s0, changeTimes)

	// Steady state: Cluster statuses rewritten, counts unchanged.
	benchutil.Logf("steady state for %v, every Cluster's status rewritten every %v", cfg.steady, cfg.churn)
	end := time.Now().Add(cfg.steady)
	rewrites := 0
	for round := 0; time.Now().Before(end); round++ {
		for i := range cfg.clusters {
			n := nodesOf(i)
			if isChanged(i, cfg) {
				n += 50
			}
			if err := setCluster(ctx, client, members[i].Name, n, "v1.34."+strconv.Itoa(round)); err != nil {
				return err
			}
			rewrites++
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(cfg.churn):
		}
	}
	w2, err := policyWrites(ctx, port)
	if err != nil {
		return err
	}
	s2 := stored.Load()
	if p.Exited() {
		return fmt.Errorf("the controller manager exited")
	}
	rss, _ := benchutil.MemKiB(p.Pid(), "VmRSS")
	benchutil.Logf("steady state: %d Cluster status rewrites, %v OverridePolicy writes sent, %d stored; manager RSS %s", rewrites, w2-w1, s2-s1, benchutil.MiB(rss))
	fmt.Printf("| %d | %.2f s | %v sent, %d stored for %d changes | %v sent, %d stored in %v (%d Cluster status rewrites) | %s | %s |\n",
		cfg.clusters, first.Seconds(), w1-w0, s1-s0, cfg.changes, w2-w1, s2-s1, cfg.steady, rewrites, benchutil.MiB(rss), benchutil.LoadAvg())
	return nil
}

// isChanged tells whether member i was one of the changed ones.
func isChanged(i int, cfg config) bool {
	for k := range cfg.changes {
		if (k*7)%cfg.clusters == i {
			return true
		}
	}
	return false
}

// setCluster creates or rewrites a member Cluster's status as Karmada's
// cluster status controller does (Ready, nodeSummary, kubernetesVersion).
func setCluster(ctx context.Context, client versioned.Interface, name string, nodes int32, version string) error {
	clusters := client.ClusterV1alpha1().Clusters()
	c, err := clusters.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		c, err = clusters.Create(ctx, &clusterv1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
		if err != nil {
			return err
		}
	}
	c.Status.KubernetesVersion = version
	c.Status.Conditions = []metav1.Condition{{Type: "Ready", Status: metav1.ConditionTrue, Reason: "ClusterReady", Message: "cluster is healthy and ready to accept workloads", LastTransitionTime: metav1.Now()}}
	c.Status.NodeSummary = &clusterv1alpha1.NodeSummary{TotalNum: nodes, ReadyNum: nodes}
	_, err = clusters.UpdateStatus(ctx, c, metav1.UpdateOptions{})
	return err
}

// waitRules polls the policy until every member's cpu request is as wanted.
func waitRules(ctx context.Context, client versioned.Interface, want map[string]string) error {
	deadline := time.Now().Add(5 * time.Minute)
	for {
		p, err := client.PolicyV1alpha1().OverridePolicies(ns).Get(ctx, name+"-resizer", metav1.GetOptions{})
		if err == nil && rulesMatch(p, want) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the OverridePolicy did not hold every member at its size in 5 minutes (last error %v)", err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func rulesMatch(p *policyv1alpha1.OverridePolicy, want map[string]string) bool {
	if len(p.Spec.OverrideRules) != len(want) {
		return false
	}
	for _, r := range p.Spec.OverrideRules {
		if r.TargetCluster == nil || len(r.TargetCluster.ClusterNames) != 1 || len(r.Overriders.Plaintext) != 1 {
			return false
		}
		var v string
		if json.Unmarshal(r.Overriders.Plaintext[0].Value.Raw, &v) != nil || want[r.TargetCluster.ClusterNames[0]] != v {
			return false
		}
	}
	return true
}

func policyWrites(ctx context.Context, port int) (float64, error) {
	text, err := benchutil.ScrapeManager(ctx, port)
	if err != nil {
		return 0, err
	}
	samples, err := benchutil.ParseSamples(text, "resizer_writes_total")
	if err != nil {
		return 0, err
	}
	return benchutil.SumBy(samples, benchutil.ByLabel("kind"))["override_policy"], nil
}
