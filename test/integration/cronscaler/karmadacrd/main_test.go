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

// Package karmadacrd runs the cron-scaler's scenarios on a control plane
// whose CronFederatedHPA CRD is what Karmada's amounts to (scaleplane's
// without maxDelaySeconds, lastScheduleTime and unique rule names), as on a
// Karmada control plane where scaleplane runs as a sidecar.
package karmadacrd

import (
	"fmt"
	"os"
	"testing"

	"github.com/scaleplane/scaleplane/test/integration/cronscaler/scenarios"
	"github.com/scaleplane/scaleplane/test/integration/framework"
)

func TestMain(m *testing.M) {
	dir, err := scenarios.KarmadaCRDDir()
	if err != nil {
		fmt.Fprintf(os.Stderr, "FAIL: writing Karmada's CRDs: %v\n", err)
		os.Exit(1)
	}
	framework.Main(m, framework.Options{CRDDir: dir})
}
