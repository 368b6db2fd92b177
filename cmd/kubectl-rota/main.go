// Command kubectl-rota is a kubectl plugin (`kubectl rota ...`) that shows
// what Rota decided: why a pod waits (`why`) and who holds every GPU of
// the pool (`pool`), and what the DeploySchedules will ask of the pool
// (`forecast`), whether the cluster can run Rota (`preflight`), and the
// moves that would admit every waiting pod (`defrag`). It only reads from
// the API server, except `defrag --apply`, which evicts the planned pods
// through the Eviction API.
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/spf13/cobra"
	"golang.org/x/term"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

func main() {
	streams := genericiooptions.IOStreams{In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr}
	if err := newRootCommand(streams).ExecuteContext(context.Background()); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}

// options are the flags every subcommand shares.
type options struct {
	config  *genericclioptions.ConfigFlags
	streams genericiooptions.IOStreams
	output  string
	width   int
	// colorMode is auto (colour only on a terminal), always or never.
	colorMode string
	// kubeAPIQPS and kubeAPIBurst limit the client: the forecast reads
	// every schedule's workloads, thousands of reads on a large cluster,
	// where client-go's default (5 a second) would take minutes.
	kubeAPIQPS   float64
	kubeAPIBurst int
}

func newRootCommand(streams genericiooptions.IOStreams) *cobra.Command {
	cmd, _ := newRoot(streams)
	return cmd
}

// newRoot is the root command and the options its flags fill.
func newRoot(streams genericiooptions.IOStreams) (*cobra.Command, *options) {
	o := &options{config: genericclioptions.NewConfigFlags(true), streams: streams}
	cmd := &cobra.Command{
		Use:           "kubectl-rota",
		Short:         "Show what Rota decided: why a pod waits, who holds each GPU, what the schedules will ask",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	o.config.AddFlags(cmd.PersistentFlags())
	cmd.PersistentFlags().StringVarP(&o.output, "output", "o", "", "output format: empty for text, json or yaml (forecast: table, json or html)")
	cmd.PersistentFlags().StringVar(&o.colorMode, "color", "auto", "colour text output: auto (only on a terminal), always or never")
	cmd.PersistentFlags().IntVar(&o.width, "width", 100, "wrap text output at this many columns")
	cmd.PersistentFlags().Float64Var(&o.kubeAPIQPS, "kube-api-qps", 50, "steady requests per second to the API server")
	cmd.PersistentFlags().IntVar(&o.kubeAPIBurst, "kube-api-burst", 100, "requests that may be sent at once above --kube-api-qps")
	cmd.AddCommand(newWhyCommand(o), newPoolCommand(o), newForecastCommand(o), newPreflightCommand(o), newDefragCommand(o))
	return cmd, o
}

// restConfig is the kubeconfig's client configuration with the rate
// limits of --kube-api-qps and --kube-api-burst.
func (o *options) restConfig() (*rest.Config, error) {
	if o.kubeAPIQPS <= 0 || o.kubeAPIBurst < 1 {
		return nil, fmt.Errorf("--kube-api-qps (%g) must be above 0 and --kube-api-burst (%d) at least 1", o.kubeAPIQPS, o.kubeAPIBurst)
	}
	cfg, err := o.config.ToRESTConfig()
	if err != nil {
		return nil, fmt.Errorf("kubeconfig: %w", err)
	}
	cfg = rest.CopyConfig(cfg)
	cfg.QPS, cfg.Burst = float32(o.kubeAPIQPS), o.kubeAPIBurst
	return cfg, nil
}

func (o *options) clients() (kubernetes.Interface, dynamic.Interface, string, error) {
	cfg, err := o.restConfig()
	if err != nil {
		return nil, nil, "", err
	}
	ns, _, err := o.config.ToRawKubeConfigLoader().Namespace()
	if err != nil {
		return nil, nil, "", fmt.Errorf("namespace: %w", err)
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, nil, "", fmt.Errorf("client: %w", err)
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, nil, "", fmt.Errorf("dynamic client: %w", err)
	}
	return client, dyn, ns, nil
}

func (o *options) validate() error {
	if o.output != "" && o.output != "json" && o.output != "yaml" {
		return fmt.Errorf("--output %q is not supported: use json, yaml or leave it empty", o.output)
	}
	if o.colorMode != "auto" && o.colorMode != "always" && o.colorMode != "never" {
		return fmt.Errorf("--color %q is not supported: use auto, always or never", o.colorMode)
	}
	if o.width < 40 {
		return fmt.Errorf("--width %d is too narrow: at least 40", o.width)
	}
	return nil
}

// color reports whether text output is coloured: with --color=auto only
// when it goes to a terminal and NO_COLOR is not set.
func (o *options) color() bool {
	switch o.colorMode {
	case "always":
		return true
	case "never":
		return false
	}
	if _, ok := os.LookupEnv("NO_COLOR"); ok {
		return false
	}
	f, ok := o.streams.Out.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}
