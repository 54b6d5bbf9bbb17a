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
}

// NewHPAGeneratorOptions returns the hpa-generator options with their defaults.
func NewHPAGeneratorOptions() *HPAGeneratorOptions {
	return &HPAGeneratorOptions{ConcurrentSyncs: 5}
}

// AddFlags adds the hpa-generator flags.
func (o *HPAGeneratorOptions) AddFlags(fs *pflag.FlagSet) {
	fs.IntVar(&o.ConcurrentSyncs, "concurrent-hpa-generator-syncs", o.ConcurrentSyncs, "The number of LeaderWorkerSets whose HorizontalPodAutoscaler is synced concurrently.")
}

// Validate checks the hpa-generator options.
func (o *HPAGeneratorOptions) Validate() []error {
	if o.ConcurrentSyncs < 1 {
		return []error{fmt.Errorf("--concurrent-hpa-generator-syncs must be at least 1, got %d", o.ConcurrentSyncs)}
	}
	return nil
}
