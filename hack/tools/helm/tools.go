//go:build tools

// Package tools pins helm, which lints and renders charts/scaleplane.
// Build it with `go build helm.sh/helm/v3/cmd/helm` from this directory.
package tools

import (
	_ "helm.sh/helm/v3/cmd/helm"
)
