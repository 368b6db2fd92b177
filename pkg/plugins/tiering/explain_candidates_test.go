package tiering

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/dynamicresources"

	gpuv1 "github.com/rota-dev/rota/pkg/apis/gpu/v1alpha1"
	"github.com/rota-dev/rota/pkg/gpupool"
)

// judgeEveryDevice is how PostFilter judged a tier on a node before it
// kept the tier's candidates: every device of the node, every selector
// evaluated. The test below holds the candidates' answer to it.
func judgeEveryDevice(ctx context.Context, inv *gpupool.Inventory, node string, tier gpupool.Tier, m *gpupool.Matcher, namespace string) (tierVerdict, error) {
	c := deviceCounts{models: map[string]bool{}, namespace: namespace}
	for _, nd := range inv.ByNode[node] {
		d := inv.DeviceOf(node, nd)
		c.models[gpupool.StringAttribute(d.Device, d.ID.Driver.String(), gpuv1.AttributeModel)] = true
		f, err := m.FirstFailing(ctx, d.ID.Driver.String(), d.Device)
		if err != nil {
			return tierVerdict{}, err
		}
		if f != "" {
			if c.failing == "" {
				c.failing = f
			}
			continue
		}
		c.add(&d, tier)
	}
	return c.verdict(tier), nil
}

// explainEveryDevice is PostFilter's message built with judgeEveryDevice.
func (e *env) explainEveryDevice(t *testing.T, cs fwk.CycleState, statuses fwk.NodeToStatusReader, namespace string) string {
	t.Helper()
	s, err := getPreFilterState(cs)
	if err != nil {
		t.Fatal(err)
	}
	inv, err := gpupool.CycleInventory(e.ctx, cs, e.tiering.dra, &e.tiering.caches.Slices)
	if err != nil {
		t.Fatal(err)
	}
	var parts []string
	for _, req := range s.requests {
		for ti, tier := range req.Tiers {
			m, err := e.tiering.matcherFor(tier)
			if err != nil {
				t.Fatal(err)
			}
			sum := tierSummary{nodes: len(e.nodeInfos), reasons: map[string]int{}}
			for _, ni := range e.nodeInfos {
				name := ni.Node().Name
				v, err := judgeEveryDevice(e.ctx, inv, name, tier, m, namespace)
				if err != nil {
					t.Fatal(err)
				}
				if v.reason == "" {
					st := statuses.Get(name)
					switch {
					case st == nil || st.IsSuccess():
						sum.available++
						continue
					case st.Plugin() == dynamicresources.Name:
						v = tierVerdict{reason: reasonClaimUnmet}
					default:
						v = tierVerdict{reason: fmt.Sprintf("%s by %s", reasonNodeRejected, st.Plugin())}
					}
				}
				sum.reasons[v.reason]++
			}
			sum.label = fmt.Sprintf("tier %d/%d %s", ti+1, len(req.Tiers), tier.Name)
			parts = append(parts, sum.String())
		}
	}
	return fmt.Sprintf("%s (policy %s): %s", Name, e.tiering.args.PolicyVersion, strings.Join(parts, "; "))
}

// TestExplainFromCandidatesLikeEveryDevice: on random clusters (H100, A100
// and L4 nodes, nodes without GPUs, unhealthy and reserved GPUs, allocated
// GPUs, every kind of node status), PostFilter's explanation, which judges
// only the tier's candidates and reuses the verdicts on the other nodes
// across cycles, says exactly what judging every device of every node says.
func TestExplainFromCandidatesLikeEveryDevice(t *testing.T) {
	models := []string{"H100", "A100", "L4"}
	for seed := range uint64(12) {
		rng := rand.New(rand.NewPCG(seed, 39))
		var nodes []*v1.Node
		var slices []*resourceapi.ResourceSlice
		var claims []*resourceapi.ResourceClaim
		for n := range 4 + rng.IntN(12) {
			name := fmt.Sprintf("node-%02d", n)
			nodes = append(nodes, testNode(name))
			if rng.IntN(6) == 0 {
				continue // a node without GPUs
			}
			devs := gpus(models[rng.IntN(len(models))], 80, 1+rng.IntN(4))
			for i := range devs {
				switch rng.IntN(6) {
				case 0:
					devs[i].tainted = true
				case 1:
					devs[i].reservedBy = []string{"default.serving", "team-a.llm"}[rng.IntN(2)]
				case 2:
					claims = append(claims, allocatedClaim(fmt.Sprintf("busy-%s-%d", name, i), name, fmt.Sprintf("gpu-%d", i)))
				}
			}
			slices = append(slices, testSlice(name, devs...))
		}
		e := newEnv(t, nodes, slices, append(claims, tieredClaim("p", int64(1+rng.IntN(2)), "H100", "A100")))
		pod := testPod("p")
		for range 2 { // the second cycle reuses the first one's verdicts on the other nodes
			_, cs := e.cycle(t, pod)
			statuses := framework.NewDefaultNodeToStatus()
			for _, n := range nodes {
				switch rng.IntN(3) {
				case 0:
					statuses.Set(n.Name, fwk.NewStatus(fwk.Unschedulable, "cannot allocate all claims").WithPlugin(dynamicresources.Name))
				case 1:
					statuses.Set(n.Name, fwk.NewStatus(fwk.Unschedulable, "Insufficient cpu").WithPlugin("NodeResourcesFit"))
				}
			}
			_, st := e.tiering.PostFilter(e.ctx, cs, pod, statuses)
			if want := e.explainEveryDevice(t, cs, statuses, pod.Namespace); st.Message() != want {
				t.Fatalf("seed %d: PostFilter says\n  %s\njudging every device says\n  %s", seed, st.Message(), want)
			}
		}
	}
}
