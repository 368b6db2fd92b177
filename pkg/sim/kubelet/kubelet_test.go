package kubelet

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"
	drapb "k8s.io/kubelet/pkg/apis/dra/v1"
	"k8s.io/utils/clock"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
)

// recordingPlugin records the claims prepared and unprepared.
type recordingPlugin struct {
	mu                   sync.Mutex
	prepared, unprepared []string
	// fail, when set, is the error every claim's prepare answers.
	fail string
	// dieAfterPrepare: the plugin prepares the claims and then fails the
	// call as a plugin killed before it answered does.
	dieAfterPrepare bool
}

func (p *recordingPlugin) NodePrepareResources(_ context.Context, in *drapb.NodePrepareResourcesRequest, _ ...grpc.CallOption) (*drapb.NodePrepareResourcesResponse, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	resp := &drapb.NodePrepareResourcesResponse{Claims: map[string]*drapb.NodePrepareResourceResponse{}}
	for _, c := range in.Claims {
		if p.fail != "" {
			resp.Claims[c.Uid] = &drapb.NodePrepareResourceResponse{Error: p.fail}
			continue
		}
		p.prepared = append(p.prepared, c.Namespace+"/"+c.Name)
		resp.Claims[c.Uid] = &drapb.NodePrepareResourceResponse{}
	}
	if p.dieAfterPrepare {
		return nil, errors.New("rpc error: code = Unavailable desc = error reading from server: EOF")
	}
	return resp, nil
}

func (p *recordingPlugin) setFail(msg string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.fail = msg
}

func (p *recordingPlugin) NodeUnprepareResources(_ context.Context, in *drapb.NodeUnprepareResourcesRequest, _ ...grpc.CallOption) (*drapb.NodeUnprepareResourcesResponse, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	resp := &drapb.NodeUnprepareResourcesResponse{Claims: map[string]*drapb.NodeUnprepareResourceResponse{}}
	for _, c := range in.Claims {
		p.unprepared = append(p.unprepared, c.Namespace+"/"+c.Name)
		resp.Claims[c.Uid] = &drapb.NodeUnprepareResourceResponse{}
	}
	return resp, nil
}

func (p *recordingPlugin) calls() (prepared, unprepared []string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.prepared...), append([]string(nil), p.unprepared...)
}

type harness struct {
	t      *testing.T
	ctx    context.Context
	client *fake.Clientset
	cancel context.CancelFunc
	clock  *clocktesting.FakeClock
	// kubeletClock is the clock the kubelet gets: clock, unless a test
	// wraps it.
	kubeletClock clock.WithTickerAndDelayedExecution
	plugin       *recordingPlugin
	kubelet      *Kubelet
}

func (h *harness) kubeletClaims() ([]ClaimRecord, uint64, int) { return h.kubelet.Claims() }

func start(t *testing.T, o Options) *harness {
	t.Helper()
	h := newHarness(t)
	h.run(o)
	return h
}

func newHarness(t *testing.T) *harness {
	t.Helper()
	logger := ktesting.NewLogger(t, ktesting.NewConfig(ktesting.Verbosity(4)))
	ctx, cancel := context.WithCancel(klog.NewContext(context.Background(), logger))
	t.Cleanup(cancel)
	return &harness{t: t, ctx: ctx, cancel: cancel, client: fake.NewClientset(),
		clock: clocktesting.NewFakeClock(time.Date(2026, 3, 2, 7, 0, 0, 0, time.UTC)), plugin: &recordingPlugin{}}
}

// run starts a kubelet for node-a on the harness's client and clock.
func (h *harness) run(o Options) {
	h.t.Helper()
	o.Client, o.Clock, o.Preparer, o.NodeName = h.client, h.kubeletClock, h.plugin, "node-a"
	if o.Clock == nil {
		o.Clock = h.clock
	}
	k, err := New(o)
	if err != nil {
		h.t.Fatal(err)
	}
	h.kubelet = k
	done := make(chan error)
	go func() { done <- k.Run(h.ctx) }()
	h.t.Cleanup(func() {
		h.cancel()
		if err := <-done; err != nil {
			h.t.Errorf("Run: %v", err)
		}
	})
}

// eventually polls until check passes; it measures nothing.
func (h *harness) eventually(what string, check func() bool) {
	h.t.Helper()
	if err := wait.PollUntilContextTimeout(h.ctx, 5*time.Millisecond, 30*time.Second, true,
		func(context.Context) (bool, error) { return check(), nil }); err != nil {
		h.t.Fatalf("never happened: %s", what)
	}
}

// step advances the fake clock once the kubelet waits on it.
func (h *harness) step(d time.Duration) {
	h.t.Helper()
	h.eventually("kubelet waits on the clock", h.clock.HasWaiters)
	h.clock.Step(d)
}

func (h *harness) pod(name string) *v1.Pod {
	h.t.Helper()
	p, err := h.client.CoreV1().Pods("ml").Get(h.ctx, name, metav1.GetOptions{})
	if err != nil {
		h.t.Fatal(err)
	}
	return p
}

func boundPod(name, node string) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ml", Name: name, UID: types.UID("uid-" + name)},
		Spec: v1.PodSpec{
			NodeName:       node,
			Containers:     []v1.Container{{Name: "main", Image: "registry.k8s.io/pause:3.10"}},
			ResourceClaims: []v1.PodResourceClaim{{Name: "gpu", ResourceClaimTemplateName: ptr.To("gpu")}},
		},
		Status: v1.PodStatus{
			Phase:                 v1.PodPending,
			ResourceClaimStatuses: []v1.PodResourceClaimStatus{{Name: "gpu", ResourceClaimName: ptr.To(name + "-gpu")}},
		},
	}
}

func allocatedClaim(name string) *resourceapi.ResourceClaim {
	return &resourceapi.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ml", Name: name, UID: types.UID("claim-" + name)},
		Status: resourceapi.ResourceClaimStatus{Allocation: &resourceapi.AllocationResult{
			Devices: resourceapi.DeviceAllocationResult{Results: []resourceapi.DeviceRequestAllocationResult{
				{Request: "gpu", Driver: "gpu.rota.dev", Pool: "node-a", Device: "gpu-0"},
			}},
		}},
	}
}

func phaseAndReady(p *v1.Pod) (v1.PodPhase, bool) {
	return p.Status.Phase, isReady(p)
}

func TestPodStartsAfterDelaysOnTheClock(t *testing.T) {
	h := start(t, Options{StartDelay: 5 * time.Second, ReadyDelay: 20 * time.Second, MaxGracePeriod: -1})
	if _, err := h.client.ResourceV1().ResourceClaims("ml").Create(h.ctx, allocatedClaim("train-gpu"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := h.client.CoreV1().Pods("ml").Create(h.ctx, boundPod("train", "node-a"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	other := boundPod("elsewhere", "node-b")
	other.UID = "uid-other"
	if _, err := h.client.CoreV1().Pods("ml").Create(h.ctx, other, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	h.step(4 * time.Second)
	if phase, _ := phaseAndReady(h.pod("train")); phase != v1.PodPending {
		t.Fatalf("pod is %s before its start delay passed", phase)
	}
	h.step(time.Second)
	h.eventually("pod Running", func() bool { p, _ := phaseAndReady(h.pod("train")); return p == v1.PodRunning })
	p := h.pod("train")
	if isReady(p) {
		t.Error("pod Ready before its ready delay passed")
	}
	if len(p.Status.ContainerStatuses) != 1 || p.Status.ContainerStatuses[0].State.Running == nil {
		t.Errorf("container statuses = %+v", p.Status.ContainerStatuses)
	}
	if got := p.Status.ContainerStatuses[0].State.Running.StartedAt.Time; !got.Equal(h.clock.Now()) {
		t.Errorf("container started at %v, want the clock's %v", got, h.clock.Now())
	}
	if prepared, _ := h.plugin.calls(); len(prepared) != 1 || prepared[0] != "ml/train-gpu" {
		t.Errorf("prepared claims = %v, want [ml/train-gpu]", prepared)
	}

	h.step(20 * time.Second)
	h.eventually("pod Ready", func() bool { return isReady(h.pod("train")) })
	if phase, _ := phaseAndReady(h.pod("elsewhere")); phase != v1.PodPending {
		t.Errorf("a pod of another node is %s", phase)
	}
}

// movingClock is a fake clock that, once armed, moves on by jump inside the
// next AfterFunc call, before the timer is set: the clock advancing (another
// goroutine's Step) between the kubelet reading the time and setting its
// timer, with the timers that fall due firing in that moment.
type movingClock struct {
	*clocktesting.FakeClock
	mu   sync.Mutex
	jump time.Duration
}

func (c *movingClock) arm(jump time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.jump = jump
}

func (c *movingClock) AfterFunc(d time.Duration, f func()) clock.Timer {
	c.mu.Lock()
	jump := c.jump
	c.jump = 0
	c.mu.Unlock()
	if jump > 0 {
		c.Step(jump)
	}
	return c.FakeClock.AfterFunc(d, f)
}

// TestWakeUpsSurviveTheClockMovingWhileTheyAreSet: the clock moves past a
// wake-up's time while the kubelet sets that wake-up's timer, and a timer
// of another pod falls due in the same moment. Both pods must still be
// started and made Ready on time without the clock moving again; before,
// the moved timer fired 30s late (never, here) and the other pod's timer
// callback deadlocked the kubelet.
func TestWakeUpsSurviveTheClockMovingWhileTheyAreSet(t *testing.T) {
	h := newHarness(t)
	mc := &movingClock{FakeClock: h.clock}
	h.kubeletClock = mc
	h.run(Options{StartDelay: 5 * time.Second, ReadyDelay: 20 * time.Second, MaxGracePeriod: -1})
	for _, name := range []string{"train", "eval"} {
		if _, err := h.client.ResourceV1().ResourceClaims("ml").Create(h.ctx, allocatedClaim(name+"-gpu"), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := h.client.CoreV1().Pods("ml").Create(h.ctx, boundPod("train", "node-a"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	start := h.clock.Now()
	h.step(5 * time.Second)
	h.eventually("train Running", func() bool { p, _ := phaseAndReady(h.pod("train")); return p == v1.PodRunning })
	h.eventually("train's ready wake-up set", func() bool { return h.clock.Waiters() == 1 })

	// eval's start wake-up (due at +10s) is being set when the clock jumps
	// to +35s, past it and past train's ready time (+25s).
	mc.arm(30 * time.Second)
	if _, err := h.client.CoreV1().Pods("ml").Create(h.ctx, boundPod("eval", "node-a"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	h.eventually("train Ready", func() bool { return isReady(h.pod("train")) })
	h.eventually("eval Running", func() bool { p, _ := phaseAndReady(h.pod("eval")); return p == v1.PodRunning })
	if got, want := h.clock.Now(), start.Add(35*time.Second); !got.Equal(want) {
		t.Fatalf("clock at %v, want %v: the test moved it more than once", got, want)
	}
	eval := h.pod("eval")
	if got := eval.Status.ContainerStatuses[0].State.Running.StartedAt.Time; !got.Equal(start.Add(35 * time.Second)) {
		t.Errorf("eval started at %v, want when its start wake-up was found due (%v)", got, start.Add(35*time.Second))
	}
	if isReady(eval) {
		t.Error("eval Ready before its ready delay passed")
	}
	if prepared, _ := h.plugin.calls(); len(prepared) != 2 {
		t.Errorf("prepared claims = %v, want train's and eval's once each", prepared)
	}
}

// TestPrepareFailureIsReported: as the kubelet does, a failed prepare
// leaves the pod Pending and records one Warning Event
// FailedPrepareDynamicResources on it per distinct error, however often it
// retries; once prepare succeeds the pod runs.
func TestPrepareFailureIsReported(t *testing.T) {
	h := newHarness(t)
	h.plugin.setFail("GpuConfig for request \"gpu\": memoryMiB 200000 exceeds the 81920 MiB of gpu-0")
	h.run(Options{StartDelay: 5 * time.Second, ReadyDelay: 10 * time.Second, RetryDelay: 10 * time.Second})
	if _, err := h.client.ResourceV1().ResourceClaims("ml").Create(h.ctx, allocatedClaim("train-gpu"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := h.client.CoreV1().Pods("ml").Create(h.ctx, boundPod("train", "node-a"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	events := func() []v1.Event {
		list, err := h.client.CoreV1().Events("ml").List(h.ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return list.Items
	}
	h.step(5 * time.Second)
	h.eventually("a FailedPrepareDynamicResources event", func() bool { return len(events()) > 0 })
	h.step(10 * time.Second) // the retry fails the same way
	h.step(20 * time.Second)
	evs := events()
	if len(evs) != 1 {
		t.Fatalf("%d events, want 1 for one distinct error: %+v", len(evs), evs)
	}
	ev := evs[0]
	if ev.Reason != "FailedPrepareDynamicResources" || ev.Type != v1.EventTypeWarning || ev.InvolvedObject.Name != "train" ||
		ev.InvolvedObject.Kind != "Pod" || !strings.Contains(ev.Message, "Failed to prepare dynamic resources: ") ||
		!strings.Contains(ev.Message, "memoryMiB 200000 exceeds") {
		t.Errorf("event %s %s on %s %s: %q", ev.Type, ev.Reason, ev.InvolvedObject.Kind, ev.InvolvedObject.Name, ev.Message)
	}
	if phase, _ := phaseAndReady(h.pod("train")); phase != v1.PodPending {
		t.Errorf("pod is %s with its claims unprepared", phase)
	}
	h.plugin.setFail("")
	h.step(40 * time.Second)
	h.eventually("pod Running once prepare succeeds", func() bool { p, _ := phaseAndReady(h.pod("train")); return p == v1.PodRunning })
}

// TestReadyWhileTheInformerLags holds back every pod event after the first,
// so the kubelet's wake-ups see the pod as it was created (Pending) although
// it wrote Running itself. The pod must still become Ready once ReadyDelay
// has passed since it started, not ReadyDelay after the stale wake-up.
func TestReadyWhileTheInformerLags(t *testing.T) {
	h := newHarness(t)
	pods := watch.NewRaceFreeFake()
	h.client.PrependWatchReactor("pods", func(k8stesting.Action) (bool, watch.Interface, error) {
		return true, pods, nil
	})
	h.run(Options{StartDelay: 5 * time.Second, ReadyDelay: 20 * time.Second, MaxGracePeriod: -1})
	if _, err := h.client.ResourceV1().ResourceClaims("ml").Create(h.ctx, allocatedClaim("train-gpu"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pod, err := h.client.CoreV1().Pods("ml").Create(h.ctx, boundPod("train", "node-a"), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pods.Add(pod) // the only event the informer gets

	h.step(5 * time.Second)
	h.eventually("pod Running", func() bool { p, _ := phaseAndReady(h.pod("train")); return p == v1.PodRunning })
	h.step(20 * time.Second)
	h.eventually("pod Ready", func() bool { return isReady(h.pod("train")) })
	p := h.pod("train")
	if got, want := p.Status.ContainerStatuses[0].State.Running.StartedAt.Time, h.clock.Now().Add(-20*time.Second); !got.Equal(want) {
		t.Errorf("container started at %v, want %v (started once)", got, want)
	}
	if prepared, _ := h.plugin.calls(); len(prepared) != 1 {
		t.Errorf("prepared claims = %v, want one prepare", prepared)
	}
}

func TestDeletedPodLeavesAfterGracePeriod(t *testing.T) {
	h := start(t, Options{MaxGracePeriod: 60 * time.Second})
	if _, err := h.client.ResourceV1().ResourceClaims("ml").Create(h.ctx, allocatedClaim("train-gpu"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := h.client.CoreV1().Pods("ml").Create(h.ctx, boundPod("train", "node-a"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	h.eventually("pod Ready", func() bool { return isReady(h.pod("train")) })

	// The fake clientset deletes at once; mark deletion the way the API
	// server does for a pod with a grace period: an update.
	p := h.pod("train")
	p.DeletionTimestamp = &metav1.Time{Time: h.clock.Now().Add(300 * time.Second)}
	p.DeletionGracePeriodSeconds = ptr.To[int64](300)
	if _, err := h.client.CoreV1().Pods("ml").Update(h.ctx, p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	h.step(59 * time.Second)
	if _, unprepared := h.plugin.calls(); len(unprepared) != 0 {
		t.Fatalf("claims unprepared before the grace period ended: %v", unprepared)
	}
	if _, err := h.client.CoreV1().Pods("ml").Get(h.ctx, "train", metav1.GetOptions{}); err != nil {
		t.Fatalf("pod gone before the grace period (capped at 60s) ended: %v", err)
	}
	h.step(time.Second)
	h.eventually("pod removed", func() bool {
		_, err := h.client.CoreV1().Pods("ml").Get(h.ctx, "train", metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	})
	if _, unprepared := h.plugin.calls(); len(unprepared) != 1 || unprepared[0] != "ml/train-gpu" {
		t.Errorf("unprepared claims = %v, want [ml/train-gpu]", unprepared)
	}
}

func TestOptionsAreChecked(t *testing.T) {
	if _, err := New(Options{}); err == nil {
		t.Error("New without client and node name succeeded")
	}
	if _, err := New(Options{Client: fake.NewClientset(), NodeName: "n", StartDelay: -time.Second}); err == nil {
		t.Error("New with a negative start delay succeeded")
	}
}

// TestWakeUpOnTimeWhenTheClockMovesPartWay: the clock moves on while a
// wake-up's timer is set, but not as far as the wake-up's time. The timer
// must still fire at that time, not as late as the clock moved.
func TestWakeUpOnTimeWhenTheClockMovesPartWay(t *testing.T) {
	h := newHarness(t)
	mc := &movingClock{FakeClock: h.clock}
	h.kubeletClock = mc
	h.run(Options{StartDelay: 5 * time.Second, ReadyDelay: 20 * time.Second, MaxGracePeriod: -1})
	if _, err := h.client.ResourceV1().ResourceClaims("ml").Create(h.ctx, allocatedClaim("train-gpu"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	start := h.clock.Now()
	// The start wake-up (due at +5s) is being set when the clock moves to +2s.
	mc.arm(2 * time.Second)
	if _, err := h.client.CoreV1().Pods("ml").Create(h.ctx, boundPod("train", "node-a"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	h.eventually("the clock moved while the wake-up was set", func() bool { return h.clock.Now().Equal(start.Add(2 * time.Second)) })
	h.eventually("start wake-up set", func() bool { return h.clock.Waiters() == 1 })
	h.clock.Step(3 * time.Second)
	h.eventually("train Running at +5s", func() bool { p, _ := phaseAndReady(h.pod("train")); return p == v1.PodRunning })
	if got := h.pod("train").Status.ContainerStatuses[0].State.Running.StartedAt.Time; !got.Equal(start.Add(5 * time.Second)) {
		t.Errorf("train started at %v, want %v", got, start.Add(5*time.Second))
	}
}

// TestClaimOfAPluginThatDiedMidPrepareIsUnprepared: the plugin prepares the
// claim and dies before it answers. The pod is deleted before a retry
// succeeds. The kubelet must still unprepare the claim, as the real kubelet
// does with the claims it recorded before calling the plugin; otherwise the
// node keeps the claim's CDI spec and checkpoint entry for good.
func TestClaimOfAPluginThatDiedMidPrepareIsUnprepared(t *testing.T) {
	h := newHarness(t)
	h.plugin.dieAfterPrepare = true
	h.run(Options{StartDelay: 5 * time.Second, ReadyDelay: 10 * time.Second, RetryDelay: time.Minute, MaxGracePeriod: -1})
	if _, err := h.client.ResourceV1().ResourceClaims("ml").Create(h.ctx, allocatedClaim("train-gpu"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := h.client.CoreV1().Pods("ml").Create(h.ctx, boundPod("train", "node-a"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	h.step(5 * time.Second)
	h.eventually("prepare called", func() bool { p, _ := h.plugin.calls(); return len(p) == 1 })
	h.eventually("the kubelet records the claim", func() bool {
		claims, _, inFlight := h.kubeletClaims()
		return inFlight == 0 && len(claims) == 1 && !claims[0].Prepared
	})
	if err := h.client.CoreV1().Pods("ml").Delete(h.ctx, "train", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	h.eventually("claim unprepared", func() bool { _, u := h.plugin.calls(); return len(u) == 1 && u[0] == "ml/train-gpu" })
	h.eventually("the kubelet forgets the claim", func() bool { claims, _, _ := h.kubeletClaims(); return len(claims) == 0 })
}
