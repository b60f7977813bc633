// Package clocktest is the manual clock unit tests share: it moves only when
// told, and is safe for concurrent use.
package clocktest

import (
	"sync"
	"time"
)

// Clock reads t until advanced. With a tick, every reading first moves it
// on by the tick, so successive readings order events.
type Clock struct {
	mu   sync.Mutex
	t    time.Time
	tick time.Duration
}

// New returns a clock standing at t.
func New(t time.Time) *Clock { return &Clock{t: t} }

// Ticking returns a clock at t that moves on by tick at every reading.
func Ticking(t time.Time, tick time.Duration) *Clock { return &Clock{t: t, tick: tick} }

// Now reads the clock.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(c.tick)
	return c.t
}

// Advance moves the clock by d.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}
