// Command dra-kubelet-plugin is the gpu.rota.dev DRA driver's node plugin: it
// publishes one ResourceSlice device per GPU, prepares claims with CDI and
// time-slicing, checkpoints them and reports GPU health as device taints.
//
//	dra-kubelet-plugin [flags]            serve the kubelet (the DaemonSet)
//	dra-kubelet-plugin discover [flags]   print the ResourceSlice it would publish, change nothing
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"k8s.io/klog/v2"

	gpuv1 "github.com/rota-dev/rota/pkg/apis/gpu/v1alpha1"
	"github.com/rota-dev/rota/pkg/driver/app"
)

func main() {
	os.Exit(realMain(os.Args[1:], os.Stderr))
}

// realMain returns the exit status: 1 with one line on stderr for any error.
func realMain(args []string, stderr io.Writer) int {
	if err := run(args, stderr); err != nil {
		fmt.Fprintf(stderr, "dra-kubelet-plugin: %v\n", err)
		return 1
	}
	return 0
}

func run(args []string, stderr io.Writer) error {
	discover := len(args) > 0 && args[0] == "discover"
	if discover {
		args = args[1:]
	}
	opts := app.DefaultOptions()
	fs := flag.NewFlagSet("dra-kubelet-plugin", flag.ContinueOnError)
	fs.SetOutput(stderr)
	opts.AddFlags(fs)
	klog.InitFlags(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	logger := klog.Background().WithName(gpuv1.DriverName)
	ctx = klog.NewContext(ctx, logger)

	if discover {
		return app.Discover(ctx, opts, os.Stdout)
	}
	plugin, err := app.Start(ctx, opts, app.Extra{})
	if err != nil {
		if ctx.Err() != nil {
			// SIGTERM while starting (the first publish waits for the API
			// server): Start has cleaned up; that is a graceful stop too.
			logger.Info("Stopped while starting", "reason", err)
			return nil
		}
		return err
	}
	logger.Info("Plugin running", "node", opts.NodeName, "mockProfile", opts.MockProfile, "consumableMemory", opts.ConsumableMemory)
	select {
	case <-ctx.Done():
		logger.Info("Shutting down")
	case <-plugin.Done():
		logger.Info("Shutting down after a fatal error")
	}
	stop() // a second signal kills the process at once
	return shutdown(plugin, opts.ShutdownTimeout)
}

// shutdown stops the plugin within timeout. The exit status is 0 after a
// signal, 1 after a fatal error or when stopping takes too long.
func shutdown(plugin *app.Plugin, timeout time.Duration) error {
	done := make(chan struct{})
	go func() {
		plugin.Stop()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(timeout):
		return fmt.Errorf("shutdown did not finish within %v", timeout)
	}
	if err := plugin.Err(); err != nil {
		return err
	}
	klog.Background().Info("Stopped")
	return nil
}
