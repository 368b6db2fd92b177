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

	"github.com/rota-dev/rota/pkg/waits"
)

func TestExplainPlacement(t *testing.T) {
	dev := func(name, uuid string, tier int, sub, model string) grantedDevice {
		return grantedDevice{id: structured.MakeDeviceID(testDriver, "dgx-a100-0", name), request: "gpu/" + sub,
			tier: tier, tiers: 2, tierName: sub, model: model, uuid: uuid}
	}
	cases := map[string]struct {
		p                         *placement
		wantTier, wantNote, wantD string
	}{
		"first tier, one device": {
			p:        &placement{node: "dgx-a100-0", devices: []grantedDevice{dev("gpu-3", "GPU-1234", 0, "h100", "H100")}},
			wantTier: "1/2: H100", wantNote: "1 × H100 on dgx-a100-0 (gpu-3), tier 1/2; policy v9",
			wantD: "dgx-a100-0/gpu-3=GPU-1234",
		},
		"fallback: four devices in one line, why the first tier was passed over": {
			p: &placement{node: "dgx-a100-0", passedOver: []waits.PassedTier{{Tier: "1/2", Name: "H100", Need: 4, Matching: 8, Allocated: 6, Tainted: map[string]int{"gpu.rota.dev/unhealthy": 2}}}, devices: []grantedDevice{
				dev("gpu-1", "GPU-b", 1, "a100", "A100"), dev("gpu-0", "GPU-a", 1, "a100", "A100"),
				dev("gpu-2", "GPU-c", 1, "a100", "A100"), dev("gpu-3", "", 1, "a100", "A100")}},
			wantTier: "2/2: A100", wantNote: "4 × A100 on dgx-a100-0 (gpu-0..3), tier 2/2; H100 tier: 0 of 8 free — 6 allocated, 2 tainted gpu.rota.dev/unhealthy; policy v9",
			wantD: "dgx-a100-0/gpu-1=GPU-b, dgx-a100-0/gpu-0=GPU-a, dgx-a100-0/gpu-2=GPU-c, dgx-a100-0/gpu-3=unknown",
		},
		"devices that are not a run are listed": {
			p:        &placement{node: "dgx-a100-0", devices: []grantedDevice{dev("gpu-0", "GPU-a", 1, "a100", ""), dev("gpu-2", "GPU-c", 1, "a100", "")}},
			wantTier: "2/2: a100", wantNote: "2 × a100 on dgx-a100-0 (gpu-0, gpu-2), tier 2/2; policy v9",
			wantD: "dgx-a100-0/gpu-0=GPU-a, dgx-a100-0/gpu-2=GPU-c",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.wantTier, tierAnnotation(tc.p)); diff != "" {
				t.Errorf("tier annotation (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantNote, placementNote(tc.p, "v9")); diff != "" {
				t.Errorf("event note (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantD, devicesAnnotation(tc.p)); diff != "" {
				t.Errorf("devices annotation (-want +got):\n%s", diff)
			}
		})
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
				want := "DeviceTainted: device gpu.rota.dev/node-a/gpu-0 on node node-a turned unhealthy before binding (taint gpu.rota.dev/unhealthy)"
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
