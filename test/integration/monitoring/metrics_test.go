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

package monitoring

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	autoscalingv1alpha1 "github.com/scaleplane/scaleplane/pkg/apis/autoscaling/v1alpha1"
	lwsv1 "github.com/scaleplane/scaleplane/pkg/apis/leaderworkerset/v1"
	scaleplanev1alpha1 "github.com/scaleplane/scaleplane/pkg/apis/scaleplane/v1alpha1"
	"github.com/scaleplane/scaleplane/test/integration/framework"
)

// webhookMetrics are the metrics the webhook exports; every other metric
// the rules and dashboards query comes from the controller manager.
var webhookMetrics = regexp.MustCompile(`^scaleplane_webhook_`)

// TestEveryQueriedMetricIsExported collects the metric names of every
// expression in the chart's rules and dashboards, makes a manager and a
// webhook export them (a slot fires, another controller writes a
// CronFederatedHPA's status, the hpa-generator meets an HPA it does not own,
// AddonResizers sync, an admission request is answered), and fails on any
// name missing from their /metrics: an alert on a name nothing exports never
// fires.
func TestEveryQueriedMetricIsExported(t *testing.T) {
	queried := queriedMetrics(t)
	if len(queried) < 15 {
		t.Fatalf("found only %d metric names in the rules and dashboards: %v", len(queried), queried)
	}
	cp := framework.Get(t)
	ns := cp.CreateNamespace(t)
	ctx := context.Background()
	m := framework.StartManager(t, cp.KubeconfigPath(), "*",
		"--leader-elect=true", "--leader-elect-resource-namespace="+ns)
	exerciseManager(ctx, t, cp, ns)
	webhookBody := scrapeWebhook(t)

	var missing []string
	var managerBody string
	err := wait.PollUntilContextTimeout(ctx, time.Second, 90*time.Second, true, func(ctx context.Context) (bool, error) {
		var err error
		managerBody, err = scrape(&http.Client{}, "http://127.0.0.1:"+strconv.Itoa(m.Port)+"/metrics")
		if err != nil {
			return false, nil
		}
		missing = missing[:0]
		for _, name := range queried {
			body := managerBody
			if webhookMetrics.MatchString(name) {
				body = webhookBody
			}
			if !exports(body, name) {
				missing = append(missing, name)
			}
		}
		return len(missing) == 0, nil
	})
	if err != nil {
		t.Fatalf("metrics queried by charts/scaleplane/files but not exported: %v", missing)
	}
	// The slot exerciseManager fired reached its Deployment: counted by
	// kind and outcome, its write's lag observed (the rule fires every
	// minute: once or more), and no series names the object.
	for _, want := range []*regexp.Regexp{
		regexp.MustCompile(`(?m)^cron_scaler_target_firings_total\{kind="Deployment",outcome="applied"\} [1-9]`),
		regexp.MustCompile(`(?m)^cron_scaler_target_write_lag_seconds_count\{kind="Deployment"\} [1-9]`),
	} {
		if !want.MatchString(managerBody) {
			t.Errorf("the manager's /metrics has no line matching %s after a firing on a Deployment", want)
		}
	}
	for _, line := range strings.Split(managerBody, "\n") {
		if strings.HasPrefix(line, "cron_scaler_") && strings.Contains(line, `"web"`) {
			t.Errorf("a cron-scaler series names an object: %s", line)
		}
	}
	// The webhook was sent one AddonResizer: the kinds it was sent nothing
	// of are exported all the same, at zero, for its alert's rate().
	for _, kind := range []string{"CronFederatedHPA", "LeaderWorkerSet"} {
		if want := `scaleplane_webhook_admission_requests_total{kind="` + kind + `",verdict="error"} 0`; !strings.Contains(webhookBody, "\n"+want+"\n") {
			t.Errorf("the webhook's /metrics has no line %s", want)
		}
	}
}

// queriedMetrics returns the metric names in the rules' expressions and the
// dashboards' targets.
func queriedMetrics(t *testing.T) []string {
	t.Helper()
	root, err := framework.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	files := filepath.Join(root, "charts", "scaleplane", "files")
	var exprs []string
	data, err := os.ReadFile(filepath.Join(files, "prometheus-rules.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var rules struct {
		Groups []struct {
			Rules []struct {
				Expr string `json:"expr"`
			} `json:"rules"`
		} `json:"groups"`
	}
	if err := yaml.Unmarshal(data, &rules); err != nil {
		t.Fatal(err)
	}
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			exprs = append(exprs, r.Expr)
		}
	}
	dashboards, err := filepath.Glob(filepath.Join(files, "dashboards", "*.json"))
	if err != nil || len(dashboards) == 0 {
		t.Fatalf("no dashboards: %v", err)
	}
	for _, file := range dashboards {
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		var d struct {
			Panels []struct {
				Targets []struct {
					Expr string `json:"expr"`
				} `json:"targets"`
			} `json:"panels"`
		}
		if err := json.Unmarshal(data, &d); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		for _, p := range d.Panels {
			for _, target := range p.Targets {
				exprs = append(exprs, target.Expr)
			}
		}
	}
	names := map[string]bool{}
	for _, e := range exprs {
		for _, n := range metricNames(e) {
			names[n] = true
		}
	}
	var out []string
	for n := range names {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

var (
	quoted      = regexp.MustCompile(`"[^"]*"`)
	matchers    = regexp.MustCompile(`\{[^}]*\}`)
	ranges      = regexp.MustCompile(`\[[^\]]*\]`)
	grouping    = regexp.MustCompile(`\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)`)
	identifiers = regexp.MustCompile(`[a-zA-Z_:][a-zA-Z0-9_:]*`)
	// promqlWords are the functions, aggregations and keywords the
	// expressions use; every other identifier is a metric name.
	promqlWords = map[string]bool{
		"sum": true, "max": true, "min": true, "avg": true, "count": true, "rate": true, "increase": true,
		"histogram_quantile": true, "absent": true, "and": true, "or": true, "unless": true, "offset": true,
		"bool": true, "irate": true, "delta": true, "topk": true, "bottomk": true, "clamp_min": true, "clamp_max": true,
	}
)

// metricNames returns the metric names in a PromQL expression: what is left
// after strings, label matchers, ranges and groupings are cut out, minus
// functions and keywords.
func metricNames(expr string) []string {
	e := quoted.ReplaceAllString(expr, "")
	e = matchers.ReplaceAllString(e, " ")
	e = ranges.ReplaceAllString(e, " ")
	e = grouping.ReplaceAllString(e, " ")
	var out []string
	for _, id := range identifiers.FindAllString(e, -1) {
		if promqlWords[id] {
			continue
		}
		if _, err := strconv.ParseFloat(id, 64); err == nil {
			continue
		}
		out = append(out, id)
	}
	return out
}

func TestMetricNames(t *testing.T) {
	got := metricNames(`histogram_quantile(0.99, sum by (le, kind) (rate(scaleplane_webhook_admission_duration_seconds_bucket{verdict=~"a|b"}[5m]))) > 1`)
	if len(got) != 1 || got[0] != "scaleplane_webhook_admission_duration_seconds_bucket" {
		t.Errorf("metricNames = %v", got)
	}
	got = metricNames(`absent(leader_election_master_status{name="x"} == 1)`)
	if len(got) != 1 || got[0] != "leader_election_master_status" {
		t.Errorf("metricNames = %v", got)
	}
}

// exports tells whether the exposition body has a sample of name.
func exports(body, name string) bool {
	for _, line := range strings.Split(body, "\n") {
		if strings.HasPrefix(line, name+"{") || strings.HasPrefix(line, name+" ") {
			return true
		}
	}
	return false
}

func scrape(client *http.Client, url string) (string, error) {
	resp, err := client.Get(url)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("%s: %s", url, resp.Status)
	}
	return string(body), err
}

// exerciseManager creates what makes each controller export its labelled
// series.
func exerciseManager(ctx context.Context, t *testing.T, cp *framework.ControlPlane, ns string) {
	t.Helper()
	kube, client := cp.KubeClient(), cp.Client()
	labels := map[string]string{"app": "web"}
	deployment := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](1),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "nginx",
					Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("16Mi")}}}}},
			},
		},
	}
	if _, err := kube.AppsV1().Deployments(ns).Create(ctx, deployment, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	// cron-scaler: a rule that fires within the minute (a seconds field),
	// and a status write by another field manager.
	second := time.Now().Add(8 * time.Second).UTC().Second()
	cron := &autoscalingv1alpha1.CronFederatedHPA{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns},
		Spec: autoscalingv1alpha1.CronFederatedHPASpec{
			ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"},
			Rules:          []autoscalingv1alpha1.CronFederatedHPARule{{Name: "soon", Schedule: fmt.Sprintf("%d * * * * *", second), TimeZone: ptr.To(""), TargetReplicas: ptr.To[int32](2)}},
		},
	}
	if _, err := client.AutoscalingV1alpha1().CronFederatedHPAs(ns).Create(ctx, cron, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 90*time.Second, true, func(ctx context.Context) (bool, error) {
		got, err := client.AutoscalingV1alpha1().CronFederatedHPAs(ns).Get(ctx, "web", metav1.GetOptions{})
		if err != nil || len(got.Status.ExecutionHistories) == 0 || len(got.Status.ExecutionHistories[0].SuccessfulExecutions) == 0 {
			return false, nil
		}
		// Another controller's status write (Karmada's, say).
		got.Status.ExecutionHistories[0].NextExecutionTime = ptr.To(metav1.NewTime(time.Now().Add(time.Hour).Truncate(time.Second)))
		_, err = client.AutoscalingV1alpha1().CronFederatedHPAs(ns).UpdateStatus(ctx, got, metav1.UpdateOptions{FieldManager: "another-cron-controller"})
		return err == nil, nil
	})
	if err != nil {
		t.Fatalf("the slot did not fire, or its status could not be written by another manager: %v", err)
	}

	// hpa-generator: an HPA of the LeaderWorkerSet's name that it does not
	// control (a name conflict), and one it creates.
	hpa := &autoscalingv2.HorizontalPodAutoscaler{
		ObjectMeta: metav1.ObjectMeta{Name: "taken", Namespace: ns},
		Spec: autoscalingv2.HorizontalPodAutoscalerSpec{
			ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"},
			MinReplicas:    ptr.To[int32](1), MaxReplicas: 3,
		},
	}
	if _, err := kube.AutoscalingV2().HorizontalPodAutoscalers(ns).Create(ctx, hpa, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"taken", "free"} {
		lws := &lwsv1.LeaderWorkerSet{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			Spec: lwsv1.LeaderWorkerSetSpec{
				Replicas: ptr.To[int32](1),
				ScalePolicy: &lwsv1.ScalePolicy{MinReplicas: ptr.To[int32](1), MaxReplicas: 4, Metrics: []autoscalingv2.MetricSpec{{
					Type: autoscalingv2.ResourceMetricSourceType,
					Resource: &autoscalingv2.ResourceMetricSource{Name: corev1.ResourceCPU,
						Target: autoscalingv2.MetricTarget{Type: autoscalingv2.UtilizationMetricType, AverageUtilization: ptr.To[int32](80)}},
				}}},
				LeaderWorkerTemplate: lwsv1.LeaderWorkerTemplate{
					WorkerTemplate: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "w", Image: "vllm",
						Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}}}}}},
				},
			},
		}
		if _, err := client.LeaderworkersetV1().LeaderWorkerSets(ns).Create(ctx, lws, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	// resizer: one AddonResizer in place on the Deployment (no running pods:
	// every state is exported at 0), one whose target is missing (an error).
	for _, ar := range []*scaleplanev1alpha1.AddonResizer{
		addonResizer(ns, "web", "web", scaleplanev1alpha1.UpdateModeInPlace),
		addonResizer(ns, "missing", "missing", scaleplanev1alpha1.UpdateModeRollout),
	} {
		if _, err := client.ScaleplaneV1alpha1().AddonResizers(ns).Create(ctx, ar, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
}

func addonResizer(ns, name, target string, mode scaleplanev1alpha1.UpdateMode) *scaleplanev1alpha1.AddonResizer {
	return &scaleplanev1alpha1.AddonResizer{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: scaleplanev1alpha1.AddonResizerSpec{
			TargetRef:     scaleplanev1alpha1.TargetReference{Kind: scaleplanev1alpha1.TargetKindDeployment, Name: target},
			ContainerName: "web",
			Resources:     []scaleplanev1alpha1.ResourceScaling{{Name: corev1.ResourceMemory, Base: resource.MustParse("16Mi"), ExtraPerUnit: resource.MustParse("1Mi")}},
			UpdateMode:    mode,
		},
	}
}

// scrapeWebhook runs the webhook binary, sends it one admission request and
// returns its /metrics.
func scrapeWebhook(t *testing.T) string {
	t.Helper()
	w := framework.StartWebhook(t, t.TempDir())
	// The metrics are counts and latencies; the test does not check the
	// certificate (the webhook's own tests do).
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec
	base := w.URL
	review := []byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"1","kind":{"group":"autoscaling.scaleplane.io","version":"v1alpha1","kind":"AddonResizer"},"operation":"CREATE","object":{}}}`)
	var body string
	err := wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		resp, err := client.Post(base+"/validate-addonresizer", "application/json", bytes.NewReader(review))
		if err != nil {
			return false, nil
		}
		_ = resp.Body.Close()
		body, err = scrape(client, base+"/metrics")
		return err == nil && exports(body, "scaleplane_webhook_admission_requests_total"), nil
	})
	if err != nil {
		t.Fatalf("the webhook did not answer and count an admission request: %v", err)
	}
	return body
}
