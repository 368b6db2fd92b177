package controller

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
)

// TestGateReadFromInformer: passes read the gate from its informer, never
// with a GET; a gate informer that has not synced reads as unreadable and
// nothing is submitted (fail closed), with the reason logged as for a
// failed read.
func TestGateReadFromInformer(t *testing.T) {
	e := newEnv(t, at(19, 8, 0), poolObjects()...)
	e.addSchedule(weekSchedule())

	// A controller whose gate informer was never started.
	unsynced := NewGateInformerFactory(e.client, gateNS, DefaultGateName)
	c, err := New(Options{Client: e.client, Dynamic: e.dyn, Clock: e.clock, Recorder: e.recorder,
		GateNamespace: gateNS, GateFactory: unsynced, Failpoints: e.fp})
	if err != nil {
		t.Fatal(err)
	}
	if gate, why := c.gate.read(e.ctx); gate != GateUnreadable || !strings.Contains(why, "gate ConfigMap rota-system/rota-schedule-gate unreadable: the gate informer has not synced yet") {
		t.Errorf("unsynced gate = %s (%s), want unreadable", gate, why)
	}
	started := e.ctrl
	e.ctrl = c
	for range 3 {
		e.mustPass("pool")
	}
	if n := e.workloadWrites(); n != 0 {
		t.Fatalf("with the gate informer not synced the controller wrote %d workloads, want 0", n)
	}
	if g := e.schedule("pool").Status.Gate; g != string(GateUnreadable) {
		t.Errorf("status.gate = %q, want unreadable", g)
	}

	// The synced one: the 08:00 transition runs, and no pass read the gate
	// with a request.
	e.ctrl = started
	e.calls = nil
	e.converge("pool", 10)
	if g := e.schedule("pool").Status.Gate; g != string(GateOn) {
		t.Errorf("status.gate = %q, want on", g)
	}
	if e.calls["get /configmaps"] {
		t.Errorf("a pass read the gate with a GET; calls: %v", e.calls)
	}
	for want, gate := range map[string]Gate{"off": GateOff, "observe": GateObserve, "on": GateOn, "maybe": GateUnreadable, "": GateUnreadable} {
		e.setGate(want)
		got, why := e.ctrl.gate.read(e.ctx)
		if got != gate {
			t.Errorf("gate %q read as %s (%s), want %s", want, got, why, gate)
		}
		switch want {
		case "maybe":
			if why != "gate ConfigMap rota-system/rota-schedule-gate has mode=maybe; want off, observe or on" {
				t.Errorf("malformed gate: reason %q", why)
			}
		case "":
			// The API's own words, as when the gate was read with a GET.
			if why != `gate ConfigMap rota-system/rota-schedule-gate unreadable: configmaps "rota-schedule-gate" not found` {
				t.Errorf("missing gate: reason %q", why)
			}
			e.create(gateConfigMap("on"))
			e.waitGate()
		}
	}
}

// TestGateChangeQueuesEverySchedule: turning the gate off (or any change of
// its mode) queues every schedule at once, so that no schedule waits for
// its next pass period to stop submitting.
func TestGateChangeQueuesEverySchedule(t *testing.T) {
	e := newEnv(t, at(19, 7, 0), poolObjects()...)
	var want []string
	for i := range 3 {
		ds := weekSchedule()
		ds.Name, ds.UID = fmt.Sprintf("pool-%d", i), types.UID(fmt.Sprintf("uid-%d", i))
		e.addSchedule(ds)
		want = append(want, ns+"/"+ds.Name)
	}
	e.startCaches(t)
	drain := func() []string {
		var keys []string
		for e.ctrl.queue.Len() > 0 {
			k, _ := e.ctrl.queue.Get()
			e.ctrl.queue.Done(k)
			e.ctrl.queue.Forget(k)
			keys = append(keys, k)
		}
		slices.Sort(keys)
		return keys
	}
	drain() // the initial list
	queued := func(what string) []string {
		t.Helper()
		// The handler runs after the cache is updated: wait for it.
		_ = wait.PollUntilContextTimeout(e.ctx, time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
			return e.ctrl.queue.Len() >= len(want), nil
		})
		return drain()
	}
	for _, mode := range []string{"off", "observe", "on", ""} {
		e.setGate(mode)
		if got := queued(mode); !slices.Equal(got, want) {
			t.Errorf("gate set to %q: queued %v, want every schedule %v", mode, got, want)
		}
	}
}
