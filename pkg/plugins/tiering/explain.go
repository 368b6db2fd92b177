package tiering

import (
	"context"
	"fmt"
	"regexp"
	"sort"
	"strings"
	"sync"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/dynamicresources"

	gpuv1 "github.com/rota-dev/rota/pkg/apis/gpu/v1alpha1"
	"github.com/rota-dev/rota/pkg/gpupool"
	"github.com/rota-dev/rota/pkg/waits"
)

// Rejection reasons, per node and tier, as users read them.
const (
	reasonNoFreeDevice   = "no free device"
	reasonTooFewFree     = "too few free devices"
	reasonConstraint     = "constraint not met"
	reasonNoModel        = "no "
	reasonNodeRejected   = "node rejected"
	reasonClaimUnmet     = "claim constraints not met together"
	reasonTaintedPrefix  = "tainted "
	reasonReserved       = "reserved"
	metricReasonTainted  = "tainted"
	metricReasonNodeFilt = "node_rejected"
)

// tierVerdict is the outcome of one tier on one node: "" when the tier's
// devices are free there, else a reason.
type tierVerdict struct {
	reason string
	metric string // bounded label for the rejections metric
}

// tierSummary aggregates one tier across all nodes.
type tierSummary struct {
	label     string // "tier 1/2 h100"
	nodes     int
	available int
	reasons   map[string]int
}

// String renders e.g. `tier 1/2 h100: 0 of 12 nodes — 9 no free device, 3 tainted gpu.rota.dev/unhealthy`.
func (t tierSummary) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %d of %d nodes", t.label, t.available, t.nodes)
	if len(t.reasons) == 0 {
		return b.String()
	}
	keys := make([]string, 0, len(t.reasons))
	for k := range t.reasons {
		keys = append(keys, k)
	}
	// Most frequent first, then by text, so the message is stable.
	sort.Slice(keys, func(i, j int) bool {
		if t.reasons[keys[i]] != t.reasons[keys[j]] {
			return t.reasons[keys[i]] > t.reasons[keys[j]]
		}
		return keys[i] < keys[j]
	})
	b.WriteString(" — ")
	for i, k := range keys {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%d %s", t.reasons[k], k)
	}
	return b.String()
}

// PostFilter explains a failed attempt: for every tier of every tiered
// request, on how many nodes its devices were free and why the other nodes
// were rejected. It never nominates a node. The work is done only when the
// pod could not be placed, so successful cycles pay nothing for it.
// The message lands in the pod's PodScheduled condition and the
// FailedScheduling event, so `kubectl describe pod` shows it.
func (pl *Tiering) PostFilter(ctx context.Context, cs fwk.CycleState, pod *v1.Pod, statuses fwk.NodeToStatusReader) (*fwk.PostFilterResult, *fwk.Status) {
	s, err := getPreFilterState(cs)
	if err != nil {
		return nil, fwk.NewStatus(fwk.Unschedulable)
	}
	logger := klog.FromContext(ctx)
	nodes, err := pl.handle.SnapshotSharedLister().NodeInfos().List()
	if err != nil {
		return nil, statusError(logger, fmt.Errorf("list nodes: %w", err))
	}
	inv, err := gpupool.CycleInventory(ctx, cs, pl.dra, &pl.caches.Slices)
	if err != nil {
		return nil, statusError(logger, err)
	}
	var parts []string
	for _, req := range s.requests {
		for ti, tier := range req.Tiers {
			sum, err := pl.summarizeTier(ctx, inv, nodes, statuses, tier, pod.Namespace)
			if err != nil {
				return nil, statusError(logger, err)
			}
			sum.label = fmt.Sprintf("tier %d/%d %s", ti+1, len(req.Tiers), tier.Name)
			if len(s.requests) > 1 {
				sum.label = req.Name + " " + sum.label
			}
			parts = append(parts, sum.String())
		}
	}
	msg := fmt.Sprintf("%s (policy %s): %s", Name, pl.args.PolicyVersion, strings.Join(parts, "; "))
	logger.V(3).Info("Tiered pod not placeable", "pod", klog.KObj(pod), "explanation", msg)
	return nil, fwk.NewStatus(fwk.Unschedulable, msg)
}

// summarizeTier judges the tier on every node. A node with a device the
// tier's selectors accept is judged from the cycle's inventory, on those
// devices only; any other node's verdict depends on its published devices
// alone, so it is judged once per slice view (staticVerdicts).
func (pl *Tiering) summarizeTier(ctx context.Context, inv *gpupool.Inventory, nodes []fwk.NodeInfo, statuses fwk.NodeToStatusReader, tier gpupool.Tier, namespace string) (tierSummary, error) {
	sum := tierSummary{nodes: len(nodes), reasons: map[string]int{}}
	m, err := pl.matcherFor(tier)
	if err != nil {
		// A missing class rejects the tier on every node alike.
		sum.reasons[fmt.Sprintf("%s (device class %s not found)", reasonConstraint, tier.Class)] = len(nodes)
		pl.metrics.rejections.WithLabelValues("constraint").Add(float64(len(nodes)))
		return sum, nil //nolint:nilerr // reported in the message
	}
	cands := pl.candidates.Get(ctx, inv.Slices, m)
	if cands.Err != nil {
		return sum, cands.Err
	}
	static := pl.static.of(cands)
	byMetric := map[string]int{}
	for _, ni := range nodes {
		name := ni.Node().Name
		var v tierVerdict
		if devices, ok := cands.ByNode[name]; ok {
			v = judgeCandidates(inv, name, devices, tier, namespace)
		} else if sv, ok := static[name]; ok {
			v = sv
		} else {
			v = rejectionVerdict(waits.NodeRejection{}) // no slices: no devices published
		}
		if v.reason == "" {
			st := statuses.Get(name)
			switch {
			case st == nil || st.IsSuccess():
				sum.available++
				continue
			case st.Plugin() == dynamicresources.Name:
				v = tierVerdict{reason: reasonClaimUnmet, metric: "constraint"}
			default:
				v = tierVerdict{reason: fmt.Sprintf("%s by %s", reasonNodeRejected, st.Plugin()), metric: metricReasonNodeFilt}
			}
		}
		sum.reasons[v.reason]++
		byMetric[v.metric]++
	}
	for metric, n := range byMetric {
		pl.metrics.rejections.WithLabelValues(metric).Add(float64(n))
	}
	return sum, nil
}

// judgeCandidates decides whether the node has enough free, untainted
// devices among devices, the tier's candidates on it, and if not, the
// reason that explains most of the gap. A device is free as the allocator
// sees it: a whole one unallocated, a shared one (consumable memory) with
// room for what the tier consumes. A device only a reservation's taint
// keeps the claim off counts as reserved, whether its members use it or
// not; one that is also unhealthy counts as tainted.
func judgeCandidates(inv *gpupool.Inventory, node string, devices []gpupool.NodeDevice, tier gpupool.Tier, namespace string) tierVerdict {
	c := deviceCounts{namespace: namespace}
	for _, nd := range devices {
		d := inv.DeviceOf(node, nd)
		c.add(&d, tier)
	}
	return c.verdict(tier)
}

// rejectionVerdict is the verdict on a node none of whose devices the
// tier's selectors accept.
func rejectionVerdict(r waits.NodeRejection) tierVerdict {
	c := deviceCounts{failing: r.FirstFailing, models: r.Models}
	return c.verdict(gpupool.Tier{})
}

// staticVerdicts keeps, per tier's candidates (so per slice view and
// selectors), the verdicts on the nodes without a candidate.
type staticVerdicts struct {
	mu      sync.Mutex
	byCands map[*waits.Candidates]map[string]tierVerdict
}

// of returns the verdicts of cands' rejecting nodes, judged on first use
// (every time with a nil s).
func (s *staticVerdicts) of(cands *waits.Candidates) map[string]tierVerdict {
	if s == nil {
		return judgeRejecting(cands)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if v, ok := s.byCands[cands]; ok {
		return v
	}
	if s.byCands == nil || len(s.byCands) >= 256 {
		// Candidates of an older slice view are never asked for again.
		s.byCands = map[*waits.Candidates]map[string]tierVerdict{}
	}
	v := judgeRejecting(cands)
	s.byCands[cands] = v
	return v
}

func judgeRejecting(cands *waits.Candidates) map[string]tierVerdict {
	v := make(map[string]tierVerdict, len(cands.Rejecting))
	for node, r := range cands.Rejecting {
		v[node] = rejectionVerdict(r)
	}
	return v
}

// modelSelector finds the model a selector asks for:
// device.attributes["gpu.rota.dev"].model == "H100".
var modelSelector = regexp.MustCompile(`(?:\.` + string(gpuv1.AttributeModel) + `|\["` + string(gpuv1.AttributeModel) + `"\])\s*==\s*"([^"]+)"`)

// missingModel returns the model the failing selector asks for when the
// node has no GPU of it: such a node is "no H100", not an unmet constraint.
func (c *deviceCounts) missingModel() string {
	if strings.HasPrefix(c.failing, gpupool.ClassSelectorPrefix) {
		return ""
	}
	m := modelSelector.FindStringSubmatch(c.failing)
	if m == nil || c.models[m[1]] {
		return ""
	}
	return m[1]
}

// deviceCounts are the matching devices of one node for one tier.
type deviceCounts struct {
	matching, free, tainted, reserved int
	// taintKey is the first blocking taint's key, reservedBy the first
	// reservation's taint value, failing the first selector no device passed.
	taintKey, reservedBy, failing string
	// models are the models of the node's devices.
	models map[string]bool
	// namespace is the waiting pod's: other namespaces' reservations are
	// not named.
	namespace string
}

func (c *deviceCounts) add(d *gpupool.Device, tier gpupool.Tier) {
	c.matching++
	other, reservedBy := gpupool.Blocked(d.Device, tier.Tolerations)
	switch {
	case other == nil && reservedBy != "":
		c.reserved++
		if c.reservedBy == "" {
			c.reservedBy = reservedBy
		}
	case !d.FreeFor(tier):
	case other != nil:
		c.tainted++
		if c.taintKey == "" {
			c.taintKey = other.Key
		}
	default:
		c.free++
	}
}

func (c *deviceCounts) verdict(tier gpupool.Tier) tierVerdict {
	need := int(tier.Count)
	if tier.All {
		need = c.matching
	}
	switch {
	case c.matching == 0 && c.failing == "":
		return tierVerdict{reason: reasonNoFreeDevice + " (no devices published)", metric: "no_free_device"}
	case c.matching == 0 && c.missingModel() != "":
		return tierVerdict{reason: reasonNoModel + c.missingModel(), metric: "constraint"}
	case c.matching == 0:
		return tierVerdict{reason: fmt.Sprintf("%s: %s", reasonConstraint, c.failing), metric: "constraint"}
	case c.free >= need && (!tier.All || c.tainted+c.reserved == 0):
		return tierVerdict{}
	case c.tainted > 0 && c.free+c.tainted >= need:
		return tierVerdict{reason: reasonTaintedPrefix + c.taintKey, metric: metricReasonTainted}
	case c.reserved > 0 && c.free+c.tainted+c.reserved >= need:
		return tierVerdict{reason: reasonReserved + " by " + waits.ReservationLabel(waits.ReservationName(c.reservedBy, c.namespace)), metric: reasonReserved}
	case c.free > 0:
		// Some matching devices are free, not as many as the tier asks
		// for at once: a capacity shortfall, not an empty node.
		return tierVerdict{reason: fmt.Sprintf("%s (%d needed)", reasonTooFewFree, need), metric: "capacity"}
	default:
		return tierVerdict{reason: reasonNoFreeDevice, metric: "no_free_device"}
	}
}

// statusError logs where an internal error came from and wraps it.
func statusError(logger klog.Logger, err error, kv ...any) *fwk.Status {
	logger.WithCallDepth(1).Error(err, "Tiering failed", kv...)
	return fwk.AsStatus(err)
}

// statusUnschedulable logs where a rejection came from and returns it.
func statusUnschedulable(logger klog.Logger, reason string, kv ...any) *fwk.Status {
	logger.WithCallDepth(1).V(3).Info("Tiering rejected the pod", append([]any{"reason", reason}, kv...)...)
	return fwk.NewStatus(fwk.Unschedulable, reason)
}
