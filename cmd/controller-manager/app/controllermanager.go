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

// Package app builds and runs scaleplane-controller-manager: the command, the
// controller registry, the controller context, leader election, and the
// health and metrics server.
package app

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/kubernetes"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/record"
	cliflag "k8s.io/component-base/cli/flag"
	"k8s.io/component-base/logs"
	logsapi "k8s.io/component-base/logs/api/v1"
	"k8s.io/component-base/term"
	"k8s.io/klog/v2"

	// Register the JSON log format, and the client-go, workqueue and leader
	// election metrics with the legacy registry served on /metrics.
	_ "k8s.io/component-base/logs/json/register"
	_ "k8s.io/component-base/metrics/prometheus/clientgo"
	_ "k8s.io/component-base/metrics/prometheus/clientgo/leaderelection"
	_ "k8s.io/component-base/metrics/prometheus/workqueue"

	"github.com/scaleplane/scaleplane/cmd/controller-manager/app/options"
	"github.com/scaleplane/scaleplane/pkg/version"
)

// NewControllerManagerCommand returns the scaleplane-controller-manager command.
func NewControllerManagerCommand() *cobra.Command {
	return newCommand(options.NewOptions(), NewControllerDescriptors())
}

func newCommand(o *options.Options, descriptors map[string]*ControllerDescriptor) *cobra.Command {
	all := KnownControllers(descriptors)
	aliases := ControllerAliases(descriptors)
	cmd := &cobra.Command{
		Use: options.ControllerManagerName,
		Long: options.ControllerManagerName + " runs scaleplane's scaling controllers against a Kubernetes or " +
			"Karmada API server, as selected with --controllers: " + describeControllers(descriptors) + ".",
		SilenceUsage: true,
		Args:         cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if o.ShowVersion {
				fmt.Fprintln(cmd.OutOrStdout(), options.ControllerManagerName, version.Get())
				return nil
			}
			if err := logsapi.ValidateAndApply(o.Logs, nil); err != nil {
				return fmt.Errorf("invalid logging options: %w", err)
			}
			defer logs.FlushLogs()
			if err := o.Validate(all, aliases); err != nil {
				return err
			}
			cliflag.PrintFlags(cmd.Flags())
			ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
			defer cancel()
			return Run(ctx, o, descriptors)
		},
	}
	fs := cmd.Flags()
	namedFlagSets := o.Flags(all, ControllersDisabledByDefault(descriptors), aliases)
	for _, f := range namedFlagSets.FlagSets {
		fs.AddFlagSet(f)
	}
	cols, _, _ := term.TerminalSize(cmd.OutOrStdout())
	cliflag.SetUsageAndHelpFunc(cmd, namedFlagSets, cols)
	return cmd
}

// Run runs the controller manager until ctx ends. With leader election on,
// controllers run only while this process holds the lease.
func Run(ctx context.Context, o *options.Options, descriptors map[string]*ControllerDescriptor) error {
	logger := klog.FromContext(ctx)
	logger.Info("Starting "+options.ControllerManagerName, "version", version.Get().String())
	go watchMemory(ctx, cgroupMemoryLimitFiles, 30*time.Second)

	cfg, err := clientcmd.BuildConfigFromFlags(o.Generic.Master, o.Generic.Kubeconfig)
	if err != nil {
		return fmt.Errorf("loading the API server configuration (--kubeconfig %q): %w", o.Generic.Kubeconfig, err)
	}
	cfg.QPS = o.Generic.KubeAPIQPS
	cfg.Burst = o.Generic.KubeAPIBurst

	kubeClient, err := kubernetes.NewForConfig(rest.AddUserAgent(rest.CopyConfig(cfg), options.ControllerManagerName))
	if err != nil {
		return fmt.Errorf("building the Kubernetes client: %w", err)
	}
	broadcaster := record.NewBroadcaster(record.WithContext(ctx))
	broadcaster.StartStructuredLogging(3)
	broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: kubeClient.CoreV1().Events("")})
	defer broadcaster.Shutdown()

	checks := newHealthChecks()
	// /healthz is public to every authenticated client (the
	// system:public-info-viewer ClusterRole), and fails while the API
	// server cannot reach etcd: either way the controllers cannot work.
	discoveryREST := kubeClient.Discovery().RESTClient()
	go probeAPIServer(ctx, func(ctx context.Context) error {
		return discoveryREST.Get().AbsPath("/healthz").Do(ctx).Error()
	}, checks)
	serverErr := make(chan error, 1)
	if o.Generic.Port != 0 {
		go func() {
			defer utilruntime.HandleCrash()
			serverErr <- serveHealthAndMetrics(ctx, o.Generic.BindAddress, o.Generic.Port, o.Generic.Profiling, checks)
		}()
	}

	controllerCtx, err := CreateControllerContext(ctx, cfg, o, broadcaster)
	if err != nil {
		return err
	}
	run := func(ctx context.Context) {
		runControllers(ctx, controllerCtx, descriptors, o.Generic.Controllers, checks)
	}

	done := make(chan error, 1)
	go func() {
		defer utilruntime.HandleCrash()
		if !o.LeaderElection.LeaderElect {
			runUntilStopped(ctx, run)
			done <- nil
			return
		}
		done <- runWithLeaderElection(ctx, kubeClient, o, checks, run)
	}()

	select {
	case err := <-serverErr:
		if err != nil {
			return err
		}
		return <-done
	case err := <-done:
		return err
	}
}

// errLeaderElectionLost is returned when another process took the lease: the
// controllers stopped, and the process must exit so it cannot act as a
// second leader.
var errLeaderElectionLost = errors.New("leader election lost")
