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

// Command scaleplane-webhook validates CronFederatedHPAs, LeaderWorkerSet
// scale policies and AddonResizers for kube-apiserver.
package main

import (
	"os"

	"k8s.io/component-base/cli"

	"github.com/scaleplane/scaleplane/cmd/webhook/app"
)

func main() {
	os.Exit(cli.Run(app.NewWebhookCommand()))
}
