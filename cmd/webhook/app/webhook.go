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
	"context"
	"fmt"
	"net"
	"os"
	"os/signal"
	"strconv"
	"syscall"

	"github.com/spf13/cobra"
	cliflag "k8s.io/component-base/cli/flag"
	"k8s.io/component-base/logs"
	logsapi "k8s.io/component-base/logs/api/v1"
	"k8s.io/component-base/term"
	"k8s.io/klog/v2"

	// Register the JSON log format.
	_ "k8s.io/component-base/logs/json/register"

	"github.com/scaleplane/scaleplane/pkg/version"
)

// NewWebhookCommand returns the scaleplane-webhook command.
func NewWebhookCommand() *cobra.Command {
	o := NewOptions()
	cmd := &cobra.Command{
		Use: WebhookName,
		Long: WebhookName + " is the validating admission webhook of scaleplane's objects: CronFederatedHPA " +
			"(/validate-cronfederatedhpa), LeaderWorkerSet spec.scalePolicy (/validate-leaderworkerset) and " +
			"AddonResizer (/validate-addonresizer). It serves HTTPS only, and needs no access to the API server.",
		SilenceUsage: true,
		Args:         cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if o.ShowVersion {
				fmt.Fprintln(cmd.OutOrStdout(), WebhookName, version.Get())
				return nil
			}
			if err := logsapi.ValidateAndApply(o.Logs, nil); err != nil {
				return fmt.Errorf("invalid logging options: %w", err)
			}
			defer logs.FlushLogs()
			if err := o.Validate(); err != nil {
				return err
			}
			cliflag.PrintFlags(cmd.Flags())
			ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
			defer cancel()
			return Run(ctx, o)
		},
	}
	fs := cmd.Flags()
	namedFlagSets := o.Flags()
	for _, f := range namedFlagSets.FlagSets {
		fs.AddFlagSet(f)
	}
	cols, _, _ := term.TerminalSize(cmd.OutOrStdout())
	cliflag.SetUsageAndHelpFunc(cmd, namedFlagSets, cols)
	return cmd
}

// Run listens on the configured address and serves until ctx ends.
func Run(ctx context.Context, o *Options) error {
	logger := klog.FromContext(ctx)
	logger.Info("Starting "+WebhookName, "version", version.Get().String())
	addr := net.JoinHostPort(o.BindAddress, strconv.Itoa(o.SecurePort))
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("listening on %s: %w", addr, err)
	}
	return Serve(ctx, ln, o)
}
