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

package guides

import (
	"fmt"
	"regexp"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// Namespaces whose objects karmada-controller-manager never propagates, as
// its resource detector decides (Karmada v1.18.2, the same at f8fdd02df, the
// newest commit read):
//
//   - cmd/controller-manager/app/options/options.go:194: the flag
//     --skipped-propagating-namespaces defaults to []string{"kube-.*"}, and
//     SkippedNamespacesRegexps (line 230) compiles each entry as
//     fmt.Sprintf("^%s$", ns). No installer (Helm chart, karmadactl init,
//     karmada-operator, hack scripts) sets the flag.
//   - pkg/util/names/names.go:189, IsReservedNamespace: karmada-system,
//     karmada-cluster and every namespace prefixed karmada-es-, always.
//
// pkg/detector/detector.go (EventFilter) drops the events of objects in these
// namespaces before any policy is matched: nothing is propagated and nothing
// is logged.
var defaultSkippedPropagatingNamespaces = []string{"kube-.*"}

func skippedByKarmada(namespace string) bool {
	if namespace == "karmada-system" || namespace == "karmada-cluster" || strings.HasPrefix(namespace, "karmada-es-") {
		return true
	}
	for _, ns := range defaultSkippedPropagatingNamespaces {
		if regexp.MustCompile(fmt.Sprintf("^%s$", ns)).MatchString(namespace) {
			return true
		}
	}
	return false
}

func TestSkippedByKarmada(t *testing.T) {
	for ns, want := range map[string]bool{
		"kube-system": true, "kube-public": true, "kube-node-lease": true, "kube-": true,
		"karmada-system": true, "karmada-cluster": true, "karmada-es-member1": true,
		"default": false, "metrics-server": false, "my-kube-system": false, "kubesystem": false, "karmada-apps": false,
	} {
		if got := skippedByKarmada(ns); got != want {
			t.Errorf("skippedByKarmada(%q) = %v, want %v", ns, got, want)
		}
	}
}

// aimedAtKarmada tells a command line addressed to karmada-apiserver, as
// the guides write it.
var aimedAtKarmada = regexp.MustCompile(`--kubeconfig[= ]("?\$KARMADA"?|\S*karmada-apiserver\.config)|--context[= ]karmada-apiserver\b`)

var namespaceFlag = regexp.MustCompile(`(?:^|\s)(?:-n|--namespace)[= ]("?)([a-z0-9.$-]+)("?)`)

// TestGuidesPropagateOutsideSkippedNamespaces: an object a guide means to be
// propagated must not be in a namespace Karmada skips by default, or Karmada
// silently propagates nothing (issue 35, item 14: docs/karmada/addons.md put
// metrics-server and its PropagationPolicy in kube-system). Meant to be
// propagated: every PropagationPolicy (it selects in its own namespace),
// every namespaced object a (Cluster)PropagationPolicy of the guide selects,
// and whatever a guide that propagates something addresses in a namespace on
// karmada-apiserver (`kubectl --kubeconfig karmada-apiserver.config -n ...`):
// there it looks at what it propagated, or at what sizes and scales it.
func TestGuidesPropagateOutsideSkippedNamespaces(t *testing.T) {
	checked := 0
	for _, g := range karmadaGuides(t) {
		propagates := false
		selected := map[string]bool{} // kind/name selected in a namespace Karmada skips
		for _, obj := range g.objects {
			switch obj.GetKind() {
			case "PropagationPolicy", "ClusterPropagationPolicy":
			default:
				continue
			}
			propagates = true
			checked++
			if obj.GetKind() == "PropagationPolicy" && skippedByKarmada(obj.GetNamespace()) {
				t.Errorf("%s: PropagationPolicy %s is in namespace %s, which karmada-controller-manager skips by default: nothing it selects is propagated",
					g.name(), obj.GetName(), obj.GetNamespace())
			}
			selectors, _, _ := unstructured.NestedSlice(obj.Object, "spec", "resourceSelectors")
			for _, s := range selectors {
				sel, _ := s.(map[string]any)
				ns, _ := sel["namespace"].(string)
				if ns == "" {
					ns = obj.GetNamespace()
				}
				if ns != "" && skippedByKarmada(ns) {
					t.Errorf("%s: %s %s selects %v/%v in namespace %s, which karmada-controller-manager skips by default",
						g.name(), obj.GetKind(), obj.GetName(), sel["kind"], sel["name"], ns)
					selected[fmt.Sprint(sel["kind"], "/", sel["name"])] = true
				}
			}
		}
		if !propagates {
			continue
		}
		for _, obj := range g.objects {
			if ns := obj.GetNamespace(); ns != "" && skippedByKarmada(ns) && obj.GetKind() != "PropagationPolicy" {
				t.Errorf("%s: %s %s is in namespace %s, which karmada-controller-manager skips by default",
					g.name(), obj.GetKind(), obj.GetName(), ns)
			}
		}
		for _, cmd := range g.commands {
			if !aimedAtKarmada.MatchString(cmd) {
				continue
			}
			for _, m := range namespaceFlag.FindAllStringSubmatch(cmd, -1) {
				if skippedByKarmada(m[2]) {
					t.Errorf("%s: %q works in namespace %s on karmada-apiserver, which karmada-controller-manager skips by default", g.name(), cmd, m[2])
				}
			}
		}
	}
	if checked == 0 {
		t.Fatal("no PropagationPolicy found in docs/karmada: the guides are not read")
	}
}
