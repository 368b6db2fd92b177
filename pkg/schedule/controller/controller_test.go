package controller

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"

	"github.com/rota-dev/rota/pkg/apis/rota/v1alpha1"
)

// Monday 2026-10-19 08:00 opens business hours: stop qwen32b, then start llama70b.
func TestReleaseFirstSwap(t *testing.T) {
	e := newEnv(t, at(19, 7, 59), poolObjects()...)
	e.addSchedule(weekSchedule())
	e.mustPass("pool")
	if got := e.targetStatus("pool", "qwen32b").Phase; got != v1alpha1.TargetPhaseConverged {
		t.Fatalf("before 08:00 qwen32b phase = %s, want Converged", got)
	}
	e.clock.SetTime(at(19, 8, 0))
	// The first pass stops qwen32b and leaves llama70b waiting for the release.
	if _, err := e.reconcile("pool"); err != nil {
		t.Fatal(err)
	}
	if got := e.replicas("md-qwen32b"); got != 0 {
		t.Fatalf("qwen32b replicas = %d, want 0 (stopped first)", got)
	}
	if got := e.replicas("md-llama70b"); got != 0 {
		t.Fatalf("llama70b replicas = %d before the release converged, want 0", got)
	}
	llama := e.targetStatus("pool", "llama70b")
	if llama.Phase != v1alpha1.TargetPhasePending || llama.Reason != ReasonWaitRelease {
		t.Fatalf("llama70b = %s/%s, want Pending/%s", llama.Phase, llama.Reason, ReasonWaitRelease)
	}
	e.settle(true)
	e.converge("pool", 5)
	if got := e.replicas("md-llama70b"); got != 1 {
		t.Fatalf("llama70b replicas = %d, want 1", got)
	}
	if got := e.replicas("md-bge-embed"); got != 1 {
		t.Fatalf("md-bge-embed touched: replicas %d", got)
	}
	for _, name := range []string{"llama70b", "qwen32b"} {
		st := e.targetStatus("pool", name)
		if st.Phase != v1alpha1.TargetPhaseConverged || len(st.Steps) != 1 || st.Steps[0].Phase != v1alpha1.StepSucceeded {
			t.Fatalf("%s: phase %s steps %+v, want Converged with one Succeeded step", name, st.Phase, st.Steps)
		}
		if !strings.HasPrefix(st.Steps[0].Key, "uid-pool/"+name+"/2026-10-19T01:00:00Z/") {
			t.Errorf("%s key = %q, want schedule UID/target/interval start/step", name, st.Steps[0].Key)
		}
	}
	if q, l := e.targetStatus("pool", "qwen32b").Steps[0], e.targetStatus("pool", "llama70b").Steps[0]; l.SubmittedAt.Before(q.CompletedAt) {
		t.Errorf("llama70b submitted at %v before qwen32b released at %v", l.SubmittedAt, q.CompletedAt)
	}
	if got := e.workloadWrites(); got != 2 {
		t.Errorf("workload writes = %d, want 2 (one per step)", got)
	}
	// Later passes inside the same interval change nothing.
	e.clock.Step(30 * time.Second)
	e.mustPass("pool")
	if got := e.workloadWrites(); got != 2 {
		t.Errorf("workload writes after a quiet pass = %d, want 2", got)
	}
}

func TestTerminalReasons(t *testing.T) {
	for name, tc := range map[string]struct {
		setup      func(e *env)
		target     string
		wantReason string
		// wantQwen is qwen32b's replicas after the passes: 1 = nothing released.
		wantQwen int32
	}{
		"AliasBlocked without consent": {
			setup: func(e *env) {
				e.create(&v1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "chat"},
					Spec: v1.ServiceSpec{Selector: map[string]string{"app": "md-qwen32b"}}})
			},
			target: "qwen32b", wantReason: ReasonAliasBlocked, wantQwen: 1,
		},
		"AliasBlocked when the alias check fails": {
			setup: func(e *env) {
				e.client.PrependReactor("list", "services", func(clienttesting.Action) (bool, runtime.Object, error) {
					return true, nil, errors.New("services is forbidden")
				})
			},
			target: "qwen32b", wantReason: ReasonAliasBlocked, wantQwen: 1,
		},
		"QuotaRefused in preflight releases nothing": {
			setup: func(e *env) {
				e.create(&v1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "gpus"},
					Spec: v1.ResourceQuotaSpec{Hard: v1.ResourceList{v1.ResourceName(driver + quotaSuffix): resource.MustParse("8")}}})
			},
			target: "llama70b", wantReason: ReasonQuotaRefused, wantQwen: 1,
		},
		"Ineligible when the claim template is missing": {
			setup: func(e *env) {
				if err := e.client.ResourceV1().ResourceClaimTemplates(ns).Delete(e.ctx, "gpu8", metav1.DeleteOptions{}); err != nil {
					t.Fatal(err)
				}
			},
			target: "llama70b", wantReason: ReasonIneligible, wantQwen: 1,
		},
		"CapacityUnavailable when an outsider holds the GPUs": {
			setup:  func(e *env) { e.create(allocatedClaim("outsider", "gpu-node", 8, 2)) },
			target: "llama70b", wantReason: ReasonCapacityUnavailable, wantQwen: 0,
		},
		"ReadinessTimeout": {
			setup:  func(e *env) { e.ready = false },
			target: "llama70b", wantReason: ReasonReadinessTimeout, wantQwen: 0,
		},
	} {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t, at(19, 8, 0), poolObjects()...)
			e.addSchedule(weekSchedule())
			e.ready = true
			tc.setup(e)
			for range 250 { // 250 × 5s > every timeout
				if _, err := e.reconcile("pool"); err != nil {
					t.Fatalf("pass: %v", err)
				}
				e.settle(e.ready)
				if e.targetStatus("pool", tc.target).Phase == v1alpha1.TargetPhaseFailed {
					break
				}
				e.clock.Step(5 * time.Second)
			}
			st := e.targetStatus("pool", tc.target)
			if st.Phase != v1alpha1.TargetPhaseFailed || st.Reason != tc.wantReason {
				t.Fatalf("%s = %s/%s (%s), want Failed/%s", tc.target, st.Phase, st.Reason, st.Message, tc.wantReason)
			}
			if !strings.Contains(st.Message, "Fix: ") {
				t.Errorf("message has no fix text: %q", st.Message)
			}
			if got := e.replicas("md-qwen32b"); got != tc.wantQwen {
				t.Errorf("qwen32b replicas = %d, want %d", got, tc.wantQwen)
			}
			if tc.wantQwen == 0 && tc.wantReason == ReasonCapacityUnavailable {
				if got := e.replicas("md-llama70b"); got != 0 {
					t.Errorf("llama70b started without capacity: %d", got)
				}
			}
			if !e.sawEvent(tc.wantReason) {
				t.Errorf("no %s event", tc.wantReason)
			}
		})
	}
}

func TestTargetOwned(t *testing.T) {
	e := newEnv(t, at(19, 9, 0), poolObjects()...)
	e.addSchedule(weekSchedule())
	second := weekSchedule()
	second.Name, second.UID = "second", "uid-second"
	second.CreationTimestamp = metav1.NewTime(at(2, 0, 0))
	e.addSchedule(second)
	e.mustPass("second")
	for _, target := range []string{"llama70b", "qwen32b"} {
		if st := e.targetStatus("second", target); st.Reason != ReasonTargetOwned {
			t.Errorf("second schedule's %s = %s/%s, want TargetOwned", target, st.Phase, st.Reason)
		}
	}
	if e.workloadWrites() != 0 {
		t.Errorf("the refused schedule wrote a workload")
	}
	e.converge("pool", 5)
	if st := e.targetStatus("pool", "llama70b"); st.Phase != v1alpha1.TargetPhaseConverged {
		t.Errorf("first schedule's llama70b = %s/%s, want Converged", st.Phase, st.Reason)
	}
}

func TestIneligibleHPAWithPinnedReplicas(t *testing.T) {
	e := newEnv(t, at(19, 9, 0), poolObjects()...)
	ds := weekSchedule()
	ds.Spec.Windows[0].States[0].Replicas = ptr.To(v1alpha1.Replicas(2))
	e.addSchedule(ds)
	e.create(&autoscalingv2.HorizontalPodAutoscaler{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "llama-hpa"},
		Spec: autoscalingv2.HorizontalPodAutoscalerSpec{
			ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "md-llama70b"},
			MaxReplicas:    3,
		}})
	e.mustPass("pool")
	st := e.targetStatus("pool", "llama70b")
	if st.Reason != ReasonIneligible || !strings.Contains(st.Message, IneligibleUnsupportedScaleForMode) {
		t.Fatalf("llama70b = %s/%s %q, want Ineligible{UnsupportedScaleForMode}", st.Phase, st.Reason, st.Message)
	}
	if got := e.replicas("md-qwen32b"); got != 1 {
		t.Errorf("qwen32b released for a target that can never start: replicas %d", got)
	}
}

func TestGateAndObserveMutateNothing(t *testing.T) {
	for name, tc := range map[string]struct {
		gate    string
		observe bool
		phase   v1alpha1.TargetPhase
	}{
		"gate off":     {gate: "off", phase: v1alpha1.TargetPhaseWaiting},
		"gate missing": {gate: "", phase: v1alpha1.TargetPhaseWaiting},
		"gate garbage": {gate: "maybe", phase: v1alpha1.TargetPhaseWaiting},
		"gate observe": {gate: "observe", phase: v1alpha1.TargetPhaseObserved},
		"Observe mode": {gate: "on", observe: true, phase: v1alpha1.TargetPhaseObserved},
	} {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t, at(19, 8, 0), poolObjects()...)
			ds := weekSchedule()
			if tc.observe {
				ds.Spec.Mode = v1alpha1.ScheduleModeObserve
			}
			e.addSchedule(ds)
			e.setGate(tc.gate)
			for range 5 {
				e.mustPass("pool")
				e.clock.Step(5 * time.Second)
			}
			if n := e.workloadWrites(); n != 0 {
				t.Fatalf("workload writes = %d, want 0", n)
			}
			st := e.targetStatus("pool", "qwen32b")
			if st.Phase != tc.phase || len(st.Steps) != 1 || st.Steps[0].Phase != v1alpha1.StepPlanned {
				t.Fatalf("qwen32b = %s/%s steps %+v, want %s with the Stop planned", st.Phase, st.Reason, st.Steps, tc.phase)
			}
			if tc.gate != "on" && tc.gate != "observe" {
				// Turning the gate on runs the planned transition.
				if tc.gate == "" {
					e.create(gateConfigMap("on"))
					e.waitGate()
				} else {
					e.setGate("on")
				}
				e.converge("pool", 10)
				if got := e.replicas("md-llama70b"); got != 1 {
					t.Errorf("after the gate opened llama70b replicas = %d, want 1", got)
				}
			}
		})
	}
}

func TestDriftIsReportedNotReverted(t *testing.T) {
	e := newEnv(t, at(19, 8, 0), poolObjects()...)
	e.addSchedule(weekSchedule())
	e.converge("pool", 10)
	writes := e.workloadWrites()
	d, _ := e.client.AppsV1().Deployments(ns).Get(e.ctx, "md-llama70b", metav1.GetOptions{})
	d.Spec.Replicas = ptr.To[int32](0) // someone stops llama70b by hand
	if _, err := e.client.AppsV1().Deployments(ns).Update(e.ctx, d, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	writes++
	for range 3 {
		e.clock.Step(30 * time.Second)
		e.mustPass("pool")
	}
	st := e.targetStatus("pool", "llama70b")
	if st.Phase != v1alpha1.TargetPhaseDrifted || st.Reason != ReasonDriftDetected {
		t.Fatalf("llama70b = %s/%s, want Drifted/DriftDetected", st.Phase, st.Reason)
	}
	if e.replicas("md-llama70b") != 0 || e.workloadWrites() != writes {
		t.Errorf("drift was reverted")
	}
	if !e.sawEvent(ReasonDriftDetected) {
		t.Errorf("no DriftDetected event")
	}
}

func TestCrashBetweenSubmittingAndMutation(t *testing.T) {
	for name, crashAfter := range map[string]bool{"before mutation": false, "after mutation": true} {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t, at(19, 8, 0), poolObjects()...)
			e.addSchedule(weekSchedule())
			e.fp.failBefore, e.fp.failAfter = !crashAfter, crashAfter
			if _, err := e.reconcile("pool"); !errors.Is(err, errCrash) {
				t.Fatalf("pass = %v, want the simulated crash", err)
			}
			st := e.targetStatus("pool", "qwen32b")
			if st.Steps[0].Phase != v1alpha1.StepSubmitting {
				t.Fatalf("after the crash the step is %s, want Submitting", st.Steps[0].Phase)
			}
			// A new controller (restart or new leader) finishes the step.
			e.ctrl = e.newController()
			e.converge("pool", 10)
			if e.fp.writes != 2 {
				t.Errorf("workload mutations = %d, want exactly 2 (stop qwen32b once, start llama70b once)", e.fp.writes)
			}
			if got := e.workloadWrites(); got != 2 {
				t.Errorf("Deployment updates = %d, want 2", got)
			}
			if e.replicas("md-llama70b") != 1 || e.replicas("md-qwen32b") != 0 {
				t.Errorf("transition did not complete")
			}
		})
	}
}

func TestMissedBoundaryPlansOneTransition(t *testing.T) {
	// Business hours ran, the controller was down over Monday 18:00 and comes
	// back at 18:20: one transition to the current (default) intent.
	objs := poolObjects()
	for i, o := range objs {
		if d, ok := o.(interface{ GetName() string }); ok && d.GetName() == "md-llama70b" {
			objs[i] = deployment("md-llama70b", 1, "gpu8", nil)
		}
		if d, ok := o.(interface{ GetName() string }); ok && d.GetName() == "md-qwen32b" {
			objs[i] = deployment("md-qwen32b", 0, "gpu6", nil)
		}
	}
	e := newEnv(t, at(19, 18, 20), objs...)
	ds := weekSchedule()
	e.addSchedule(ds)
	e.converge("pool", 10)
	if e.replicas("md-llama70b") != 0 || e.replicas("md-qwen32b") != 1 {
		t.Fatalf("not at the current intent: llama %d qwen %d", e.replicas("md-llama70b"), e.replicas("md-qwen32b"))
	}
	if got := e.workloadWrites(); got != 2 {
		t.Errorf("workload writes = %d, want 2 (one transition)", got)
	}
	st := e.targetStatus("pool", "qwen32b")
	if !strings.Contains(st.Steps[0].Key, "2026-10-19T11:00:00Z") {
		t.Errorf("key %q does not name the 18:00 interval", st.Steps[0].Key)
	}
}

func TestRequeueAtNextBoundary(t *testing.T) {
	e := newEnv(t, at(19, 7, 59), poolObjects()...)
	e.addSchedule(weekSchedule())
	e.mustPass("pool")
	e.clock.SetTime(at(19, 7, 59).Add(50 * time.Second))
	requeue, err := e.reconcile("pool")
	if err != nil {
		t.Fatal(err)
	}
	if requeue != 10*time.Second {
		t.Errorf("requeue = %v, want 10s (the 08:00 boundary)", requeue)
	}
}

func (e *env) create(objs ...runtime.Object) {
	e.t.Helper()
	if err := createAll(e.ctx, e.client.Tracker(), objs); err != nil {
		e.t.Fatal(err)
	}
}

func createAll(_ context.Context, tracker clienttesting.ObjectTracker, objs []runtime.Object) error {
	for _, o := range objs {
		if err := tracker.Add(o); err != nil {
			return err
		}
	}
	return nil
}

func (e *env) sawEvent(reason string) bool {
	for {
		select {
		case ev := <-e.recorder.Events:
			e.events = append(e.events, ev)
		default:
			for _, ev := range e.events {
				if strings.Contains(ev, " "+reason+" ") {
					return true
				}
			}
			return false
		}
	}
}
