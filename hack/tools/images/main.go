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

// Command imagetool builds OCI images of scaleplane's static binaries from an
// empty base (no container runtime, no registry, nothing pulled), writes them
// as OCI image layout tarballs, and inspects and runs such tarballs so tests
// can prove an image starts.
//
//	imagetool build   --output X.tar --repository R --tag T --binary linux/amd64=PATH ... [--label k=v ...]
//	imagetool inspect --archive X.tar
//	imagetool run     --archive X.tar [--platform os/arch] -- ARGS...
//
// and, for hack/release.sh, prints an archive's index digest and writes
// reproducible .tar.gz and .zip archives:
//
//	imagetool digest  --archive X.tar
//	imagetool archive --output X.tar.gz|X.zip --file NAME=PATH ...
//	imagetool repack  --input chart.tgz --output chart.tgz
//
// and stages, publishes and installs a release through an OCI registry
// (hack/release.sh, hack/push-release.sh, test/integration/release):
//
//	imagetool registry --listen 127.0.0.1:0 --address-file F
//	imagetool chart    --chart NAME-VERSION.tgz --output X.tar
//	imagetool push     --archive X.tar --reference REGISTRY/REPO:TAG | --prefix REGISTRY/PATH
//	imagetool save     --output X.tar --prefix REGISTRY/PATH REPO:TAG...
//	imagetool resolve  --reference REGISTRY/REPO:TAG
//	imagetool extract  --reference REF --platform os/arch --file PATH --output OUT
//	imagetool provenance --output F --build-type URI --builder-id URI --subject NAME=sha256:HEX ...
package main

import (
	"errors"
	"fmt"
	"os"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		var exit exitError
		if errors.As(err, &exit) {
			os.Exit(int(exit))
		}
		fmt.Fprintln(os.Stderr, "imagetool:", err)
		os.Exit(1)
	}
}

// exitError carries the exit status of a program `imagetool run` started, so
// imagetool exits with it instead of printing an error of its own.
type exitError int

func (e exitError) Error() string { return fmt.Sprintf("exit status %d", int(e)) }

func run(args []string) error {
	if len(args) == 0 {
		return errors.New("usage: imagetool build|inspect|run|digest|archive|repack|registry|chart|push|save|resolve|extract|provenance [flags]")
	}
	switch args[0] {
	case "build":
		return buildCommand(args[1:])
	case "inspect":
		return inspectCommand(args[1:])
	case "run":
		return runCommand(args[1:])
	case "digest":
		return digestCommand(args[1:])
	case "archive":
		return archiveCommand(args[1:])
	case "repack":
		return repackCommand(args[1:])
	case "registry":
		return registryCommand(args[1:])
	case "chart":
		return chartCommand(args[1:])
	case "push":
		return pushCommand(args[1:])
	case "save":
		return saveCommand(args[1:])
	case "resolve":
		return resolveCommand(args[1:])
	case "extract":
		return extractCommand(args[1:])
	case "provenance":
		return provenanceCommand(args[1:])
	default:
		return fmt.Errorf("unknown command %q: want build, inspect, run, digest, archive, repack, registry, chart, push, save, resolve, extract or provenance", args[0])
	}
}
