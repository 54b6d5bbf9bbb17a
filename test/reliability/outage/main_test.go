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

// Package outage restarts etcd and kube-apiserver under the real
// scaleplane-controller-manager binary for a few seconds each, aimed at a
// cron slot, and checks what the controller manager promises for such
// outages: it keeps running, its leader keeps the Lease when the outage is
// shorter than the renew deadline, and every slot that fell in the outage
// runs once afterwards if still within its maxDelaySeconds, else is recorded
// as missed, once.
//
// It is a package of its own so that hack/test-integration.sh runs it next
// to the chaos test (test/reliability), each with its own control plane;
// it takes a little over two minutes, most of it waiting for minute
// boundaries.
// ../README.md has the figures.
package outage

import (
	"testing"

	"github.com/scaleplane/scaleplane/test/integration/framework"
)

func TestMain(m *testing.M) {
	framework.Main(m, framework.Options{})
}
