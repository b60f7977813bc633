package core

import (
	"context"
	"math"
	"time"
)

// sleep waits d, or until ctx ends (its error); injected (a test's clock),
// when set, waits instead.
func sleep(ctx context.Context, d time.Duration, injected func(context.Context, time.Duration) error) error {
	if injected != nil {
		return injected(ctx, d)
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// BackoffPolicy bounds automatic retries: exponential growth with full
// jitter, a per-delay cap, a cap on attempts and on total age since the first
// attempt. Randomness is injected so schedules are deterministic in tests.
type BackoffPolicy struct {
	Base        time.Duration
	Cap         time.Duration
	MaxAttempts int
	MaxAge      time.Duration
	// Rand returns a value in [0,1). Nil means no jitter (the full delay).
	Rand func() float64
}

// DefaultBackoff is the production policy.
func DefaultBackoff(rand func() float64) BackoffPolicy {
	return BackoffPolicy{Base: 2 * time.Second, Cap: 15 * time.Minute, MaxAttempts: 8, MaxAge: 24 * time.Hour, Rand: rand}
}

// Next returns the delay before attempt number attempts+1, given that
// `attempts` attempts have been made, the first at firstAt. retryAfter, when
// the provider sent one, is a floor. ok is false when the policy is exhausted
// (no attempts left, or the next attempt would fall past MaxAge).
func (p BackoffPolicy) Next(attempts int, firstAt, now time.Time, retryAfter time.Duration) (delay time.Duration, ok bool) {
	if p.MaxAttempts > 0 && attempts >= p.MaxAttempts {
		return 0, false
	}
	ceiling := float64(p.Base) * math.Pow(2, float64(max(attempts-1, 0)))
	if p.Cap > 0 && ceiling > float64(p.Cap) {
		ceiling = float64(p.Cap)
	}
	delay = time.Duration(ceiling)
	if p.Rand != nil {
		// Full jitter, but never below a tenth of the ceiling so retries never hammer.
		delay = time.Duration(ceiling * (0.1 + 0.9*p.Rand()))
	}
	if retryAfter > delay {
		delay = retryAfter
	}
	if p.MaxAge > 0 && now.Add(delay).Sub(firstAt) > p.MaxAge {
		return 0, false
	}
	return delay, true
}
