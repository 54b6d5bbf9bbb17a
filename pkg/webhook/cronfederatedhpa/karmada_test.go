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
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	"k8s.io/apimachinery/pkg/api/validate/content"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	autoscalingv1alpha1 "github.com/scaleplane/scaleplane/pkg/apis/autoscaling/v1alpha1"
)

// karmadaValidate is karmada-webhook's CronFederatedHPA validation, which the
// karmadactl, operator and hack installs register on karmada-apiserver next
// to scaleplane's webhook: transcribed from Karmada v1.18.2,
// pkg/webhook/cronfederatedhpa/validating.go (ValidatingAdmission.Handle,
// validateCronFederatedHPASpec, validateCronFederatedHPARules,
// validateCronFederatedHPAScalingReplicas; unchanged at f8fdd02df) and
// pkg/util/lifted/validatingfhpa.go (ValidateCrossVersionObjectReference).
// The one substitution: gronx is this module's version (Karmada pins
// v1.6.3); the schedules used here are plain five-field ones both accept.
//
// Unlike scaleplane's webhook, it admits targetMinReplicas/targetMaxReplicas
// without targetReplicas only when scaleTargetRef.apiVersion is exactly
// autoscaling.karmada.io/v1alpha1 (and the kind FederatedHPA): every other
// target, a LeaderWorkerSet included, needs targetReplicas.
func karmadaValidate(cron *autoscalingv1alpha1.CronFederatedHPA) field.ErrorList {
	errs := field.ErrorList{}
	errs = append(errs, apivalidation.ValidateObjectMeta(&cron.ObjectMeta, true, apivalidation.NameIsDNSSubdomain, field.NewPath("metadata"))...)
	errs = append(errs, karmadaValidateSpec(&cron.Spec, field.NewPath("spec"))...)
	return errs
}

func karmadaValidateSpec(spec *autoscalingv1alpha1.CronFederatedHPASpec, fldPath *field.Path) field.ErrorList {
	errs := field.ErrorList{}
	scaleFHPA := false
	ref := spec.ScaleTargetRef
	if ref.APIVersion == "autoscaling.karmada.io/v1alpha1" {
		if ref.Kind != "FederatedHPA" {
			return append(errs, field.Invalid(fldPath.Child("scaleTargetRef").Child("kind"), ref.Kind,
				fmt.Sprintf("invalid scaleTargetRef kind: %s, only support %s", ref.Kind, "FederatedHPA")))
		}
		scaleFHPA = true
	}
	errs = append(errs, karmadaValidateCrossVersionObjectReference(ref, fldPath.Child("scaleTargetRef"))...)
	errs = append(errs, karmadaValidateRules(spec.Rules, scaleFHPA, ref.Kind, fldPath.Child("rules"))...)
	return errs
}

func karmadaValidateCrossVersionObjectReference(ref autoscalingv2.CrossVersionObjectReference, fldPath *field.Path) field.ErrorList {
	allErrs := field.ErrorList{}
	if len(ref.Kind) == 0 {
		allErrs = append(allErrs, field.Required(fldPath.Child("kind"), ""))
	} else {
		for _, msg := range content.IsPathSegmentName(ref.Kind) {
			allErrs = append(allErrs, field.Invalid(fldPath.Child("kind"), ref.Kind, msg))
		}
	}
	if len(ref.Name) == 0 {
		allErrs = append(allErrs, field.Required(fldPath.Child("name"), ""))
	} else {
		for _, msg := range content.IsPathSegmentName(ref.Name) {
			allErrs = append(allErrs, field.Invalid(fldPath.Child("name"), ref.Name, msg))
		}
	}
	return allErrs
}

func karmadaValidateRules(rules []autoscalingv1alpha1.CronFederatedHPARule, scaleFHPA bool, scaleTargetKind string, fldPath *field.Path) field.ErrorList {
	errs := field.ErrorList{}
	ruleNameSet := sets.New[string]()
	for index, rule := range rules {
		if ruleNameSet.Has(rule.Name) {
			errs = append(errs, field.Duplicate(fldPath.Index(index).Child("name"), rule.Name))
		}
		ruleNameSet.Insert(rule.Name)
		if !gronx.New().IsValid(rule.Schedule) {
			errs = append(errs, field.Invalid(fldPath.Index(index).Child("schedule"), rule.Schedule, "invalid cron format"))
		}
		if rule.TimeZone != nil {
			if _, err := time.LoadLocation(*rule.TimeZone); err != nil {
				errs = append(errs, field.Invalid(fldPath.Index(index).Child("timeZone"), rule.TimeZone, err.Error()))
			}
		}
		errs = append(errs, karmadaValidateScalingReplicas(rule, scaleFHPA, scaleTargetKind, fldPath.Index(index))...)
	}
	return errs
}

func karmadaValidateScalingReplicas(rule autoscalingv1alpha1.CronFederatedHPARule, scaleFHPA bool, scaleTargetKind string, fldPath *field.Path) field.ErrorList {
	errs := field.ErrorList{}
	if scaleFHPA {
		if rule.TargetMinReplicas == nil && rule.TargetMaxReplicas == nil {
			errs = append(errs, field.Invalid(fldPath.Child("targetMaxReplicas"), "",
				"targetMinReplicas and targetMaxReplicas cannot be nil at the same time if you want to scale FederatedHPA"))
		}
		if ptr.Deref(rule.TargetMinReplicas, 1) <= 0 {
			errs = append(errs, field.Invalid(fldPath.Child("targetMinReplicas"), "", "targetMinReplicas should be larger than 0"))
		}
		if ptr.Deref(rule.TargetMaxReplicas, math.MaxInt32) <= 0 {
			errs = append(errs, field.Invalid(fldPath.Child("targetMaxReplicas"), "", "targetMaxReplicas should be larger than 0"))
		}
		if ptr.Deref(rule.TargetMinReplicas, 1) > ptr.Deref(rule.TargetMaxReplicas, math.MaxInt32) {
			errs = append(errs, field.Invalid(fldPath.Child("targetMinReplicas"), "",
				"targetMaxReplicas should be larger than or equal to targetMinReplicas"))
		}
		return errs
	}
	if rule.TargetReplicas == nil {
		errs = append(errs, field.Invalid(fldPath.Child("targetReplicas"), "",
			fmt.Sprintf("targetReplicas cannot be nil if you want to scale %s", scaleTargetKind)))
	}
	if ptr.Deref(rule.TargetReplicas, 0) < 0 {
		errs = append(errs, field.Invalid(fldPath.Child("targetReplicas"), "", "targetReplicas should be larger than or equal to 0"))
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
