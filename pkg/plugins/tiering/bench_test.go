package tiering

import (
	"fmt"
	"runtime"
	"testing"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
)

// BenchmarkFilterScore measures one scheduling cycle of a pod asking
// "H100 else A100" over n nodes of 8 GPUs (a third each H100, A100, L4):
// "stock" is what DynamicResources alone costs (PreFilter, Filter on every
// node, Score on the feasible ones), "rota" adds Tiering's PreFilter,
// PreScore and Score. ns/node is the per-node cost of the whole cycle.
func BenchmarkFilterScore(b *testing.B) {
	for _, n := range []int{1000, 5000} {
		nodes, slices := mixedPool(n)
		e := newEnv(b, nodes, slices, []*resourceapi.ResourceClaim{tieredClaim("p", 1, "H100", "A100")})
		pod := testPod("p")
		runtime.GC() // the fake clientset's setup garbage must not be collected on the clock
		for _, mode := range []string{"stock", "rota"} {
			b.Run(fmt.Sprintf("nodes=%d/%s", n, mode), func(b *testing.B) {
				for b.Loop() {
					e.benchCycle(b, pod, mode == "rota")
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/node")
			})
		}
	}
}

func (e *env) benchCycle(b *testing.B, pod *v1.Pod, rota bool) {
	cs := framework.NewCycleState()
	if _, st := e.dr.PreFilter(e.ctx, cs, pod, e.nodeInfos); !st.IsSuccess() {
		b.Fatal(st)
	}
	if rota {
		if _, st := e.tiering.PreFilter(e.ctx, cs, pod, e.nodeInfos); !st.IsSuccess() {
			b.Fatal(st)
		}
	}
	feasible := make([]fwk.NodeInfo, 0, len(e.nodeInfos))
	for _, ni := range e.nodeInfos {
		if e.dr.Filter(e.ctx, cs, pod, ni).IsSuccess() {
			feasible = append(feasible, ni)
		}
	}
	for _, ni := range feasible {
		if _, st := e.dr.Score(e.ctx, cs, pod, ni); !st.IsSuccess() {
			b.Fatal(st)
		}
	}
	if !rota {
		return
	}
	if st := e.tiering.PreScore(e.ctx, cs, pod, feasible); !st.IsSuccess() {
		b.Fatal(st)
	}
	for _, ni := range feasible {
		if _, st := e.tiering.Score(e.ctx, cs, pod, ni); !st.IsSuccess() {
			b.Fatal(st)
		}
	}
}

// mixedPool is n nodes of 8 GPUs, a third each H100, A100 and L4.
func mixedPool(n int) ([]*v1.Node, []*resourceapi.ResourceSlice) {
	var nodes []*v1.Node
	var slices []*resourceapi.ResourceSlice
	for i := range n {
		name := fmt.Sprintf("node-%05d", i)
		nodes = append(nodes, testNode(name))
		slices = append(slices, testSlice(name, gpus([]string{"H100", "A100", "L4"}[i%3], 80, 8)...))
	}
	return nodes, slices
}
