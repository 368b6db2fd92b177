package chaos

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/rota-dev/rota/pkg/driver/gpu"
	"github.com/rota-dev/rota/pkg/sandbox/cluster"
)

// Options configure a chaos run.
type Options struct {
	// RepoRoot holds manifests/ and examples/ (the reservation's workloads).
	RepoRoot string
	// Dir receives the control plane's data, the components' logs and the
	// report.
	Dir string
	// BinDir holds the built scheduler, schedule-controller and
	// dra-kubelet-plugin binaries (make build: bin/).
	BinDir string
	// Seed drives every random choice of the injector and the workload.
	Seed uint64
	// Kills is how many SIGKILLs the injector sends.
	Kills int
	// Nodes are the simulated GPU nodes. The reservation needs a node named
	// h200-0 with consumable memory; the fallback churn needs H100 and A100
	// GPUs. DefaultNodes has both.
	Nodes  []cluster.NodeSpec
	Timing Timing
	// Settle bounds the wait, after the last kill, for every component to
	// finish its work, and again after the teardown. Default 3m.
	Settle time.Duration
	// Progress, when set, receives a line every few seconds.
	Progress io.Writer
}

// DefaultNodes: an 8× H100 and an 8× A100 node for the fallback churn, and
// the 8× H200 node with consumable memory that holds the reservation.
func DefaultNodes() []cluster.NodeSpec {
	return []cluster.NodeSpec{
		{Name: "h100-0", Profile: "dgx-h100"},
		{Name: "a100-0", Profile: "dgx-a100"},
		{Name: reservationNode, Profile: "hgx-h200", ConsumableMemory: true},
	}
}

// DefaultTiming: a kill every 0.3–2.5 s, each component down for up to 1.5 s.
func DefaultTiming() Timing {
	return Timing{MinGap: 300 * time.Millisecond, MaxGap: 2500 * time.Millisecond, MaxDown: 1500 * time.Millisecond}
}

func (o *Options) validate() error {
	var errs []error
	if o.RepoRoot == "" {
		errs = append(errs, errors.New("chaos: RepoRoot is required"))
	}
	if o.Dir == "" {
		errs = append(errs, errors.New("chaos: Dir is required"))
	}
	if o.BinDir == "" {
		errs = append(errs, errors.New("chaos: BinDir is required"))
	}
	if o.Kills < 0 {
		errs = append(errs, fmt.Errorf("--kills: Invalid value: %d: must not be negative", o.Kills))
	}
	if len(o.Nodes) == 0 {
		o.Nodes = DefaultNodes()
	}
	hasReservationNode := false
	for _, n := range o.Nodes {
		hasReservationNode = hasReservationNode || (n.Name == reservationNode && n.ConsumableMemory)
	}
	if !hasReservationNode {
		errs = append(errs, fmt.Errorf("--nodes: the reservation needs a node %q with consumable memory", reservationNode))
	}
	if o.Timing == (Timing{}) {
		o.Timing = DefaultTiming()
	}
	if o.Timing.MinGap <= 0 || o.Timing.MaxGap < o.Timing.MinGap || o.Timing.MaxDown < 0 {
		errs = append(errs, fmt.Errorf("timing %+v: want 0 < MinGap <= MaxGap and MaxDown >= 0", o.Timing))
	}
	if o.Settle <= 0 {
		o.Settle = 3 * time.Minute
	}
	return errors.Join(errs...)
}

// ParseNodes reads "name=profile[+cm],..." (rota-sandbox chaos --nodes);
// +cm publishes the node's GPUs with consumable memory.
func ParseNodes(s string) ([]cluster.NodeSpec, error) {
	var nodes []cluster.NodeSpec
	seen := map[string]bool{}
	for i, part := range strings.Split(s, ",") {
		name, profile, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok || name == "" || profile == "" {
			return nil, fmt.Errorf("--nodes[%d]: Invalid value: %q: want name=profile[+cm]", i, part)
		}
		profile, cm := strings.CutSuffix(profile, "+cm")
		if _, err := gpu.ParseProfile(profile); err != nil {
			return nil, fmt.Errorf("--nodes[%d]: Invalid value: %q: %w", i, part, err)
		}
		if seen[name] {
			return nil, fmt.Errorf("--nodes[%d]: Duplicate value: %q", i, name)
		}
		seen[name] = true
		nodes = append(nodes, cluster.NodeSpec{Name: name, Profile: profile, ConsumableMemory: cm})
	}
	return nodes, nil
}
