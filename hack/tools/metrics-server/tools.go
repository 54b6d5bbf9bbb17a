//go:build tools

// Package tools pins metrics-server, which serves metrics.k8s.io from kwok's
// emulated kubelet resource metrics in hack/local-up.sh and the integration
// tests. Build it with `go build sigs.k8s.io/metrics-server/cmd/metrics-server`
// from this directory.
package tools

import (
	_ "sigs.k8s.io/metrics-server/cmd/metrics-server"
)
