//go:build tools

// Package tools pins cyclonedx-gomod, which writes the release's SBOMs from
// the Go module graph (hack/release.sh).
package tools

import _ "github.com/CycloneDX/cyclonedx-gomod/cmd/cyclonedx-gomod"
