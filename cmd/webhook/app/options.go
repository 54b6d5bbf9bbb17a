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

package app

import (
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/spf13/pflag"
	cliflag "k8s.io/component-base/cli/flag"
	"k8s.io/component-base/logs"
	logsapi "k8s.io/component-base/logs/api/v1"
)

// WebhookName is the name of the binary, in logs and --version.
const WebhookName = "scaleplane-webhook"

// Options are the flags of scaleplane-webhook.
type Options struct {
	// CertFile and KeyFile hold the serving certificate and its key, PEM
	// encoded. They are reloaded when they change on disk, so a rotated
	// certificate is served without a restart.
	CertFile string
	KeyFile  string
	// BindAddress and SecurePort are where HTTPS is served.
	BindAddress string
	SecurePort  int
	// ShutdownGracePeriod bounds how long in-flight reviews may take to
	// finish after SIGTERM.
	ShutdownGracePeriod time.Duration

	Logs        *logsapi.LoggingConfiguration
	ShowVersion bool
}

// NewOptions returns the default options.
func NewOptions() *Options {
	return &Options{
		BindAddress:         "0.0.0.0",
		SecurePort:          9443,
		ShutdownGracePeriod: 10 * time.Second,
		Logs:                logs.NewOptions(),
	}
}

// Flags returns the flags, in named sections for the help text.
func (o *Options) Flags() cliflag.NamedFlagSets {
	var fss cliflag.NamedFlagSets
	o.addServingFlags(fss.FlagSet("serving"))
	logsapi.AddFlags(o.Logs, fss.FlagSet("logs"))
	fss.FlagSet("global").BoolVar(&o.ShowVersion, "version", false, "Print version information and quit.")
	return fss
}

func (o *Options) addServingFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.CertFile, "tls-cert-file", o.CertFile,
		"File with the x509 serving certificate (PEM), followed by any intermediate certificates. Reloaded when it changes.")
	fs.StringVar(&o.KeyFile, "tls-private-key-file", o.KeyFile,
		"File with the private key (PEM) of --tls-cert-file. Reloaded when it changes.")
	fs.StringVar(&o.BindAddress, "bind-address", o.BindAddress,
		"IP address to serve HTTPS on (use 127.0.0.1 to serve this host only).")
	fs.IntVar(&o.SecurePort, "secure-port", o.SecurePort,
		"Port to serve HTTPS on: the admission endpoints, /healthz and /metrics.")
	fs.DurationVar(&o.ShutdownGracePeriod, "shutdown-grace-period", o.ShutdownGracePeriod,
		"How long in-flight requests may take to finish after SIGTERM or SIGINT.")
}

// Validate returns every problem of the options together.
func (o *Options) Validate() error {
	var errs []error
	if o.CertFile == "" || o.KeyFile == "" {
		errs = append(errs, errors.New("--tls-cert-file and --tls-private-key-file are required: kube-apiserver only calls webhooks over HTTPS"))
	}
	if net.ParseIP(o.BindAddress) == nil {
		errs = append(errs, fmt.Errorf("--bind-address %q is not an IP address", o.BindAddress))
	}
	if o.SecurePort < 1 || o.SecurePort > 65535 {
		errs = append(errs, fmt.Errorf("--secure-port %d must be between 1 and 65535", o.SecurePort))
	}
	if o.ShutdownGracePeriod < 0 {
		errs = append(errs, fmt.Errorf("--shutdown-grace-period %v must not be negative", o.ShutdownGracePeriod))
	}
	return errors.Join(errs...)
}
