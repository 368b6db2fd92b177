package schedule

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/utils/ptr"

	gpuv1 "github.com/rota-dev/rota/pkg/apis/gpu/v1alpha1"
	"github.com/rota-dev/rota/pkg/apis/rota/v1alpha1"
	"github.com/rota-dev/rota/pkg/schedule/controller"
)

const weekName = "gpu-pool-h100-shared"

// nightPool is the week-swap scenario's pool on Monday before 08:00: qwen32b (6 GPUs) and
// md-bge-embed (2 GPUs) run, llama70b (8 GPUs) is stopped.
func nightPool(t *testing.T, start time.Time) (*env, *observer) {
	e, obs := nightWorkloads(t, start, nightOptions{})
	e.createSchedule(readExample(t, "deployschedule-week.yaml"))
	return e, obs
}

// scaleChanges counts the observed changes of one Deployment's replicas.
func (o *observer) scaleChanges(name string) int {
	n := 0
	last, seen := int32(0), false
	o.replay(func(_ *clusterState, r observation) {
		if r.kind != "deployment" || r.name != name {
			return
		}
		if seen && r.replicas != last {
			n++
		}
		last, seen = r.replicas, true
	})
	return n
}

// An outsider takes 2 of the 4 GPUs left at night: at 08:00 qwen32b is
// stopped, llama70b (8) cannot fit the 8-2=6 free GPUs, waits, and after 15
// minutes fails with CapacityUnavailable. qwen32b is not restarted.
func TestCapacityUnavailableWhenOutsiderTakesGPUs(t *testing.T) {
	e, _ := nightPool(t, at(19, 7, 0))
	e.gpuDeployment("outsider", 1, 2)
	e.waitReady("outsider", 1)
	e.startController(nil)
	e.convergedSince(weekName, at(19, 7, 0), 50)
	e.clock.SetTime(at(19, 8, 0))
	e.advance("llama70b waiting for capacity", 200, func() (bool, string) {
		st := e.targetStatus(weekName, "llama70b")
		return st.Reason == controller.ReasonCapacityWait, string(st.Phase) + "/" + st.Reason + " " + st.Message
	})
	e.advance("llama70b CapacityUnavailable", 400, func() (bool, string) {
		st := e.targetStatus(weekName, "llama70b")
		return st.Reason == controller.ReasonCapacityUnavailable, string(st.Phase) + "/" + st.Reason + " " + st.Message
	})
	st := e.targetStatus(weekName, "llama70b")
	if st.Phase != v1alpha1.TargetPhaseFailed || e.clock.Now().Before(at(19, 8, 15)) {
		t.Errorf("llama70b %s at %s, want Failed no earlier than 08:15", st.Phase, e.clock.Now().In(zone))
	}
	t.Logf("llama70b: %s", st.Message)
	e.tick(10)
	if r := ptr.Deref(e.deployment("md-qwen32b").Spec.Replicas, 1); r != 0 {
		t.Errorf("qwen32b restarted: replicas %d", r)
	}
	if r := ptr.Deref(e.deployment("md-llama70b").Spec.Replicas, 1); r != 0 {
		t.Errorf("llama70b started without room: replicas %d", r)
	}
}

// crashAt stops the controller at a failpoint: it reports the key and blocks
// until the test has stopped the controller.
type crashAt struct {
	before, after bool
	hit           chan string
	mu            sync.Mutex
	writes        int
}

func (c *crashAt) BeforeMutation(ctx context.Context, key string) error {
	if c.before {
		c.before = false
		c.hit <- key
		<-ctx.Done()
		return errors.New("crashed before the mutation")
	}
	return nil
}

func (c *crashAt) AfterMutation(ctx context.Context, key string, wrote bool) error {
	c.mu.Lock()
	if wrote {
		c.writes++
	}
	c.mu.Unlock()
	if c.after {
		c.after = false
		c.hit <- key
		<-ctx.Done()
		return errors.New("crashed after the mutation")
	}
	return nil
}

// countWrites counts the workload writes a controller made.
type countWrites struct {
	mu     sync.Mutex
	writes map[string]int
}

func (c *countWrites) BeforeMutation(context.Context, string) error { return nil }

func (c *countWrites) AfterMutation(_ context.Context, key string, wrote bool) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if wrote {
		c.writes[key]++
	}
	return nil
}

func TestCrashBetweenSubmittingAndMutation(t *testing.T) {
	for name, after := range map[string]bool{"before the mutation": false, "after the mutation": true} {
		t.Run(name, func(t *testing.T) {
			e, obs := nightPool(t, at(19, 7, 0))
			first := &crashAt{before: !after, after: after, hit: make(chan string, 1)}
			a := e.startController(first)
			e.convergedSince(weekName, at(19, 7, 0), 50)
			e.clock.SetTime(at(19, 8, 0))
			var key string
			select {
			case key = <-first.hit:
			case <-time.After(30 * time.Second):
				t.Fatal("the controller never reached the failpoint")
			}
			a.stop()
			st := e.targetStatus(weekName, "qwen32b")
			if len(st.Steps) != 1 || st.Steps[0].Phase != v1alpha1.StepSubmitting || st.Steps[0].Key != key {
				t.Fatalf("after the crash: steps %+v, want %s Submitting", st.Steps, key)
			}
			if got := e.deployment("md-qwen32b").Annotations[gpuv1.TransitionKeyAnnotation] == key; got != after {
				t.Fatalf("mutation applied before the restart = %v, want %v", got, after)
			}
			second := &countWrites{writes: map[string]int{}}
			e.startController(second)
			e.convergedSince(weekName, at(19, 8, 0), 400)
			total := second.writes[key]
			if after {
				total += first.writes
			}
			if total != 1 {
				t.Errorf("step %s written %d times, want exactly once", key, total)
			}
			if n := obs.scaleChanges("md-qwen32b"); n != 1 {
				t.Errorf("qwen32b scale changed %d times, want 1", n)
			}
			if n := obs.scaleChanges("md-llama70b"); n != 1 {
				t.Errorf("llama70b scale changed %d times, want 1", n)
			}
		})
	}
}

// Two controllers without leader election race on one schedule: every step is
// still applied exactly once.
func TestTwoControllersRace(t *testing.T) {
	e, obs := nightPool(t, at(19, 7, 0))
	a, b := &countWrites{writes: map[string]int{}}, &countWrites{writes: map[string]int{}}
	e.startController(a)
	e.startController(b)
	e.convergedSince(weekName, at(19, 7, 0), 50)
	for _, boundary := range []time.Time{at(19, 8, 0), at(19, 18, 0), at(20, 8, 0)} {
		e.clock.SetTime(boundary)
		e.convergedSince(weekName, boundary, 400)
	}
	keys := map[string]int{}
	for k, n := range a.writes {
		keys[k] += n
	}
	for k, n := range b.writes {
		keys[k] += n
	}
	if len(keys) != 6 {
		t.Errorf("%d distinct steps written, want 6: %v", len(keys), keys)
	}
	for k, n := range keys {
		if n != 1 {
			t.Errorf("step %s written %d times", k, n)
		}
	}
	if n := obs.scaleChanges("md-qwen32b"); n != 3 {
		t.Errorf("qwen32b scale changed %d times, want 3", n)
	}
	t.Logf("writes by controller A: %d, B: %d", len(a.writes), len(b.writes))
}

// The controller is down across Monday 18:00 and comes up at 18:20: one
// transition to the current intent.
func TestMissedBoundary(t *testing.T) {
	e, obs := nightPool(t, at(19, 7, 0))
	c := e.startController(nil)
	e.convergedSince(weekName, at(19, 7, 0), 50)
	e.clock.SetTime(at(19, 8, 0))
	e.convergedSince(weekName, at(19, 8, 0), 400)
	c.stop()
	e.clock.SetTime(at(19, 18, 20))
	e.tick(2)
	counts := &countWrites{writes: map[string]int{}}
	e.startController(counts)
	e.convergedSince(weekName, at(19, 18, 20), 400)
	if len(counts.writes) != 2 {
		t.Errorf("steps after the restart: %v, want 2 (stop llama70b, start qwen32b)", counts.writes)
	}
	for k := range counts.writes {
		if want := "2026-10-19T11:00:00Z"; !strings.Contains(k, want) {
			t.Errorf("step key %s does not name the 18:00 interval (%s)", k, want)
		}
	}
	if n := obs.scaleChanges("md-qwen32b"); n != 2 {
		t.Errorf("qwen32b scale changed %d times, want 2 (08:00 stop, one start after the restart)", n)
	}
	// Waiting longer changes nothing.
	e.tick(20)
	if n := obs.scaleChanges("md-llama70b"); n != 2 {
		t.Errorf("llama70b scale changed %d times, want 2", n)
	}
}
