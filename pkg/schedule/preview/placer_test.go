package preview

import (
	"context"
	"fmt"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// modelSlice publishes n GPUs of model on node.
func modelSlice(node, model string, n int) *resourceapi.ResourceSlice {
	s := slice(node, n)
	for i := range s.Spec.Devices {
		s.Spec.Devices[i].Attributes = map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{"model": {StringValue: ptr.To(model)}}
	}
	return s
}

// firstOf asks for n GPUs of the first of models a node has room for.
func firstOf(n int64, models ...string) resourceapi.ResourceClaimSpec {
	req := resourceapi.DeviceRequest{Name: "gpu"}
	for _, m := range models {
		req.FirstAvailable = append(req.FirstAvailable, resourceapi.DeviceSubRequest{
			Name: strings.ToLower(m), DeviceClassName: driver, Count: n, AllocationMode: resourceapi.DeviceAllocationModeExactCount,
			Selectors: []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{
				Expression: fmt.Sprintf(`device.attributes["gpu.rota.dev"].model == %q`, m)}}},
		})
	}
	return resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{req}}}
}

// mixed is 4 A100s on a-node and 8 H100s on z-node: node names that would
// put every pod on the A100s if the name decided.
func mixed(claims ...*resourceapi.ResourceClaim) Inputs {
	in := inputs(claims...)
	in.Nodes = []*v1.Node{{ObjectMeta: metav1.ObjectMeta{Name: "a-node"}}, {ObjectMeta: metav1.ObjectMeta{Name: "z-node"}}}
	in.Slices = []*resourceapi.ResourceSlice{modelSlice("a-node", "A100", 4), modelSlice("z-node", "H100", 8)}
	return in
}

// placed renders where each pod went: "z-node H100 1/2 h100 ×2", or "-
// count" for a pod that found no node.
func placed(res Result) string {
	var out []string
	for _, p := range res.Pods {
		if p.Node == "" {
			out = append(out, "- "+p.Shortage)
			continue
		}
		d := p.Devices[0]
		out = append(out, fmt.Sprintf("%s %s %d/%d %s ×%d", p.Node, d.Model, d.Tier+1, d.Tiers, d.TierName, len(p.Devices)))
	}
	return strings.Join(out, "; ")
}

// TestCheckRanksLikeTiering: each pod goes to the node the Tiering plugin
// ranks first: the best tier before the best fit, the best fit before the
// name; a pod no node fits is reported with its reason and the pods after
// it are still placed.
func TestCheckRanksLikeTiering(t *testing.T) {
	for name, tc := range map[string]struct {
		in      Inputs
		demands []Demand
		want    string
	}{
		"first tier although it strands more": {
			in:      mixed(),
			demands: []Demand{{PodClaims: []resourceapi.ResourceClaimSpec{firstOf(2, "H100", "A100")}, Pods: 1}},
			want:    "z-node H100 1/2 h100 ×2",
		},
		"fallback tier once the first is full": {
			in: mixed(),
			demands: []Demand{{PodClaims: []resourceapi.ResourceClaimSpec{firstOf(6, "H100", "A100")}, Pods: 1},
				{PodClaims: []resourceapi.ResourceClaimSpec{firstOf(4, "H100", "A100")}, Pods: 1}},
			want: "z-node H100 1/2 h100 ×6; a-node A100 2/2 a100 ×4",
		},
		"any GPU: the node it strands the fewest on": {
			in:      mixed(allocated("a-node", 0)),
			demands: []Demand{{PodClaims: []resourceapi.ResourceClaimSpec{gpus(2)}, Pods: 2}},
			want:    "a-node A100 1/1 gpu ×2; z-node H100 1/1 gpu ×2",
		},
		"by count, then the next pod still placed": {
			in: mixed(),
			demands: []Demand{{PodClaims: []resourceapi.ResourceClaimSpec{firstOf(8, "H100")}, Pods: 2},
				{PodClaims: []resourceapi.ResourceClaimSpec{firstOf(2, "H100", "A100")}, Pods: 1}},
			want: "z-node H100 1/1 h100 ×8; - count; a-node A100 2/2 a100 ×2",
		},
		"by fragmentation": {
			in:      mixed(allocated("z-node", 0, 1, 2, 3, 4)),
			demands: []Demand{{PodClaims: []resourceapi.ResourceClaimSpec{gpus(5)}, Pods: 1}},
			want:    "- fragmentation",
		},
	} {
		t.Run(name, func(t *testing.T) {
			res, err := New().Check(context.Background(), tc.in, tc.demands...)
			if err != nil {
				t.Fatal(err)
			}
			if got := placed(res); got != tc.want {
				t.Errorf("placed %s, want %s (%s)", got, tc.want, res.Message)
			}
			if fits := !strings.Contains(tc.want, "- "); res.Fits != fits {
				t.Errorf("fits = %v, want %v", res.Fits, fits)
			}
		})
	}
}

// TestCheckReturnsAllocatedClaims: a placed pod's claims carry the
// allocation, so a later preview can count them as held.
func TestCheckReturnsAllocatedClaims(t *testing.T) {
	p := New()
	first, err := p.Check(context.Background(), mixed(), Demand{PodClaims: []resourceapi.ResourceClaimSpec{firstOf(8, "H100")}, Pods: 1})
	if err != nil {
		t.Fatal(err)
	}
	if len(first.Pods) != 1 || len(first.Pods[0].Claims) != 1 || first.Pods[0].Claims[0].Status.Allocation == nil {
		t.Fatalf("pods %+v, want one with its allocated claim", first.Pods)
	}
	second, err := p.Check(context.Background(), mixed(first.Pods[0].Claims...), Demand{PodClaims: []resourceapi.ResourceClaimSpec{firstOf(2, "H100", "A100")}, Pods: 1})
	if err != nil {
		t.Fatal(err)
	}
	if got := placed(second); got != "a-node A100 2/2 a100 ×2" {
		t.Errorf("after the 8 H100s are held: %s, want the A100 tier", got)
	}
}

// TestCountingAgreesWithAllocator: where a claim's allocation is decided
// by counting (Tiering's fast path), the node counting ranks first is the
// one ranking every node's allocator answer gives, with the same rank.
func TestCountingAgreesWithAllocator(t *testing.T) {
	ctx := context.Background()
	specs := map[string]resourceapi.ResourceClaimSpec{
		"2 H100 else A100": firstOf(2, "H100", "A100"),
		"4 H100 else A100": firstOf(4, "H100", "A100"),
		"6 H100":           firstOf(6, "H100"),
		"3 of any":         gpus(3),
		"5 of any":         gpus(5),
	}
	pools := map[string]Inputs{
		"free":          mixed(),
		"H100s in use":  mixed(allocated("z-node", 0, 1, 2, 3, 4)),
		"A100s in use":  mixed(allocated("a-node", 0, 1)),
		"little of all": mixed(allocated("a-node", 0, 1, 2), allocated("z-node", 0, 1, 2, 3, 4, 5, 6)),
	}
	for pool, in := range pools {
		for name, spec := range specs {
			pl := newPlacer(New(), in)
			claims := podClaims([]resourceapi.ResourceClaimSpec{spec}, 0, 0)
			counted, err := pl.best(ctx, claims, true)
			if err != nil {
				t.Fatal(err)
			}
			allocated, err := pl.best(ctx, claims, false)
			if err != nil {
				t.Fatal(err)
			}
			switch {
			case (counted == nil) != (allocated == nil):
				t.Errorf("%s, %s: counting found %v, the allocator %v", pool, name, counted, allocated)
			case counted != nil && counted.rank != allocated.rank:
				t.Errorf("%s, %s: counting ranks %+v first, the allocator %+v", pool, name, counted.rank, allocated.rank)
			}
		}
	}
}
