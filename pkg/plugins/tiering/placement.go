package tiering

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	gpuv1 "github.com/rota-dev/rota/pkg/apis/gpu/v1alpha1"
	"github.com/rota-dev/rota/pkg/gpupool"
	"github.com/rota-dev/rota/pkg/waits"
)

// tierAnnotation returns the rota.dev/tier value for a placement, e.g.
// "1/3: H100". With several tiered requests the distinct parts are joined
// with "; ".
func tierAnnotation(p *placement) string {
	tiers := make([]string, 0, len(p.devices))
	for _, g := range p.devices {
		tiers = append(tiers, fmt.Sprintf("%d/%d: %s", g.tier+1, g.tiers, g.label()))
	}
	return strings.Join(dedupe(tiers), "; ")
}

// devicesAnnotation returns the rota.dev/devices value: every granted
// device with its UUID, "pool/device=UUID, ...".
func devicesAnnotation(p *placement) string {
	parts := make([]string, 0, len(p.devices))
	for _, g := range p.devices {
		uuid := g.uuid
		if uuid == "" {
			uuid = "unknown"
		}
		parts = append(parts, fmt.Sprintf("%s/%s=%s", g.id.Pool, g.id.Device, uuid))
	}
	return strings.Join(parts, ", ")
}

// placementNote returns the TieredPlacement event's note, one line per
// placement: "4 × A100 on dgx-a100-0 (gpu-0..3), tier 2/2; H100 tier: 0 of
// 8 free; policy tiering-v1". The UUIDs are in the rota.dev/devices annotation.
func placementNote(p *placement, policyVersion string) string {
	type group struct {
		label   string
		tier    string
		devices []string
	}
	var groups []*group
	byRef := map[string]*group{}
	for _, g := range p.devices {
		gr, ok := byRef[g.request]
		if !ok {
			gr = &group{label: g.label(), tier: fmt.Sprintf("%d/%d", g.tier+1, g.tiers)}
			byRef[g.request] = gr
			groups = append(groups, gr)
		}
		gr.devices = append(gr.devices, g.id.Device.String())
	}
	parts := make([]string, 0, len(groups)+len(p.passedOver)+1)
	for _, gr := range groups {
		parts = append(parts, fmt.Sprintf("%d × %s on %s (%s), tier %s", len(gr.devices), gr.label, p.node, deviceRange(gr.devices), gr.tier))
	}
	for _, t := range p.passedOver {
		parts = append(parts, t.Line())
	}
	parts = append(parts, "policy "+policyVersion)
	return strings.Join(parts, "; ")
}

// deviceRange renders device names compactly: "gpu-0..3" for a run of
// numbered names with one prefix, else the names joined with ", ".
func deviceRange(names []string) string {
	sorted := append([]string(nil), names...)
	prefix := ""
	nums := make([]int, 0, len(sorted))
	for i, n := range sorted {
		j := strings.LastIndexFunc(n, func(r rune) bool { return r < '0' || r > '9' }) + 1
		num, err := strconv.Atoi(n[j:])
		if err != nil || (i > 0 && n[:j] != prefix) {
			return strings.Join(names, ", ")
		}
		prefix = n[:j]
		nums = append(nums, num)
	}
	sort.Ints(nums)
	if len(nums) < 2 || nums[len(nums)-1]-nums[0] != len(nums)-1 {
		return strings.Join(names, ", ")
	}
	for i := 1; i < len(nums); i++ {
		if nums[i] == nums[i-1] {
			return strings.Join(names, ", ")
		}
	}
	return fmt.Sprintf("%s%d..%d", prefix, nums[0], nums[len(nums)-1])
}

// passedOver counts, for every tier preferred to one the placement
// granted, its matching GPUs in the cycle's inventory and what kept each
// one that was not free, so the event says why that tier was not taken. A
// placement on first tiers costs nothing; one on a fallback tier costs a
// scan of the inventory per passed-over tier (matches are cached), not a
// pool build, which lists every claim.
func (pl *Tiering) passedOver(ctx context.Context, cs fwk.CycleState, pod *v1.Pod, s *preFilterState, p *placement) []waits.PassedTier {
	granted := map[string]int{} // request name -> granted tier
	for _, g := range p.devices {
		req, _, _ := strings.Cut(g.request, "/")
		granted[req] = g.tier
	}
	var out []waits.PassedTier
	var inv *gpupool.Inventory
	var excluded func(node string) bool
	for _, r := range s.requests {
		for ti := 0; ti < granted[r.Name] && ti < len(r.Tiers); ti++ {
			if inv == nil {
				var err error
				if inv, err = gpupool.CycleInventory(ctx, cs, pl.dra, &pl.caches.Slices); err != nil {
					klog.FromContext(ctx).V(3).Info("Could not count passed-over tiers", "err", err)
					return nil
				}
				excluded = pl.excludedNodes(pod)
			}
			t := pl.tierFree(ctx, inv, r.Tiers[ti], pod.Namespace, excluded)
			t.Tier = fmt.Sprintf("%d/%d", ti+1, len(r.Tiers))
			if len(s.requests) > 1 {
				t.Request = r.Name
			}
			out = append(out, t)
		}
	}
	return out
}

// excludedNodes reports whether the pod's node selector or required node
// affinity excludes a node; a node the scheduler does not know is not
// counted as excluded.
func (pl *Tiering) excludedNodes(pod *v1.Pod) func(string) bool {
	if len(pod.Spec.NodeSelector) == 0 && (pod.Spec.Affinity == nil || pod.Spec.Affinity.NodeAffinity == nil ||
		pod.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil) {
		return func(string) bool { return false }
	}
	required := nodeaffinity.GetRequiredNodeAffinity(pod)
	lister := pl.handle.SnapshotSharedLister().NodeInfos()
	seen := map[string]bool{}
	return func(node string) bool {
		if ex, ok := seen[node]; ok {
			return ex
		}
		ni, err := lister.Get(node)
		ex := false
		if err == nil && ni.Node() != nil {
			match, err := required.Match(ni.Node())
			ex = err == nil && !match
		}
		seen[node] = ex
		return ex
	}
}

// tierFree counts one passed-over tier: its matching GPUs, the free ones
// (and the most on one node), and why each other one was not free, under
// the first of: on a node the pod may not use, reserved by a GPUReservation
// the claim does not tolerate, allocated, tainted.
func (pl *Tiering) tierFree(ctx context.Context, inv *gpupool.Inventory, tier gpupool.Tier, namespace string, excluded func(string) bool) waits.PassedTier {
	out := waits.PassedTier{Name: tier.Name, Need: int(tier.Count)}
	m, err := pl.matcherFor(tier)
	if err != nil {
		out.Problem = fmt.Sprintf("device class %s not found", tier.Class)
		return out
	}
	for _, node := range inv.Nodes {
		ex := excluded(node)
		free := 0
		for _, nd := range inv.ByNode[node] {
			dev := inv.DeviceOf(node, nd)
			d := &dev
			if !m.Matches(ctx, d) {
				continue
			}
			if out.Matching == 0 {
				if model := gpupool.StringAttribute(d.Device, d.ID.Driver.String(), gpuv1.AttributeModel); model != "" {
					out.Name = model
				}
			}
			out.Matching++
			other, reservedBy := gpupool.Blocked(d.Device, tier.Tolerations)
			switch {
			case ex:
				out.Excluded++
			case other == nil && reservedBy != "":
				if out.Reserved == nil {
					out.Reserved = map[string]int{}
				}
				out.Reserved[waits.ReservationName(reservedBy, namespace)]++
			case !d.FreeFor(tier):
				out.Allocated++
			case other != nil:
				if out.Tainted == nil {
					out.Tainted = map[string]int{}
				}
				out.Tainted[other.Key]++
			default:
				free++
			}
		}
		out.Free += free
		out.LargestFree = max(out.LargestFree, free)
	}
	if out.Matching == 0 {
		out.Problem = "none in the pool"
	}
	return out
}

// label names a granted device's tier for people: its model, else the
// subrequest's name.
func (g *grantedDevice) label() string {
	if g.model != "" {
		return g.model
	}
	return g.tierName
}

func dedupe(in []string) []string {
	out := in[:0:0]
	seen := map[string]bool{}
	for _, s := range in {
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out
}
