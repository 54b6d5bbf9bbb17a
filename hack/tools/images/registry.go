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

package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
)

// registryCommand serves an OCI distribution registry (go-containerregistry's
// pkg/registry, blobs in memory) on a loopback address until it is sent
// SIGINT or SIGTERM. hack/release.sh stages a release in one to sign it with
// cosign, and test/integration/release installs a release from one. It
// writes the address it listens on to --address-file once it accepts
// connections, so a caller can ask for port 0.
func registryCommand(args []string) error {
	fs := flag.NewFlagSet("registry", flag.ContinueOnError)
	listen := fs.String("listen", "127.0.0.1:0", "the loopback address to listen on")
	addressFile := fs.String("address-file", "", "where to write host:port once listening")
	verbose := fs.Bool("v", false, "log every request to stderr")
	if err := fs.Parse(args); err != nil {
		return err
	}
	host, _, err := net.SplitHostPort(*listen)
	if err != nil {
		return fmt.Errorf("--listen=%s: %w", *listen, err)
	}
	// A registry without authentication is for this machine only.
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		return fmt.Errorf("--listen=%s: only a loopback IP address is allowed (the registry has no authentication)", *listen)
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return fmt.Errorf("listening on %s: %w", *listen, err)
	}
	logger := log.New(io.Discard, "", 0)
	if *verbose {
		logger = log.New(os.Stderr, "registry: ", log.LstdFlags)
	}
	srv := &http.Server{
		Handler:           registry.New(registry.Logger(logger), registry.WithReferrersSupport(true)),
		ReadHeaderTimeout: 30 * time.Second,
	}
	if *addressFile != "" {
		if err := writeAtomically(*addressFile, []byte(ln.Addr().String()+"\n")); err != nil {
			ln.Close()
			return err
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("serving: %w", err)
	case <-ctx.Done():
	}
	shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return srv.Shutdown(shutdown)
}

// pushCommand pushes what an OCI image layout tarball holds. With
// --reference the archive must hold one manifest or index (an image of
// `imagetool build`, a chart of `imagetool chart`), pushed by that name;
// with --prefix every manifest is pushed to PREFIX/REPOSITORY:TAG as the
// archive's annotations name it (`imagetool save` wrote it). Digests are kept:
// what is pushed is the bytes of the archive.
func pushCommand(args []string) error {
	fs := flag.NewFlagSet("push", flag.ContinueOnError)
	archive := fs.String("archive", "", "the OCI image layout tarball")
	reference := fs.String("reference", "", "push its one manifest as REGISTRY/REPOSITORY:TAG")
	prefix := fs.String("prefix", "", "push each manifest to PREFIX/<its repository>:<its tag>")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *archive == "" || (*reference == "") == (*prefix == "") {
		return errors.New("push needs --archive and one of --reference or --prefix")
	}
	dir, err := extractArchive(*archive)
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	entries, err := layoutEntries(dir)
	if err != nil {
		return err
	}
	if *reference != "" && len(entries) != 1 {
		return fmt.Errorf("%s holds %d manifests; --reference pushes an archive of one (use --prefix)", *archive, len(entries))
	}
	for _, e := range entries {
		target := *reference
		if target == "" {
			if e.repository == "" || e.tag == "" {
				return fmt.Errorf("%s: manifest %s has no %s and %s annotations to push it by", *archive, e.digest, repositoryAnnotation, refNameAnnotation)
			}
			target = *prefix + "/" + e.repository + ":" + e.tag
		}
		ref, err := name.ParseReference(target, name.StrictValidation)
		if err != nil {
			return fmt.Errorf("%s: %w", target, err)
		}
		if err := writeRemote(ref, e); err != nil {
			return err
		}
		fmt.Printf("%s@%s\n", ref.Context().Name()+":"+ref.Identifier(), e.digest)
	}
	return nil
}

// saveCommand writes the manifests REPOSITORY:TAG... of a registry (under
// --prefix) into an OCI image layout tarball, each annotated with its
// repository and tag so that `imagetool push --prefix` puts it back at the
// same place under another prefix. hack/release.sh saves cosign's signature
// and attestation manifests (tags sha256-<digest>.sig and .att) with it.
func saveCommand(args []string) error {
	fs := flag.NewFlagSet("save", flag.ContinueOnError)
	output := fs.String("output", "", "the OCI image layout tarball to write")
	prefix := fs.String("prefix", "", "REGISTRY[/PATH] the repositories are under")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *output == "" || *prefix == "" || fs.NArg() == 0 {
		return errors.New("save needs --output, --prefix and at least one REPOSITORY:TAG")
	}
	var saved []layoutEntry
	for _, arg := range fs.Args() {
		ref, err := name.NewTag(*prefix+"/"+arg, name.StrictValidation)
		if err != nil {
			return fmt.Errorf("%s: %w", arg, err)
		}
		e, err := readRemote(ref)
		if err != nil {
			return err
		}
		e.repository = arg[:len(arg)-len(ref.TagStr())-1]
		e.tag = ref.TagStr()
		saved = append(saved, e)
	}
	return writeLayoutArchive(*output, time.Unix(sourceDateEpoch(), 0).UTC(), func(dir string) error { return writeLayout(dir, saved) })
}

// resolveCommand prints the digest a registry serves a reference by.
func resolveCommand(args []string) error {
	fs := flag.NewFlagSet("resolve", flag.ContinueOnError)
	reference := fs.String("reference", "", "REGISTRY/REPOSITORY:TAG or @DIGEST")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *reference == "" {
		return errors.New("resolve needs --reference")
	}
	ref, err := name.ParseReference(*reference, name.StrictValidation)
	if err != nil {
		return fmt.Errorf("%s: %w", *reference, err)
	}
	e, err := readRemote(ref)
	if err != nil {
		return err
	}
	fmt.Println(e.digest.String())
	return nil
}
