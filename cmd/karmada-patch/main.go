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

// Command karmada-patch reads the karmada-controller-manager Deployment of a
// Karmada install (as `kubectl get deployment -o yaml` prints it) and writes
// the patches and values that put scaleplane next to it, derived from that
// Deployment so that nobody copies Karmada's command by hand:
//
//	cron-off.json         JSON patch: appends --controllers=*,-cronFederatedHorizontalPodAutoscaler to Karmada's command
//	cron-on.json          its exact reverse (also when read after cron-off.json was applied)
//	helm-values.yaml      Helm installs: the chart's controllerManager.controllers with the cron controller off
//	helm-values-undo.yaml ... and as it was
//	karmada-cron-off.json karmada-operator installs: merge patch of the Karmada object's extraArgs.controllers
//	karmada-cron-on.json  ... and as it was
//	sidecar.yaml          strategic merge patch adding only scaleplane's container (not for karmada-operator)
//	sidecar-remove.yaml   its reverse
//	companion-values.yaml values of charts/scaleplane for a companion Deployment
//
// docs/karmada/<installer>.md says which of them each installer needs.
//
// -image is required: the image the sidecar and the companion run, as your
// host cluster pulls it. scaleplane's images are not published to any
// registry yet (`make images` builds them), so no default would pull.
//
// -controllers is what the sidecar and the companion run: the cron-scaler
// alone by default; cron-scaler,hpa-generator,resizer for LeaderWorkerSets
// and add-ons sized per member cluster. The cron-scaler must be in it, since
// the patches switch Karmada's cron controller off.
//
// Usage:
//
//	kubectl -n karmada-system get deployment karmada-controller-manager -o yaml > kcm.yaml
//	go run ./cmd/karmada-patch -f kcm.yaml -o karmada-patches -image <registry>/scaleplane-controller-manager:<tag> [-controllers=cron-scaler,hpa-generator,resizer]
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	"sigs.k8s.io/yaml"

	"github.com/scaleplane/scaleplane/pkg/karmadaadoption"
)

func main() {
	if err := run(os.Args[1:], os.Stdin, os.Stderr); err != nil {
		fmt.Fprintf(os.Stderr, "karmada-patch: %v\n", err)
		os.Exit(1)
	}
}

func run(args []string, stdin io.Reader, stderr io.Writer) error {
	fs := flag.NewFlagSet("karmada-patch", flag.ContinueOnError)
	fs.SetOutput(stderr)
	file := fs.String("f", "-", "the karmada-controller-manager Deployment, YAML or JSON (- is stdin)")
	out := fs.String("o", "karmada-patches", "directory to write the patches and values to")
	image := fs.String("image", "", "scaleplane-controller-manager image (repository:tag) of the sidecar and the companion, where your host cluster pulls it from; required: "+
		"the images are not published, `make images` builds them (e.g. "+karmadaadoption.DefaultImage+", pushed to your registry)")
	controllerList := fs.String("controllers", karmadaadoption.CronScaler, "the controllers the sidecar and the companion run, comma-separated: "+
		strings.Join(karmadaadoption.Controllers, ", ")+"; the cron-scaler always, in place of Karmada's cron controller "+
		"(docs/karmada/leaderworkerset.md and addons.md add hpa-generator and resizer)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	controllers, err := karmadaadoption.ParseControllers(*controllerList)
	if err != nil {
		return err
	}
	if *image == "" {
		return errors.New("-image is required: the scaleplane-controller-manager image your host cluster pulls. " +
			"It is not published to any registry yet: build it with `make images` (_output/images), push it to your registry and pass it here")
	}
	if _, _, err := karmadaadoption.SplitImage(*image); err != nil {
		return err
	}
	var data []byte
	if *file == "-" {
		data, err = io.ReadAll(stdin)
	} else {
		data, err = os.ReadFile(*file)
	}
	if err != nil {
		return fmt.Errorf("reading the Deployment: %w", err)
	}
	d := &appsv1.Deployment{}
	if err := yaml.Unmarshal(data, d); err != nil {
		return fmt.Errorf("decoding the Deployment: %w", err)
	}
	if d.Kind != "Deployment" {
		return fmt.Errorf("%s is a %q, not a Deployment", *file, d.Kind)
	}
	in, err := karmadaadoption.Inspect(d)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(*out, 0o755); err != nil {
		return fmt.Errorf("creating %s: %w", *out, err)
	}
	write := func(name string, content []byte) error {
		if err := os.WriteFile(filepath.Join(*out, name), content, 0o644); err != nil {
			return fmt.Errorf("writing %s: %w", name, err)
		}
		fmt.Fprintf(stderr, "  %s\n", filepath.Join(*out, name))
		return nil
	}

	fmt.Fprintf(stderr, "%s/%s: installed by %s; Karmada's container %q (index %d); kubeconfig %s from Secret %s key %s; Lease namespace %s\n",
		d.Namespace, d.Name, in.Installer, in.Container.Name, in.ContainerIndex, in.Kubeconfig, in.SecretName, in.SecretKey, in.LeaseNamespace)
	// Stale files of an earlier run would not fit this Deployment.
	for _, name := range []string{"cron-off.json", "cron-on.json"} {
		if err := os.Remove(filepath.Join(*out, name)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("removing the earlier %s: %w", name, err)
		}
	}
	if off, err := in.CronOffPatch(); err == nil {
		if err := write("cron-off.json", off); err != nil {
			return err
		}
	} else {
		// Not fatal: an install whose cron controller is already off (the
		// installer's own setting) still needs the sidecar or companion.
		fmt.Fprintf(stderr, "no cron-off.json: %v\n", err)
	}
	if on, err := in.CronOnPatch(); err == nil {
		if err := write("cron-on.json", on); err != nil {
			return err
		}
	} else {
		fmt.Fprintf(stderr, "no cron-on.json: %v\n", err)
	}
	switch {
	case in.Installer == karmadaadoption.Helm:
		if err := writeHelmValues(in, stderr, write); err != nil {
			return err
		}
	case in.HelmChartLayout():
		// Karmada's chart applied by a tool other than Helm (Argo CD
		// applies `helm template` output, with kubectl apply's annotation
		// or server-side) carries none of Helm's labels: its values are
		// still the way to switch the cron controller off that lasts.
		fmt.Fprintf(stderr, "installed by %s, but laid out as Karmada's Helm chart writes it (volume %s, subPath %s) without Helm's "+
			"labels (app.kubernetes.io/managed-by=Helm, meta.helm.sh/release-name): a chart applied by a tool that does not add them "+
			"(Argo CD, helm template | kubectl). Set controllerManager.controllers in that tool's values of the chart as helm-values.yaml says: "+
			"the tool puts the chart's command back at its next sync, undoing cron-off.json\n", in.Installer, in.Mount.Name, in.Mount.SubPath)
		if err := writeHelmValues(in, stderr, write); err != nil {
			return err
		}
	case in.Installer == karmadaadoption.Unknown:
		fmt.Fprintln(stderr, "installer not recognised: the Deployment has none of the marks of Karmada's installers "+
			"(Helm's labels, karmadactl's karmada.io/bootstrapping label, karmada-operator's managed-by label, kubectl apply's "+
			"last-applied-configuration), so no installer setting (helm-values.yaml, karmada-cron-off.json) is written; "+
			"if your installer re-applies the Deployment, it undoes cron-off.json")
	case in.Installer == karmadaadoption.Operator:
		fmt.Fprintf(stderr, "the Karmada object: %s/%s\n", d.Namespace, in.KarmadaObject)
		if off, undo, err := in.OperatorPatches(); err != nil {
			fmt.Fprintf(stderr, "no karmada-cron-off.json: %v\n", err)
		} else if err := errors.Join(write("karmada-cron-off.json", off), write("karmada-cron-on.json", undo)); err != nil {
			return err
		}
	}
	if in.Installer == karmadaadoption.Operator {
		// karmada-operator PUTs the whole Deployment on every reconcile:
		// a sidecar would be gone at the next one.
		fmt.Fprintln(stderr, "no sidecar.yaml: karmada-operator replaces the whole Deployment on every reconcile; use the companion Deployment")
	} else {
		sidecar, err := in.SidecarPatch(*image, controllers)
		if err != nil {
			return err
		}
		if err := errors.Join(write("sidecar.yaml", sidecar), write("sidecar-remove.yaml", in.SidecarRemovePatch())); err != nil {
			return err
		}
	}
	companion, err := in.CompanionValues(*image, controllers)
	if err != nil {
		return err
	}
	return write("companion-values.yaml", companion)
}

// writeHelmValues writes the values files of Karmada's chart, or says on
// stderr why there are none.
func writeHelmValues(in *karmadaadoption.Install, stderr io.Writer, write func(string, []byte) error) error {
	off, undo, err := in.HelmValues()
	if err != nil {
		fmt.Fprintf(stderr, "no helm-values.yaml: %v\n", err)
		return nil
	}
	return errors.Join(write("helm-values.yaml", off), write("helm-values-undo.yaml", undo))
}
