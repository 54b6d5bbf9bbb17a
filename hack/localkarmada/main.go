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

// Command localkarmada lets hack/local-up.sh (SCALEPLANE_LOCAL_KARMADA=1)
// play a Karmada control plane with the project's own files, so that what
// runs locally is what the sidecar install runs:
//
//	localkarmada sidecar-args --patch F --container C --pod-ip IP --mount VOLUME=DIR ...
//	    prints, one per line, the args of container C in the strategic merge
//	    patch F, as the kubelet would pass them: $(VAR) expanded from the
//	    container's env (status.podIP is IP), and every path under a
//	    volumeMount's mountPath moved to the local DIR standing in for it.
//	localkarmada strip-crd --crd F --remove PATH ...
//	    prints CRD F (as JSON) without the schema properties at each PATH
//	    (dotted, [] for list items, e.g. spec.rules[].maxDelaySeconds), nor
//	    the printer columns and validation rules that mention them: the
//	    CronFederatedHPA CRD as Karmada installs it, without scaleplane's
//	    additions.
package main

import (
	"errors"
	"fmt"
	"os"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "localkarmada:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	if len(args) == 0 {
		return errors.New("usage: localkarmada sidecar-args|strip-crd [flags]")
	}
	switch args[0] {
	case "sidecar-args":
		return sidecarArgsCommand(args[1:])
	case "strip-crd":
		return stripCRDCommand(args[1:])
	default:
		return fmt.Errorf("unknown command %q: want sidecar-args or strip-crd", args[0])
	}
}
