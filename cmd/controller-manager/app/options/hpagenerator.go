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

package options

import (
	"fmt"

	"github.com/spf13/pflag"
)

// HPAGeneratorOptions are the flags of the hpa-generator controller.
type HPAGeneratorOptions struct {
	// ConcurrentSyncs is how many LeaderWorkerSets are synced at once.
	ConcurrentSyncs int
	// Output is the kind of autoscaler kept for a LeaderWorkerSet: Auto,
	// HorizontalPodAutoscaler or FederatedHPA.
	Output string
}

// The values of --hpa-generator-output.
const (
	// HPAGeneratorOutputAuto: a FederatedHPA on a Karmada control plane, an
	// HPA elsewhere, decided at start-up.
	HPAGeneratorOutputAuto                    = "Auto"
	HPAGeneratorOutputHorizontalPodAutoscaler = "HorizontalPodAutoscaler"
	HPAGeneratorOutputFederatedHPA            = "FederatedHPA"
)

// NewHPAGeneratorOptions returns the hpa-generator options with their defaults.
func NewHPAGeneratorOptions() *HPAGeneratorOptions {
	return &HPAGeneratorOptions{ConcurrentSyncs: 5, Output: HPAGeneratorOutputAuto}
}

// AddFlags adds the hpa-generator flags.
func (o *HPAGeneratorOptions) AddFlags(fs *pflag.FlagSet) {
	fs.IntVar(&o.ConcurrentSyncs, "concurrent-hpa-generator-syncs", o.ConcurrentSyncs, "The number of LeaderWorkerSets whose HorizontalPodAutoscaler is synced concurrently.")
	fs.StringVar(&o.Output, "hpa-generator-output", o.Output, "The kind of autoscaler the hpa-generator keeps for a LeaderWorkerSet's spec.scalePolicy: "+
		"HorizontalPodAutoscaler (autoscaling/v2), FederatedHPA (autoscaling.karmada.io/v1alpha1, for a Karmada control plane), "+
		"or Auto: FederatedHPA when the API server is a Karmada control plane (it serves policy.karmada.io PropagationPolicies or cluster.karmada.io Clusters), HorizontalPodAutoscaler otherwise, decided once at start-up. "+
		"An autoscaler of the other kind that a LeaderWorkerSet controls is deleted.")
}

// Validate checks the hpa-generator options.
func (o *HPAGeneratorOptions) Validate() []error {
	var errs []error
	if o.ConcurrentSyncs < 1 {
		errs = append(errs, fmt.Errorf("--concurrent-hpa-generator-syncs must be at least 1, got %d", o.ConcurrentSyncs))
	}
	switch o.Output {
	case HPAGeneratorOutputAuto, HPAGeneratorOutputHorizontalPodAutoscaler, HPAGeneratorOutputFederatedHPA:
	default:
		errs = append(errs, fmt.Errorf("--hpa-generator-output must be %s, %s or %s, got %q",
			HPAGeneratorOutputAuto, HPAGeneratorOutputHorizontalPodAutoscaler, HPAGeneratorOutputFederatedHPA, o.Output))
	}
	return errs
}
