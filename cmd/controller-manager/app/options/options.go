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

// Package options holds the flags of scaleplane-controller-manager, one file
// per flag section, and their validation.
package options

import (
	"fmt"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/apimachinery/pkg/util/sets"
	cliflag "k8s.io/component-base/cli/flag"
	componentbaseconfig "k8s.io/component-base/config"
	componentbaseoptions "k8s.io/component-base/config/options"
	"k8s.io/component-base/logs"
	logsapi "k8s.io/component-base/logs/api/v1"
)

// ControllerManagerName is the name the controller manager uses for its
// leader-election lease, its events and its user agent.
const ControllerManagerName = "scaleplane-controller-manager"

// Options holds every flag of the controller manager.
type Options struct {
	Generic        *GenericOptions
	LeaderElection *componentbaseconfig.LeaderElectionConfiguration
	CronScaler     *CronScalerOptions
	HPAGenerator   *HPAGeneratorOptions
	Resizer        *ResizerOptions
	Logs           *logs.Options
	// ShowVersion prints the version and exits.
	ShowVersion bool
}

// NewOptions returns the options with their defaults.
func NewOptions() *Options {
	return &Options{
		Generic: NewGenericOptions(),
		LeaderElection: &componentbaseconfig.LeaderElectionConfiguration{
			LeaderElect:       true,
			LeaseDuration:     metav1.Duration{Duration: 15 * time.Second},
			RenewDeadline:     metav1.Duration{Duration: 10 * time.Second},
			RetryPeriod:       metav1.Duration{Duration: 2 * time.Second},
			ResourceLock:      "leases",
			ResourceName:      ControllerManagerName,
			ResourceNamespace: "kube-system",
		},
		CronScaler:   NewCronScalerOptions(),
		HPAGenerator: NewHPAGeneratorOptions(),
		Resizer:      NewResizerOptions(),
		Logs:         logs.NewOptions(),
	}
}

// Flags returns the flags in named sections, for help output grouped the way
// kube-controller-manager groups its own. allControllers, disabledByDefault
// and aliases come from the controller registry so the help text cannot drift
// from what the binary runs.
func (o *Options) Flags(allControllers, disabledByDefault []string, aliases map[string]string) cliflag.NamedFlagSets {
	fss := cliflag.NamedFlagSets{}
	o.Generic.AddFlags(fss.FlagSet("generic"), allControllers, disabledByDefault, aliases)
	componentbaseoptions.BindLeaderElectionFlags(o.LeaderElection, fss.FlagSet("leader election"))
	o.CronScaler.AddFlags(fss.FlagSet("cron-scaler controller"))
	o.HPAGenerator.AddFlags(fss.FlagSet("hpa-generator controller"))
	o.Resizer.AddFlags(fss.FlagSet("resizer controller"))
	logsapi.AddFlags(o.Logs, fss.FlagSet("logs"))
	fss.FlagSet("global").BoolVar(&o.ShowVersion, "version", false, "Print version information and quit.")
	return fss
}

// Validate checks the options. allControllers and aliases are the names the
// registry knows; --controllers may only use those.
func (o *Options) Validate(allControllers []string, aliases map[string]string) error {
	var errs []error
	errs = append(errs, o.Generic.Validate(allControllers, aliases)...)
	errs = append(errs, validateLeaderElection(o.LeaderElection)...)
	errs = append(errs, o.CronScaler.Validate()...)
	errs = append(errs, o.HPAGenerator.Validate()...)
	errs = append(errs, o.Resizer.Validate()...)
	if logErrs := logsapi.Validate(o.Logs, nil, nil); len(logErrs) > 0 {
		errs = append(errs, logErrs.ToAggregate())
	}
	return utilerrors.NewAggregate(errs)
}

func validateLeaderElection(le *componentbaseconfig.LeaderElectionConfiguration) []error {
	if !le.LeaderElect {
		return nil
	}
	var errs []error
	if le.LeaseDuration.Duration <= le.RenewDeadline.Duration {
		errs = append(errs, fmt.Errorf("--leader-elect-lease-duration (%v) must be greater than --leader-elect-renew-deadline (%v)", le.LeaseDuration.Duration, le.RenewDeadline.Duration))
	}
	if le.RenewDeadline.Duration <= le.RetryPeriod.Duration {
		errs = append(errs, fmt.Errorf("--leader-elect-renew-deadline (%v) must be greater than --leader-elect-retry-period (%v)", le.RenewDeadline.Duration, le.RetryPeriod.Duration))
	}
	if le.RetryPeriod.Duration <= 0 {
		errs = append(errs, fmt.Errorf("--leader-elect-retry-period must be positive, got %v", le.RetryPeriod.Duration))
	}
	if le.ResourceLock != "leases" {
		errs = append(errs, fmt.Errorf("--leader-elect-resource-lock %q is not supported: only \"leases\"", le.ResourceLock))
	}
	if le.ResourceName == "" || le.ResourceNamespace == "" {
		errs = append(errs, fmt.Errorf("--leader-elect-resource-name and --leader-elect-resource-namespace must not be empty"))
	}
	return errs
}

// knownNames lists the controller names and aliases, sorted, for messages.
func knownNames(allControllers []string, aliases map[string]string) string {
	s := sets.New(allControllers...)
	for alias := range aliases {
		s.Insert(alias)
	}
	return strings.Join(sets.List(s), ", ")
}
