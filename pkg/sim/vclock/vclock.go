// Package vclock is a virtual clock for simulations: time stands still until
// the owner moves it, and the owner can ask when the next one-shot timer is
// due, so a run can jump from one event to the next instead of waiting.
//
// Tickers fire when time passes their next tick (at most once per move, as a
// real ticker drops ticks nobody reads) but do not count as events: periodic
// housekeeping such as a work queue's heartbeat must not make a simulated
// week advance in ten-second steps.
package vclock

import (
	"sort"
	"sync"
	"time"

	"k8s.io/utils/clock"
)

// Clock is a virtual clock implementing clock.WithTickerAndDelayedExecution.
type Clock struct {
	mu      sync.Mutex
	now     time.Time
	waiters []*waiter
	// running counts AfterFunc callbacks started and not yet returned;
	// delivered holds one-shot channel timers that fired, until their value
	// is read, the timer is stopped or reset, or abandonAfter passes.
	running   int
	delivered map[*waiter]time.Time
}

// abandonAfter is how long (real time) a fired, unread timer value counts
// as pending. A receiver that took another branch of its select and never
// stops the timer would otherwise keep the clock busy for ever.
const abandonAfter = time.Second

var _ clock.WithTickerAndDelayedExecution = &Clock{}

type waiter struct {
	c      *Clock
	at     time.Time
	period time.Duration // > 0 for tickers
	ch     chan time.Time
	fn     func()
}

// New returns a clock standing at now.
func New(now time.Time) *Clock { return &Clock{now: now} }

// Now is the virtual time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Since is Now().Sub(t).
func (c *Clock) Since(t time.Time) time.Duration { return c.Now().Sub(t) }

// Next is when the earliest one-shot timer fires; false when none waits.
func (c *Clock) Next() (time.Time, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var next time.Time
	found := false
	for _, w := range c.waiters {
		if w.period == 0 && (!found || w.at.Before(next)) {
			next, found = w.at, true
		}
	}
	return next, found
}

// SetTime moves the clock to t, firing in order every timer due by then.
// Moving backwards is ignored.
func (c *Clock) SetTime(t time.Time) {
	for {
		c.mu.Lock()
		if t.Before(c.now) {
			c.mu.Unlock()
			return
		}
		sort.SliceStable(c.waiters, func(i, j int) bool { return c.waiters[i].at.Before(c.waiters[j].at) })
		if len(c.waiters) == 0 || c.waiters[0].at.After(t) {
			c.now = t
			c.mu.Unlock()
			return
		}
		w := c.waiters[0]
		if w.at.After(c.now) {
			c.now = w.at
		}
		if w.period > 0 {
			// Skip the ticks nobody could have read.
			for !w.at.After(t) {
				w.at = w.at.Add(w.period)
			}
		} else {
			c.waiters = c.waiters[1:]
		}
		now := c.now
		c.running++ // off the clock, not yet fired: still pending
		c.mu.Unlock()
		w.fire(now)
		c.mu.Lock()
		c.running--
		c.mu.Unlock()
	}
}

// Step moves the clock forward by d.
func (c *Clock) Step(d time.Duration) { c.SetTime(c.Now().Add(d)) }

func (w *waiter) fire(now time.Time) {
	c := w.c
	if w.fn != nil {
		c.mu.Lock()
		c.running++
		c.mu.Unlock()
		go func() {
			defer func() {
				c.mu.Lock()
				c.running--
				c.mu.Unlock()
			}()
			w.fn()
		}()
		return
	}
	select {
	case w.ch <- now:
		if w.period == 0 {
			c.mu.Lock()
			if c.delivered == nil {
				c.delivered = map[*waiter]time.Time{}
			}
			c.delivered[w] = time.Now()
			c.mu.Unlock()
		}
	default:
	}
}

// Pending says how many timers fired whose receivers may not have acted yet:
// AfterFunc callbacks still running, and one-shot timer values not yet read
// from their channel. A simulation that waits for quiet must count them as
// work in flight: between a timer leaving the clock and its callback queueing
// work, nothing else shows that something is about to happen.
func (c *Clock) Pending() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := c.running
	for w, at := range c.delivered {
		if len(w.ch) == 0 || time.Since(at) > abandonAfter {
			delete(c.delivered, w)
			continue
		}
		n++
	}
	return n
}

func (c *Clock) add(w *waiter) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if w.period == 0 && !w.at.After(c.now) {
		c.running++
		go func(now time.Time) {
			w.fire(now)
			c.mu.Lock()
			c.running--
			c.mu.Unlock()
		}(c.now)
		return
	}
	c.waiters = append(c.waiters, w)
}

// remove takes w off the clock and says whether it was waiting.
func (c *Clock) remove(w *waiter) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.delivered, w)
	for i, x := range c.waiters {
		if x == w {
			c.waiters = append(c.waiters[:i], c.waiters[i+1:]...)
			return true
		}
	}
	return false
}

func (c *Clock) newWaiter(d time.Duration, fn func()) *waiter {
	w := &waiter{c: c, at: c.Now().Add(d), fn: fn}
	if fn == nil {
		w.ch = make(chan time.Time, 1)
	}
	c.add(w)
	return w
}

// After fires once after d.
func (c *Clock) After(d time.Duration) <-chan time.Time { return c.newWaiter(d, nil).ch }

// NewTimer is a timer firing after d.
func (c *Clock) NewTimer(d time.Duration) clock.Timer { return &timer{w: c.newWaiter(d, nil)} }

// AfterFunc calls f in its own goroutine after d.
func (c *Clock) AfterFunc(d time.Duration, f func()) clock.Timer {
	return &timer{w: c.newWaiter(d, f)}
}

// Sleep blocks until the clock has moved on by d.
func (c *Clock) Sleep(d time.Duration) { <-c.After(d) }

// Tick is NewTicker(d).C(), nil for d <= 0.
func (c *Clock) Tick(d time.Duration) <-chan time.Time {
	if d <= 0 {
		return nil
	}
	return c.NewTicker(d).C()
}

// NewTicker ticks every d of virtual time.
func (c *Clock) NewTicker(d time.Duration) clock.Ticker {
	if d <= 0 {
		panic("vclock: non-positive ticker period")
	}
	w := &waiter{c: c, at: c.Now().Add(d), period: d, ch: make(chan time.Time, 1)}
	c.add(w)
	return &ticker{w: w}
}

type timer struct{ w *waiter }

func (t *timer) C() <-chan time.Time { return t.w.ch }
func (t *timer) Stop() bool          { return t.w.c.remove(t.w) }
func (t *timer) Reset(d time.Duration) bool {
	active := t.w.c.remove(t.w)
	t.w.at = t.w.c.Now().Add(d)
	t.w.c.add(t.w)
	return active
}

type ticker struct{ w *waiter }

func (t *ticker) C() <-chan time.Time { return t.w.ch }
func (t *ticker) Stop()               { t.w.c.remove(t.w) }
