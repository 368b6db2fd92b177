package state

import (
	"fmt"
	"testing"

	"k8s.io/klog/v2/ktesting"
)

// BenchmarkPrepareUnprepare measures the state machine alone (checkpoint
// fsyncs and CDI writes included, no gRPC, no API server): one time-sliced
// claim prepared and unprepared per op on an 8-GPU node.
func BenchmarkPrepareUnprepare(b *testing.B) {
	_, ctx := ktesting.NewTestContext(b)
	e := newEnv(b, "dgx-h100")
	s := e.mustStart()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		c := allocated(fmt.Sprintf("c%d", i), []string{fmt.Sprintf("gpu-%d", i%8)}, timeSliced("Medium"))
		if _, err := s.Prepare(ctx, c); err != nil {
			b.Fatal(err)
		}
		if err := s.Unprepare(ctx, string(c.UID), c.Namespace, c.Name); err != nil {
			b.Fatal(err)
		}
	}
}
