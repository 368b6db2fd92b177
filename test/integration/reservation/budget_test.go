package reservation

import (
	"context"
	"fmt"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	gpuv1 "github.com/rota-dev/rota/pkg/apis/gpu/v1alpha1"
	rotav1 "github.com/rota-dev/rota/pkg/apis/rota/v1alpha1"
	reservationcontroller "github.com/rota-dev/rota/pkg/reservation/controller"
	"github.com/rota-dev/rota/test/integration/framework"
)

// TestBudgetUnderConcurrency submits 50 member pods of 4096 MiB at once to a
// time-sliced H200 reservation (budget 136,582 MiB): exactly 33 fit
// (135,168 MiB) and the other 17 are refused with ReservationOvercommitted.
// The GPU's own capacity (143,771 MiB) would take 35, so the budget, not the
// allocator, is what holds.
func TestBudgetUnderConcurrency(t *testing.T) {
	cp := setup(t)
	ctx := context.Background()
	createReservation(t, cp, timeSliced(tenant, "batch", 1, member("w", "workers")))
	res := waitForReservation(t, cp, tenant, "batch", "Bound", func(r *rotav1.GPUReservation) bool {
		return r.Status.Phase == rotav1.ReservationBound
	})
	uuid := res.Status.Devices[0].UUID
	rs := cp.CreateDeployment(t, tenant, "workers")
	cp.Create(t, framework.SharedGPUTemplate(tenant, "worker", 4096, reservedToleration(tenant, "batch"), framework.UUIDSelector(uuid)))

	const pods, mem, budget = 50, 4096, 136582
	const wantBound = budget / mem // 33
	done := make(chan error, pods)
	for i := range pods {
		go func() {
			_, err := cp.Client.CoreV1().Pods(tenant).Create(ctx, framework.ReplicaPod(rs, fmt.Sprintf("w-%02d", i), schedulerName, "worker"), metav1.CreateOptions{})
			done <- err
		}()
	}
	for range pods {
		if err := <-done; err != nil {
			t.Fatalf("create pod: %v", err)
		}
	}
	var bound, refused int
	framework.WaitFor(t, fmt.Sprintf("%d pods bound and the rest refused", wantBound), func(ctx context.Context) (bool, string, error) {
		list, err := cp.Client.CoreV1().Pods(tenant).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, "", err
		}
		bound, refused = 0, 0
		for _, p := range list.Items {
			if p.Spec.NodeName != "" {
				bound++
				continue
			}
			for _, c := range p.Status.Conditions {
				if c.Type == v1.PodScheduled && c.Status == v1.ConditionFalse && strings.Contains(c.Message, "ReservationOvercommitted") {
					refused++
				}
			}
		}
		return bound+refused == pods, fmt.Sprintf("bound=%d refused=%d", bound, refused), nil
	})
	if bound != wantBound || refused != pods-wantBound {
		t.Fatalf("bound %d, refused %d; want %d bound (%d MiB of %d) and %d refused", bound, refused, wantBound, wantBound*mem, budget, pods-wantBound)
	}
	// What the allocator granted agrees: every bound pod shares gpu-0.
	list, err := cp.Client.ResourceV1().ResourceClaims(tenant).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	onGPU := 0
	for _, c := range list.Items {
		if c.Status.Allocation == nil {
			continue
		}
		for _, r := range c.Status.Allocation.Devices.Results {
			if r.Device != "gpu-0" {
				t.Errorf("claim %s allocated %s, want gpu-0", c.Name, r.Device)
			}
			onGPU++
		}
	}
	if onGPU > wantBound {
		t.Errorf("%d claims allocated on the reserved GPU, budget allows %d", onGPU, wantBound)
	}
	res = waitForReservation(t, cp, tenant, "batch", "status counting the bound members", func(r *rotav1.GPUReservation) bool {
		return len(r.Status.Members) == 1 && r.Status.Members[0].Pods == int32(wantBound)
	})
	if got := res.Status.Members[0].MemoryMiB; got != wantBound*mem || got > res.Status.BudgetMiBPerGPU {
		t.Errorf("status memoryMiB = %d, want %d (≤ budget %d)", got, wantBound*mem, res.Status.BudgetMiBPerGPU)
	}
	t.Logf("50 pods at once: %d bound (%d MiB), %d refused; budget %d MiB", bound, bound*mem, refused, budget)

	// A member without memoryMiB on a time-sliced reservation is refused
	// with a message that says what is missing.
	cp.Create(t, framework.SharedGPUTemplate(tenant, "no-memory", 0, reservedToleration(tenant, "batch"), framework.UUIDSelector(uuid)))
	nm := framework.ReplicaPod(rs, "no-memory", schedulerName, "no-memory")
	cp.Create(t, nm)
	cp.WaitForPodUnschedulable(t, tenant, nm.Name, "ReservationMemoryMissing", "gets no memoryMiB")
	// A member whose claim does not tolerate the reservation is told so.
	cp.Create(t, framework.SharedGPUTemplate(tenant, "untolerated", 1024, nil))
	un := framework.ReplicaPod(rs, "untolerated", schedulerName, "untolerated")
	cp.Create(t, un)
	cp.WaitForPodUnschedulable(t, tenant, un.Name, "ReservationNotTolerated", gpuv1.ReservedTaintKey+"=team-a.batch")
}

// TestBadSpecs: reservations that cannot be held say why in their status,
// with the field and the numbers, and the controller keeps serving others.
func TestBadSpecs(t *testing.T) {
	cp := setup(t)
	tests := map[string]struct {
		res        *rotav1.GPUReservation
		wantReason string
		wantMsg    string
	}{
		"unknown node": {
			res: func() *rotav1.GPUReservation {
				r := timeSliced(tenant, "nowhere", 1, member("a", "md-a"))
				r.Spec.NodeName = "no-such-node"
				return r
			}(),
			wantReason: reservationcontroller.ReasonNodeNotFound, wantMsg: "spec.nodeName: node no-such-node does not exist",
		},
		"more GPUs than the node has": {
			res:        timeSliced(tenant, "greedy", 9, member("a", "md-a")),
			wantReason: reservationcontroller.ReasonTooManyGPUs, wantMsg: "spec.count: 9 GPUs asked, node hgx-h200-0 has 8",
		},
		"name too long to mark the GPUs": {
			res:        timeSliced(tenant, strings.Repeat("r", 60), 1, member("a", "md-a")),
			wantReason: reservationcontroller.ReasonNameTooLong, wantMsg: "must be no more than 63 bytes",
		},
		"UUID not on the node": {
			res: func() *rotav1.GPUReservation {
				r := timeSliced(tenant, "ghost", 1, member("a", "md-a"))
				r.Spec.Count, r.Spec.DeviceUUIDs = nil, []string{"GPU-hgx-h200-0-1", "GPU-does-not-exist"}
				return r
			}(),
			wantReason: reservationcontroller.ReasonDeviceNotFound, wantMsg: "spec.deviceUUIDs[1]: GPU-does-not-exist is not published on node hgx-h200-0",
		},
	}
	for _, tc := range tests {
		createReservation(t, cp, tc.res)
	}
	good := timeSliced(tenant, "good", 2, member("a", "md-a"))
	createReservation(t, cp, good)
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			res := waitForReservation(t, cp, tenant, tc.res.Name, "Pending with "+tc.wantReason, func(r *rotav1.GPUReservation) bool {
				return r.Status.Phase == rotav1.ReservationPending && condition(r, reservationcontroller.ConditionReady).Reason == tc.wantReason
			})
			if c := condition(res, reservationcontroller.ConditionReady); !strings.Contains(c.Message, tc.wantMsg) {
				t.Errorf("Ready condition message %q, want it to contain %q", c.Message, tc.wantMsg)
			}
			if len(res.Status.Devices) != 0 {
				t.Errorf("a pending reservation holds %v", res.Status.Devices)
			}
		})
	}
	res := waitForReservation(t, cp, tenant, "good", "Bound", func(r *rotav1.GPUReservation) bool {
		return r.Status.Phase == rotav1.ReservationBound
	})
	if len(res.Status.Devices) != 2 {
		t.Errorf("good reservation holds %v, want 2 GPUs", res.Status.Devices)
	}
	// Two GPUs are held; the node has 6 free, so 7 cannot be had.
	createReservation(t, cp, timeSliced(tenant, "seven", 7, member("a", "md-a")))
	res = waitForReservation(t, cp, tenant, "seven", "Pending with "+reservationcontroller.ReasonInsufficientFree, func(r *rotav1.GPUReservation) bool {
		return condition(r, reservationcontroller.ConditionReady).Reason == reservationcontroller.ReasonInsufficientFree
	})
	t.Logf("seven: %s", condition(res, reservationcontroller.ConditionReady).Message)
}
