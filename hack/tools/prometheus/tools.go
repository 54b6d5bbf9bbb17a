//go:build tools

// Package tools pins promtool and prometheus. Build them with
// `go build github.com/prometheus/prometheus/cmd/promtool` (or .../cmd/prometheus)
// from this directory.
package tools

import (
	_ "github.com/prometheus/prometheus/cmd/prometheus"
	_ "github.com/prometheus/prometheus/cmd/promtool"
)
