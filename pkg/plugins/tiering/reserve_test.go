package tiering

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/dynamic-resource-allocation/structured"
	fwk "k8s.io/kube-scheduler/framework"
)

func TestExplainPlacement(t *testing.T) {
	p := &placement{node: "node-h100", devices: []grantedDevice{{
		id: structured.MakeDeviceID(testDriver, "node-h100", "gpu-3"), request: "gpu/h100",
		tier: 0, tiers: 3, tierName: "h100", model: "H100", uuid: "GPU-1234",
	}}}
	if diff := cmp.Diff("1/3: H100", tierAnnotation(p)); diff != "" {
		t.Errorf("annotation (-want +got):\n%s", diff)
	}
	want := "Placed on node node-h100: tier 1/3: H100 (request gpu/h100), device node-h100/gpu-3 GPU-1234; policy v9"
	if diff := cmp.Diff(want, placementNote(p, "v9")); diff != "" {
		t.Errorf("event note (-want +got):\n%s", diff)
	}
}

// TestReserveRechecksHealth: the device DynamicResources reserved turns
// unhealthy before Tiering's Reserve; the node is rejected for this cycle.
func TestReserveRechecksHealth(t *testing.T) {
	for name, taint := range map[string]bool{"healthy device passes": false, "tainted device is rejected": true} {
		t.Run(name, func(t *testing.T) {
			slice := testSlice("node-a", gpus("H100", 80, 1)...)
			e := newEnv(t, []*v1.Node{testNode("node-a"), testNode("node-b")},
				[]*resourceapi.ResourceSlice{slice, testSlice("node-b", gpus("A100", 80, 1)...)},
				[]*resourceapi.ResourceClaim{tieredClaim("p", 1, "H100", "A100")})
			pod := testPod("p")
			_, cs := e.cycle(t, pod)
			if st := e.dr.Reserve(e.ctx, cs, pod, "node-a"); !st.IsSuccess() {
				t.Fatalf("DynamicResources Reserve: %v", st)
			}
			if taint {
				s := slice.DeepCopy()
				s.Spec.Devices[0].Taints = []resourceapi.DeviceTaint{{Key: testDriver + "/unhealthy", Effect: resourceapi.DeviceTaintEffectNoSchedule}}
				if _, err := e.client.ResourceV1().ResourceSlices().Update(e.ctx, s, metav1.UpdateOptions{}); err != nil {
					t.Fatal(err)
				}
				waitForTaint(t, e)
			}
			st := e.tiering.Reserve(e.ctx, cs, pod, "node-a")
			if taint {
				want := "device gpu.rota.dev/node-a/gpu-0 on node node-a turned unhealthy before binding (taint gpu.rota.dev/unhealthy)"
				if st.Code() != fwk.Unschedulable || st.Message() != want {
					t.Errorf("Reserve: %v, want Unschedulable %q", st, want)
				}
				return
			}
			if !st.IsSuccess() {
				t.Fatalf("Reserve: %v", st)
			}
			p, err := getPlacement(cs)
			if err != nil {
				t.Fatal(err)
			}
			if tier := tierAnnotation(p); tier != "1/2: H100" || p.devices[0].uuid != "GPU-node-a-0" {
				t.Errorf("placement tier %q uuid %q, want 1/2: H100 and GPU-node-a-0", tier, p.devices[0].uuid)
			}
		})
	}
}

func waitForTaint(t *testing.T, e *env) {
	t.Helper()
	err := wait.PollUntilContextTimeout(e.ctx, 10e6, 5e9, true, func(context.Context) (bool, error) {
		slices, err := e.tiering.dra.ResourceSlices().ListWithDeviceTaintRules()
		if err != nil {
			return false, err
		}
		for _, s := range slices {
			for _, d := range s.Spec.Devices {
				if len(d.Taints) > 0 {
					return true, nil
				}
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("taint never reached the DRA manager: %v", err)
	}
}
