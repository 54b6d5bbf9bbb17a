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
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
)

// nannyManifest is a Deployment "web" in kube-system with container "web"
// and a nanny running args, its env (MY_POD_NAMESPACE and MY_POD_NAME from
// the downward API unless env is given), a ConfigMap volume "cfg" at
// /etc/config, and configMap (a ConfigMap document, or "").
func nannyManifest(args []string, env, configMap string) string {
	if env == "" {
		env = `
        - name: MY_POD_NAME
          valueFrom: {fieldRef: {fieldPath: metadata.name}}
        - name: MY_POD_NAMESPACE
          valueFrom: {fieldRef: {fieldPath: metadata.namespace}}`
	}
	var cmd strings.Builder
	for _, a := range args {
		fmt.Fprintf(&cmd, "\n        - %q", a)
	}
	m := fmt.Sprintf(`apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: kube-system}
spec:
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers:
      - name: web
        image: example.com/web:1
      - name: web-nanny
        image: registry.k8s.io/autoscaling/addon-resizer:1.8.23
        env:%s
        command:
        - /pod_nanny%s
        volumeMounts:
        - {name: cfg, mountPath: /etc/config}
      volumes:
      - name: cfg
        configMap: {name: web-nanny}
`, env, cmd.String())
	if configMap != "" {
		m += "---\n" + configMap
	}
	return m
}

func nannyConfigMap(body string) string {
	return fmt.Sprintf(`apiVersion: v1
kind: ConfigMap
metadata: {name: web-nanny, namespace: kube-system}
data:
  NannyConfiguration: |-
    apiVersion: nannyconfig/v1alpha1
    kind: NannyConfiguration%s
`, body)
}

var goodArgs = []string{"--cpu=40m", "--extra-cpu=0.5m", "--memory=40Mi", "--extra-memory=4Mi", "--threshold=5",
	"--deployment=web", "--container=web", "--estimator=exponential", "--minClusterSize=16"}

func with(extra ...string) []string { return append(append([]string{}, goodArgs...), extra...) }

// without drops the flags named.
func without(args []string, names ...string) []string {
	var out []string
	for _, a := range args {
		keep := true
		for _, n := range names {
			if strings.HasPrefix(a, "--"+n+"=") {
				keep = false
			}
		}
		if keep {
			out = append(out, a)
		}
	}
	return out
}

// TestMigrateRefusals: every input migrate cannot map exactly is refused
// with a message naming the flag and why, before anything is written (each
// is also run with --apply against a cluster holding the Deployment, and
// nothing is written).
func TestMigrateRefusals(t *testing.T) {
	noDownward := `
        - {name: MY_POD_NAME, value: ""}`
	for _, c := range []struct {
		name      string
		args      []string
		env, cm   string
		wantError string
	}{
		{"unknown flag", with("--v=2"), "", "", "--v: unknown flag: Addon Resizer 1.8's nanny does not define it"},
		{"single dash", with("-cpu=40m"), "", "", "-cpu=40m: not a --flag"},
		{"another deployment", append(without(goodArgs, "deployment"), "--deployment=other"), "", "",
			"--deployment=other: sizes another Deployment than its own (web)"},
		{"no deployment", without(goodArgs, "deployment"), "", "", "--deployment: not set: the nanny exits at start"},
		{"missing base", without(goodArgs, "cpu", "extra-cpu", "memory", "extra-memory"), "", "", "--cpu/--memory: no base is set"},
		{"extra without base", without(goodArgs, "cpu"), "", "", "--extra-cpu=0.5m: set without --cpu"},
		{"storage", with("--storage=1Gi"), "", "", "--storage=1Gi: the nanny sizes a container resource named \"storage\""},
		{"sizes itself", without(goodArgs, "container"), "", "", "--container=pod-nanny: no such container"},
		{"sizes a nanny", append(without(goodArgs, "container"), "--container=web-nanny"), "", "", "--container=web-nanny: names a nanny container"},
		{"other namespace", with("--namespace=default"), "", "", "--namespace=default: sizes a Deployment in another namespace"},
		{"no namespace", goodArgs, noDownward, "", "--namespace: not set and no MY_POD_NAMESPACE"},
		{"other pod", with("--pod=web-0"), "", "", "--pod=web-0: reads the resources of a named pod"},
		{"pods counted by metrics", with("--scaling-mode=container-proportional", "--use-metrics=true"), "", "",
			"--use-metrics: with container-proportional the nanny counts pods, not containers"},
		{"delay", with("--scale-up-delay=5m"), "", "", "--scale-up-delay=5m: the nanny counts it from its start or its last change"},
		{"estimator", with("--estimator=log"), "", "", "--estimator=log: not linear or exponential"},
		{"minClusterSize", with("--minClusterSize=1"), "", "", "--minClusterSize=1: below 2"},
		{"threshold", with("--threshold=101"), "", "", "--threshold=101: outside 0..100"},
		{"scaling mode", with("--scaling-mode=pods"), "", "", "--scaling-mode=pods: not node-proportional or container-proportional"},
		{"quantity", append(without(goodArgs, "cpu"), "--cpu=forty"), "", "", "--cpu=forty: not a quantity"},
		{"kubeconfig", with("--kubeconfig=/etc/k"), "", "", "--kubeconfig=/etc/k: the nanny talks to the API server in that file"},
		{"control plane", with("--run-on-control-plane"), "", "", "--run-on-control-plane: control-plane mode"},
		{"config map name", with("--nanny-config-map-name=x"), "", "", "--nanny-config-map-name=x: the bases come from the API each poll"},
		{"config file missing", with("--config-dir=/etc/config"), "", "", "--config-dir=/etc/config: ConfigMap web-nanny (mounted at /etc/config) not found"},
		{"config file undecodable", with("--config-dir=/etc/config"), "", strings.Replace(nannyConfigMap(""), "nannyconfig/v1alpha1", "v1", 1),
			"--config-dir=/etc/config: ConfigMap web-nanny key NannyConfiguration is not a nannyconfig/v1alpha1 NannyConfiguration"},
		{"config dir not mounted", with("--config-dir=/config"), "", "", "--config-dir=/config: no volume is mounted at /config"},
		{"env var", with("--namespace=$(NS)"), "", "", "refers to an environment variable that is not a literal value"},
	} {
		t.Run(c.name, func(t *testing.T) {
			manifest := nannyManifest(c.args, c.env, c.cm)
			e := newMigrateEnv(nil, nil)
			_, err := e.run(t, manifest, "migrate", "addon-resizer", "-n", "kube-system", "-f", "-")
			if err == nil || !strings.Contains(err.Error(), c.wantError) || !strings.Contains(err.Error(), "refused, nothing written") {
				t.Fatalf("error %v, want one with %q", err, c.wantError)
			}
			// Live, with --apply: refused before any write.
			live := newMigrateEnv(objectsOf(t, manifest), nil)
			if _, err := live.run(t, "", "migrate", "addon-resizer", "-n", "kube-system", "deployment/web", "--apply"); err == nil || !strings.Contains(err.Error(), c.wantError) {
				t.Errorf("live: error %v, want one with %q", err, c.wantError)
			}
			if len(live.writes) > 0 {
				t.Errorf("refused, yet wrote %v", live.writes)
			}
		})
	}
}

// TestMigrateTwoNanniesOneContainer: two nannies sizing one container are
// refused (they undo each other).
func TestMigrateTwoNanniesOneContainer(t *testing.T) {
	m := nannyManifest(goodArgs, "", "")
	m = strings.Replace(m, "      volumes:", `      - name: web-nanny-2
        image: registry.k8s.io/autoscaling/addon-resizer:1.8.23
        env:
        - name: MY_POD_NAMESPACE
          valueFrom: {fieldRef: {fieldPath: metadata.namespace}}
        args: ["--cpu=10m", "--deployment=web", "--container=web"]
      volumes:`, 1)
	e := newMigrateEnv(nil, nil)
	_, err := e.run(t, m, "migrate", "addon-resizer", "-n", "kube-system", "-f", "-")
	if err == nil || !strings.Contains(err.Error(), "container web-nanny-2: --container=web: nanny web-nanny sizes it too") {
		t.Fatalf("error %v", err)
	}
}

// TestMigrateConfigFileWins: the NannyConfiguration file overrides the
// flags where it sets a value, a per-node "0" counting as unset, as the
// nanny's FillInDefaults_NannyConfiguration does; --map-delays maps a
// delay; the linear estimator leaves minClusterSize out.
func TestMigrateConfigFileWins(t *testing.T) {
	cm := nannyConfigMap("\n    baseCPU: 100m\n    cpuPerNode: \"0\"\n    memoryPerNode: 8Mi")
	args := append(without(goodArgs, "estimator", "minClusterSize"), "--config-dir=/etc/config", "--scale-down-delay=10m")
	e := newMigrateEnv(nil, nil)
	out, err := e.run(t, nannyManifest(args, "", cm), "migrate", "addon-resizer", "-n", "kube-system", "-f", "-", "--map-delays", "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"base": "100m"`, `"extraPerUnit": "500u"`, `"base": "40Mi"`, `"extraPerUnit": "8Mi"`,
		`"scaleDownDelay": "10m0s"`, `"type": "Linear"`} {
		if !strings.Contains(out, want) {
			t.Errorf("missing %s in\n%s", want, out)
		}
	}
	if strings.Contains(out, "minClusterSize") {
		t.Errorf("linear with minClusterSize:\n%s", out)
	}
}

// objectsOf reads a manifest's Deployments and ConfigMaps as objects.
func objectsOf(t *testing.T, manifest string) []runtime.Object {
	t.Helper()
	m := &migrateOptions{options: &options{}, file: "-"}
	m.streams.In = strings.NewReader(manifest)
	src, err := m.readManifest("kube-system", "")
	if err != nil {
		t.Fatal(err)
	}
	objs := []runtime.Object{src.deployment}
	if cm, _ := src.configMap("web-nanny"); cm != nil {
		objs = append(objs, cm)
	}
	return objs
}
