package vclock

import (
	"testing"
	"time"
)

var t0 = time.Date(2026, 3, 2, 0, 0, 0, 0, time.UTC)

func TestTimersFireInOrderAndTickersDoNotCount(t *testing.T) {
	c := New(t0)
	tick := c.NewTicker(10 * time.Second)
	late := c.After(time.Hour)
	early := c.NewTimer(time.Minute)
	stopped := c.NewTimer(30 * time.Second)
	stopped.Stop()

	next, ok := c.Next()
	if !ok || !next.Equal(t0.Add(time.Minute)) {
		t.Fatalf("Next = %v %v, want the one-minute timer", next, ok)
	}
	c.SetTime(next)
	if got := <-early.C(); !got.Equal(t0.Add(time.Minute)) {
		t.Errorf("early timer fired at %v", got)
	}
	if got := <-tick.C(); got.After(t0.Add(time.Minute)) {
		t.Errorf("ticker fired at %v", got)
	}
	next, _ = c.Next()
	if !next.Equal(t0.Add(time.Hour)) {
		t.Errorf("Next after the first timer = %v, want the hour timer", next)
	}
	c.Step(2 * time.Hour)
	if got := <-late; !got.Equal(t0.Add(time.Hour)) {
		t.Errorf("late timer fired at %v", got)
	}
	if _, ok := c.Next(); ok {
		t.Error("a timer still waits")
	}
	if !c.Now().Equal(t0.Add(time.Minute + 2*time.Hour)) {
		t.Errorf("Now = %v", c.Now())
	}
}

func TestAfterFuncAndReset(t *testing.T) {
	c := New(t0)
	done := make(chan time.Time, 1)
	tm := c.AfterFunc(time.Minute, func() { done <- c.Now() })
	tm.Reset(2 * time.Minute)
	c.Step(time.Minute)
	select {
	case <-done:
		t.Fatal("function ran before its reset deadline")
	default:
	}
	c.Step(time.Minute)
	if got := <-done; !got.Equal(t0.Add(2 * time.Minute)) {
		t.Errorf("function saw %v", got)
	}
	c.SetTime(t0) // backwards: ignored
	if !c.Now().Equal(t0.Add(2 * time.Minute)) {
		t.Errorf("clock moved backwards to %v", c.Now())
	}
}
