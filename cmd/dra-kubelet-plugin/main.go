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

	"k8s.io/klog/v2"

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
	logger := klog.Background().WithName("gpu.rota.dev")
	ctx = klog.NewContext(ctx, logger)

	if discover {
		return app.Discover(ctx, opts, os.Stdout)
	}
	plugin, err := app.Start(ctx, opts, app.Extra{})
	if err != nil {
		return err
	}
	logger.Info("Plugin running", "node", opts.NodeName, "mockProfile", opts.MockProfile)
	<-ctx.Done()
	logger.Info("Shutting down")
	plugin.Stop()
	return nil
}
