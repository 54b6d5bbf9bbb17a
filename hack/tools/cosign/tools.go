//go:build tools

// Package tools pins cosign, which signs and attests the release's images
// and chart (hack/release.sh) and verifies them as a user would
// (test/integration/release).
package tools

import _ "github.com/sigstore/cosign/v2/cmd/cosign"
