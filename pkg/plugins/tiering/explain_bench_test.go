package tiering

import (
	"fmt"
	"runtime"
	"testing"

	resourceapi "k8s.io/api/resource/v1"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/dynamicresources"

	"github.com/rota-dev/rota/pkg/gpupool"
)

// BenchmarkPostFilter is Tiering's explanation of a failed cycle at 1,000
// and 5,000 nodes of 8 GPUs (a third each H100, A100, L4) for a pod asking
// 9 H100, else 9 A100, which no node has: "candidates" is PostFilter as it
// runs (the tiers' candidates and the verdicts on the other nodes reused
// from the cycle before), "every-device" judges every device of every node
// as PostFilter did before (test reference judgeEveryDevice). Both read the
// cycle's inventory, which PreFilter took.
func BenchmarkPostFilter(b *testing.B) {
	for _, n := range []int{1000, 5000} {
		nodes, slices := mixedPool(n)
		e := newEnv(b, nodes, slices, []*resourceapi.ResourceClaim{tieredClaim("p", 9, "H100", "A100")})
		pod := testPod("p")
		_, cs := e.cycle(b, pod)
		statuses := framework.NewDefaultNodeToStatus()
		for _, node := range nodes {
			statuses.Set(node.Name, fwk.NewStatus(fwk.Unschedulable, "cannot allocate all claims").WithPlugin(dynamicresources.Name))
		}
		runtime.GC()
		b.Run(fmt.Sprintf("candidates/nodes=%d", n), func(b *testing.B) {
			for b.Loop() {
				if _, st := e.tiering.PostFilter(e.ctx, cs, pod, statuses); st.Code() != fwk.Unschedulable {
					b.Fatal(st)
				}
			}
		})
		b.Run(fmt.Sprintf("every-device/nodes=%d", n), func(b *testing.B) {
			s, err := getPreFilterState(cs)
			if err != nil {
				b.Fatal(err)
			}
			inv, err := gpupool.CycleInventory(e.ctx, cs, e.tiering.dra, &e.tiering.caches.Slices)
			if err != nil {
				b.Fatal(err)
			}
			for b.Loop() {
				for _, req := range s.requests {
					for _, tier := range req.Tiers {
						m, err := e.tiering.matcherFor(tier)
						if err != nil {
							b.Fatal(err)
						}
						for _, ni := range e.nodeInfos {
							if _, err := judgeEveryDevice(e.ctx, inv, ni.Node().Name, tier, m, pod.Namespace); err != nil {
								b.Fatal(err)
							}
						}
					}
				}
			}
		})
	}
}
