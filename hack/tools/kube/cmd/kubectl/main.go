// Command kubectl is upstream's kubectl, built from the k8s.io/kubectl version
// pinned in ../../go.mod, so local-up never depends on whatever kubectl (if
// any) the machine has.
package main

import (
	"k8s.io/component-base/cli"
	"k8s.io/kubectl/pkg/cmd"
	"k8s.io/kubectl/pkg/cmd/util"
)

func main() {
	// RunNoErrOutput leaves error printing to CheckErr, which prints kubectl's
	// usual "error: ..." line and picks the exit code, as upstream kubectl does.
	if err := cli.RunNoErrOutput(cmd.NewDefaultKubectlCommand()); err != nil {
		util.CheckErr(err)
	}
}
