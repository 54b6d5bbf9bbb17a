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

// Package app is kubectl-scaleplane's commands.
package app

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/clock"

	"github.com/scaleplane/scaleplane/pkg/generated/clientset/versioned"
)

// Clients are what the commands read the cluster with. Tests pass fake
// clientsets and a fake clock; the command builds real ones from kubectl's
// flags otherwise.
type Clients struct {
	Kube       kubernetes.Interface
	Scaleplane versioned.Interface
	Clock      clock.PassiveClock
	// Namespace is the namespace when -n is not given (the kubeconfig
	// context's otherwise).
	Namespace string
}

// options are the flags every subcommand shares.
type options struct {
	configFlags   *genericclioptions.ConfigFlags
	streams       genericiooptions.IOStreams
	clients       *Clients
	allNamespaces bool
	output        string
}

// NewCommand returns `kubectl scaleplane`. clients is nil outside tests.
func NewCommand(streams genericiooptions.IOStreams, clients *Clients) *cobra.Command {
	o := &options{
		configFlags: genericclioptions.NewConfigFlags(true),
		streams:     streams,
		clients:     clients,
	}
	cmd := &cobra.Command{
		Use:   "kubectl-scaleplane",
		Short: "See what scaleplane will do: upcoming cron firings, who scales a workload, an AddonResizer's decision; migrate from Addon Resizer",
		Long: `kubectl scaleplane reads scaleplane's objects and the autoscalers next to them, and says what will happen:

  next [NAME]               the next firings of every CronFederatedHPA rule, in its zone and UTC
  who-scales KIND/NAME      every object that sets a workload's replicas or bounds, and where they fight
  explain addonresizer NAME the count, the estimate with its arithmetic, the band, the delay, the next step
  migrate addon-resizer deployment/NAME
                            the AddonResizer that sizes an add-on as its Addon Resizer nanny does, and the
                            nanny's removal (docs/migrate-from-addon-resizer.md)

Install: put kubectl-scaleplane on PATH (make build puts it in _output/bin), or krew (plugins/krew/scaleplane.yaml).`,
		SilenceUsage: true,
		Annotations: map[string]string{
			cobra.CommandDisplayNameAnnotation: "kubectl scaleplane",
		},
	}
	o.configFlags.AddFlags(cmd.PersistentFlags())
	cmd.PersistentFlags().BoolVarP(&o.allNamespaces, "all-namespaces", "A", false, "List across all namespaces.")
	cmd.PersistentFlags().StringVarP(&o.output, "output", "o", "", "Output format: one of (json, yaml, wide). Tables by default.")
	cmd.AddCommand(newNextCommand(o), newWhoScalesCommand(o), newExplainCommand(o), newMigrateCommand(o))
	return cmd
}

// complete builds the clients from kubectl's flags, unless a test gave them.
func (o *options) complete() (*Clients, string, error) {
	switch o.output {
	case "", "wide", "json", "yaml":
	default:
		return nil, "", fmt.Errorf("unknown output format %q: use one of json, yaml, wide", o.output)
	}
	c := o.clients
	if c == nil {
		config, err := o.configFlags.ToRESTConfig()
		if err != nil {
			return nil, "", fmt.Errorf("loading kubeconfig: %w", err)
		}
		config.UserAgent = "kubectl-scaleplane"
		c = &Clients{Clock: clock.RealClock{}}
		if c.Kube, err = kubernetes.NewForConfig(config); err != nil {
			return nil, "", err
		}
		if c.Scaleplane, err = versioned.NewForConfig(config); err != nil {
			return nil, "", err
		}
		if c.Namespace, _, err = o.configFlags.ToRawKubeConfigLoader().Namespace(); err != nil {
			return nil, "", fmt.Errorf("reading the namespace from kubeconfig: %w", err)
		}
	}
	ns := c.Namespace
	if o.configFlags.Namespace != nil && *o.configFlags.Namespace != "" {
		ns = *o.configFlags.Namespace
	}
	if ns == "" {
		ns = "default"
	}
	if o.allNamespaces {
		ns = ""
	}
	return c, ns, nil
}

// splitKindName splits KIND/NAME; the kind is matched case-insensitively
// and in its plural and short forms by the callers.
func splitKindName(arg string) (string, string, error) {
	kind, name, ok := strings.Cut(arg, "/")
	if !ok || kind == "" || name == "" {
		return "", "", fmt.Errorf("%q is not KIND/NAME (e.g. deployment/web)", arg)
	}
	return kind, name, nil
}
