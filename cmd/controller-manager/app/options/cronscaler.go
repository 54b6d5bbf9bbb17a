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

// CronScalerOptions are the flags of the cron-scaler controller.
type CronScalerOptions struct {
	// ConcurrentSyncs is how many CronFederatedHPAs are synced at once. Firings
	// due in the same minute are applied in parallel up to this number, and
	// it bounds the cron-scaler's writes in flight (they are not
	// rate-limited on the client; see app.UnboundedClients): one per sync
	// and one per status writer, of which there are as many; in a burst the
	// status writers wait until the targets are written. 64 keeps
	// an apiserver on 2 cores busy in a burst (test/bench/README.md).
	ConcurrentSyncs int
}

// NewCronScalerOptions returns the cron-scaler options with their defaults.
func NewCronScalerOptions() *CronScalerOptions {
	return &CronScalerOptions{ConcurrentSyncs: 64}
}

// AddFlags adds the cron-scaler flags.
func (o *CronScalerOptions) AddFlags(fs *pflag.FlagSet) {
	fs.IntVar(&o.ConcurrentSyncs, "concurrent-cron-scaler-syncs", o.ConcurrentSyncs, "The number of CronFederatedHPAs synced concurrently (and of status writers): it bounds the cron-scaler's writes in flight to twice this number, and to this number while a burst of firings writes its targets; they are not limited by --kube-api-qps. Larger is faster when many rules fire at once, at the cost of API load.")
}

// Validate checks the cron-scaler options.
func (o *CronScalerOptions) Validate() []error {
	if o.ConcurrentSyncs < 1 {
		return []error{fmt.Errorf("--concurrent-cron-scaler-syncs must be at least 1, got %d", o.ConcurrentSyncs)}
	}
	return nil
}
