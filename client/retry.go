package client

import (
	"context"
	"errors"
	"math/rand/v2"
	"net"
	"net/http"
	"strconv"
	"time"
)

// RetryPolicy says how a call is retried. Every retry of a call re-sends the
// same bytes with the same Idempotency-Key.
type RetryPolicy struct {
	// MaxAttempts per call, the first included (default 6).
	MaxAttempts int
	// Base and Cap bound the exponential backoff (defaults 200ms, 10s);
	// the delay is drawn uniformly from [0, min(Cap, Base*2^n)] (full jitter).
	Base, Cap time.Duration
	// AttemptTimeout bounds one attempt (default 15s); a timed-out attempt is
	// retried like a dropped connection.
	AttemptTimeout time.Duration
	// MaxRetryAfter caps how long a server's Retry-After is honoured
	// (default 60s); a longer one is waited for only up to the cap.
	MaxRetryAfter time.Duration
	// Rand returns a float in [0,1) for the jitter (default math/rand/v2).
	Rand func() float64
}

func (p RetryPolicy) withDefaults() RetryPolicy {
	if p.MaxAttempts <= 0 {
		p.MaxAttempts = 6
	}
	if p.Base <= 0 {
		p.Base = 200 * time.Millisecond
	}
	if p.Cap <= 0 {
		p.Cap = 10 * time.Second
	}
	if p.AttemptTimeout <= 0 {
		p.AttemptTimeout = 15 * time.Second
	}
	if p.MaxRetryAfter <= 0 {
		p.MaxRetryAfter = 60 * time.Second
	}
	if p.Rand == nil {
		p.Rand = rand.Float64
	}
	return p
}

// backoff is the delay before retry number n (n = 1 for the first retry).
// A server's Retry-After wins (capped at MaxRetryAfter).
func (p RetryPolicy) backoff(n int, retryAfter time.Duration) time.Duration {
	if retryAfter > 0 {
		return min(retryAfter, p.MaxRetryAfter)
	}
	d := p.Base
	for i := 1; i < n && d < p.Cap; i++ {
		d *= 2
	}
	d = min(d, p.Cap)
	return time.Duration(p.Rand() * float64(d))
}

// shouldRetry decides whether a failed attempt is tried again. idempotent
// calls (every call that carries an Idempotency-Key, and reads) are retried
// on anything that may be transient: a connection error, a timeout, 5xx,
// 429. A call that is not idempotent is retried only when the server
// provably did not act: the connection was never made, or it answered 429.
func shouldRetry(idempotent bool, status int, err error) bool {
	if err != nil {
		if errors.Is(err, context.Canceled) {
			return false
		}
		if idempotent {
			return true
		}
		var op *net.OpError
		return errors.As(err, &op) && op.Op == "dial"
	}
	switch {
	case status == http.StatusTooManyRequests:
		return true
	case status >= 500:
		return idempotent
	}
	return false
}

// parseRetryAfter reads a Retry-After header: delta-seconds or an HTTP date.
func parseRetryAfter(v string, now time.Time) time.Duration {
	if v == "" {
		return 0
	}
	if s, err := strconv.Atoi(v); err == nil && s >= 0 {
		return time.Duration(s) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return t.Sub(now)
	}
	return 0
}
