package reservation

import (
	"fmt"
	"testing"

	"k8s.io/klog/v2/ktesting"
	"k8s.io/kubernetes/pkg/scheduler/framework"

	rotav1 "github.com/rota-dev/rota/pkg/apis/rota/v1alpha1"
)

// BenchmarkMemberPreFilterFilter is one scheduling attempt of a time-sliced
// member (PreFilter, then Filter on the reservation's node) in a cluster
// with n allocated claims, one in 100 of them on the held GPU: Filter sums
// the budget from every claim the DRA tracker has.
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
