package app

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"sync"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/rota-dev/rota/pkg/driver"
	"github.com/rota-dev/rota/pkg/driver/cdi"
	"github.com/rota-dev/rota/pkg/driver/checkpoint"
	"github.com/rota-dev/rota/pkg/driver/gpu"
	"github.com/rota-dev/rota/pkg/driver/health"
	"github.com/rota-dev/rota/pkg/driver/resources"
	"github.com/rota-dev/rota/pkg/driver/state"
	"github.com/rota-dev/rota/pkg/driver/timeslice"
	"github.com/rota-dev/rota/pkg/secureserving"
)

// Plugin is a running kubelet plugin.
type Plugin struct {
	Helper  *kubeletplugin.Helper
	Driver  *driver.Driver
	State   *state.State
	Monitor *health.Monitor
	Metrics *driver.Metrics
	// Mock is the simulated NVML, nil on real GPUs.
	Mock *gpu.Mock
	// HTTPAddr is where /healthz and /readyz listen ("" when off).
	HTTPAddr string
	// MetricsAddr is where /metrics listens ("" when off).
	MetricsAddr string
	// client is the plugin's API client (also for --metrics-secure's
	// token and access reviews).
	client kubernetes.Interface

	ctx    context.Context
	cancel context.CancelCauseFunc
	wg     sync.WaitGroup
	close  func()
}

// Done is closed when the plugin stops on its own after a fatal error (see
// Err) or when Stop was called.
func (p *Plugin) Done() <-chan struct{} { return p.ctx.Done() }

// Err is the fatal error that stopped the plugin, nil while it runs or after
// a plain Stop.
func (p *Plugin) Err() error {
	if err := context.Cause(p.ctx); err != nil && !errors.Is(err, errStopped) && !errors.Is(err, context.Canceled) {
		return err
	}
	return nil
}

var errStopped = errors.New("plugin stopped")

// Extra are what tests inject; production leaves it empty.
type Extra struct {
	KubeClient kubernetes.Interface
	Clock      clock.WithTicker
	// Hook injects crashes into prepare (see state.Options.Hook).
	Hook func(state.Step) error
	// Fatal receives errors that should end the process.
	Fatal func(error)
	// TimeSlicer replaces the time-slice setter (nvidia-smi, or a fresh
	// recorder on mock NVML), so that a test sees every setting across
	// plugin restarts.
	TimeSlicer timeslice.Setter
}

// Start builds and starts the plugin. Stop ends it.
func Start(ctx context.Context, o Options, extra Extra) (*Plugin, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	clk := extra.Clock
	if clk == nil {
		clk = clock.RealClock{}
	}
	ctx, cancel := context.WithCancelCause(ctx)
	p := &Plugin{ctx: ctx, cancel: cancel}
	ok := false
	defer func() {
		if !ok {
			p.Stop()
		}
	}()

	lib, mock, inv, closeNVML, err := openNVML(ctx, &o, clk)
	if err != nil {
		return nil, err
	}
	p.Mock, p.close = mock, closeNVML
	p.Metrics = driver.NewMetrics()
	if p.State, err = newState(ctx, &o, extra, &inv, p.Metrics); err != nil {
		return nil, err
	}
	p.startHealth(ctx, &o, lib, &inv, clk)
	if err := p.startDriver(ctx, &o, extra, &inv, clk); err != nil {
		return nil, err
	}
	if o.HTTPAddress != "" {
		if p.HTTPAddr, err = p.serve(ctx, o.HTTPAddress, p.healthMux(), nil); err != nil {
			return nil, err
		}
	}
	if err := p.serveMetrics(ctx, &o); err != nil {
		return nil, err
	}
	ok = true
	return p, nil
}

// newState opens the checkpoint and the CDI directory and restores what
// this node had prepared before.
func newState(ctx context.Context, o *Options, extra Extra, inv *gpu.Inventory, m *driver.Metrics) (*state.State, error) {
	bootID, err := checkpoint.ReadBootID(o.BootIDFile)
	if err != nil {
		return nil, err
	}
	store, err := checkpoint.NewStore(o.CheckpointDir)
	if err != nil {
		return nil, err
	}
	cdiWriter, err := cdi.NewWriter(o.CDIRoot, cdi.WithDriverRoot(o.DriverRoot))
	if err != nil {
		return nil, err
	}
	slicer := extra.TimeSlicer
	if slicer == nil {
		slicer = timeSlicer(o)
	}
	return state.New(ctx, state.Options{
		NodeName: o.NodeName, Inventory: inv, Store: store, CDI: cdiWriter,
		TimeSlicer: slicer, BootID: bootID, Hook: extra.Hook,
		ObserveBatch: m.ObserveBatch, ObserveWrite: m.ObserveCheckpointWrite,
	})
}

// startHealth probes every GPU once, then watches them (and, on a mock
// node, the fault file) until the plugin stops.
func (p *Plugin) startHealth(ctx context.Context, o *Options, lib nvml.Interface, inv *gpu.Inventory, clk clock.WithTicker) {
	p.Monitor = health.NewMonitor(lib, inv, clk, health.Options{ProbeInterval: o.ProbeInterval, XIDHoldTime: o.XIDHoldTime})
	p.Monitor.Refresh(ctx)
	p.goRun(func() {
		if err := p.Monitor.Run(ctx); err != nil {
			klog.FromContext(ctx).Error(err, "Health monitor failed; GPU health is no longer watched")
		}
	})
	if p.Mock != nil && o.MockFaultFile != "" {
		p.goRun(func() { p.Mock.WatchFaultFile(ctx, o.MockFaultFile, o.FaultPollEvery) })
	}
}

// startDriver builds the DRA driver and registers it with the kubelet; its
// first ResourceSlice publish waits for the API server.
func (p *Plugin) startDriver(ctx context.Context, o *Options, extra Extra, inv *gpu.Inventory, clk clock.WithTicker) error {
	client := extra.KubeClient
	if client == nil {
		var err error
		if client, err = kubeClient(o); err != nil {
			return err
		}
	}
	p.client = client
	fatal := extra.Fatal
	if fatal == nil {
		fatal = func(err error) { p.cancel(err) }
	}
	p.Driver = driver.New(driver.Config{
		NodeName: o.NodeName, Inventory: inv, State: p.State, Monitor: p.Monitor,
		Metrics: p.Metrics, Clock: clk, Fatal: fatal,
		Publish: resources.Options{ConsumableMemory: o.ConsumableMemory},
	})
	for _, dir := range []string{o.PluginDataDir, o.RegistrarDir} {
		if err := os.MkdirAll(dir, 0o750); err != nil {
			return fmt.Errorf("creating plugin directory: %w", err)
		}
	}
	opts := []kubeletplugin.Option{
		kubeletplugin.KubeClient(client),
		kubeletplugin.PluginDataDirectoryPath(o.PluginDataDir),
		kubeletplugin.RegistrarDirectoryPath(o.RegistrarDir),
	}
	if o.PodUID != "" {
		opts = append(opts, kubeletplugin.RollingUpdate(types.UID(o.PodUID)))
	}
	var err error
	p.Helper, err = p.Driver.Start(ctx, opts...)
	return err
}

// Stop shuts the plugin down: the kubelet sockets close and are removed first
// (which is how the kubelet learns that this instance is gone), then the
// prepare or unprepare in progress finishes and later ones are refused, then
// the health monitor and NVML stop. The checkpoint needs no flushing: every
// change was written atomically. Safe to call more than once.
func (p *Plugin) Stop() {
	if p.Helper != nil {
		p.Helper.Stop()
	}
	if p.State != nil {
		p.State.Close()
	}
	p.cancel(errStopped)
	p.wg.Wait()
	if p.close != nil {
		p.close()
		p.close = nil
	}
}

func (p *Plugin) goRun(f func()) {
	p.wg.Add(1)
	go func() { defer p.wg.Done(); f() }()
}

func kubeClient(o *Options) (kubernetes.Interface, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", o.Kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("loading Kubernetes client configuration: %w", err)
	}
	cfg.QPS, cfg.Burst = float32(o.KubeAPIQPS), o.KubeAPIBurst
	// Protobuf, as the kubelet and kube-scheduler talk: every prepare reads
	// its claim, and decoding protobuf costs the plugin (and the API server
	// encoding it) a fraction of JSON. The plugin reads built-in types only.
	cfg.ContentType = runtime.ContentTypeProtobuf
	cfg.AcceptContentTypes = runtime.ContentTypeProtobuf + "," + runtime.ContentTypeJSON
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("creating Kubernetes client: %w", err)
	}
	return cs, nil
}

// healthMux serves /healthz (the process runs) and /readyz (the kubelet
// registered the plugin), what the kubelet's probes ask, on the pod's
// address.
func (p *Plugin) healthMux() *http.ServeMux {
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) })
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		if st := p.Helper.RegistrationStatus(); st == nil || !st.PluginRegistered {
			http.Error(w, "not registered with the kubelet", http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ok"))
	})
	return mux
}

// metricsMux serves /metrics on its own listener, unauthenticated: on the
// loopback interface by default (--metrics-address), as kube-proxy serves
// its metrics, so that only the pod itself (a sidecar) reads them, while
// the kubelet's probes reach /healthz and /readyz on the pod's address.
func (p *Plugin) metricsMux() *http.ServeMux {
	mux := http.NewServeMux()
	mux.Handle("/metrics", p.Metrics.Handler())
	return mux
}

// serveMetrics serves /metrics on --metrics-address: plainly, or with
// --metrics-secure over TLS to authenticated, authorized callers only.
func (p *Plugin) serveMetrics(ctx context.Context, o *Options) error {
	if o.MetricsAddress == "" {
		return nil
	}
	var h http.Handler = p.metricsMux()
	var tlsConfig *tls.Config
	if o.MetricsSecure {
		var err error
		if h, tlsConfig, err = secureserving.Metrics(h, p.client, "rota-dra-kubelet-plugin"); err != nil {
			return err
		}
	}
	var err error
	if p.MetricsAddr, err = p.serve(ctx, o.MetricsAddress, h, tlsConfig); err != nil {
		return err
	}
	if !o.MetricsSecure && !secureserving.Loopback(p.MetricsAddr) {
		klog.FromContext(ctx).Info("Serving /metrics without authentication beyond this host; restrict who can reach it (a NetworkPolicy) or use --metrics-secure", "address", p.MetricsAddr)
	}
	return nil
}

// serve listens on addr and serves h until ctx ends, over TLS when
// tlsConfig is set; it returns the address it listens on.
func (p *Plugin) serve(ctx context.Context, addr string, h http.Handler, tlsConfig *tls.Config) (string, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return "", fmt.Errorf("listening on %s: %w", addr, err)
	}
	if tlsConfig != nil {
		ln = tls.NewListener(ln, tlsConfig)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
	p.goRun(func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			klog.FromContext(ctx).Error(err, "HTTP server failed", "address", ln.Addr().String())
		}
	})
	p.goRun(func() {
		<-ctx.Done()
		_ = srv.Close()
	})
	return ln.Addr().String(), nil
}
