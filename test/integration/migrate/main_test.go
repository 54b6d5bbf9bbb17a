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

// Package migrate tests `kubectl scaleplane migrate addon-resizer` end to
// end against a real kube-apiserver and etcd, on the three transcribed users
// of Addon Resizer's nanny (cmd/kubectl-scaleplane/app/testdata/migrate):
// each is created as it runs today, migrated (the printed AddonResizer and
// patch applied as a user would, or --apply), and then sized by the real
// scaleplane-controller-manager's resizer at 3, 16, 100 and 1,000 Node
// objects to the values Addon Resizer 1.8 would write.
package migrate

import (
	"testing"

	"github.com/scaleplane/scaleplane/test/integration/framework"
)

func TestMain(m *testing.M) {
	framework.Main(m, framework.Options{})
}
