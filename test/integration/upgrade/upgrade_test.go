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

// Package upgrade upgrades a Helm release of scaleplane from the previous
// release's chart (testdata/scaleplane-0.1.0.tgz) to the working tree's, on
// a real kube-apiserver, the way docs/upgrading.md tells users to: the new
// CRDs first, server-side, from the chart itself, then helm upgrade. It
// checks that nothing stored is lost and the new fields are served; what
// helm upgrade alone does (Helm never upgrades crds/); and what a rollback
// leaves.
//
// There is no kubelet: the chart's Deployments never run. The webhook the
// chart registers is served by a scaleplane-webhook process started here, on
// 127.0.0.1, which the chart's ValidatingWebhookConfiguration reaches
// through webhook.configuration.url, with the test's CA as webhook.caBundle.
// It is the working tree's binary for both charts: there is no 0.1.0 binary
// (0.1.0 was never built as a release), and what is tested is the chart and
// the CRDs, not the webhook's rules.
package upgrade

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/yaml"

	"github.com/scaleplane/scaleplane/test/integration/framework"
)

func TestMain(m *testing.M) {
	// No CRDs at start (the directory does not exist): helm install of the
	// 0.1.0 chart installs its own, as on a new cluster.
	framework.Main(m, framework.Options{CRDDir: "testdata/no-crds-at-start"})
}

const (
	release = "scaleplane"
	// oldChart is the previous release's chart: testdata/README.md says
	// how it was made.
	oldChart = "testdata/scaleplane-0.1.0.tgz"
	// newVersion labels the working tree's chart, packaged by the test, so
	// that helm history tells the two apart (its Chart.yaml still says
	// 0.1.0).
	newVersion = "0.2.0-dev"

	// crdStep is docs/upgrading.md's CRD step; %s is the chart (oci://...
	// or a .tgz).
	crdStep = "helm show crds %s | kubectl apply --server-side --force-conflicts -f -"
	// crdStepNoForce is the same without --force-conflicts.
	crdStepNoForce = "helm show crds %s | kubectl apply --server-side -f -"

	// karmadaCRDStep is docs/upgrading.md's CRD step on Karmada, after
	// helm pull: the chart's AddonResizer and LeaderWorkerSet CRDs, to
	// karmada-apiserver (here the test's API server).
	karmadaCRDStep = "tar -xzf %s scaleplane/crds && " +
		"kubectl apply --server-side --force-conflicts " +
		"-f scaleplane/crds/autoscaling.scaleplane.io_addonresizers.yaml " +
		"-f scaleplane/crds/leaderworkerset.x-k8s.io_leaderworkersets.yaml"
	// karmadaInstall0_1_0 installs those CRDs on karmada-apiserver as
	// docs/karmada/addons.md and docs/karmada/leaderworkerset.md do (with
	// kubectl apply --server-side), 0.1.0's, taken from its chart (at
	// 6e14fdc artifacts/deploy/crds holds the same files).
	karmadaInstall0_1_0 = "tar -xzf %s scaleplane/crds && " +
		"kubectl apply --server-side " +
		"-f scaleplane/crds/autoscaling.scaleplane.io_addonresizers.yaml " +
		"-f scaleplane/crds/leaderworkerset.x-k8s.io_leaderworkersets.yaml"

	// findOff is docs/upgrading.md's command that lists the
	// AddonResizers with updateMode Off, to deal with before a downgrade.
	findOff = `kubectl get addonresizers -A -o jsonpath='{range .items[?(@.spec.updateMode=="Off")]}{.metadata.namespace}/{.metadata.name}{"\n"}{end}'`

	commandTimeout = 60 * time.Second
	waitTimeout    = 30 * time.Second
)

// The CRDs the chart's crds/ directory holds.
var crdNames = []string{
	"addonresizers.autoscaling.scaleplane.io",
	"cronfederatedhpas.autoscaling.karmada.io",
	"federatedhpas.autoscaling.karmada.io",
	"leaderworkersets.leaderworkerset.x-k8s.io",
}

var (
	cronGVR = schema.GroupVersionResource{Group: "autoscaling.karmada.io", Version: "v1alpha1", Resource: "cronfederatedhpas"}
	fhpaGVR = schema.GroupVersionResource{Group: "autoscaling.karmada.io", Version: "v1alpha1", Resource: "federatedhpas"}
	arGVR   = schema.GroupVersionResource{Group: "autoscaling.scaleplane.io", Version: "v1alpha1", Resource: "addonresizers"}
	lwsGVR  = schema.GroupVersionResource{Group: "leaderworkerset.x-k8s.io", Version: "v1", Resource: "leaderworkersets"}
)

// objects0_1_0 are one object of every kind the CRDs define, valid under
// 0.1.0's schemas, as artifacts/examples has them (the AddonResizer with
// updateMode Rollout, the FederatedHPA's CronFederatedHPA with a time zone
// and maxDelaySeconds).
const objects0_1_0 = `
apiVersion: autoscaling.karmada.io/v1alpha1
kind: FederatedHPA
metadata:
  name: nginx-fhpa
spec:
  scaleTargetRef:
    apiVersion: apps/v1
    kind: Deployment
    name: nginx-federated
  minReplicas: 1
  maxReplicas: 100
  metrics:
    - type: Resource
      resource:
        name: cpu
        target:
          type: Utilization
          averageUtilization: 80
---
apiVersion: autoscaling.karmada.io/v1alpha1
kind: CronFederatedHPA
metadata:
  name: nginx-fhpa-cronfhpa
spec:
  scaleTargetRef:
    apiVersion: autoscaling.karmada.io/v1alpha1
    kind: FederatedHPA
    name: nginx-fhpa
  rules:
    - name: scale-up
      schedule: "30 8 * * 1-5"
      timeZone: Europe/Paris
      maxDelaySeconds: 600
      targetMinReplicas: 1000
      targetMaxReplicas: 2000
    - name: scale-down
      schedule: "0 11 * * *"
      targetMinReplicas: 1
      targetMaxReplicas: 100
---
` + addonResizer0_1_0 + `
---
apiVersion: leaderworkerset.x-k8s.io/v1
kind: LeaderWorkerSet
metadata:
  name: vllm
spec:
  replicas: 1
  leaderWorkerTemplate:
    size: 2
    workerTemplate:
      metadata:
        labels:
          app: vllm
      spec:
        containers:
          - name: vllm
            image: vllm/vllm-openai:v0.11.0
            resources:
              requests:
                cpu: 100m
  scalePolicy:
    minReplicas: 1
    maxReplicas: 4
    metrics:
      - type: Resource
        resource:
          name: cpu
          target:
            type: Utilization
            averageUtilization: 50
    behavior:
      scaleDown:
        stabilizationWindowSeconds: 60
`

const addonResizer0_1_0 = `
apiVersion: autoscaling.scaleplane.io/v1alpha1
kind: AddonResizer
metadata:
  name: metrics-server
spec:
  targetRef:
    kind: Deployment
    name: metrics-server
  containerName: metrics-server
  resources:
    - name: cpu
      base: 40m
      extraPerUnit: 500u
    - name: memory
      base: 40Mi
      extraPerUnit: 4Mi
  scalingMode: NodeProportional
  source: Metrics
  estimator:
    type: Exponential
    minClusterSize: 16
  threshold: 5
  setLimits: false
  updateMode: Rollout
`

// addonResizerNew is the same AddonResizer switched to recommend-only, with
// bounds: fields 0.1.0's schema does not have.
const addonResizerNew = `
apiVersion: autoscaling.scaleplane.io/v1alpha1
kind: AddonResizer
metadata:
  name: metrics-server
spec:
  targetRef:
    kind: Deployment
    name: metrics-server
  containerName: metrics-server
  resources:
    - name: cpu
      base: 40m
      extraPerUnit: 500u
      minAllowed: 50m
      maxAllowed: "2"
    - name: memory
      base: 40Mi
      extraPerUnit: 4Mi
      maxAllowed: 2Gi
  scalingMode: NodeProportional
  source: Metrics
  estimator:
    type: Exponential
    minClusterSize: 16
  threshold: 5
  setLimits: false
  updateMode: "Off"
`

// statuses0_1_0 are statuses as the controllers write them, through the
// status subresource, valid under 0.1.0's schemas. The LeaderWorkerSet's
// observedGeneration is not in 0.1.0's schema: it is pruned.
var statuses0_1_0 = map[schema.GroupVersionResource]string{
	cronGVR: `
executionHistories:
  - ruleName: scale-up
    nextExecutionTime: "2026-11-30T07:30:00Z"
    lastScheduleTime: "2026-11-27T07:30:00Z"
    successfulExecutions:
      - scheduleTime: "2026-11-27T07:30:00Z"
        executionTime: "2026-11-27T07:30:01Z"
        appliedMinReplicas: 1000
        appliedMaxReplicas: 2000
  - ruleName: scale-down
    nextExecutionTime: "2026-11-28T10:00:00Z"
`,
	fhpaGVR: `
currentReplicas: 3
desiredReplicas: 4
lastScaleTime: "2026-11-27T07:31:00Z"
`,
	arGVR: `
observedGeneration: 1
federation: Karmada
memberClusters: 2
sizedClusters: 2
overridePolicy: metrics-server-resizer
clusters:
  - name: member1
    nodes: 24
    resources:
      requests:
        cpu: 58m
        memory: 136Mi
    state: Sized
  - name: member2
    nodes: 3
    resources:
      requests:
        cpu: 48m
        memory: 104Mi
    state: Postponed
conditions:
  - type: UpToDate
    status: "True"
    reason: Sized
    message: every member cluster is held at its recommendation
    lastTransitionTime: "2026-11-27T07:00:00Z"
`,
	lwsGVR: `
replicas: 1
readyReplicas: 1
updatedReplicas: 1
hpaPodSelector: leaderworkerset.sigs.k8s.io/name=vllm,leaderworkerset.sigs.k8s.io/worker-index=0
observedGeneration: 1
`,
}

// arStatusNew uses what 0.1.0's schema lacks: the states Capped,
// NotApplied and Recommended, and a member's recommendation.
const arStatusNew = `
observedGeneration: 2
federation: Karmada
memberClusters: 3
sizedClusters: 1
overridePolicy: metrics-server-resizer
clusters:
  - name: member1
    nodes: 24
    recommendation:
      requests:
        cpu: 58m
        memory: 136Mi
    resources:
      requests:
        cpu: 58m
        memory: 136Mi
    state: Capped
  - name: member2
    nodes: 3
    state: NotApplied
  - name: member3
    nodes: 5
    recommendation:
      requests:
        cpu: 50m
    state: Recommended
conditions:
  - type: UpToDate
    status: "False"
    reason: RecommendationOnly
    message: updateMode is Off
    lastTransitionTime: "2026-11-29T07:00:00Z"
`

// user is a shell with the pinned helm and kubectl first on PATH, the
// control plane's admin kubeconfig as KUBECONFIG, and a Helm home of its
// own, in the namespace of one release.
type user struct {
	t          *testing.T
	cp         *framework.ControlPlane
	env        []string
	dir        string
	ns         string
	values     string
	oldChart   string
	newChart   string
	dyn        dynamic.Interface
	webhookURL string
}

// newUser starts the webhook, writes the values every helm install and
// upgrade of the test is given, and packages the working tree's chart.
func newUser(t *testing.T) *user {
	t.Helper()
	cp := framework.Get(t)
	helm := tool(t, "helm")
	tool(t, "kubectl")
	dir := t.TempDir()
	u := &user{t: t, cp: cp, dir: dir, ns: cp.CreateNamespace(t), dyn: cp.DynamicClient()}
	u.env = append(os.Environ(),
		"PATH="+filepath.Dir(helm)+string(os.PathListSeparator)+os.Getenv("PATH"),
		"KUBECONFIG="+cp.KubeconfigPath(),
		"HOME="+dir, // kubectl's discovery cache
		"HELM_CACHE_HOME="+filepath.Join(dir, "helm"), "HELM_CONFIG_HOME="+filepath.Join(dir, "helm"), "HELM_DATA_HOME="+filepath.Join(dir, "helm"))

	caBundle := u.startWebhook()
	// The chart's own ValidatingWebhookConfiguration, pointed at the
	// process by URL (as on Karmada), with the test's CA. existingSecret
	// keeps the chart from generating a CA of its own, which would replace
	// caBundle; the Secret is never mounted, nothing runs the Deployment.
	values := fmt.Sprintf("webhook:\n  existingSecret: scaleplane-webhook-test-cert\n  caBundle: %s\n  configuration:\n    url: %s\n",
		base64.StdEncoding.EncodeToString(caBundle), u.webhookURL)
	u.values = filepath.Join(dir, "values.yaml")
	if err := os.WriteFile(u.values, []byte(values), 0o644); err != nil {
		t.Fatal(err)
	}

	root, err := framework.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	u.mustRun(nil, "helm", "package", filepath.Join(root, "charts", "scaleplane"), "--version", newVersion,
		"--app-version", "v"+newVersion, "--destination", dir)
	u.newChart = filepath.Join(dir, "scaleplane-"+newVersion+".tgz")
	// Commands run in dir.
	if u.oldChart, err = filepath.Abs(oldChart); err != nil {
		t.Fatal(err)
	}
	// Last registered, first run: the release goes before the webhook
	// process and the namespace. Idempotent: a test may uninstall first.
	t.Cleanup(func() {
		if out, err := u.run(nil, "helm", "uninstall", release, "-n", u.ns, "--ignore-not-found"); err != nil {
			t.Errorf("helm uninstall: %v\n%s", err, out)
		}
	})
	return u
}

func tool(t *testing.T, name string) string {
	t.Helper()
	path, err := framework.Binary(name)
	if err != nil {
		t.Fatal(err)
	}
	return path
}

// startWebhook runs scaleplane-webhook on 127.0.0.1 with a certificate of a
// new CA and returns that CA.
func (u *user) startWebhook() []byte {
	t := u.t
	bin := tool(t, "scaleplane-webhook")
	certs, err := framework.GenerateServingCerts()
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(u.dir, "webhook")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	certFile, keyFile, _, err := certs.WriteFiles(dir, "webhook")
	if err != nil {
		t.Fatal(err)
	}
	port, err := framework.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	p, err := framework.StartProcess(dir, "webhook", bin, []string{
		"--tls-cert-file=" + certFile, "--tls-private-key-file=" + keyFile,
		"--bind-address=127.0.0.1", "--secure-port=" + strconv.Itoa(port),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		p.Stop(5 * time.Second)
		if t.Failed() {
			t.Logf("scaleplane-webhook log:\n%s", p.Tail(50))
		}
	})
	u.webhookURL = "https://127.0.0.1:" + strconv.Itoa(port)
	return certs.CACert
}

// run runs a program of the user's PATH, or a bash command line when name
// is "bash", and returns its combined output.
func (u *user) run(stdin []byte, name string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), commandTimeout)
	defer cancel()
	var cmd *exec.Cmd
	switch name {
	case "bash":
		cmd = exec.CommandContext(ctx, "bash", "-o", "pipefail", "-c", strings.Join(args, " "))
	default:
		// exec.Command looks a name up in the test's PATH, not in the
		// user's: name the pinned binary.
		cmd = exec.CommandContext(ctx, tool(u.t, name), args...)
	}
	cmd.Env = u.env
	cmd.Dir = u.dir
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func (u *user) mustRun(stdin []byte, name string, args ...string) string {
	u.t.Helper()
	out, err := u.run(stdin, name, args...)
	if err != nil {
		u.t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return out
}

// apply is kubectl apply of manifests into the user's namespace, with
// kubectl's defaults (client-side apply, strict field validation).
func (u *user) apply(manifests string, extra ...string) (string, error) {
	return u.run([]byte(manifests), "kubectl", append([]string{"apply", "-n", u.ns, "-f", "-"}, extra...)...)
}

func (u *user) helmInstall(chart string) {
	u.t.Helper()
	u.mustRun(nil, "helm", "install", release, chart, "-n", u.ns, "-f", u.values)
}

func (u *user) helmUpgrade(chart string) {
	u.t.Helper()
	u.mustRun(nil, "helm", "upgrade", release, chart, "-n", u.ns, "-f", u.values)
}

// revision is one line of helm history.
type revision struct {
	Revision    int    `json:"revision"`
	Status      string `json:"status"`
	Chart       string `json:"chart"`
	Description string `json:"description"`
}

// checkDeployed checks that the release's last revision is n, deployed,
// from chart.
func (u *user) checkDeployed(n int, chart string) {
	u.t.Helper()
	var history []revision
	if err := json.Unmarshal([]byte(u.mustRun(nil, "helm", "history", release, "-n", u.ns, "-o", "json")), &history); err != nil {
		u.t.Fatalf("helm history -o json: %v", err)
	}
	if len(history) == 0 {
		u.t.Fatal("helm history is empty")
	}
	last := history[len(history)-1]
	if last.Revision != n || last.Status != "deployed" || last.Chart != chart {
		u.t.Fatalf("the release's last revision is %+v, want revision %d of %s, deployed", last, n, chart)
	}
}

// object decodes one YAML object.
func object(t *testing.T, manifest string) *unstructured.Unstructured {
	t.Helper()
	obj := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(manifest), &obj.Object); err != nil {
		t.Fatalf("decoding %s: %v", manifest, err)
	}
	return obj
}

func (u *user) get(gvr schema.GroupVersionResource, name string) *unstructured.Unstructured {
	u.t.Helper()
	obj, err := u.dyn.Resource(gvr).Namespace(u.ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		u.t.Fatalf("reading %s %s: %v", gvr.Resource, name, err)
	}
	return obj
}

// writeStatus replaces an object's status through its status subresource,
// as a controller does.
func (u *user) writeStatus(gvr schema.GroupVersionResource, name, status string) error {
	obj := u.get(gvr, name)
	var s map[string]any
	if err := yaml.Unmarshal([]byte(status), &s); err != nil {
		u.t.Fatalf("decoding status %s: %v", status, err)
	}
	obj.Object["status"] = s
	_, err := u.dyn.Resource(gvr).Namespace(u.ns).UpdateStatus(context.Background(), obj, metav1.UpdateOptions{})
	return err
}

// stored is what the API server returns of one object.
type stored struct {
	resourceVersion string
	spec, status    string
}

// key names an object for messages.
type key struct {
	gvr  schema.GroupVersionResource
	name string
}

func (k key) String() string { return k.gvr.Resource + "/" + k.name }

var theObjects = []key{
	{fhpaGVR, "nginx-fhpa"},
	{cronGVR, "nginx-fhpa-cronfhpa"},
	{arGVR, "metrics-server"},
	{lwsGVR, "vllm"},
}

// snapshot reads every object of theObjects.
func (u *user) snapshot() map[key]stored {
	u.t.Helper()
	snap := map[key]stored{}
	for _, k := range theObjects {
		obj := u.get(k.gvr, k.name)
		spec, err := json.Marshal(obj.Object["spec"])
		if err != nil {
			u.t.Fatal(err)
		}
		status, err := json.Marshal(obj.Object["status"])
		if err != nil {
			u.t.Fatal(err)
		}
		snap[k] = stored{resourceVersion: obj.GetResourceVersion(), spec: string(spec), status: string(status)}
	}
	return snap
}

// checkUnchanged checks that every object reads as in before: the same
// spec and status, byte for byte, and the same resourceVersion (nothing
// rewrote it).
func (u *user) checkUnchanged(step string, before map[key]stored) {
	u.t.Helper()
	after := u.snapshot()
	for _, k := range theObjects {
		b, a := before[k], after[k]
		if a.spec != b.spec {
			u.t.Errorf("after %s, %s's spec changed:\nbefore: %s\nafter:  %s", step, k, b.spec, a.spec)
		}
		if a.status != b.status {
			u.t.Errorf("after %s, %s's status changed:\nbefore: %s\nafter:  %s", step, k, b.status, a.status)
		}
		if a.resourceVersion != b.resourceVersion {
			u.t.Errorf("after %s, %s was rewritten: resourceVersion %s, was %s", step, k, a.resourceVersion, b.resourceVersion)
		}
	}
}

// createObjects creates one object of each kind with kubectl apply, through
// the webhook, and writes their statuses.
func (u *user) createObjects() {
	u.t.Helper()
	out := u.mustRun([]byte(objects0_1_0), "kubectl", "apply", "-n", u.ns, "-f", "-")
	for _, k := range theObjects {
		if !strings.Contains(out, "/"+k.name+" created") {
			u.t.Errorf("kubectl apply did not create %s:\n%s", k, out)
		}
	}
	for gvr, status := range statuses0_1_0 {
		if err := u.writeStatus(gvr, nameOf(gvr), status); err != nil {
			u.t.Fatalf("writing the status of %s: %v", gvr.Resource, err)
		}
	}
}

func nameOf(gvr schema.GroupVersionResource) string {
	for _, k := range theObjects {
		if k.gvr == gvr {
			return k.name
		}
	}
	panic("no object of " + gvr.String())
}

// webhookCases are, per webhook of the chart, an object it refuses and the
// message it refuses it with. The schema accepts each one (before and after
// the upgrade): only the webhook refuses them.
var webhookCases = []struct {
	webhook, manifest, message string
}{
	{
		webhook: "cronfederatedhpa.validation.scaleplane.io",
		manifest: `
apiVersion: autoscaling.karmada.io/v1alpha1
kind: CronFederatedHPA
metadata: {name: never}
spec:
  scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: web}
  rules: [{name: never, schedule: "0 8 31 2 *", targetReplicas: 1}]
`,
		message: `spec.rules[0].schedule: Invalid value: "0 8 31 2 *": schedule "0 8 31 2 *" never fires`,
	},
	{
		webhook: "addonresizer.validation.scaleplane.io",
		manifest: `
apiVersion: autoscaling.scaleplane.io/v1alpha1
kind: AddonResizer
metadata: {name: nanny}
spec:
  targetRef: {kind: Deployment, name: metrics-server}
  containerName: pod.nanny
  resources: [{name: cpu, base: 40m, extraPerUnit: 500u}]
`,
		message: `spec.containerName: Invalid value: "pod.nanny": must not contain dots`,
	},
	{
		webhook: "leaderworkerset-scalepolicy.validation.scaleplane.io",
		manifest: `
apiVersion: leaderworkerset.x-k8s.io/v1
kind: LeaderWorkerSet
metadata: {name: slow}
spec:
  leaderWorkerTemplate:
    workerTemplate:
      spec:
        containers: [{name: server, image: registry.k8s.io/pause:3.10}]
  scalePolicy:
    maxReplicas: 4
    metrics: [{type: Resource, resource: {name: cpu, target: {type: Utilization, averageUtilization: 50}}}]
    behavior: {scaleDown: {stabilizationWindowSeconds: 7200}}
`,
		message: "spec.scalePolicy.behavior.scaleDown.stabilizationWindowSeconds: Invalid value: 7200: must be between 0 and 3600 seconds",
	},
}

// checkWebhook waits until each of the chart's webhooks refuses its invalid
// object with its message (the configuration the last helm command wrote
// may take a moment to reach the API server's admission chain).
func (u *user) checkWebhook(step string) {
	u.t.Helper()
	for _, c := range webhookCases {
		obj := object(u.t, c.manifest)
		gvr := map[string]schema.GroupVersionResource{"CronFederatedHPA": cronGVR, "AddonResizer": arGVR, "LeaderWorkerSet": lwsGVR}[obj.GetKind()]
		want := fmt.Sprintf("admission webhook %q denied the request: %s", c.webhook, c.message)
		framework.WaitObject(u.t, waitTimeout, step+": the webhook "+c.webhook,
			func(ctx context.Context) (error, error) {
				_, err := u.dyn.Resource(gvr).Namespace(u.ns).Create(ctx, obj.DeepCopy(), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
				return err, nil
			},
			func(err, _ error) string {
				if err == nil || !strings.Contains(err.Error(), want) || !apierrors.IsForbidden(err) {
					return fmt.Sprintf("creating %s %s: %v, want a Forbidden error with %q", obj.GetKind(), obj.GetName(), err, want)
				}
				return ""
			})
	}
}

// crd reads a CustomResourceDefinition.
func (u *user) crd(name string) *unstructured.Unstructured {
	u.t.Helper()
	crd, err := u.dyn.Resource(framework.CRDResource).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		u.t.Fatalf("reading CRD %s: %v", name, err)
	}
	return crd
}

// crdVersions returns every CRD's resourceVersion.
func (u *user) crdVersions() map[string]string {
	u.t.Helper()
	rv := map[string]string{}
	for _, name := range crdNames {
		rv[name] = u.crd(name).GetResourceVersion()
	}
	return rv
}

// schemaAt returns the schema of a field of the CRD's only version: path
// names properties, "[]" steps into a list's items.
func schemaAt(crd *unstructured.Unstructured, path ...string) map[string]any {
	versions, _, _ := unstructured.NestedSlice(crd.Object, "spec", "versions")
	if len(versions) != 1 {
		return nil
	}
	s, _, _ := unstructured.NestedMap(versions[0].(map[string]any), "schema", "openAPIV3Schema")
	for _, p := range path {
		var next map[string]any
		if p == "[]" {
			next, _ = s["items"].(map[string]any)
		} else {
			props, _ := s["properties"].(map[string]any)
			next, _ = props[p].(map[string]any)
		}
		if next == nil {
			return nil
		}
		s = next
	}
	return s
}

func enum(s map[string]any) []string {
	var values []string
	list, _ := s["enum"].([]any)
	for _, v := range list {
		values = append(values, fmt.Sprint(v))
	}
	return values
}

// schemaIs says which schemas the CRDs hold: "0.1.0" or "new", from the
// fields that tell them apart, or what is mixed.
func (u *user) schemaIs() string {
	u.t.Helper()
	ar, lws := u.crd(crdNames[0]), u.crd(crdNames[3])
	has := map[string]bool{
		"updateMode Off":                     slices.Contains(enum(schemaAt(ar, "spec", "updateMode")), "Off"),
		"resources[].minAllowed":             schemaAt(ar, "spec", "resources", "[]", "minAllowed") != nil,
		"resources[].maxAllowed":             schemaAt(ar, "spec", "resources", "[]", "maxAllowed") != nil,
		"clusters[].state Capped":            slices.Contains(enum(schemaAt(ar, "status", "clusters", "[]", "state")), "Capped"),
		"clusters[].state NotApplied":        slices.Contains(enum(schemaAt(ar, "status", "clusters", "[]", "state")), "NotApplied"),
		"clusters[].state Recommended":       slices.Contains(enum(schemaAt(ar, "status", "clusters", "[]", "state")), "Recommended"),
		"clusters[].recommendation":          schemaAt(ar, "status", "clusters", "[]", "recommendation") != nil,
		"LeaderWorkerSet observedGeneration": schemaAt(lws, "status", "observedGeneration") != nil,
	}
	var with, without []string
	for field, ok := range has {
		if ok {
			with = append(with, field)
		} else {
			without = append(without, field)
		}
	}
	switch {
	case len(with) == 0:
		return "0.1.0"
	case len(without) == 0:
		return "new"
	}
	slices.Sort(with)
	slices.Sort(without)
	return fmt.Sprintf("mixed: with %v, without %v", with, without)
}

// header returns the columns kubectl get addonresizers shows.
func (u *user) header(args ...string) []string {
	u.t.Helper()
	out := u.mustRun(nil, "kubectl", append([]string{"get", "addonresizers", "-n", u.ns}, args...)...)
	first, _, _ := strings.Cut(out, "\n")
	return strings.Fields(first)
}

// managers returns the field managers of an object, as manager/operation.
func managers(obj *unstructured.Unstructured) []string {
	var m []string
	for _, e := range obj.GetManagedFields() {
		m = append(m, e.Manager+"/"+string(e.Operation))
	}
	slices.Sort(m)
	return m
}

// waitServed waits until the API server serves an AddonResizer with the new
// fields (a CRD update reaches its handler a moment after the write), and
// returns how many tries it took.
func (u *user) waitServed() int {
	u.t.Helper()
	obj := object(u.t, addonResizerNew)
	obj.SetName("served")
	tries := 0
	framework.WaitObject(u.t, waitTimeout, "an AddonResizer with the new fields, strictly validated",
		func(ctx context.Context) (error, error) {
			tries++
			_, err := u.dyn.Resource(arGVR).Namespace(u.ns).Create(ctx, obj.DeepCopy(),
				metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}, FieldValidation: "Strict"})
			return err, nil
		},
		func(err, _ error) string {
			if err != nil {
				return err.Error()
			}
			return ""
		})
	return tries
}

// TestUpgradeFrom0_1_0 follows docs/upgrading.md from the 0.1.0 chart to
// the working tree's: the CRDs first, then helm upgrade; then back with
// helm rollback.
func TestUpgradeFrom0_1_0(t *testing.T) {
	removeCRDs(t)
	u := newUser(t)

	// 0.1.0, as installed by its users.
	u.helmInstall(u.oldChart)
	u.checkDeployed(1, "scaleplane-0.1.0")
	if got := u.schemaIs(); got != "0.1.0" {
		t.Fatalf("after helm install of %s the CRDs are %s, want 0.1.0's", oldChart, got)
	}
	// helm install creates crds/ as the field manager helm, by an update:
	// a server-side apply by another manager that changes a field helm
	// set conflicts (TestHelmUpgradeWithoutCRDStep shows it).
	if m := managers(u.crd(crdNames[0])); !slices.Contains(m, "helm/Update") {
		t.Errorf("after helm install the AddonResizer CRD's field managers are %v, want helm/Update among them", m)
	}
	u.checkWebhook("0.1.0 installed")
	u.createObjects()
	if _, found, _ := unstructured.NestedFieldNoCopy(u.get(lwsGVR, "vllm").Object, "status", "observedGeneration"); found {
		t.Errorf("0.1.0's LeaderWorkerSet schema kept status.observedGeneration: the test's premise is wrong")
	}
	before := u.snapshot()
	if h := u.header(); slices.Contains(h, "UPDATE-MODE") {
		t.Errorf("kubectl get addonresizers under 0.1.0's CRD shows %v: UPDATE-MODE was a wide column then", h)
	}

	// The upgrade, as documented.
	crdsBefore := u.crdVersions()
	out := u.mustRun(nil, "bash", fmt.Sprintf(crdStep, u.newChart))
	t.Logf("%s:\n%s", fmt.Sprintf(crdStep, "scaleplane-"+newVersion+".tgz"), out)
	for _, name := range crdNames {
		if !strings.Contains(out, "customresourcedefinition.apiextensions.k8s.io/"+name+" serverside-applied") {
			t.Errorf("the CRD step did not apply %s:\n%s", name, out)
		}
	}
	if got := u.schemaIs(); got != "new" {
		t.Fatalf("after the CRD step the CRDs are %s, want the new ones", got)
	}
	if m := managers(u.crd(crdNames[0])); !slices.Contains(m, "kubectl/Apply") {
		t.Errorf("after the CRD step the AddonResizer CRD's field managers are %v, want kubectl/Apply among them", m)
	}
	if tries := u.waitServed(); tries > 1 {
		t.Logf("the new AddonResizer schema was served after %d tries", tries)
	}
	u.helmUpgrade(u.newChart)
	u.checkDeployed(2, "scaleplane-"+newVersion)
	crdsAfter := u.crdVersions()
	for _, name := range []string{crdNames[0], crdNames[3]} {
		if crdsAfter[name] == crdsBefore[name] {
			t.Errorf("the CRD step left %s as it was", name)
		}
	}

	t.Run("nothing lost", func(t *testing.T) {
		u := u.in(t)
		u.checkUnchanged("the CRD step and helm upgrade", before)
	})

	t.Run("webhook", func(t *testing.T) { u.in(t).checkWebhook("upgraded") })

	t.Run("columns", func(t *testing.T) {
		u := u.in(t)
		if h := u.header(); !slices.Contains(h, "UPDATE-MODE") {
			t.Errorf("kubectl get addonresizers shows %v, want UPDATE-MODE", h)
		}
		if h := u.header("-o", "wide"); !slices.Contains(h, "CPU") || !slices.Contains(h, "MEM") {
			t.Errorf("kubectl get addonresizers -o wide shows %v, want CPU and MEM", h)
		}
	})

	t.Run("new fields served", func(t *testing.T) {
		u := u.in(t)
		// The existing AddonResizer, switched to recommend-only with
		// bounds, and a new one, both by kubectl apply (strict validation).
		u.mustRun([]byte(addonResizerNew), "kubectl", "apply", "-n", u.ns, "-f", "-")
		fresh := strings.Replace(addonResizerNew, "name: metrics-server\nspec", "name: recommend-only\nspec", 1)
		u.mustRun([]byte(fresh), "kubectl", "apply", "-n", u.ns, "-f", "-")
		for _, name := range []string{"metrics-server", "recommend-only"} {
			u.checkNewSpec(name)
		}
		// The new schema's rule between the bounds.
		bad := strings.Replace(fresh, `maxAllowed: "2"`, "maxAllowed: 10m", 1)
		out, err := u.apply(bad, "--dry-run=server")
		if err == nil || !strings.Contains(out, "maxAllowed must be greater than or equal to minAllowed") {
			t.Errorf("an AddonResizer with maxAllowed < minAllowed: %v\n%s", err, out)
		}
		// Statuses with what 0.1.0 lacked.
		if err := u.writeStatus(arGVR, "metrics-server", arStatusNew); err != nil {
			t.Fatalf("writing a status with the states Capped, NotApplied and Recommended: %v", err)
		}
		u.checkStatus(arGVR, "metrics-server", arStatusNew)
		if err := u.writeStatus(lwsGVR, "vllm", statuses0_1_0[lwsGVR]); err != nil {
			t.Fatal(err)
		}
		u.checkStatus(lwsGVR, "vllm", statuses0_1_0[lwsGVR])
	})
	if t.Failed() {
		return
	}

	t.Run("rollback", func(t *testing.T) {
		u := u.in(t)
		out := u.mustRun(nil, "bash", findOff)
		if want := u.ns + "/metrics-server\n" + u.ns + "/recommend-only\n"; out != want {
			t.Errorf("%s printed %q, want %q", findOff, out, want)
		}
		before := u.snapshot()
		crds := u.crdVersions()
		u.mustRun(nil, "helm", "rollback", release, "1", "-n", u.ns)
		u.checkDeployed(3, "scaleplane-0.1.0")
		// Helm never touches crds/: not on upgrade, not on rollback.
		if got := u.crdVersions(); !equalMaps(got, crds) {
			t.Errorf("helm rollback changed CRDs: resourceVersions %v, were %v", got, crds)
		}
		if got := u.schemaIs(); got != "new" {
			t.Errorf("after helm rollback the CRDs are %s, want still the new ones", got)
		}
		u.checkUnchanged("helm rollback", before)
		u.checkNewSpec("metrics-server")
		u.checkWebhook("rolled back")

		// What 0.1.0's controller manager writes, emulated: it decodes
		// into its own types, so whatever they lack is left out of what
		// it sends. The resizer writes an AddonResizer's status only
		// (UpdateStatus): the spec's new fields stay; the status fields
		// 0.1.0 does not know are dropped until a newer resizer writes
		// them again.
		ar := u.get(arGVR, "metrics-server")
		clusters, _, _ := unstructured.NestedSlice(ar.Object, "status", "clusters")
		for _, c := range clusters {
			m := c.(map[string]any)
			delete(m, "recommendation")
			if m["state"] != "Sized" {
				m["state"] = "Unknown"
			}
		}
		if err := unstructured.SetNestedSlice(ar.Object, clusters, "status", "clusters"); err != nil {
			t.Fatal(err)
		}
		if _, err := u.dyn.Resource(arGVR).Namespace(u.ns).UpdateStatus(context.Background(), ar, metav1.UpdateOptions{}); err != nil {
			t.Fatalf("a status write of 0.1.0's shape: %v", err)
		}
		u.checkNewSpec("metrics-server")
		ar = u.get(arGVR, "metrics-server")
		clusters, _, _ = unstructured.NestedSlice(ar.Object, "status", "clusters")
		for _, c := range clusters {
			if _, ok := c.(map[string]any)["recommendation"]; ok {
				t.Errorf("a status write without clusters[].recommendation kept it: %v", c)
			}
		}
		// The cron-scaler Updates a whole LeaderWorkerSet to set its
		// scalePolicy bounds; 0.1.0's type lacks status.observedGeneration,
		// but an update of the object ignores its status.
		lws := u.get(lwsGVR, "vllm")
		unstructured.RemoveNestedField(lws.Object, "status", "observedGeneration")
		if err := unstructured.SetNestedField(lws.Object, int64(2), "spec", "scalePolicy", "minReplicas"); err != nil {
			t.Fatal(err)
		}
		if _, err := u.dyn.Resource(lwsGVR).Namespace(u.ns).Update(context.Background(), lws, metav1.UpdateOptions{}); err != nil {
			t.Fatalf("an update of the LeaderWorkerSet of 0.1.0's shape: %v", err)
		}
		if g, _, _ := unstructured.NestedInt64(u.get(lwsGVR, "vllm").Object, "status", "observedGeneration"); g != 1 {
			t.Errorf("after an update of the LeaderWorkerSet without it, status.observedGeneration is %d, want 1", g)
		}
	})

	t.Run("uninstall keeps CRDs and objects", func(t *testing.T) {
		u := u.in(t)
		u.mustRun(nil, "helm", "uninstall", release, "-n", u.ns)
		u.crdVersions() // fails if one is gone
		for _, k := range theObjects {
			u.get(k.gvr, k.name)
		}
		u.get(arGVR, "recommend-only")
	})
}

// TestHelmUpgradeWithoutCRDStep shows what docs/upgrading.md says happens
// when helm upgrade runs alone, and the way back.
func TestHelmUpgradeWithoutCRDStep(t *testing.T) {
	removeCRDs(t)
	u := newUser(t)
	u.helmInstall(u.oldChart)
	u.checkWebhook("0.1.0 installed")
	u.createObjects()
	crds := u.crdVersions()

	u.helmUpgrade(u.newChart)
	u.checkDeployed(2, "scaleplane-"+newVersion)
	if got := u.crdVersions(); !equalMaps(got, crds) {
		t.Errorf("helm upgrade changed CRDs: resourceVersions %v, were %v", got, crds)
	}
	if got := u.schemaIs(); got != "0.1.0" {
		t.Fatalf("after helm upgrade alone the CRDs are %s, want still 0.1.0's", got)
	}

	// kubectl validates strictly: unknown fields are refused.
	withBounds := strings.Replace(addonResizerNew, `updateMode: "Off"`, "updateMode: Rollout", 1)
	out, err := u.apply(withBounds)
	for _, field := range []string{"spec.resources[0].minAllowed", "spec.resources[0].maxAllowed", "spec.resources[1].maxAllowed"} {
		if err == nil || !strings.Contains(out, fmt.Sprintf("unknown field %q", field)) {
			t.Errorf("kubectl apply of an AddonResizer with %s under 0.1.0's CRD: %v, want refused as an unknown field:\n%s", field, err, out)
		}
	}
	// Without strict validation (kubectl --validate=warn, and client-go's
	// default) they are pruned, with a warning.
	out, err = u.apply(withBounds, "--validate=warn")
	if err != nil || !strings.Contains(out, `unknown field "spec.resources[0].minAllowed"`) {
		t.Errorf("kubectl apply --validate=warn of an AddonResizer with bounds: %v, want accepted with a warning:\n%s", err, out)
	}
	resources, _, _ := unstructured.NestedSlice(u.get(arGVR, "metrics-server").Object, "spec", "resources")
	for _, r := range resources {
		for _, field := range []string{"minAllowed", "maxAllowed"} {
			if v, ok := r.(map[string]any)[field]; ok {
				t.Errorf("0.1.0's CRD kept spec.resources[].%s = %v", field, v)
			}
		}
	}
	// A new enum value is refused, not pruned.
	out, err = u.apply(addonResizerNew, "--validate=warn")
	if err == nil || !strings.Contains(out, `spec.updateMode: Unsupported value: "Off"`) {
		t.Errorf("updateMode Off under 0.1.0's CRD: %v, want refused:\n%s", err, out)
	}
	// The new resizer's status: a new state is refused (the whole write),
	// a member's recommendation pruned.
	err = u.writeStatus(arGVR, "metrics-server", arStatusNew)
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), `status.clusters[0].state: Unsupported value: "Capped"`) {
		t.Errorf("a status with state Capped under 0.1.0's CRD: %v, want Invalid", err)
	}
	sized := strings.ReplaceAll(strings.ReplaceAll(strings.ReplaceAll(arStatusNew, "Capped", "Sized"), "NotApplied", "Unknown"), "Recommended", "Sized")
	if err := u.writeStatus(arGVR, "metrics-server", sized); err != nil {
		t.Fatal(err)
	}
	clusters, _, _ := unstructured.NestedSlice(u.get(arGVR, "metrics-server").Object, "status", "clusters")
	for _, c := range clusters {
		if v, ok := c.(map[string]any)["recommendation"]; ok {
			t.Errorf("0.1.0's CRD kept status.clusters[].recommendation = %v", v)
		}
	}
	// The LeaderWorkerSet's status.observedGeneration is pruned.
	if err := u.writeStatus(lwsGVR, "vllm", statuses0_1_0[lwsGVR]); err != nil {
		t.Fatal(err)
	}
	if g, found, _ := unstructured.NestedFieldNoCopy(u.get(lwsGVR, "vllm").Object, "status", "observedGeneration"); found {
		t.Errorf("0.1.0's CRD kept the LeaderWorkerSet's status.observedGeneration = %v", g)
	}

	// The way back: the CRD step after the fact. Without
	// --force-conflicts the changed CRDs are refused: helm install owns
	// their fields.
	out, err = u.run(nil, "bash", fmt.Sprintf(crdStepNoForce, u.newChart))
	t.Logf("%s: %v\n%s", fmt.Sprintf(crdStepNoForce, "scaleplane-"+newVersion+".tgz"), err, out)
	conflict := `Apply failed with 1 conflict: conflict with "helm" using apiextensions.k8s.io/v1: .spec.versions`
	if err == nil || strings.Count(out, conflict) != 2 {
		t.Errorf("the CRD step without --force-conflicts: %v, want two CRDs (those that changed) refused with %q:\n%s", err, conflict, out)
	}
	for _, name := range crdNames {
		applied := strings.Contains(out, "customresourcedefinition.apiextensions.k8s.io/"+name+" serverside-applied")
		if changed := name == crdNames[0] || name == crdNames[3]; applied == changed {
			t.Errorf("the CRD step without --force-conflicts applied %s: %v, want %v (it changed: %v)", name, applied, !changed, changed)
		}
	}
	if got := u.schemaIs(); got != "0.1.0" {
		t.Errorf("after the CRD step without --force-conflicts the CRDs are %s, want still 0.1.0's", got)
	}
	u.mustRun(nil, "bash", fmt.Sprintf(crdStep, u.newChart))
	if got := u.schemaIs(); got != "new" {
		t.Fatalf("after the CRD step the CRDs are %s, want the new ones", got)
	}
	u.waitServed()
	// What was pruned is gone: the bounds must be applied again.
	resources, _, _ = unstructured.NestedSlice(u.get(arGVR, "metrics-server").Object, "spec", "resources")
	if _, ok := resources[0].(map[string]any)["minAllowed"]; ok {
		t.Errorf("a pruned minAllowed came back with the new CRD")
	}
	u.mustRun([]byte(addonResizerNew), "kubectl", "apply", "-n", u.ns, "-f", "-")
	u.checkNewSpec("metrics-server")
}

// TestKarmadaCRDStep: on Karmada the chart is installed with --skip-crds in
// the host cluster; karmada-apiserver holds Karmada's own CronFederatedHPA
// and FederatedHPA CRDs and, applied by the user, scaleplane's AddonResizer
// and LeaderWorkerSet CRDs. The CRD step upgrades those two, and nothing
// else.
func TestKarmadaCRDStep(t *testing.T) {
	removeCRDs(t)
	u := newUser(t)
	u.mustRun(nil, "bash", fmt.Sprintf(karmadaInstall0_1_0, u.oldChart))
	if got := u.schemaIs(); got != "0.1.0" {
		t.Fatalf("0.1.0's CRDs as installed on karmada-apiserver are %s", got)
	}
	u.mustRun([]byte(addonResizer0_1_0), "kubectl", "apply", "-n", u.ns, "-f", "-")
	before := u.get(arGVR, "metrics-server")

	// Nothing of 0.1.0's chart left where the new one is unpacked.
	if err := os.RemoveAll(filepath.Join(u.dir, "scaleplane")); err != nil {
		t.Fatal(err)
	}
	out := u.mustRun(nil, "bash", fmt.Sprintf(karmadaCRDStep, u.newChart))
	for _, name := range []string{crdNames[0], crdNames[3]} {
		if !strings.Contains(out, "customresourcedefinition.apiextensions.k8s.io/"+name+" serverside-applied") {
			t.Errorf("the Karmada CRD step did not apply %s:\n%s", name, out)
		}
	}
	if got := u.schemaIs(); got != "new" {
		t.Fatalf("after the Karmada CRD step the CRDs are %s, want the new ones", got)
	}
	for _, name := range []string{crdNames[1], crdNames[2]} {
		if _, err := u.dyn.Resource(framework.CRDResource).Get(context.Background(), name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("the Karmada CRD step touched %s (Karmada's): %v", name, err)
		}
	}
	if after := u.get(arGVR, "metrics-server"); after.GetResourceVersion() != before.GetResourceVersion() {
		t.Errorf("the Karmada CRD step rewrote an AddonResizer")
	}
	u.waitServed()
	u.mustRun([]byte(addonResizerNew), "kubectl", "apply", "-n", u.ns, "-f", "-")
	u.checkNewSpec("metrics-server")
}

// TestCRDsInTemplatesAlternative checks one reason docs/upgrading.md gives
// against moving the CRDs to the chart's templates/: an install of 0.1.0
// cannot be upgraded to such a chart.
func TestCRDsInTemplatesAlternative(t *testing.T) {
	removeCRDs(t)
	u := newUser(t)
	root, err := framework.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	variant := filepath.Join(u.dir, "variant", "scaleplane")
	if err := os.CopyFS(variant, os.DirFS(filepath.Join(root, "charts", "scaleplane"))); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(variant, "crds"), filepath.Join(variant, "templates", "crds")); err != nil {
		t.Fatal(err)
	}

	u.helmInstall(u.oldChart)
	out, err := u.run(nil, "helm", "upgrade", release, variant, "-n", u.ns, "-f", u.values)
	want := `in namespace "" exists and cannot be imported into the current release: invalid ownership metadata`
	if err == nil || !strings.Contains(out, want) {
		t.Errorf("helm upgrade of a 0.1.0 install to a chart with its CRDs in templates/: %v, want %q:\n%s", err, want, out)
	}

}

// in returns the user for a subtest.
func (u *user) in(t *testing.T) *user {
	c := *u
	c.t = t
	return &c
}

// checkNewSpec checks that an AddonResizer reads back with addonResizerNew's
// new fields, unpruned.
func (u *user) checkNewSpec(name string) {
	u.t.Helper()
	obj := u.get(arGVR, name)
	want := object(u.t, addonResizerNew)
	for _, path := range [][]string{{"spec", "updateMode"}, {"spec", "resources"}} {
		got, _, _ := unstructured.NestedFieldNoCopy(obj.Object, path...)
		w, _, _ := unstructured.NestedFieldNoCopy(want.Object, path...)
		if !equalJSON(got, w) {
			u.t.Errorf("AddonResizer %s's %s reads %s, want %s", name, strings.Join(path, "."), mustJSON(got), mustJSON(w))
		}
	}
}

// checkStatus checks that an object's status reads as written.
func (u *user) checkStatus(gvr schema.GroupVersionResource, name, status string) {
	u.t.Helper()
	var want map[string]any
	if err := yaml.Unmarshal([]byte(status), &want); err != nil {
		u.t.Fatal(err)
	}
	got := u.get(gvr, name).Object["status"]
	if !equalJSON(got, want) {
		u.t.Errorf("%s %s's status reads %s, want %s", gvr.Resource, name, mustJSON(got), mustJSON(want))
	}
}

func mustJSON(v any) string {
	data, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprintf("<%v>", err)
	}
	return string(data)
}

// equalJSON compares two decoded objects by their JSON (numbers decoded from
// YAML and from the API server differ in Go type).
func equalJSON(a, b any) bool {
	var x, y any
	_ = json.Unmarshal([]byte(mustJSON(a)), &x)
	_ = json.Unmarshal([]byte(mustJSON(b)), &y)
	return mustJSON(x) == mustJSON(y)
}

func equalMaps(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// removeCRDs deletes the chart's CRDs (and with them every object of their
// kinds) left by an earlier test, so that helm install installs 0.1.0's.
//
// Each kind's watch cache must be ready first: a CRD deleted while it
// initializes (the first request for a kind, or any after a change of its
// CRD, starts it) is held by its finalizer, which cannot list the objects
// ("storage is (re)initializing"), for minutes.
func removeCRDs(t *testing.T) {
	t.Helper()
	cp := framework.Get(t)
	client := cp.DynamicClient().Resource(framework.CRDResource)
	for _, name := range crdNames {
		crd, err := client.Get(context.Background(), name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			t.Fatalf("reading CRD %s: %v", name, err)
		}
		group, _, _ := unstructured.NestedString(crd.Object, "spec", "group")
		plural, _, _ := unstructured.NestedString(crd.Object, "spec", "names", "plural")
		versions, _, _ := unstructured.NestedSlice(crd.Object, "spec", "versions")
		for _, v := range versions {
			version, _ := v.(map[string]any)["name"].(string)
			gvr := schema.GroupVersionResource{Group: group, Version: version, Resource: plural}
			// resourceVersion 0: served by the watch cache, refused while
			// it initializes.
			framework.WaitObject(t, waitTimeout, "the watch cache of "+gvr.String(),
				func(ctx context.Context) (error, error) {
					_, err := cp.DynamicClient().Resource(gvr).List(ctx, metav1.ListOptions{ResourceVersion: "0", Limit: 1})
					return err, nil
				},
				func(err, _ error) string {
					if err != nil {
						return err.Error()
					}
					return ""
				})
		}
		if err := client.Delete(context.Background(), name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			t.Fatalf("deleting CRD %s: %v", name, err)
		}
	}
	framework.WaitObject(t, 60*time.Second, "removing the CRDs of an earlier test",
		func(context.Context) ([]string, error) {
			var left []string
			for _, name := range crdNames {
				// Not the poll's context: its last read would fail
				// with its deadline instead of saying what is left.
				crd, err := client.Get(context.Background(), name, metav1.GetOptions{})
				if err == nil {
					conditions, _, _ := unstructured.NestedSlice(crd.Object, "status", "conditions")
					left = append(left, fmt.Sprintf("%s (conditions %v)", name, conditions))
				} else if !apierrors.IsNotFound(err) {
					return nil, err
				}
			}
			return left, nil
		},
		func(left []string, err error) string {
			switch {
			case err != nil:
				return err.Error()
			case len(left) > 0:
				return fmt.Sprintf("still there: %v", left)
			}
			return ""
		})
}
