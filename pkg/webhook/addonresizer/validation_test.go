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

package addonresizer

import (
	"context"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	scaleplanev1alpha1 "github.com/scaleplane/scaleplane/pkg/apis/scaleplane/v1alpha1"
)

func validAddonResizer() *scaleplanev1alpha1.AddonResizer {
	return &scaleplanev1alpha1.AddonResizer{
		ObjectMeta: metav1.ObjectMeta{Name: "metrics-server", Namespace: "kube-system"},
		Spec: scaleplanev1alpha1.AddonResizerSpec{
			TargetRef:     scaleplanev1alpha1.TargetReference{Kind: scaleplanev1alpha1.TargetKindDeployment, Name: "metrics-server"},
			ContainerName: "metrics-server",
			Resources: []scaleplanev1alpha1.ResourceScaling{
				{Name: corev1.ResourceCPU, Base: resource.MustParse("40m"), ExtraPerUnit: resource.MustParse("0.5m")},
				{Name: corev1.ResourceMemory, Base: resource.MustParse("40Mi"), ExtraPerUnit: resource.MustParse("4Mi")},
			},
			ScalingMode: scaleplanev1alpha1.NodeProportional,
			Source:      scaleplanev1alpha1.SourceMetrics,
			Estimator:   scaleplanev1alpha1.Estimator{Type: scaleplanev1alpha1.ExponentialEstimator, MinClusterSize: 16},
			Threshold:   5,
		},
	}
}

func quantity(s string) *resource.Quantity {
	q := resource.MustParse(s)
	return &q
}

func TestValidateAddonResizer(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(s *scaleplanev1alpha1.AddonResizerSpec)
		want   []string
	}{
		{name: "valid", mutate: func(*scaleplanev1alpha1.AddonResizerSpec) {}},
		{name: "StatefulSet, storage, zero amounts, bounds", mutate: func(s *scaleplanev1alpha1.AddonResizerSpec) {
			s.TargetRef.Kind = scaleplanev1alpha1.TargetKindStatefulSet
			s.Resources = []scaleplanev1alpha1.ResourceScaling{{Name: corev1.ResourceEphemeralStorage}}
			s.Threshold = 100
			s.Estimator.MinClusterSize = 1
			s.ScaleUpDelay = &metav1.Duration{}
			s.ScaleDownDelay = &metav1.Duration{Duration: time.Hour}
		}},
		{name: "in place, cpu and memory", mutate: func(s *scaleplanev1alpha1.AddonResizerSpec) {
			s.UpdateMode = scaleplanev1alpha1.UpdateModeInPlace
		}},
		{
			name: "in place, ephemeral-storage",
			mutate: func(s *scaleplanev1alpha1.AddonResizerSpec) {
				s.UpdateMode = scaleplanev1alpha1.UpdateModeInPlace
				s.Resources = append(s.Resources, scaleplanev1alpha1.ResourceScaling{Name: corev1.ResourceEphemeralStorage})
			},
			want: []string{`spec.updateMode: Invalid value: "InPlace": ephemeral-storage cannot be resized in place (pods/resize changes cpu and memory only); use updateMode Rollout`},
		},
		{
			name:   "update mode unknown",
			mutate: func(s *scaleplanev1alpha1.AddonResizerSpec) { s.UpdateMode = "Recreate" },
			want:   []string{`spec.updateMode: Unsupported value: "Recreate": supported values: "Rollout", "InPlace", "Off"`},
		},
		{name: "recommend only, ephemeral-storage too", mutate: func(s *scaleplanev1alpha1.AddonResizerSpec) {
			s.UpdateMode = scaleplanev1alpha1.UpdateModeOff
			s.Resources = append(s.Resources, scaleplanev1alpha1.ResourceScaling{Name: corev1.ResourceEphemeralStorage})
		}},
		{name: "bounds: both, one, equal", mutate: func(s *scaleplanev1alpha1.AddonResizerSpec) {
			s.Resources[0].MinAllowed, s.Resources[0].MaxAllowed = quantity("50m"), quantity("2")
			s.Resources[1].MaxAllowed = quantity("1Gi")
			s.Resources = append(s.Resources, scaleplanev1alpha1.ResourceScaling{Name: corev1.ResourceEphemeralStorage,
				MinAllowed: quantity("1Gi"), MaxAllowed: quantity("1Gi")})
		}},
		{
			name: "maxAllowed below minAllowed",
			mutate: func(s *scaleplanev1alpha1.AddonResizerSpec) {
				s.Resources[0].MinAllowed, s.Resources[0].MaxAllowed = quantity("500m"), quantity("100m")
				s.Resources[1].MinAllowed, s.Resources[1].MaxAllowed = quantity("1Gi"), quantity("512Mi")
			},
			want: []string{
				`spec.resources[0].maxAllowed: Invalid value: "100m": must be greater than or equal to minAllowed (500m)`,
				`spec.resources[1].maxAllowed: Invalid value: "512Mi": must be greater than or equal to minAllowed (1Gi)`,
			},
		},
		{
			name: "negative bounds",
			mutate: func(s *scaleplanev1alpha1.AddonResizerSpec) {
				s.Resources[0].MinAllowed = quantity("-1m")
				s.Resources[1].MaxAllowed = quantity("-1Mi")
			},
			want: []string{
				`spec.resources[0].minAllowed: Invalid value: "-1m": must be greater than or equal to 0`,
				`spec.resources[1].maxAllowed: Invalid value: "-1Mi": must be greater than or equal to 0`,
			},
		},
		{
			name: "bounds finer than an estimate",
			mutate: func(s *scaleplanev1alpha1.AddonResizerSpec) {
				s.Resources[0].MinAllowed, s.Resources[0].MaxAllowed = quantity("0.5m"), quantity("2500u")
				s.Resources[1].MinAllowed = quantity("0.5")
			},
			want: []string{
				`spec.resources[0].minAllowed: Invalid value: "500u": must be in whole millicores (1m), as cpu estimates are rounded to them`,
				`spec.resources[0].maxAllowed: Invalid value: "2500u": must be in whole millicores (1m), as cpu estimates are rounded to them`,
				`spec.resources[1].minAllowed: Invalid value: "500m": must be in whole bytes, as memory estimates are rounded to them`,
			},
		},
		{name: "DaemonSet, defaults left empty", mutate: func(s *scaleplanev1alpha1.AddonResizerSpec) {
			s.TargetRef.Kind = scaleplanev1alpha1.TargetKindDaemonSet
			s.ScalingMode, s.Source, s.Estimator.Type = "", "", ""
		}},
		{
			name:   "target kind unsupported",
			mutate: func(s *scaleplanev1alpha1.AddonResizerSpec) { s.TargetRef.Kind = "ReplicaSet" },
			want:   []string{`spec.targetRef.kind: Unsupported value: "ReplicaSet": supported values: "Deployment", "StatefulSet", "DaemonSet"`},
		},
		{
			name:   "target kind and name missing",
			mutate: func(s *scaleplanev1alpha1.AddonResizerSpec) { s.TargetRef = scaleplanev1alpha1.TargetReference{} },
			want: []string{
				"spec.targetRef.kind: Required value: must be Deployment, StatefulSet or DaemonSet",
				"spec.targetRef.name: Required value: must name the workload",
			},
		},
		{
			name:   "target name invalid",
			mutate: func(s *scaleplanev1alpha1.AddonResizerSpec) { s.TargetRef.Name = "Metrics_Server" },
			want:   []string{`spec.targetRef.name: Invalid value: "Metrics_Server": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')`},
		},
		{
			name:   "container name missing",
			mutate: func(s *scaleplanev1alpha1.AddonResizerSpec) { s.ContainerName = "" },
			want:   []string{"spec.containerName: Required value: must name the container to resize"},
		},
		{
			name:   "container name invalid",
			mutate: func(s *scaleplanev1alpha1.AddonResizerSpec) { s.ContainerName = "pod.nanny" },
			want:   []string{`spec.containerName: Invalid value: "pod.nanny": must not contain dots`},
		},
		{
			name:   "no resources",
			mutate: func(s *scaleplanev1alpha1.AddonResizerSpec) { s.Resources = nil },
			want:   []string{"spec.resources: Required value: must list at least one of cpu, memory, ephemeral-storage"},
		},
		{
			name: "resource names unknown and duplicated",
			mutate: func(s *scaleplanev1alpha1.AddonResizerSpec) {
				s.Resources[1].Name = corev1.ResourceCPU
				s.Resources = append(s.Resources, scaleplanev1alpha1.ResourceScaling{Name: "nvidia.com/gpu"})
			},
			want: []string{
				`spec.resources[1].name: Duplicate value: "cpu"`,
				`spec.resources[2].name: Unsupported value: "nvidia.com/gpu": supported values: "cpu", "memory", "ephemeral-storage"`,
			},
		},
		{
			name: "negative amounts",
			mutate: func(s *scaleplanev1alpha1.AddonResizerSpec) {
				s.Resources[0].Base = resource.MustParse("-1m")
				s.Resources[1].ExtraPerUnit = resource.MustParse("-4Mi")
			},
			want: []string{
				`spec.resources[0].base: Invalid value: "-1m": must be greater than or equal to 0`,
				`spec.resources[1].extraPerUnit: Invalid value: "-4Mi": must be greater than or equal to 0`,
			},
		},
		{
			name:   "threshold below 0",
			mutate: func(s *scaleplanev1alpha1.AddonResizerSpec) { s.Threshold = -1 },
			want:   []string{"spec.threshold: Invalid value: -1: must be between 0 and 100 (percent)"},
		},
		{
			name:   "threshold above 100",
			mutate: func(s *scaleplanev1alpha1.AddonResizerSpec) { s.Threshold = 101 },
			want:   []string{"spec.threshold: Invalid value: 101: must be between 0 and 100 (percent)"},
		},
		{
			name:   "min cluster size 0",
			mutate: func(s *scaleplanev1alpha1.AddonResizerSpec) { s.Estimator.MinClusterSize = 0 },
			want:   []string{"spec.estimator.minClusterSize: Invalid value: 0: must be at least 1"},
		},
		{
			name: "enums",
			mutate: func(s *scaleplanev1alpha1.AddonResizerSpec) {
				s.ScalingMode, s.Source, s.Estimator.Type = "PodProportional", "Kubelet", "Quadratic"
			},
			want: []string{
				`spec.scalingMode: Unsupported value: "PodProportional": supported values: "NodeProportional", "ContainerProportional"`,
				`spec.source: Unsupported value: "Kubelet": supported values: "APIServer", "Metrics"`,
				`spec.estimator.type: Unsupported value: "Quadratic": supported values: "Linear", "Exponential"`,
			},
		},
		{
			name: "negative delays",
			mutate: func(s *scaleplanev1alpha1.AddonResizerSpec) {
				s.ScaleUpDelay = &metav1.Duration{Duration: -time.Second}
				s.ScaleDownDelay = &metav1.Duration{Duration: -time.Minute}
			},
			want: []string{
				`spec.scaleUpDelay: Invalid value: "-1s": must not be negative`,
				`spec.scaleDownDelay: Invalid value: "-1m0s": must not be negative`,
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ar := validAddonResizer()
			tc.mutate(&ar.Spec)
			var got []string
			for _, err := range ValidateAddonResizer(ar) {
				got = append(got, err.Error())
			}
			if strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
				t.Errorf("errors:\n got: %q\nwant: %q", got, tc.want)
			}
		})
	}
}

// TestValidatorQuantitiesParse feeds raw objects, as the apiserver sends
// them, so that a quantity that does not parse names its field.
func TestValidatorQuantitiesParse(t *testing.T) {
	const tmpl = `{"apiVersion":"autoscaling.scaleplane.io/v1alpha1","kind":"AddonResizer",
	"metadata":{"name":"ms","namespace":"kube-system"},
	"spec":{"targetRef":{"kind":"Deployment","name":"ms"},"containerName":"ms",
	"estimator":{"type":"Linear","minClusterSize":16},
	"resources":[{"name":"cpu","base":BASE,"extraPerUnit":EXTRA BOUNDS}]}}`
	tests := []struct {
		name, base, extra, bounds string
		want                      []string
		wantErr                   bool
	}{
		{name: "strings", base: `"40m"`, extra: `"0.5m"`},
		{name: "numbers", base: `1`, extra: `0.25`},
		{
			name: "garbage", base: `"forty"`, extra: `"1Q"`,
			want: []string{
				`spec.resources[0].base: Invalid value: "forty": quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'`,
				`spec.resources[0].extraPerUnit: Invalid value: "1Q": quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'`,
			},
		},
		{
			name: "not a scalar", base: `{"v":1}`, extra: `"1"`,
			want: []string{`spec.resources[0].base: Invalid value: {"v":1}: must be a quantity, such as 100m or 64Mi`},
		},
		{name: "bounds", base: `"40m"`, extra: `"1m"`, bounds: `,"minAllowed":"50m","maxAllowed":2`},
		{
			name: "bounds that do not parse", base: `"40m"`, extra: `"1m"`, bounds: `,"minAllowed":"lots","maxAllowed":[2]`,
			want: []string{
				`spec.resources[0].minAllowed: Invalid value: "lots": quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'`,
				`spec.resources[0].maxAllowed: Invalid value: [2]: must be a quantity, such as 100m or 64Mi`,
			},
		},
		{
			name: "bounds parse, then are denied", base: `"40m"`, extra: `"1m"`, bounds: `,"minAllowed":"2","maxAllowed":"1"`,
			want: []string{`spec.resources[0].maxAllowed: Invalid value: "1": must be greater than or equal to minAllowed (2)`},
		},
		{
			name: "negative parses, then is denied", base: `"-1"`, extra: `"1"`,
			want: []string{`spec.resources[0].base: Invalid value: "-1": must be greater than or equal to 0`},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			raw := strings.NewReplacer("BASE", tc.base, "EXTRA", tc.extra, " BOUNDS", tc.bounds).Replace(tmpl)
			req := &admissionv1.AdmissionRequest{Operation: admissionv1.Create, Object: runtime.RawExtension{Raw: []byte(raw)}}
			got, err := NewValidator().Validate(context.Background(), req)
			if err != nil {
				t.Fatalf("Validate: %v", err)
			}
			var msgs []string
			for _, e := range got.Errs {
				msgs = append(msgs, e.Error())
			}
			if strings.Join(msgs, "\n") != strings.Join(tc.want, "\n") {
				t.Errorf("errors:\n got: %q\nwant: %q", msgs, tc.want)
			}
		})
	}
}
