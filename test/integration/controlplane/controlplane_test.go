// Package controlplane checks the integration test control plane itself: that
// the apiserver serves the scale subresource the way scaleplane's
// controllers use it, and that every CRD in artifacts/deploy/crds installs,
// is Established and stores objects of its kind.
package controlplane

import (
	"context"
	"fmt"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/scale"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"

	"github.com/scaleplane/scaleplane/test/integration/framework"
)

func TestMain(m *testing.M) {
	framework.Main(m, framework.Options{})
}

// TestDeploymentScaleSubresource scales a Deployment through the typed
// client's scale subresource and through the generic scale client (the path
// cron-scaler takes for any scalable kind), and checks the apiserver's
// optimistic concurrency on scale updates.
func TestDeploymentScaleSubresource(t *testing.T) {
	ctx := context.Background()
	cp := framework.Get(t)
	ns := cp.CreateNamespace(t)
	deployments := cp.KubeClient().AppsV1().Deployments(ns)

	deploy, err := deployments.Create(ctx, newDeployment("web", 1), metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating deployment: %v", err)
	}

	got, err := deployments.GetScale(ctx, deploy.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("reading scale: %v", err)
	}
	if got.Spec.Replicas != 1 {
		t.Errorf("initial scale: spec.replicas = %d, want 1", got.Spec.Replicas)
	}
	// The selector in the scale status is what the HPA controller uses to
	// find the pods; it must come from the Deployment's selector.
	if got.Status.Selector != "app=web" {
		t.Errorf("scale status.selector = %q, want %q", got.Status.Selector, "app=web")
	}

	stale := got.DeepCopy()
	got.Spec.Replicas = 5
	if _, err := deployments.UpdateScale(ctx, deploy.Name, got, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("updating scale to 5: %v", err)
	}
	assertDeploymentReplicas(ctx, t, cp, ns, deploy.Name, 5)

	// An update carrying an old resourceVersion must be refused, not
	// silently applied: controllers rely on this to never overwrite a scale
	// they have not seen.
	stale.Spec.Replicas = 7
	_, err = deployments.UpdateScale(ctx, deploy.Name, stale, metav1.UpdateOptions{})
	if !apierrors.IsConflict(err) {
		t.Errorf("updating scale with a stale resourceVersion: got %v, want a Conflict", err)
	}
	assertDeploymentReplicas(ctx, t, cp, ns, deploy.Name, 5)

	scales := newScaleClient(t, cp)
	deploymentsGR := schema.GroupResource{Group: "apps", Resource: "deployments"}
	generic, err := scales.Scales(ns).Get(ctx, deploymentsGR, deploy.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("reading scale through the scale client: %v", err)
	}
	if generic.Spec.Replicas != 5 {
		t.Errorf("scale client: spec.replicas = %d, want 5", generic.Spec.Replicas)
	}
	generic.Spec.Replicas = 2
	if _, err := scales.Scales(ns).Update(ctx, deploymentsGR, generic, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("updating scale through the scale client: %v", err)
	}
	assertDeploymentReplicas(ctx, t, cp, ns, deploy.Name, 2)
}

// TestCRDsEstablished checks that every CRD shipped in artifacts/deploy/crds
// was installed by the framework and is served: Established, and listed in
// discovery with its kind.
func TestCRDsEstablished(t *testing.T) {
	ctx := context.Background()
	cp := framework.Get(t)

	onDisk := crdsOnDisk(t)
	installed := map[string]framework.CRD{}
	for _, crd := range cp.CRDs() {
		installed[crd.Name] = crd
	}
	if len(installed) != len(onDisk) {
		t.Errorf("framework installed %d CRDs, artifacts/deploy/crds holds %d", len(installed), len(onDisk))
	}

	disco, err := discovery.NewDiscoveryClientForConfig(cp.Config())
	if err != nil {
		t.Fatalf("creating discovery client: %v", err)
	}
	for _, want := range onDisk {
		t.Run(want.GetName(), func(t *testing.T) {
			crd, ok := installed[want.GetName()]
			if !ok {
				t.Fatalf("CRD %s from artifacts/deploy/crds was not installed", want.GetName())
			}
			current, err := cp.DynamicClient().Resource(framework.CRDResource).Get(ctx, crd.Name, metav1.GetOptions{})
			if err != nil {
				t.Fatalf("reading CRD: %v", err)
			}
			if !framework.IsCRDEstablished(current) {
				t.Errorf("CRD is not Established: %v", current.Object["status"])
			}
			if len(crd.Versions) == 0 {
				t.Fatalf("CRD serves no version")
			}
			for _, version := range crd.Versions {
				gv := schema.GroupVersion{Group: crd.Group, Version: version}.String()
				resources, err := disco.ServerResourcesForGroupVersion(gv)
				if err != nil {
					t.Fatalf("discovery of %s: %v", gv, err)
				}
				found := false
				for _, r := range resources.APIResources {
					if r.Name == crd.Plural && r.Kind == crd.Kind {
						found = true
					}
				}
				if !found {
					t.Errorf("discovery of %s does not list %s (kind %s)", gv, crd.Plural, crd.Kind)
				}
			}
		})
	}
}

// minimalObjects holds, per kind, the smallest spec its CRD accepts. A CRD
// whose kind is missing here fails TestCustomResourcesRoundTrip, so a new
// kind cannot go untested.
var minimalObjects = map[string]map[string]any{
	"CronFederatedHPA": {
		"scaleTargetRef": map[string]any{"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
		"rules": []any{
			map[string]any{"name": "scale-up", "schedule": "0 8 * * *", "targetReplicas": int64(3)},
		},
	},
	"FederatedHPA": {
		"scaleTargetRef": map[string]any{"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
		"minReplicas":    int64(1),
		"maxReplicas":    int64(5),
	},
	"LeaderWorkerSet": {
		"replicas": int64(1),
		"leaderWorkerTemplate": map[string]any{
			"size": int64(2),
			"workerTemplate": map[string]any{
				"spec": map[string]any{
					"containers": []any{map[string]any{"name": "worker", "image": "registry.k8s.io/pause:3.10"}},
				},
			},
		},
	},
	"AddonResizer": {
		"targetRef":     map[string]any{"kind": "Deployment", "name": "metrics-server"},
		"containerName": "metrics-server",
		"resources": []any{
			map[string]any{"name": "cpu", "base": "40m", "extraPerUnit": "1m"},
		},
	},
}

// TestCustomResourcesRoundTrip creates a minimal object of every installed
// kind, in every served version, and reads it back: the schema must accept
// it and the apiserver must keep every field that was set (a field missing
// from the schema would be pruned silently).
func TestCustomResourcesRoundTrip(t *testing.T) {
	ctx := context.Background()
	cp := framework.Get(t)
	ns := cp.CreateNamespace(t)

	kinds := map[string]bool{}
	for _, crd := range cp.CRDs() {
		kinds[crd.Kind] = true
		for _, version := range crd.Versions {
			t.Run(crd.Kind+"/"+version, func(t *testing.T) {
				spec, ok := minimalObjects[crd.Kind]
				if !ok {
					t.Fatalf("no minimal object for kind %s: add one to minimalObjects", crd.Kind)
				}
				obj := &unstructured.Unstructured{Object: map[string]any{
					"apiVersion": schema.GroupVersion{Group: crd.Group, Version: version}.String(),
					"kind":       crd.Kind,
					"metadata":   map[string]any{"name": "minimal-" + version},
					"spec":       spec,
				}}
				client := resourceClient(cp.DynamicClient(), crd, version, ns)
				if _, err := client.Create(ctx, obj, metav1.CreateOptions{}); err != nil {
					t.Fatalf("creating %s: %v", crd.Kind, err)
				}
				got, err := client.Get(ctx, obj.GetName(), metav1.GetOptions{})
				if err != nil {
					t.Fatalf("reading %s back: %v", crd.Kind, err)
				}
				if diff := missingFields(spec, got.Object["spec"], "spec"); diff != "" {
					t.Errorf("%s read back differs from what was created: %s", crd.Kind, diff)
				}
			})
		}
	}
	for kind := range minimalObjects {
		if !kinds[kind] {
			t.Errorf("kind %s has no CRD in artifacts/deploy/crds", kind)
		}
	}
}

// TestLeaderWorkerSetScaleSubresource scales a LeaderWorkerSet through the
// generic scale client: its CRD declares a scale subresource, and cron-scaler
// must be able to drive it like a Deployment.
func TestLeaderWorkerSetScaleSubresource(t *testing.T) {
	ctx := context.Background()
	cp := framework.Get(t)
	ns := cp.CreateNamespace(t)

	var lws *framework.CRD
	for _, crd := range cp.CRDs() {
		if crd.Kind == "LeaderWorkerSet" {
			lws = &crd
		}
	}
	if lws == nil {
		t.Fatal("no LeaderWorkerSet CRD in artifacts/deploy/crds")
	}
	obj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": schema.GroupVersion{Group: lws.Group, Version: lws.StorageVersion}.String(),
		"kind":       lws.Kind,
		"metadata":   map[string]any{"name": "lws"},
		"spec":       minimalObjects["LeaderWorkerSet"],
	}}
	if _, err := resourceClient(cp.DynamicClient(), *lws, lws.StorageVersion, ns).Create(ctx, obj, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating LeaderWorkerSet: %v", err)
	}

	scales := newScaleClient(t, cp)
	gr := schema.GroupResource{Group: lws.Group, Resource: lws.Plural}
	s, err := scales.Scales(ns).Get(ctx, gr, "lws", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("reading LeaderWorkerSet scale: %v", err)
	}
	if s.Spec.Replicas != 1 {
		t.Errorf("LeaderWorkerSet scale spec.replicas = %d, want 1", s.Spec.Replicas)
	}
	s.Spec.Replicas = 4
	if _, err := scales.Scales(ns).Update(ctx, gr, s, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("updating LeaderWorkerSet scale: %v", err)
	}
	got, err := resourceClient(cp.DynamicClient(), *lws, lws.StorageVersion, ns).Get(ctx, "lws", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("reading LeaderWorkerSet: %v", err)
	}
	replicas, _, _ := unstructured.NestedInt64(got.Object, "spec", "replicas")
	if replicas != 4 {
		t.Errorf("LeaderWorkerSet spec.replicas after scaling = %d, want 4", replicas)
	}
}

func newDeployment(name string, replicas int32) *appsv1.Deployment {
	labels := map[string]string{"app": name}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					Containers: []corev1.Container{{Name: name, Image: "registry.k8s.io/pause:3.10"}},
				},
			},
		},
	}
}

func assertDeploymentReplicas(ctx context.Context, t *testing.T, cp *framework.ControlPlane, ns, name string, want int32) {
	t.Helper()
	deploy, err := cp.KubeClient().AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("reading deployment: %v", err)
	}
	if got := ptr.Deref(deploy.Spec.Replicas, -1); got != want {
		t.Errorf("deployment spec.replicas = %d, want %d", got, want)
	}
	var s *autoscalingv1.Scale
	s, err = cp.KubeClient().AppsV1().Deployments(ns).GetScale(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("reading scale: %v", err)
	}
	if s.Spec.Replicas != want {
		t.Errorf("scale spec.replicas = %d, want %d", s.Spec.Replicas, want)
	}
}

// newScaleClient builds the scale client the way a controller does: kinds
// and scale subresources resolved through discovery.
func newScaleClient(t *testing.T, cp *framework.ControlPlane) scale.ScalesGetter {
	t.Helper()
	disco, err := discovery.NewDiscoveryClientForConfig(cp.Config())
	if err != nil {
		t.Fatalf("creating discovery client: %v", err)
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(disco))
	scales, err := scale.NewForConfig(cp.Config(), mapper, dynamic.LegacyAPIPathResolverFunc, scale.NewDiscoveryScaleKindResolver(disco))
	if err != nil {
		t.Fatalf("creating scale client: %v", err)
	}
	return scales
}

func resourceClient(client dynamic.Interface, crd framework.CRD, version, ns string) dynamic.ResourceInterface {
	r := client.Resource(crd.Resource(version))
	if crd.Namespaced {
		return r.Namespace(ns)
	}
	return r
}

func crdsOnDisk(t *testing.T) []*unstructured.Unstructured {
	t.Helper()
	root, err := framework.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	crds, err := framework.ReadCRDs(filepath.Join(root, "artifacts", "deploy", "crds"))
	if err != nil {
		t.Fatal(err)
	}
	return crds
}

// missingFields reports the first field of want that got lacks or holds a
// different value in; fields only got has (defaults) are fine.
func missingFields(want, got any, path string) string {
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			return fmt.Sprintf("%s: got %T, want an object", path, got)
		}
		for k, v := range w {
			if diff := missingFields(v, g[k], path+"."+k); diff != "" {
				return diff
			}
		}
	case []any:
		g, ok := got.([]any)
		if !ok || len(g) != len(w) {
			return fmt.Sprintf("%s: got %v, want %v", path, got, want)
		}
		for i := range w {
			if diff := missingFields(w[i], g[i], fmt.Sprintf("%s[%d]", path, i)); diff != "" {
				return diff
			}
		}
	default:
		if !reflect.DeepEqual(want, got) {
			return fmt.Sprintf("%s: got %v (%T), want %v (%T)", path, got, got, want, want)
		}
	}
	return ""
}

// TestKubeControllerManager starts kube-controller-manager on demand and
// checks the controllers scaleplane's tests lean on: a Deployment scaled
// through its scale subresource gets a ReplicaSet with that many pods, and
// the garbage collector removes both once the Deployment is deleted.
func TestKubeControllerManager(t *testing.T) {
	ctx := context.Background()
	cp := framework.Get(t)
	if err := cp.StartKubeControllerManager(ctx); err != nil {
		t.Fatalf("starting kube-controller-manager: %v", err)
	}
	ns := cp.CreateNamespace(t)
	client := cp.KubeClient()

	deploy, err := client.AppsV1().Deployments(ns).Create(ctx, newDeployment("gc", 1), metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating deployment: %v", err)
	}
	// The deployment controller writes the new Deployment (revision
	// annotation, status) while this test scales it, so a conditional update
	// can meet a conflict: re-read and retry, as any client must.
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		s, err := client.AppsV1().Deployments(ns).GetScale(ctx, deploy.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		s.Spec.Replicas = 3
		_, err = client.AppsV1().Deployments(ns).UpdateScale(ctx, deploy.Name, s, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatalf("scaling to 3: %v", err)
	}

	// Pods stay Pending (there is no scheduler or node here); that they
	// exist shows the deployment and replicaset controllers acted.
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		pods, err := client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=gc"})
		if err != nil {
			return false, err
		}
		return len(pods.Items) == 3, nil
	})
	if err != nil {
		t.Fatalf("waiting for 3 pods of the scaled deployment: %v", err)
	}

	if err := client.AppsV1().Deployments(ns).Delete(ctx, deploy.Name, metav1.DeleteOptions{
		PropagationPolicy: ptr.To(metav1.DeletePropagationBackground),
	}); err != nil {
		t.Fatalf("deleting deployment: %v", err)
	}
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		rs, err := client.AppsV1().ReplicaSets(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		pods, err := client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		return len(rs.Items) == 0 && len(pods.Items) == 0, nil
	})
	if err != nil {
		t.Fatalf("waiting for the garbage collector to delete the deployment's replicasets and pods: %v", err)
	}
}
