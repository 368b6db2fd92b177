package state

import (
	"testing"

	"k8s.io/klog/v2/ktesting"

	"github.com/rota-dev/rota/pkg/driver/checkpoint"
)

// TestCrashAtEveryStep kills the plugin after each side effect of prepare,
// restarts it on the same disk, and checks that the claim is either fully
// rolled back or fully prepared, that unprepare works, and that the GPU is
// never handed to a second exclusive claim while the first holds it.
func TestCrashAtEveryStep(t *testing.T) {
	for _, crashAt := range Steps {
		t.Run(string(crashAt), func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			e := newEnv(t, "l4x2")
			e.hook = func(s Step) error {
				if s == crashAt {
					return ErrCrash
				}
				return nil
			}
			s := e.mustStart()
			claimA := allocated("a", []string{"gpu-0"}, timeSliced("Long"))
			if _, err := s.Prepare(ctx, claimA); err == nil {
				t.Fatal("Prepare survived the injected crash")
			}

			e.hook = nil
			s = e.mustStart() // restart
			c, recorded := s.Claims()["uid-a"]
			completed := recorded && c.State == checkpoint.PrepareCompleted
			if recorded && !completed {
				t.Fatalf("claim left in state %s after restart", c.State)
			}
			if completed != e.cdiExists("uid-a") {
				t.Fatalf("checkpoint says completed=%v but CDI spec exists=%v", completed, e.cdiExists("uid-a"))
			}
			if wantCompleted := crashAt == StepCompleted; completed != wantCompleted {
				t.Errorf("completed = %v, want %v", completed, wantCompleted)
			}

			// While A holds the GPU, an exclusive claim is refused.
			if completed {
				if _, err := s.Prepare(ctx, allocated("b", []string{"gpu-0"})); err == nil {
					t.Fatal("exclusive claim prepared on a GPU held by a recovered claim")
				}
			}
			// The kubelet retries A: it prepares (again) and unprepares cleanly.
			if _, err := s.Prepare(ctx, claimA); err != nil {
				t.Fatalf("retried Prepare: %v", err)
			}
			if err := s.Unprepare(ctx, "uid-a", "ns", "a"); err != nil {
				t.Fatalf("Unprepare: %v", err)
			}
			if len(s.Claims()) != 0 || e.cdiExists("uid-a") {
				t.Error("state left after unprepare")
			}
			// The GPU ended back on the default interval.
			calls := e.setter.Calls()
			if len(calls) == 0 || calls[len(calls)-1].TimeSlice != "Default" {
				t.Errorf("last time-slice call = %v, want a reset to Default", calls)
			}
			// And now an exclusive claim gets it.
			if _, err := s.Prepare(ctx, allocated("b", []string{"gpu-0"})); err != nil {
				t.Errorf("exclusive claim after unprepare: %v", err)
			}
		})
	}
}
