// Package app assembles the gpu.rota.dev kubelet plugin from its parts, for
// cmd/dra-kubelet-plugin and for tests that run the whole plugin in-process.
package app

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"time"

	gpuv1 "github.com/rota-dev/rota/pkg/apis/gpu/v1alpha1"
	"github.com/rota-dev/rota/pkg/driver/checkpoint"
)

// Options are the plugin's settings, one flag each.
type Options struct {
	NodeName      string
	PodUID        string
	MockProfile   string
	MockFaultFile string
	// MockTimeSliceDelay is how long a simulated time-slice change takes.
	MockTimeSliceDelay time.Duration
	CDIRoot            string
	DriverRoot         string
	PluginDataDir      string
	RegistrarDir       string
	CheckpointDir      string
	BootIDFile         string
	Kubeconfig         string
	// KubeAPIQPS and KubeAPIBurst limit the plugin's API client.
	KubeAPIQPS     float64
	KubeAPIBurst   int
	HTTPAddress    string
	MetricsAddress string
	MetricsSecure  bool
	NvidiaSMI      string
	ProbeInterval  time.Duration
	XIDHoldTime    time.Duration
	FaultPollEvery time.Duration
	// ShutdownTimeout bounds Stop after SIGTERM; main exits 1 past it.
	ShutdownTimeout time.Duration
	// ConsumableMemory publishes GPUs for sharing by memory (see
	// resources.Options). Off by default: only nodes that host time-sliced
	// reservations need it.
	ConsumableMemory bool
}

// DefaultMetricsAddress is where /metrics listens unless told otherwise:
// the loopback interface only, as kube-proxy serves its metrics.
const DefaultMetricsAddress = "127.0.0.1:8081"

// DefaultOptions are the values the DaemonSet runs with.
func DefaultOptions() Options {
	return Options{
		NodeName:      os.Getenv("NODE_NAME"),
		PodUID:        os.Getenv("POD_UID"),
		CDIRoot:       "/var/run/cdi",
		DriverRoot:    "/",
		PluginDataDir: filepath.Join("/var/lib/kubelet/plugins", gpuv1.DriverName),
		RegistrarDir:  "/var/lib/kubelet/plugins_registry",
		BootIDFile:    checkpoint.BootIDPath,
		HTTPAddress:   ":8080",
		// A node starting 32 GPU pods makes 32 claim GETs at once (the
		// helper reads each claim it prepares): the burst covers them; the
		// steady rate is far below the kubelet's own default (50).
		KubeAPIQPS:     25,
		KubeAPIBurst:   50,
		MetricsAddress: DefaultMetricsAddress,
		ProbeInterval:  5 * time.Second,
		XIDHoldTime:    5 * time.Minute,
		FaultPollEvery: 100 * time.Millisecond,
		// The DaemonSet's terminationGracePeriodSeconds is 30.
		ShutdownTimeout: 20 * time.Second,
	}
}

// AddFlags registers the options on fs.
func (o *Options) AddFlags(fs *flag.FlagSet) {
	fs.StringVar(&o.NodeName, "node-name", o.NodeName, "Name of this node: the pool name and the node of the published ResourceSlice (env NODE_NAME).")
	fs.StringVar(&o.PodUID, "pod-uid", o.PodUID, "UID of this pod; enables rolling updates of the DaemonSet without a gap (env POD_UID).")
	fs.StringVar(&o.MockProfile, "mock-profile", o.MockProfile, "Simulate GPUs instead of reading NVML: dgx-h100, dgx-a100, hgx-h200, dgx-b200, l4x2, or a list such as h100:4,a100:4.")
	fs.StringVar(&o.MockFaultFile, "mock-fault-file", o.MockFaultFile, "With --mock-profile: file of active faults, one \"<gpu index> <xid>\" per line; removing a line recovers the GPU.")
	fs.DurationVar(&o.MockTimeSliceDelay, "mock-time-slice-delay", o.MockTimeSliceDelay, "With --mock-profile: how long each time-slice change takes, as nvidia-smi compute-policy does on a real GPU (a slow prepare to test crashes in).")
	fs.StringVar(&o.CDIRoot, "cdi-root", o.CDIRoot, "Directory for the per-claim CDI specs (the container runtime's CDI directory).")
	fs.StringVar(&o.DriverRoot, "driver-root", o.DriverRoot, "Where the GPUs' device nodes (dev/nvidia*) are on the host, as the container runtime sees it: / (the host's /dev) or a driver container's root such as /run/nvidia/driver.")
	fs.StringVar(&o.PluginDataDir, "plugin-data-dir", o.PluginDataDir, "Directory of the kubelet plugin's service socket.")
	fs.StringVar(&o.RegistrarDir, "registrar-dir", o.RegistrarDir, "The kubelet's plugin registration directory.")
	fs.StringVar(&o.CheckpointDir, "checkpoint-dir", o.CheckpointDir, "Directory of the checkpoint; defaults to --plugin-data-dir. Must survive plugin restarts.")
	fs.StringVar(&o.BootIDFile, "boot-id-file", o.BootIDFile, "File holding the node's boot ID.")
	fs.StringVar(&o.Kubeconfig, "kubeconfig", o.Kubeconfig, "Kubeconfig file; in-cluster configuration when empty.")
	fs.Float64Var(&o.KubeAPIQPS, "kube-api-qps", o.KubeAPIQPS, "Steady requests per second the plugin may send to the API server.")
	fs.IntVar(&o.KubeAPIBurst, "kube-api-burst", o.KubeAPIBurst, "Requests the plugin may send at once above --kube-api-qps (e.g. the claim reads of pods starting together).")
	fs.StringVar(&o.HTTPAddress, "http-address", o.HTTPAddress, "Address of /healthz and /readyz (the kubelet's probes); empty disables.")
	fs.StringVar(&o.MetricsAddress, "metrics-address", o.MetricsAddress, "Address of /metrics, served without authentication: the pod's loopback by default (scrape it through a sidecar, "+
		"e.g. a proxy that authenticates and authorizes the scraper); a wider address is only for networks where a NetworkPolicy limits who reaches it, or with --metrics-secure. Empty disables.")
	fs.BoolVar(&o.MetricsSecure, "metrics-secure", o.MetricsSecure, "Serve /metrics over TLS (a self-signed certificate) to callers whose bearer token the API server accepts (TokenReview) and who may get "+
		"the non-resource URL /metrics (SubjectAccessReview), as kube components do. Needs create on tokenreviews and subjectaccessreviews (ClusterRole system:auth-delegator).")
	fs.StringVar(&o.NvidiaSMI, "nvidia-smi", o.NvidiaSMI, "Path of nvidia-smi, used to set time slices (nvidia-smi on PATH when empty).")
	fs.BoolVar(&o.ConsumableMemory, "consumable-memory", o.ConsumableMemory, "Publish every GPU as shareable (allowMultipleAllocations) with its memory as consumable capacity, "+
		"the whole GPU by default: claims that ask for no memory keep a GPU to themselves, time-sliced claims asking capacity.requests.memory share one within its memory. "+
		"For nodes that host time-sliced GPU reservations; off, each GPU goes to one claim.")
	fs.DurationVar(&o.ProbeInterval, "health-probe-interval", o.ProbeInterval, "How often every GPU is probed; recovery is noticed at this pace.")
	fs.DurationVar(&o.ShutdownTimeout, "shutdown-timeout", o.ShutdownTimeout, "How long a graceful shutdown (SIGTERM) may take before the plugin gives up and exits 1.")
	fs.DurationVar(&o.XIDHoldTime, "xid-hold-time", o.XIDHoldTime, "How long a GPU stays tainted after its last XID (negative: not at all).")
}

// Validate checks the options.
func (o *Options) Validate() error {
	var errs []error
	if o.NodeName == "" {
		errs = append(errs, errors.New("--node-name (or NODE_NAME) is required"))
	}
	if o.MockTimeSliceDelay != 0 && o.MockProfile == "" {
		errs = append(errs, errors.New("--mock-time-slice-delay needs --mock-profile"))
	}
	if o.MockTimeSliceDelay < 0 {
		errs = append(errs, fmt.Errorf("--mock-time-slice-delay=%s: must not be negative", o.MockTimeSliceDelay))
	}
	if o.MockFaultFile != "" && o.MockProfile == "" {
		errs = append(errs, errors.New("--mock-fault-file needs --mock-profile"))
	}
	if o.KubeAPIQPS <= 0 || o.KubeAPIBurst < 1 {
		errs = append(errs, fmt.Errorf("--kube-api-qps (%g) must be above 0 and --kube-api-burst (%d) at least 1", o.KubeAPIQPS, o.KubeAPIBurst))
	}
	if o.CheckpointDir == "" {
		o.CheckpointDir = o.PluginDataDir
	}
	return errors.Join(errs...)
}
