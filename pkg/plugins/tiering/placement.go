package tiering

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	gpuv1 "github.com/rota-dev/rota/pkg/apis/gpu/v1alpha1"
	"github.com/rota-dev/rota/pkg/gpupool"
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
	parts = append(parts, p.passedOver...)
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
// granted, its matching and free GPUs in the cycle's inventory, so the event
// says why that tier was not taken. A placement on first tiers costs nothing;
// one on a fallback tier costs a scan of the inventory per passed-over tier
// (matches are cached), not a pool build, which lists every claim.
func (pl *Tiering) passedOver(ctx context.Context, cs fwk.CycleState, s *preFilterState, p *placement) []string {
	granted := map[string]int{} // request name -> granted tier
	for _, g := range p.devices {
		req, _, _ := strings.Cut(g.request, "/")
		granted[req] = g.tier
	}
	var out []string
	var inv *gpupool.Inventory
	for _, r := range s.requests {
		for ti := 0; ti < granted[r.Name] && ti < len(r.Tiers); ti++ {
			if inv == nil {
				var err error
				if inv, err = gpupool.CycleInventory(ctx, cs, pl.dra, &pl.caches.Slices); err != nil {
					klog.FromContext(ctx).V(3).Info("Could not count passed-over tiers", "err", err)
					return nil
				}
			}
			out = append(out, pl.tierFree(ctx, inv, r.Tiers[ti]))
		}
	}
	return out
}

// tierFree renders "H100 tier: 0 of 8 free", adding where the free ones
// are when they would have sufficed in number but not on one node.
func (pl *Tiering) tierFree(ctx context.Context, inv *gpupool.Inventory, tier gpupool.Tier) string {
	m, err := pl.matcherFor(tier)
	if err != nil {
		return fmt.Sprintf("%s tier: device class %s not found", tier.Name, tier.Class)
	}
	name, matching, free, block := tier.Name, 0, 0, 0
	for _, node := range inv.Nodes {
		var c deviceCounts
		for _, nd := range inv.ByNode[node] {
			dev := inv.DeviceOf(node, nd)
			d := &dev
			if !m.Matches(ctx, d) {
				continue
			}
			if matching == 0 {
				if model := gpupool.StringAttribute(d.Device, d.ID.Driver.String(), gpuv1.AttributeModel); model != "" {
					name = model
				}
			}
			matching++
			c.add(d, tier)
		}
		free += c.free
		block = max(block, c.free)
	}
	if matching == 0 {
		return name + " tier: none in the pool"
	}
	msg := fmt.Sprintf("%s tier: %d of %d free", name, free, matching)
	if free >= int(tier.Count) && block < int(tier.Count) {
		msg += fmt.Sprintf(", at most %d on one node", block)
	}
	return msg
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
