//go:build tools

// Package tools pins kwok, which fakes nodes and pods for hack/local-up.sh.
// Build it with `go build sigs.k8s.io/kwok/cmd/kwok` from this directory.
package tools

import (
	_ "sigs.k8s.io/kwok/cmd/kwok"
)
