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

// Package reliability runs scaleplane-controller-manager the way a cluster
// runs it, three replicas behind a leader-election Lease, while its leader is
// killed (SIGKILL) or stopped (SIGTERM) and kube-apiserver and etcd are
// restarted, and checks that every
// cron-scaler firing still happens once, in order, and only under a leader.
//
// By default the short form runs (about three minutes, part of
// hack/test-integration.sh and so of `make test`); SCALEPLANE_CHAOS_LONG=1
// (`make test-reliability`) runs the full one. README.md has the figures.
package reliability

import (
	"testing"

	"github.com/scaleplane/scaleplane/test/integration/framework"
)

func TestMain(m *testing.M) {
	framework.Main(m, framework.Options{})
}
