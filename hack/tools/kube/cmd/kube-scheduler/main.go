// Command kube-scheduler is upstream's kube-scheduler, built from the k8s.io/kubernetes
// version pinned in ../../go.mod so tests and local-up run a real one.
package main

import (
	"os"

	"k8s.io/component-base/cli"
	"k8s.io/kubernetes/cmd/kube-scheduler/app"
)

func main() {
	os.Exit(cli.Run(app.NewSchedulerCommand()))
}
