package tiering

import (
	"context"
	"fmt"
	"testing"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/utils/ptr"
)

// recheckBenchSizes are the cluster sizes, in nodes, the Reserve and
// PreBind benchmarks compare: the recheck must not grow from one to the
// other.
var recheckBenchSizes = []int{1000, 5000}

// recheckWorld is a cluster of n nodes with eight H100s each and one
// DeviceTaintRule per ten nodes, each tainting gpu-7 of another node than
// node-0. The pod p asks for one H100 (else A100); DynamicResources has
// reserved gpu-0 of node-0 for it: the cycle state is what Tiering's
// Reserve finds.
func recheckWorld(b *testing.B, n int) (*env, *v1.Pod, fwk.CycleState) {
	b.Helper()
	nodes := make([]*v1.Node, 0, n)
	slices := make([]*resourceapi.ResourceSlice, 0, n)
	for i := range n {
		name := fmt.Sprintf("node-%d", i)
		nodes = append(nodes, testNode(name))
		slices = append(slices, testSlice(name, gpus("H100", 80, 8)...))
	}
	e := newEnv(b, nodes, slices, []*resourceapi.ResourceClaim{tieredClaim("p", 1, "H100", "A100")})
	rules := n / 10
	for i := range rules {
		rule := &resourceapi.DeviceTaintRule{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("unhealthy-%d", i)},
			Spec: resourceapi.DeviceTaintRuleSpec{
				DeviceSelector: &resourceapi.DeviceTaintSelector{Driver: ptr.To(testDriver), Pool: ptr.To(fmt.Sprintf("node-%d", 1+i*10)), Device: ptr.To("gpu-7")},
				Taint:          resourceapi.DeviceTaint{Key: testDriver + "/unhealthy", Effect: resourceapi.DeviceTaintEffectNoSchedule},
			},
		}
		if _, err := e.client.ResourceV1().DeviceTaintRules().Create(e.ctx, rule, metav1.CreateOptions{}); err != nil {
			b.Fatal(err)
		}
	}
	err := wait.PollUntilContextTimeout(e.ctx, 10e6, 60e9, true, func(context.Context) (bool, error) {
		all, err := e.tiering.dra.ResourceSlices().ListWithDeviceTaintRules()
		if err != nil {
			return false, err
		}
		tainted := 0
		for _, s := range all {
			for _, d := range s.Spec.Devices {
				tainted += len(d.Taints)
			}
		}
		return tainted == rules, nil
	})
	if err != nil {
		b.Fatalf("waiting for %d DeviceTaintRules: %v", rules, err)
	}
	pod := testPod("p")
	cs := framework.NewCycleState()
	if _, st := e.dr.PreFilter(e.ctx, cs, pod, e.nodeInfos); !st.IsSuccess() {
		b.Fatalf("DynamicResources PreFilter: %v", st)
	}
	if _, st := e.tiering.PreFilter(e.ctx, cs, pod, e.nodeInfos); !st.IsSuccess() {
		b.Fatalf("Tiering PreFilter: %v", st)
	}
	if st := e.dr.Filter(e.ctx, cs, pod, e.nodeInfos[0]); !st.IsSuccess() {
		b.Fatalf("DynamicResources Filter: %v", st)
	}
	if st := e.dr.Reserve(e.ctx, cs, pod, "node-0"); !st.IsSuccess() {
		b.Fatalf("DynamicResources Reserve: %v", st)
	}
	return e, pod, cs
}

// BenchmarkReserveRecheck is Tiering's Reserve on node-0: the devices
// DynamicResources chose, re-checked against their slices and taint rules.
func BenchmarkReserveRecheck(b *testing.B) {
	for _, n := range recheckBenchSizes {
		b.Run(fmt.Sprintf("nodes=%d", n), func(b *testing.B) {
			e, pod, cs := recheckWorld(b, n)
			b.ResetTimer()
			for b.Loop() {
				if st := e.tiering.Reserve(e.ctx, cs, pod, "node-0"); !st.IsSuccess() {
					b.Fatal(st)
				}
			}
		})
	}
}

// BenchmarkPreBindRecheck is Tiering's PreBind on node-0 after its
// Reserve: the same recheck once more before binding.
func BenchmarkPreBindRecheck(b *testing.B) {
	for _, n := range recheckBenchSizes {
		b.Run(fmt.Sprintf("nodes=%d", n), func(b *testing.B) {
			e, pod, cs := recheckWorld(b, n)
			if st := e.tiering.Reserve(e.ctx, cs, pod, "node-0"); !st.IsSuccess() {
				b.Fatal(st)
			}
			b.ResetTimer()
			for b.Loop() {
				if st := e.tiering.PreBind(e.ctx, cs, pod, "node-0"); !st.IsSuccess() {
					b.Fatal(st)
				}
			}
		})
	}
}
