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

// Command kubectl-scaleplane is the kubectl plugin of scaleplane: installed on
// PATH (or with krew), it runs as `kubectl scaleplane`. It previews the
// cron-scaler's next firings, lists what scales a workload, and explains an
// AddonResizer's decision, from the objects in the cluster.
package main

import (
	"os"

	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/component-base/cli"

	"github.com/scaleplane/scaleplane/cmd/kubectl-scaleplane/app"
	"github.com/scaleplane/scaleplane/pkg/version"
)

func main() {
	streams := genericiooptions.IOStreams{In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr}
	cmd := app.NewCommand(streams, nil)
	// --version prints what the controller manager and the webhook print:
	// the release (stamped by hack/release.sh and hack/build-images.sh with
	// -ldflags -X into pkg/version) and the commit.
	cmd.Version = version.Get().String()
	cmd.SetVersionTemplate(cmd.Name() + " {{.Version}}\n")
	os.Exit(cli.Run(cmd))
}
