package state

import (
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/klog/v2/ktesting"

	"github.com/rota-dev/rota/pkg/driver/checkpoint"
)

// TestTwoInstancesShareTheCheckpoint plays a rolling update: an old and a new
// plugin instance of one node, both live on one checkpoint, each called for
// any claim. Neither loses a claim the other recorded, neither hands out a
// GPU the other holds, and either unprepares what the other prepared.
func TestTwoInstancesShareTheCheckpoint(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	e := newEnv(t, "dgx-h100")
	old := e.mustStart()
	if _, err := old.Prepare(ctx, allocated("x", []string{"gpu-0"})); err != nil {
		t.Fatal(err)
	}
	upd := e.mustStart() // the new pod starts while the old one serves
	if _, err := upd.Prepare(ctx, allocated("y", []string{"gpu-1"}, timeSliced("Long"))); err != nil {
		t.Fatal(err)
	}
	// The old instance prepares after the new one started: it must not write
	// back its stale view without y.
	if _, err := old.Prepare(ctx, allocated("z", []string{"gpu-2"})); err != nil {
		t.Fatal(err)
	}
	if got := claimUIDs(upd); got != "uid-x uid-y uid-z" {
		t.Fatalf("checkpoint claims after prepares on both instances = %q", got)
	}
	// No double prepare: the old instance sees the GPU the new one handed out.
	if _, err := old.Prepare(ctx, allocated("rival", []string{"gpu-1"})); err == nil ||
		!strings.Contains(err.Error(), "an exclusive claim needs it alone") {
		t.Fatalf("old instance prepared gpu-1 held by the new instance's claim: %v", err)
	}
	// Each instance unprepares what the other prepared, GPU settings included.
	for _, step := range []struct {
		s    *State
		name string
	}{{upd, "x"}, {upd, "z"}, {old, "y"}} {
		if err := step.s.Unprepare(ctx, "uid-"+step.name, "ns", step.name); err != nil {
			t.Fatalf("unprepare %s: %v", step.name, err)
		}
		if e.cdiExists("uid-" + step.name) {
			t.Errorf("CDI spec of %s left after unprepare", step.name)
		}
	}
	if got := claimUIDs(old); got != "" {
		t.Errorf("claims left: %q", got)
	}
	if calls := e.setter.Calls(); len(calls) != 2 {
		t.Errorf("time-slice calls %v, want Long on prepare and Default on unprepare", calls)
	}
}

// TestTwoInstancesConcurrentPrepares races the two instances: eight claims
// on eight GPUs all land in the checkpoint, and per GPU two exclusive claims
// from different instances never both succeed.
func TestTwoInstancesConcurrentPrepares(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	e := newEnv(t, "dgx-h100")
	instances := []*State{e.mustStart(), e.mustStart()}
	var wg sync.WaitGroup
	var mu sync.Mutex
	won := map[string][]string{}
	for i := 0; i < 8; i++ {
		for j, s := range instances {
			wg.Add(1)
			go func() {
				defer wg.Done()
				name := fmt.Sprintf("c%d-%d", i, j)
				if _, err := s.Prepare(ctx, allocated(name, []string{fmt.Sprintf("gpu-%d", i)})); err == nil {
					mu.Lock()
					won[fmt.Sprintf("gpu-%d", i)] = append(won[fmt.Sprintf("gpu-%d", i)], name)
					mu.Unlock()
				}
			}()
		}
	}
	wg.Wait()
	if len(won) != 8 {
		t.Errorf("GPUs prepared: %v, want all 8", won)
	}
	for gpu, names := range won {
		if len(names) != 1 {
			t.Errorf("%s prepared exclusively for %v", gpu, names)
		}
	}
	if n := len(instances[0].Claims()); n != 8 {
		t.Errorf("checkpoint holds %d claims, want 8: %q", n, claimUIDs(instances[1]))
	}
}

func claimUIDs(s *State) string {
	var uids []string
	for uid := range s.Claims() {
		uids = append(uids, uid)
	}
	sort.Strings(uids)
	return strings.Join(uids, " ")
}

// TestCloseWaitsForThePrepareInProgress: Close, as in a graceful shutdown,
// lets the prepare in progress complete and refuses later calls, so the
// checkpoint holds no half-prepared claim.
func TestCloseWaitsForThePrepareInProgress(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	e := newEnv(t, "l4x2")
	inStep, release := make(chan struct{}), make(chan struct{})
	e.hook = func(st Step) error {
		if st == StepStarted {
			close(inStep)
			<-release
		}
		return nil
	}
	s := e.mustStart()
	prepared := make(chan error, 1)
	go func() {
		_, err := s.Prepare(ctx, allocated("a", []string{"gpu-0"}))
		prepared <- err
	}()
	<-inStep
	closed := make(chan struct{})
	go func() { s.Close(); close(closed) }()
	select {
	case <-closed:
		t.Fatal("Close returned while a prepare was half done")
	case <-time.After(50 * time.Millisecond):
	}
	close(release)
	<-closed
	if err := <-prepared; err != nil {
		t.Fatalf("prepare in progress during Close: %v", err)
	}
	if c := s.Claims()["uid-a"]; c.State != checkpoint.PrepareCompleted {
		t.Errorf("claim after Close: %+v, want PrepareCompleted", c)
	}
	if _, err := s.Prepare(ctx, allocated("b", []string{"gpu-1"})); !errors.Is(err, ErrClosed) {
		t.Errorf("prepare after Close = %v, want ErrClosed", err)
	}
	if err := s.Unprepare(ctx, "uid-a", "ns", "a"); !errors.Is(err, ErrClosed) {
		t.Errorf("unprepare after Close = %v, want ErrClosed", err)
	}
}
