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

package cronfederatedhpa

import (
	"bufio"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/adhocore/gronx"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	autoscalingv1alpha1 "github.com/scaleplane/scaleplane/pkg/apis/autoscaling/v1alpha1"
)

// karmadaValidate says what karmada-webhook's CronFederatedHPA validation
// (Karmada v1.18.2, pkg/webhook/cronfederatedhpa/validating.go; unchanged at
// f8fdd02df), which the karmadactl, operator and hack installs register on
// karmada-apiserver next to scaleplane's webhook, denies in a CronFederatedHPA's
// target kind and rules: its rules and messages as ANCHORS.md lists them
// (items 2, 4, 5, 6, 7 and 8), with the field paths and the "" value it reports.
// Schedules are checked with this module's gronx (Karmada pins v1.6.3); the
// schedules used here are plain five-field ones both accept.
//
// Unlike scaleplane's webhook, it admits targetMinReplicas/targetMaxReplicas
// without targetReplicas only when scaleTargetRef.apiVersion is exactly
// autoscaling.karmada.io/v1alpha1 (and the kind FederatedHPA): every other
// target, a LeaderWorkerSet included, needs targetReplicas.
func karmadaValidate(cron *autoscalingv1alpha1.CronFederatedHPA) field.ErrorList {
	spec := field.NewPath("spec")
	ref := cron.Spec.ScaleTargetRef
	federated := ref.APIVersion == "autoscaling.karmada.io/v1alpha1"
	if federated && ref.Kind != "FederatedHPA" {
		// Nothing else is looked at then.
		return field.ErrorList{field.Invalid(spec.Child("scaleTargetRef", "kind"), ref.Kind,
			fmt.Sprintf("invalid scaleTargetRef kind: %s, only support FederatedHPA", ref.Kind))}
	}
	var errs field.ErrorList
	seen := sets.New[string]()
	for i, r := range cron.Spec.Rules {
		at := spec.Child("rules").Index(i)
		if seen.Has(r.Name) {
			errs = append(errs, field.Duplicate(at.Child("name"), r.Name))
		}
		seen.Insert(r.Name)
		if !gronx.New().IsValid(r.Schedule) {
			errs = append(errs, field.Invalid(at.Child("schedule"), r.Schedule, "invalid cron format"))
		}
		if r.TimeZone != nil {
			if _, err := time.LoadLocation(*r.TimeZone); err != nil {
				errs = append(errs, field.Invalid(at.Child("timeZone"), r.TimeZone, err.Error()))
			}
		}
		errs = append(errs, karmadaReplicaDenials(r, federated, ref.Kind, at)...)
	}
	return errs
}

// karmadaReplicaDenials are ANCHORS.md's items 7 (a FederatedHPA target: the
// bounds, targetReplicas ignored) and 8 (any other target: targetReplicas,
// the bounds ignored). An unset bound counts as 1 (min) or unbounded (max).
func karmadaReplicaDenials(r autoscalingv1alpha1.CronFederatedHPARule, federated bool, kind string, at *field.Path) field.ErrorList {
	type check struct {
		denied bool
		field  string
		msg    string
	}
	var checks []check
	if federated {
		lo, hi := ptr.Deref(r.TargetMinReplicas, 1), ptr.Deref(r.TargetMaxReplicas, math.MaxInt32)
		checks = []check{
			{r.TargetMinReplicas == nil && r.TargetMaxReplicas == nil, "targetMaxReplicas", "targetMinReplicas and targetMaxReplicas cannot be nil at the same time if you want to scale FederatedHPA"},
			{lo <= 0, "targetMinReplicas", "targetMinReplicas should be larger than 0"},
			{hi <= 0, "targetMaxReplicas", "targetMaxReplicas should be larger than 0"},
			{lo > hi, "targetMinReplicas", "targetMaxReplicas should be larger than or equal to targetMinReplicas"},
		}
	} else {
		checks = []check{
			{r.TargetReplicas == nil, "targetReplicas", "targetReplicas cannot be nil if you want to scale " + kind},
			{ptr.Deref(r.TargetReplicas, 0) < 0, "targetReplicas", "targetReplicas should be larger than or equal to 0"},
		}
	}
	var errs field.ErrorList
	for _, c := range checks {
		if c.denied {
			errs = append(errs, field.Invalid(at.Child(c.field), "", c.msg))
		}
	}
	return errs
}

func lwsBoundsCron(apiVersion, kind string, rules ...autoscalingv1alpha1.CronFederatedHPARule) *autoscalingv1alpha1.CronFederatedHPA {
	c := boundsCron(apiVersion, kind, rules...)
	c.Spec.ScaleTargetRef.Name = "vllm"
	return c
}

// Issue 35, item 15: which CronFederatedHPAs that move a LeaderWorkerSet's
// autoscaling bounds on a schedule each webhook admits. On karmadactl,
// operator and hack installs both run, so a rule must pass both: a
// bounds-only rule aimed at the LeaderWorkerSet is denied by Karmada's; one
// aimed at the FederatedHPA the hpa-generator keeps for it (named after the
// LeaderWorkerSet) is admitted by both, and the cron-scaler writes its
// bounds to the LeaderWorkerSet's scalePolicy, which the FederatedHPA
// follows.
func TestLeaderWorkerSetBoundsUnderBothWebhooks(t *testing.T) {
	min4, max12 := ptr.To[int32](4), ptr.To[int32](12)
	tests := []struct {
		name      string
		cron      *autoscalingv1alpha1.CronFederatedHPA
		karmada   []string // Karmada's errors; nil: admitted
		scaleplan []string // scaleplane's errors; nil: admitted
	}{{
		name:    "bounds aimed at the LeaderWorkerSet",
		cron:    lwsBoundsCron("leaderworkerset.x-k8s.io/v1", "LeaderWorkerSet", boundsRule("peak", min4, max12)),
		karmada: []string{`spec.rules[0].targetReplicas: Invalid value: "": targetReplicas cannot be nil if you want to scale LeaderWorkerSet`},
	}, {
		name: "bounds aimed at the generated FederatedHPA",
		cron: lwsBoundsCron("autoscaling.karmada.io/v1alpha1", "FederatedHPA", boundsRule("peak", min4, max12), boundsRule("night", ptr.To[int32](2), ptr.To[int32](8))),
	}, {
		name: "one bound aimed at the generated FederatedHPA",
		cron: lwsBoundsCron("autoscaling.karmada.io/v1alpha1", "FederatedHPA", boundsRule("floor", min4, nil)),
	}, {
		name:      "inverted bounds aimed at the generated FederatedHPA",
		cron:      lwsBoundsCron("autoscaling.karmada.io/v1alpha1", "FederatedHPA", boundsRule("peak", max12, min4)),
		karmada:   []string{`spec.rules[0].targetMinReplicas: Invalid value: "": targetMaxReplicas should be larger than or equal to targetMinReplicas`},
		scaleplan: []string{`spec.rules[0].targetMaxReplicas: Invalid value: 4: targetMaxReplicas should be larger than or equal to targetMinReplicas`},
	}, {
		name: "targetReplicas aimed at the LeaderWorkerSet",
		cron: lwsBoundsCron("leaderworkerset.x-k8s.io/v1", "LeaderWorkerSet", replicasRule("peak", "0 8 * * *", 4)),
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := errorStrings(karmadaValidate(tc.cron)); !equalStrings(got, tc.karmada) {
				t.Errorf("Karmada's webhook: %q, want %q", got, tc.karmada)
			}
			if got := errorStrings(newTestValidator().ValidateCronFederatedHPA(tc.cron)); !equalStrings(got, tc.scaleplan) {
				t.Errorf("scaleplane's webhook: %q, want %q", got, tc.scaleplan)
			}
		})
	}
}

// The CronFederatedHPAs docs/karmada/leaderworkerset.md asks a user to apply
// to karmada-apiserver are admitted by both webhooks (issue 35, item 15: the
// guide's rule aimed at the LeaderWorkerSet was denied by Karmada's).
func TestLeaderWorkerSetGuideAdmittedByBothWebhooks(t *testing.T) {
	crons := guideCronFederatedHPAs(t, filepath.Join("..", "..", "..", "docs", "karmada", "leaderworkerset.md"))
	if len(crons) == 0 {
		t.Fatal("docs/karmada/leaderworkerset.md has no CronFederatedHPA")
	}
	for _, c := range crons {
		if errs := karmadaValidate(c); len(errs) > 0 {
			t.Errorf("CronFederatedHPA %s is denied by Karmada's webhook: %v", c.Name, errs.ToAggregate())
		}
		if errs := newTestValidator().ValidateCronFederatedHPA(c); len(errs) > 0 {
			t.Errorf("CronFederatedHPA %s is denied by scaleplane's webhook: %v", c.Name, errs.ToAggregate())
		}
	}
}

// guideCronFederatedHPAs decodes the CronFederatedHPAs of a guide's yaml code
// blocks.
func guideCronFederatedHPAs(t *testing.T, path string) []*autoscalingv1alpha1.CronFederatedHPA {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var (
		out    []*autoscalingv1alpha1.CronFederatedHPA
		inYAML bool
		block  strings.Builder
	)
	scanner := bufio.NewScanner(f)
	for scanner.Scan() {
		line := scanner.Text()
		switch trimmed := strings.TrimSpace(line); {
		case !inYAML && trimmed == "```yaml":
			inYAML = true
			block.Reset()
		case inYAML && trimmed == "```":
			inYAML = false
			for _, doc := range regexp.MustCompile(`(?m)^---\s*$`).Split(block.String(), -1) {
				if !strings.Contains(doc, "kind: CronFederatedHPA") {
					continue
				}
				c := &autoscalingv1alpha1.CronFederatedHPA{}
				if err := yaml.UnmarshalStrict([]byte(doc), c); err != nil {
					t.Fatalf("%s: decoding a CronFederatedHPA: %v", path, err)
				}
				out = append(out, c)
			}
		case inYAML:
			block.WriteString(line + "\n")
		}
	}
	if err := scanner.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func errorStrings(errs field.ErrorList) []string {
	var out []string
	for _, e := range errs {
		out = append(out, e.Error())
	}
	return out
}

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
