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
package release

import (
	"encoding/base64"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
)

// keyPair makes a cosign key pair (cosign.key, cosign.pub, password
// password) in a new directory name of the test's and returns it.
func (e *env) keyPair(name string) string {
	dir := filepath.Join(e.dir, name)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		e.t.Fatal(err)
	}
	cmd := exec.Command(e.bin["cosign"], "generate-key-pair")
	cmd.Dir, cmd.Env = dir, append(os.Environ(), "COSIGN_PASSWORD="+password)
	if out, err := cmd.CombinedOutput(); err != nil {
		e.t.Fatalf("cosign generate-key-pair: %v\n%s", err, out)
	}
	return dir
}

func (e *env) cosign(args ...string) (string, string, error) {
	return e.try(nil, e.bin["cosign"], append(args[:1:1], append([]string{"--allow-http-registry"}, args[1:]...)...)...)
}

func (e *env) pub() string { return filepath.Join(e.out, "cosign.pub") }

// simpleSigning is the payload cosign signs for an image.
type simpleSigning struct {
	Critical struct {
		Identity struct {
			DockerReference string `json:"docker-reference"`
		} `json:"identity"`
		Image struct {
			DockerManifestDigest string `json:"docker-manifest-digest"`
		} `json:"image"`
		Type string `json:"type"`
	} `json:"critical"`
}

// verifySignatures: `cosign verify --key` by tag, as a user would, passes for
// both images and the chart, and what was signed is the digest the release
// recorded, under the repository's name.
func (e *env) verifySignatures() {
	chartDigest := strings.TrimSpace(e.run(nil, e.bin["imagetool"], "resolve", "--reference", e.prefix+"/charts/scaleplane:"+strings.TrimPrefix(e.version, "v")))
	want := map[string]string{
		"scaleplane-controller-manager:" + e.version:              e.images["scaleplane-controller-manager"],
		"scaleplane-webhook:" + e.version:                         e.images["scaleplane-webhook"],
		"charts/scaleplane:" + strings.TrimPrefix(e.version, "v"): chartDigest,
	}
	for ref, digest := range want {
		out, errOut, err := e.cosign("verify", "--key", e.pub(), "--insecure-ignore-tlog", e.prefix+"/"+ref)
		if err != nil {
			e.t.Fatalf("cosign verify %s: %v\n%s", ref, err, errOut)
		}
		var payloads []simpleSigning
		if err := json.Unmarshal([]byte(out), &payloads); err != nil || len(payloads) != 1 {
			e.t.Fatalf("cosign verify %s printed %q, want one signature payload (%v)", ref, out, err)
		}
		repo := e.prefix + "/" + ref[:strings.LastIndex(ref, ":")]
		if p := payloads[0].Critical; p.Image.DockerManifestDigest != digest || p.Identity.DockerReference != repo {
			e.t.Errorf("%s is signed as %s at %s, want %s at %s", ref, p.Identity.DockerReference, p.Image.DockerManifestDigest, repo, digest)
		}
	}
	// The checksums, and through them every file of the release.
	if _, errOut, err := e.try(nil, e.bin["cosign"], "verify-blob", "--key", e.pub(), "--insecure-ignore-tlog",
		"--signature", filepath.Join(e.out, "SHA256SUMS.sig"), filepath.Join(e.out, "SHA256SUMS")); err != nil {
		e.t.Errorf("cosign verify-blob SHA256SUMS: %v\n%s", err, errOut)
	}
}

// statement is the in-toto statement of an attestation.
type statement struct {
	PredicateType string `json:"predicateType"`
	Subject       []struct {
		Digest map[string]string `json:"digest"`
	} `json:"subject"`
	Predicate json.RawMessage `json:"predicate"`
}

// attestations runs cosign verify-attestation and decodes each statement.
func (e *env) attestations(ref, kind string) []statement {
	out, errOut, err := e.cosign("verify-attestation", "--key", e.pub(), "--insecure-ignore-tlog", "--type", kind, ref)
	if err != nil {
		e.t.Fatalf("cosign verify-attestation --type %s %s: %v\n%s", kind, ref, err, errOut)
	}
	var statements []statement
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		var envelope struct {
			Payload string `json:"payload"`
		}
		if err := json.Unmarshal([]byte(line), &envelope); err != nil {
			e.t.Fatalf("verify-attestation printed %q: %v", line, err)
		}
		raw, err := base64.StdEncoding.DecodeString(envelope.Payload)
		if err != nil {
			e.t.Fatal(err)
		}
		var st statement
		if err := json.Unmarshal(raw, &st); err != nil {
			e.t.Fatal(err)
		}
		statements = append(statements, st)
	}
	return statements
}

// verifyAttestations reads, from the registry, the controller manager's SBOM
// (the modules its binary is built from, at go.mod's versions, for this
// platform) and provenance (the commit), both attested to its digest.
func (e *env) verifyAttestations() {
	ref := e.prefix + "/scaleplane-controller-manager:" + e.version
	digest := strings.TrimPrefix(e.images["scaleplane-controller-manager"], "sha256:")
	sboms := e.attestations(ref, "cyclonedx")
	if len(sboms) != 1 {
		e.t.Fatalf("%d SBOM attestations, want one (one platform)", len(sboms))
	}
	var bom struct {
		BOMFormat string `json:"bomFormat"`
		Metadata  struct {
			Component struct {
				Name string `json:"name"`
				PURL string `json:"purl"`
			} `json:"component"`
		} `json:"metadata"`
		Components []struct {
			Name    string `json:"name"`
			Version string `json:"version"`
		} `json:"components"`
	}
	if err := json.Unmarshal(sboms[0].Predicate, &bom); err != nil {
		e.t.Fatal(err)
	}
	if sboms[0].Subject[0].Digest["sha256"] != digest {
		e.t.Errorf("the SBOM is attested to %v, want %s", sboms[0].Subject[0].Digest, digest)
	}
	if bom.BOMFormat != "CycloneDX" || bom.Metadata.Component.Name != "github.com/scaleplane/scaleplane" ||
		!strings.Contains(bom.Metadata.Component.PURL, "goarch="+runtime.GOARCH) {
		e.t.Errorf("the SBOM is %s of %s (%s), want CycloneDX of github.com/scaleplane/scaleplane for %s",
			bom.BOMFormat, bom.Metadata.Component.Name, bom.Metadata.Component.PURL, runtime.GOARCH)
	}
	clientGo := e.run(nil, "go", "list", "-m", "-f", "{{.Version}}", "k8s.io/client-go")
	found := false
	for _, c := range bom.Components {
		found = found || (c.Name == "k8s.io/client-go" && c.Version == strings.TrimSpace(clientGo))
	}
	if !found {
		e.t.Errorf("the SBOM's %d components have no k8s.io/client-go %s", len(bom.Components), strings.TrimSpace(clientGo))
	}

	provenance := e.attestations(ref, "slsaprovenance1")
	if len(provenance) != 1 || provenance[0].PredicateType != "https://slsa.dev/provenance/v1" {
		e.t.Fatalf("provenance attestations: %+v, want one SLSA v1", provenance)
	}
	var pred struct {
		BuildDefinition struct {
			ExternalParameters map[string]string `json:"externalParameters"`
		} `json:"buildDefinition"`
	}
	if err := json.Unmarshal(provenance[0].Predicate, &pred); err != nil {
		e.t.Fatal(err)
	}
	commit := e.commit
	if got := pred.BuildDefinition.ExternalParameters["source"]; !strings.HasSuffix(got, "@"+commit) ||
		pred.BuildDefinition.ExternalParameters["version"] != e.version {
		e.t.Errorf("the provenance names source %q, version %q; want commit %s, %s", got, pred.BuildDefinition.ExternalParameters["version"], commit, e.version)
	}
}

// verifyRefusals: verification fails for an image pushed without a
// signature, for the release's tag moved to another image (the webhook's,
// itself signed, but in its own repository), and with a key that did not
// sign; the moved tag's original image still verifies by digest.
func (e *env) verifyRefusals() {
	cm := e.prefix + "/scaleplane-controller-manager"
	webhookArchive := filepath.Join(e.out, "scaleplane-webhook.oci.tar")
	e.run(nil, e.bin["imagetool"], "push", "--archive", webhookArchive, "--reference", e.prefix+"/unsigned:"+e.version)
	e.run(nil, e.bin["imagetool"], "push", "--archive", webhookArchive, "--reference", cm+":"+e.version+"-moved")

	otherKeys := e.keyPair("other-keys")
	for _, c := range []struct{ what, key, ref string }{
		{"an image pushed unsigned", e.pub(), e.prefix + "/unsigned:" + e.version},
		{"a tag moved to another image", e.pub(), cm + ":" + e.version + "-moved"},
		{"another key", filepath.Join(otherKeys, "cosign.pub"), cm + ":" + e.version},
	} {
		if out, errOut, err := e.cosign("verify", "--key", c.key, "--insecure-ignore-tlog", c.ref); err == nil {
			e.t.Errorf("cosign verify passed for %s (%s):\n%s", c.what, c.ref, out)
		} else if !strings.Contains(errOut, "no signatures found") && !strings.Contains(errOut, "no matching signatures") {
			e.t.Errorf("cosign verify of %s failed for another reason than its signature:\n%s", c.what, errOut)
		}
	}
	if _, errOut, err := e.cosign("verify", "--key", e.pub(), "--insecure-ignore-tlog", cm+"@"+e.images["scaleplane-controller-manager"]); err != nil {
		e.t.Errorf("cosign verify of the controller manager by digest: %v\n%s", err, errOut)
	}
}
