//go:build tools

// Package tools pins the versions of the programs scaleplane builds and runs
// (generators, linters, and the control plane used by tests and local-up), so
// that every machine builds the same ones from the Go module proxy.
package tools

import (
	_ "honnef.co/go/tools/cmd/staticcheck"
	_ "k8s.io/code-generator"
	_ "sigs.k8s.io/controller-tools/cmd/controller-gen"
)
