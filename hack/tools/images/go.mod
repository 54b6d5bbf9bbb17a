// Module images builds imagetool, which turns the static scaleplane binaries
// into OCI images without a container runtime and without pulling a base
// image (hack/build-images.sh, `make images`), and inspects and runs them
// (test/integration/images).
//
// Why a module of its own: go-containerregistry is only needed to build and
// check images; keeping it out of the main module keeps it out of the
// binaries' dependency graph.
module github.com/scaleplane/scaleplane/hack/tools/images

go 1.26.0

require github.com/google/go-containerregistry v0.22.1

require (
	github.com/klauspost/compress v1.19.2 // indirect
	github.com/opencontainers/go-digest v1.0.0 // indirect
	github.com/opencontainers/image-spec v1.1.1 // indirect
	golang.org/x/sync v0.22.0 // indirect
)
