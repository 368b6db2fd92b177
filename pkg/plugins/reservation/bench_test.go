package reservation

import (
	"fmt"
	"testing"

	"k8s.io/klog/v2/ktesting"
	"k8s.io/kubernetes/pkg/scheduler/framework"

	rotav1 "github.com/rota-dev/rota/pkg/apis/rota/v1alpha1"
)

// benchSizes are the cluster sizes the per-extension-point benchmarks
// compare: a cycle's cost must not grow from one to the other.
var benchSizes = []int{1000, 5000}

// benchWorld is a cluster with n allocated claims (ten of them members'
// on the held GPU gpu-0 of n1, the rest on other, unreserved GPUs, which
// they do not tolerate) and n GPUReservations
// in the candidate's namespace, one of which (serving) lists its
// Deployment md-a; the candidate's claim cand is allocated gpu-0 by
// DynamicResources' Reserve (a pending allocation).
func benchWorld(n int) world {
	claims := claimMap{}
	for i := range n {
		device, tolerate := fmt.Sprintf("gpu-%d", 1+i%7), ""
		if i < 10 {
			device, tolerate = "gpu-0", "team-a.serving"
		}
		addClaims(claims, allocated(claim("team-a", fmt.Sprintf("c-%d", i), tolerate, 1024), device))
	}
	cand := claim("team-a", "cand", "team-a.serving", 1024)
	addClaims(claims, cand)
	reservations := []*rotav1.GPUReservation{boundReservation("team-a", "serving", rotav1.ReservationTimeSliced, "md-a")}
	for i := range n - 1 {
		reservations = append(reservations, boundReservation("team-a", fmt.Sprintf("other-%d", i), rotav1.ReservationTimeSliced, fmt.Sprintf("md-%d", i)))
	}
	return world{
		reservations: reservations,
		deployments:  []string{"md-a"},
		claims:       claims,
		pending:      pendingAllocations{cand.UID: allocation(cand, "gpu-0")},
	}
}

// benchPoint runs one extension point of a time-sliced member's cycle at
// each size; setup runs the points before it once, outside the timer.
func benchPoint(b *testing.B, run func(b *testing.B, pl *Reservation, cs *framework.CycleState) bool, needPreFilter bool) {
	for _, n := range benchSizes {
		b.Run(fmt.Sprintf("size=%d", n), func(b *testing.B) {
			_, ctx := ktesting.NewTestContext(b)
			pl := benchWorld(n).plugin(b)
			p := pod("team-a", "cand-0", "md-a", "cand", "")
			cs := framework.NewCycleState()
			if needPreFilter {
				if _, st := pl.PreFilter(ctx, cs, p, nil); !st.IsSuccess() {
					b.Fatal(st)
				}
			}
			b.ResetTimer()
			for b.Loop() {
				if !run(b, pl, cs) {
					b.Fatal("refused")
				}
			}
		})
	}
}

// BenchmarkPreFilter is a time-sliced member's PreFilter: membership among
// the namespace's reservations.
func BenchmarkPreFilter(b *testing.B) {
	_, ctx := ktesting.NewTestContext(b)
	p := pod("team-a", "cand-0", "md-a", "cand", "")
	benchPoint(b, func(_ *testing.B, pl *Reservation, _ *framework.CycleState) bool {
		_, st := pl.PreFilter(ctx, framework.NewCycleState(), p, nil)
		return st.IsSuccess()
	}, false)
}

// BenchmarkFilter is its Filter on the reservation's node: the budget left
// on the held GPU.
func BenchmarkFilter(b *testing.B) {
	_, ctx := ktesting.NewTestContext(b)
	p := pod("team-a", "cand-0", "md-a", "cand", "")
	ni := nodeN1()
	benchPoint(b, func(_ *testing.B, pl *Reservation, cs *framework.CycleState) bool {
		return pl.Filter(ctx, cs, p, ni).IsSuccess()
	}, true)
}

// BenchmarkReserve is its Reserve: the devices the allocator chose against
// the budget.
func BenchmarkReserve(b *testing.B) {
	_, ctx := ktesting.NewTestContext(b)
	p := pod("team-a", "cand-0", "md-a", "cand", "")
	benchPoint(b, func(_ *testing.B, pl *Reservation, cs *framework.CycleState) bool {
		return pl.Reserve(ctx, cs, p, "n1").IsSuccess()
	}, true)
}

// BenchmarkMemberPreFilterFilter is one scheduling attempt of a time-sliced
// member (PreFilter, then Filter on the reservation's node) in a cluster
// with n allocated claims, one in 100 of them on the held GPU. All of them
// tolerate the reservation, so Filter reads each (claimsNear): this is the
// cost of a reservation's own claims; BenchmarkFilter is the cluster's.
func BenchmarkMemberPreFilterFilter(b *testing.B) {
	for _, n := range []int{100, 1000, 10000} {
		b.Run(fmt.Sprintf("claims=%d", n), func(b *testing.B) {
			_, ctx := ktesting.NewTestContext(b)
			claims := claimMap{}
			for i := range n {
				device := fmt.Sprintf("gpu-%d", 1+i%7)
				if i%100 == 0 {
					device = "gpu-0"
				}
				addClaims(claims, allocated(claim("team-a", fmt.Sprintf("c-%d", i), "team-a.serving", 1024), device))
			}
			addClaims(claims, claim("team-a", "cand", "team-a.serving", 1024))
			w := world{
				reservations: []*rotav1.GPUReservation{boundReservation("team-a", "serving", rotav1.ReservationTimeSliced, "md-a")},
				deployments:  []string{"md-a"},
				claims:       claims,
			}
			pl := w.plugin(b)
			p := pod("team-a", "cand-0", "md-a", "cand", "")
			ni := nodeN1()
			b.ResetTimer()
			for b.Loop() {
				cs := framework.NewCycleState()
				if _, st := pl.PreFilter(ctx, cs, p, nil); !st.IsSuccess() {
					b.Fatal(st)
				}
				if st := pl.Filter(ctx, cs, p, ni); !st.IsSuccess() {
					b.Fatal(st)
				}
			}
		})
	}
}
