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

func TestPendingCoversFiredTimersUntilTheirReceiversAct(t *testing.T) {
	c := New(t0)
	release := make(chan struct{})
	ran := make(chan struct{})
	c.AfterFunc(time.Minute, func() { <-release; close(ran) })
	read := c.NewTimer(time.Minute)
	stopped := c.NewTimer(time.Minute)
	c.NewTicker(time.Second) // tickers are not events
	if n := c.Pending(); n != 0 {
		t.Fatalf("Pending before anything fired = %d", n)
	}

	c.Step(time.Minute)
	if _, ok := c.Next(); ok {
		t.Fatal("a one-shot timer still waits on the clock")
	}
	if n := c.Pending(); n != 3 {
		t.Errorf("Pending after the step = %d, want 3 (a running callback, two unread timers)", n)
	}
	<-read.C()
	stopped.Stop()
	if n := c.Pending(); n != 1 {
		t.Errorf("Pending with the values read or stopped = %d, want 1 (the callback)", n)
	}
	close(release)
	<-ran
	for c.Pending() != 0 {
		time.Sleep(time.Millisecond) // the callback's goroutine returns after close(ran)
	}

	late := c.After(-time.Second) // already due: fires on its own goroutine
	if c.Pending() == 0 {
		t.Error("a timer due when made is not pending before it is read")
	}
	<-late
}
