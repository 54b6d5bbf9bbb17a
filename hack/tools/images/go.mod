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

require (
	github.com/google/go-containerregistry v0.22.1
	sigs.k8s.io/yaml v1.6.0
)

require (
	github.com/docker/cli v29.7.2+incompatible // indirect
	github.com/docker/docker-credential-helpers v0.9.3 // indirect
	github.com/klauspost/compress v1.19.2 // indirect
	github.com/opencontainers/go-digest v1.0.0 // indirect
	github.com/opencontainers/image-spec v1.1.1 // indirect
	github.com/sirupsen/logrus v1.9.4 // indirect
	go.yaml.in/yaml/v2 v2.4.2 // indirect
	golang.org/x/sync v0.22.0 // indirect
	golang.org/x/sys v0.47.0 // indirect
	gotest.tools/v3 v3.5.2 // indirect
)
