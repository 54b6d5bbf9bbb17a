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

package options

import (
	"fmt"
	"net"
	"sort"
	"strings"

	"github.com/spf13/pflag"
)

// GenericOptions are the flags every controller manager has: how to reach the
// API server, which controllers to run, and where to serve health and metrics.
type GenericOptions struct {
	// Kubeconfig is the path of a kubeconfig; empty means in-cluster config.
	Kubeconfig string
	// Master overrides the API server address of the kubeconfig.
	Master string
	// KubeAPIQPS and KubeAPIBurst bound the client-side rate of API requests,
	// but for the cron-scaler's writes, which its number of syncs bounds
	// instead (cron firings come in bursts: every rule due at 08:30 fires at
	// 08:30; see app.UnboundedClients). The large burst lets informers list
	// and events flow at the apiserver's pace (its priority and fairness
	// still protects it) while the sustained rate stays moderate.
	KubeAPIQPS   float32
	KubeAPIBurst int
	// Controllers is the --controllers list.
	Controllers []string
	// BindAddress and Port are where /healthz, /readyz and /metrics are served;
	// port 0 turns the server off.
	BindAddress string
	Port        int
	// Profiling adds Go's /debug/pprof/ handlers to that server. Off by
	// default: they are not authenticated, and a profile shows the
	// process's memory (object names, for one).
	Profiling bool
}

// NewGenericOptions returns the generic options with their defaults.
func NewGenericOptions() *GenericOptions {
	return &GenericOptions{
		KubeAPIQPS:   500,
		KubeAPIBurst: 3000,
		Controllers:  []string{"*"},
		BindAddress:  "0.0.0.0",
		Port:         10358,
	}
}

// AddFlags adds the generic flags.
func (o *GenericOptions) AddFlags(fs *pflag.FlagSet, allControllers, disabledByDefault []string, aliases map[string]string) {
	fs.StringVar(&o.Kubeconfig, "kubeconfig", o.Kubeconfig, "Path to a kubeconfig file. Empty means the in-cluster configuration.")
	fs.StringVar(&o.Master, "master", o.Master, "The address of the API server; overrides any value in the kubeconfig.")
	fs.Float32Var(&o.KubeAPIQPS, "kube-api-qps", o.KubeAPIQPS, "QPS to use while talking with the API server (the cron-scaler's writes are bounded by --concurrent-cron-scaler-syncs instead).")
	fs.IntVar(&o.KubeAPIBurst, "kube-api-burst", o.KubeAPIBurst, "Burst to use while talking with the API server (the cron-scaler's writes are bounded by --concurrent-cron-scaler-syncs instead).")
	fs.StringSliceVar(&o.Controllers, "controllers", o.Controllers, controllersHelp(allControllers, disabledByDefault, aliases))
	fs.StringVar(&o.BindAddress, "bind-address", o.BindAddress, "The IP address on which to serve /healthz, /readyz and /metrics.")
	fs.IntVar(&o.Port, "port", o.Port, "The port on which to serve /healthz, /readyz and /metrics. 0 disables the server.")
	fs.BoolVar(&o.Profiling, "profiling", o.Profiling, "Serve Go's profiles on /debug/pprof/ next to /metrics. Unauthenticated: enable it only with --bind-address=127.0.0.1 or where the port is not reachable by others.")
}

func controllersHelp(allControllers, disabledByDefault []string, aliases map[string]string) string {
	help := "A list of controllers to enable. '*' enables all on-by-default controllers, 'foo' enables the controller named 'foo', " +
		"'-foo' disables the controller named 'foo'; the first mention of a controller wins."
	help += fmt.Sprintf("\nAll controllers: %s", strings.Join(allControllers, ", "))
	if len(disabledByDefault) > 0 {
		help += fmt.Sprintf("\nDisabled-by-default controllers: %s", strings.Join(disabledByDefault, ", "))
	}
	if len(aliases) > 0 {
		var pairs []string
		for alias, name := range aliases {
			pairs = append(pairs, alias+" ("+name+")")
		}
		sort.Strings(pairs)
		help += fmt.Sprintf("\nAliases: %s", strings.Join(pairs, ", "))
	}
	return help
}

// Validate checks the generic options.
func (o *GenericOptions) Validate(allControllers []string, aliases map[string]string) []error {
	var errs []error
	if o.KubeAPIQPS <= 0 {
		errs = append(errs, fmt.Errorf("--kube-api-qps must be positive, got %v", o.KubeAPIQPS))
	}
	if o.KubeAPIBurst < 1 {
		errs = append(errs, fmt.Errorf("--kube-api-burst must be at least 1, got %d", o.KubeAPIBurst))
	}
	if o.Port < 0 || o.Port > 65535 {
		errs = append(errs, fmt.Errorf("--port must be between 0 and 65535, got %d", o.Port))
	}
	if net.ParseIP(o.BindAddress) == nil {
		errs = append(errs, fmt.Errorf("--bind-address %q is not an IP address", o.BindAddress))
	}
	errs = append(errs, validateControllers(o.Controllers, allControllers, aliases)...)
	return errs
}

// validateControllers rejects names the registry does not know, so that a
// typo fails at start-up instead of silently running nothing.
func validateControllers(controllers, allControllers []string, aliases map[string]string) []error {
	known := map[string]bool{}
	for _, name := range allControllers {
		known[name] = true
	}
	for alias := range aliases {
		known[alias] = true
	}
	var errs []error
	for _, c := range controllers {
		if c == "*" {
			continue
		}
		name := strings.TrimPrefix(c, "-")
		if !known[name] {
			errs = append(errs, fmt.Errorf("--controllers: %q is not a known controller; known controllers: %s", c, knownNames(allControllers, aliases)))
		}
	}
	return errs
}
