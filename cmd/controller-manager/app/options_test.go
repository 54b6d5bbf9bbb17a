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
	"strings"
	"testing"
	"time"

	"github.com/scaleplane/scaleplane/cmd/controller-manager/app/options"
)

func newTestOptions() *options.Options { return options.NewOptions() }

func TestOptionsValidate(t *testing.T) {
	all := []string{"cron-scaler", "hpa-generator"}
	aliases := map[string]string{"cronFederatedHorizontalPodAutoscaler": "cron-scaler"}
	tests := []struct {
		name    string
		mutate  func(*options.Options)
		wantErr []string
	}{
		{name: "defaults are valid", mutate: func(*options.Options) {}},
		{name: "aliases and minus are valid", mutate: func(o *options.Options) {
			o.Generic.Controllers = []string{"-cronFederatedHorizontalPodAutoscaler", "*"}
		}},
		{name: "unknown controller", mutate: func(o *options.Options) { o.Generic.Controllers = []string{"*", "cronscaler"} },
			wantErr: []string{`--controllers: "cronscaler" is not a known controller; known controllers: cron-scaler, cronFederatedHorizontalPodAutoscaler, hpa-generator`}},
		{name: "zero qps", mutate: func(o *options.Options) { o.Generic.KubeAPIQPS = 0 }, wantErr: []string{"--kube-api-qps must be positive"}},
		{name: "zero burst", mutate: func(o *options.Options) { o.Generic.KubeAPIBurst = 0 }, wantErr: []string{"--kube-api-burst must be at least 1"}},
		{name: "bad port", mutate: func(o *options.Options) { o.Generic.Port = 70000 }, wantErr: []string{"--port must be between 0 and 65535"}},
		{name: "bad bind address", mutate: func(o *options.Options) { o.Generic.BindAddress = "localhost" }, wantErr: []string{`--bind-address "localhost" is not an IP address`}},
		{name: "zero concurrency", mutate: func(o *options.Options) { o.CronScaler.ConcurrentSyncs = 0 }, wantErr: []string{"--concurrent-cron-scaler-syncs must be at least 1"}},
		{name: "lease not longer than renew deadline", mutate: func(o *options.Options) {
			o.LeaderElection.LeaseDuration.Duration = 10 * time.Second
		}, wantErr: []string{"--leader-elect-lease-duration (10s) must be greater than --leader-elect-renew-deadline (10s)"}},
		{name: "renew deadline not longer than retry", mutate: func(o *options.Options) {
			o.LeaderElection.RetryPeriod.Duration = 10 * time.Second
		}, wantErr: []string{"--leader-elect-renew-deadline (10s) must be greater than --leader-elect-retry-period (10s)"}},
		{name: "leader election timings ignored when off", mutate: func(o *options.Options) {
			o.LeaderElection.LeaderElect = false
			o.LeaderElection.RetryPeriod.Duration = time.Hour
		}},
		{name: "only lease locks", mutate: func(o *options.Options) { o.LeaderElection.ResourceLock = "configmapsleases" },
			wantErr: []string{`--leader-elect-resource-lock "configmapsleases" is not supported`}},
		{name: "errors are aggregated", mutate: func(o *options.Options) {
			o.Generic.KubeAPIQPS = -1
			o.CronScaler.ConcurrentSyncs = -1
		}, wantErr: []string{"--kube-api-qps", "--concurrent-cron-scaler-syncs"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o := options.NewOptions()
			tc.mutate(o)
			err := o.Validate(all, aliases)
			if len(tc.wantErr) == 0 {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("expected errors containing %q", tc.wantErr)
			}
			for _, want := range tc.wantErr {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not contain %q", err, want)
				}
			}
		})
	}
}
