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
	"time"

	"github.com/spf13/pflag"
)

// ResizerOptions are the flags of the resizer controller.
type ResizerOptions struct {
	// ConcurrentSyncs is how many AddonResizers are synced at once.
	ConcurrentSyncs int
	// MetricsInterval is how often AddonResizers with source Metrics read the
	// metrics API, which cannot be watched.
	MetricsInterval time.Duration
}

// NewResizerOptions returns the resizer options with their defaults.
func NewResizerOptions() *ResizerOptions {
	// Addon Resizer polls every 10 s by default; metrics-server itself
	// scrapes every 15 s, so reading more often only sees the same numbers.
	return &ResizerOptions{ConcurrentSyncs: 2, MetricsInterval: 15 * time.Second}
}

// AddFlags adds the resizer flags.
func (o *ResizerOptions) AddFlags(fs *pflag.FlagSet) {
	fs.IntVar(&o.ConcurrentSyncs, "concurrent-resizer-syncs", o.ConcurrentSyncs, "The number of AddonResizers synced concurrently.")
	fs.DurationVar(&o.MetricsInterval, "resizer-metrics-interval", o.MetricsInterval, "How often AddonResizers with source Metrics read node and pod metrics from the metrics API (metrics.k8s.io).")
}

// Validate checks the resizer options.
func (o *ResizerOptions) Validate() []error {
	var errs []error
	if o.ConcurrentSyncs < 1 {
		errs = append(errs, fmt.Errorf("--concurrent-resizer-syncs must be at least 1, got %d", o.ConcurrentSyncs))
	}
	if o.MetricsInterval < time.Second {
		errs = append(errs, fmt.Errorf("--resizer-metrics-interval must be at least 1s, got %v", o.MetricsInterval))
	}
	return errs
}
