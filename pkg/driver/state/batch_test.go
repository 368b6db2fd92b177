package state

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"

	gpuv1 "github.com/rota-dev/rota/pkg/apis/gpu/v1alpha1"
	"github.com/rota-dev/rota/pkg/driver/checkpoint"
)

// sharedClaims are n time-sliced claims spread over the 8 GPUs of a
// dgx-h100, as a kubelet starting n pods would prepare them.
func sharedClaims(n int) []*resourceapi.ResourceClaim {
	claims := make([]*resourceapi.ResourceClaim, n)
	for i := range claims {
		claims[i] = allocated(fmt.Sprintf("c%02d", i), []string{fmt.Sprintf("gpu-%d", i%8)}, timeSliced("Medium"))
	}
	return claims
}

// TestConcurrentPreparesShareWrites: 32 prepares arrive while a batch holds
// the state; they all run in the next batch, which records them with two
// checkpoint writes, not 64, and sets each GPU's interval once.
func TestConcurrentPreparesShareWrites(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	e := newEnv(t, "dgx-h100")
	claims := sharedClaims(32)
	var s *State
	first := true
	e.hook = func(st Step) error {
		if st != StepStarted || !first {
			return nil
		}
		first = false
		// Hold the first batch until the other 31 calls are queued (or,
		// if they never are, long enough for the counts below to fail).
		for i := 0; queued(s) < len(claims)-1 && i < 1e6; i++ {
			runtime.Gosched()
		}
		return nil
	}
	s = e.mustStart()
	e.writes.Store(0)
	setsBefore := len(e.setter.Calls())

	errs := make([]error, len(claims))
	var wg sync.WaitGroup
	for i, c := range claims {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = s.Prepare(ctx, c)
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("claim %d: %v", i, err)
		}
	}
	got := s.Claims()
	for _, c := range claims {
		if got[string(c.UID)].State != checkpoint.PrepareCompleted || !e.cdiExists(string(c.UID)) {
			t.Errorf("claim %s not prepared: %+v", c.Name, got[string(c.UID)])
		}
	}
	// Two batches: the one that held the state (1 claim) and the rest.
	if w := e.writes.Load(); w != 4 {
		t.Errorf("checkpoint writes for 32 concurrent prepares = %d, want 4 (2 batches × 2)", w)
	}
	if n := len(e.setter.Calls()) - setsBefore; n != 8 {
		t.Errorf("time slice set %d times, want once per GPU (8)", n)
	}
}

// TestBatchClaimsFailAlone: in one batch, a claim that conflicts with an
// earlier claim of the batch, and the claims on a GPU whose interval cannot
// be set, fail; the others are prepared, and nothing of the failed ones is
// left behind.
func TestBatchClaimsFailAlone(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	e := newEnv(t, "dgx-h100")
	broken := e.inv.GPUs[2].UUID
	e.slicer = failOn{uuid: broken, next: e.setter}
	s := e.mustStart()
	e.writes.Store(0)
	claims := []*resourceapi.ResourceClaim{
		allocated("x1", []string{"gpu-0"}),
		allocated("x2", []string{"gpu-0"}), // conflicts with x1
		allocated("t1", []string{"gpu-1"}, timeSliced("Long")),
		allocated("t2", []string{"gpu-2"}, timeSliced("Long")),  // interval cannot be set
		allocated("t3", []string{"gpu-2"}, timeSliced("Long")),  // same GPU
		allocated("t4", []string{"gpu-1"}, timeSliced("Short")), // other interval than t1
	}
	res := s.PrepareAll(ctx, claims)
	want := map[string]string{"x1": "", "x2": "already prepared exclusively", "t1": "", "t2": "cannot set", "t3": "cannot set", "t4": "runs with time slice Long"}
	recorded := s.Claims()
	for i, c := range claims {
		err := res[i].Err
		switch w := want[c.Name]; {
		case w == "" && err != nil:
			t.Errorf("%s: %v", c.Name, err)
		case w != "" && (err == nil || !strings.Contains(err.Error(), w)):
			t.Errorf("%s: error %v, want one containing %q", c.Name, err, w)
		}
		_, ok := recorded[string(c.UID)]
		if ok != (want[c.Name] == "") || e.cdiExists(string(c.UID)) != ok {
			t.Errorf("%s: recorded=%v, CDI spec=%v", c.Name, ok, e.cdiExists(string(c.UID)))
		}
	}
	if w := e.writes.Load(); w != 2 {
		t.Errorf("checkpoint writes = %d, want 2 for one batch", w)
	}
}

// TestUnprepareAfterPrepareInOneQueue: an unprepare queued behind a prepare
// of the same claim sees it prepared and removes it, as it would one call at
// a time.
func TestUnprepareAfterPrepareInOneQueue(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	e := newEnv(t, "dgx-h100")
	s := e.mustStart()
	c := allocated("a", []string{"gpu-3"}, timeSliced("Long"))
	ops := []*op{
		{claim: c, uid: "uid-a", namespace: "ns", name: "a", logger: klogDiscard(ctx), done: make(chan opResult, 1)},
		{uid: "uid-a", namespace: "ns", name: "a", logger: klogDiscard(ctx), done: make(chan opResult, 1)},
	}
	s.submit(ctx, ops)
	for i, o := range ops {
		if r := <-o.done; r.err != nil {
			t.Fatalf("op %d: %v", i, r.err)
		}
	}
	if len(s.Claims()) != 0 || e.cdiExists("uid-a") {
		t.Error("claim left prepared after its unprepare")
	}
	calls := e.setter.Calls()
	if len(calls) != 2 || calls[1].TimeSlice != gpuv1.DefaultTimeSlice {
		t.Errorf("time slice calls = %v, want Long then Default", calls)
	}
}

// TestCrashAtEveryStepOfABatch kills the plugin after each step of a batch
// of four claims and checks that after the restart each claim is completed
// with its CDI spec or gone without one, all alike, and that the kubelet's
// retry prepares them all.
func TestCrashAtEveryStepOfABatch(t *testing.T) {
	kinds := map[string]func() []*resourceapi.ResourceClaim{
		// A time-sliced batch changes GPU intervals: a started record first.
		"time-sliced": func() []*resourceapi.ResourceClaim { return sharedClaims(4) },
		// An exclusive batch changes no setting: one write, at completion.
		"exclusive": func() []*resourceapi.ResourceClaim {
			return []*resourceapi.ResourceClaim{allocated("x0", []string{"gpu-0"}), allocated("x1", []string{"gpu-1"}), allocated("x2", []string{"gpu-2", "gpu-3"})}
		},
	}
	for kind, newClaims := range kinds {
		for _, crashAt := range Steps {
			t.Run(kind+"/"+string(crashAt), func(t *testing.T) {
				crashBatchAt(t, crashAt, newClaims())
			})
		}
	}
}

func crashBatchAt(t *testing.T, crashAt Step, claims []*resourceapi.ResourceClaim) {
	t.Helper()
	_, ctx := ktesting.NewTestContext(t)
	e := newEnv(t, "dgx-h100")
	e.hook = func(s Step) error {
		if s == crashAt {
			return ErrCrash
		}
		return nil
	}
	s := e.mustStart()
	for i, r := range s.PrepareAll(ctx, claims) {
		if r.Err == nil {
			t.Fatalf("claim %d survived the injected crash", i)
		}
	}
	e.hook = nil
	s = e.mustStart()
	got := s.Claims()
	for _, c := range claims {
		rec, ok := got[string(c.UID)]
		completed := ok && rec.State == checkpoint.PrepareCompleted
		if ok != completed || completed != e.cdiExists(string(c.UID)) || completed != (crashAt == StepCompleted) {
			t.Errorf("%s after restart: recorded=%v completed=%v CDI=%v", c.Name, ok, completed, e.cdiExists(string(c.UID)))
		}
	}
	for i, r := range s.PrepareAll(ctx, claims) {
		if r.Err != nil {
			t.Errorf("retry of claim %d: %v", i, r.Err)
		}
	}
}

// TestOneWriteWithoutSettingChanges: a batch that changes no GPU setting
// is recorded with one checkpoint write.
func TestOneWriteWithoutSettingChanges(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	e := newEnv(t, "dgx-h100")
	s := e.mustStart()
	e.writes.Store(0)
	if _, err := s.Prepare(ctx, allocated("a", []string{"gpu-0"})); err != nil {
		t.Fatal(err)
	}
	if w := e.writes.Load(); w != 1 {
		t.Errorf("checkpoint writes for an exclusive claim = %d, want 1", w)
	}
}

// failOn fails Set for one GPU.
type failOn struct {
	uuid string
	next interface {
		Set(context.Context, string, gpuv1.TimeSlice) error
	}
}

func (f failOn) Set(ctx context.Context, uuid string, ts gpuv1.TimeSlice) error {
	if uuid == f.uuid {
		return errors.New("cannot set the interval: GPU is busy")
	}
	return f.next.Set(ctx, uuid, ts)
}

func queued(s *State) int {
	s.queueMu.Lock()
	defer s.queueMu.Unlock()
	return len(s.queue)
}

func klogDiscard(ctx context.Context) klog.Logger { return klog.FromContext(ctx) }
