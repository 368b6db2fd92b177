package cluster

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/rota-dev/rota/pkg/driver/gpu"
	"github.com/rota-dev/rota/pkg/sim/vclock"
)

// NodeSpec is one simulated GPU node.
type NodeSpec struct {
	Name string `json:"name"`
	// Profile is a mock NVML profile (pkg/driver/gpu): dgx-h100, dgx-a100,
	// hgx-h200, dgx-b200, l4x2, or a list such as h100:4,a100:4.
	Profile string `json:"profile"`
	// ConsumableMemory publishes the node's GPUs for sharing by memory
	// (the driver's --consumable-memory).
	ConsumableMemory bool `json:"consumableMemory,omitempty"`
}

// KubeletTiming are the simulated kubelets' delays.
type KubeletTiming struct {
	StartDelay     time.Duration
	ReadyDelay     time.Duration
	MaxGracePeriod time.Duration
}

// Options configure a sandbox.
type Options struct {
	// RepoRoot holds manifests/ (CRDs, DeviceClasses, scheduler config).
	RepoRoot string
	// Dir receives the control plane's data and the kubeconfig.
	Dir   string
	Nodes []NodeSpec
	// Clock drives the kubelets and the schedule controller.
	Clock   *vclock.Clock
	Kubelet KubeletTiming
	// PassPeriod is the schedule controller's re-evaluation period when no
	// boundary is nearer. Long periods keep a virtual week short.
	PassPeriod time.Duration
	// ProgressPeriod is how often the schedule controller looks at a step
	// in flight. Default 15s.
	ProgressPeriod time.Duration
	// SchedulerPluginArgs replace the args of the named plugins in the
	// rota-scheduler profile (plugin name → args object); each must have a
	// pluginConfig entry there.
	SchedulerPluginArgs map[string]any
	// ExternalComponents leaves the scheduler, the Rota controllers and the
	// nodes to the caller, which runs them as processes (the chaos run):
	// Start runs the control plane, the claim and workload controllers and
	// the watch, and writes the scheduler configuration (SchedulerConfig).
	// Nodes must be empty.
	ExternalComponents bool
}

func (o *Options) validate() error {
	var errs []error
	if o.RepoRoot == "" {
		errs = append(errs, errors.New("cluster: RepoRoot is required"))
	}
	if o.Dir == "" {
		errs = append(errs, errors.New("cluster: Dir is required"))
	}
	if o.Clock == nil {
		errs = append(errs, errors.New("cluster: Clock is required"))
	}
	seen := map[string]bool{}
	for i, n := range o.Nodes {
		if n.Name == "" {
			errs = append(errs, fmt.Errorf("nodes[%d].name: Required value", i))
		}
		if seen[n.Name] {
			errs = append(errs, fmt.Errorf("nodes[%d].name: Duplicate value: %q", i, n.Name))
		}
		seen[n.Name] = true
		if _, err := gpu.ParseProfile(n.Profile); err != nil {
			errs = append(errs, fmt.Errorf("nodes[%d].profile: Invalid value: %q: %w", i, n.Profile, err))
		}
	}
	if o.ExternalComponents && len(o.Nodes) > 0 {
		errs = append(errs, errors.New("cluster: nodes: with ExternalComponents the caller starts the nodes"))
	}
	if o.PassPeriod <= 0 {
		o.PassPeriod = 6 * time.Hour
	}
	if o.ProgressPeriod <= 0 {
		o.ProgressPeriod = 15 * time.Second
	}
	return errors.Join(errs...)
}

// ParseNodes reads "profile:count,profile:count" (rota-sandbox up --nodes)
// into node specs named <profile>-<i>.
func ParseNodes(s string) ([]NodeSpec, error) {
	var nodes []NodeSpec
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		profile, count, ok := strings.Cut(part, ":")
		n := 1
		if ok {
			if _, err := fmt.Sscanf(count, "%d", &n); err != nil || n < 1 {
				return nil, fmt.Errorf("--nodes: %q: count must be a positive number", part)
			}
		}
		if _, err := gpu.ParseProfile(profile); err != nil {
			return nil, fmt.Errorf("--nodes: %q: %w", part, err)
		}
		for i := range n {
			nodes = append(nodes, NodeSpec{Name: fmt.Sprintf("%s-%d", profile, i), Profile: profile})
		}
	}
	if len(nodes) == 0 {
		return nil, errors.New("--nodes: no nodes given")
	}
	return nodes, nil
}
