package client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"testing"
	"time"
)

func TestShouldRetry(t *testing.T) {
	dial := &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connection refused")}
	reset := &net.OpError{Op: "read", Net: "tcp", Err: errors.New("connection reset by peer")}
	cases := []struct {
		name       string
		idempotent bool
		status     int
		err        error
		want       bool
	}{
		{"idempotent: refused connection", true, 0, dial, true},
		{"idempotent: reset after sending", true, 0, reset, true},
		{"idempotent: EOF", true, 0, io.ErrUnexpectedEOF, true},
		{"idempotent: attempt timeout", true, 0, fmt.Errorf("Post: %w", context.DeadlineExceeded), true},
		{"idempotent: caller cancelled", true, 0, fmt.Errorf("Post: %w", context.Canceled), false},
		{"idempotent: 500", true, 500, nil, true},
		{"idempotent: 502", true, 502, nil, true},
		{"idempotent: 503", true, 503, nil, true},
		{"idempotent: 429", true, 429, nil, true},
		{"idempotent: 400", true, 400, nil, false},
		{"idempotent: 401", true, 401, nil, false},
		{"idempotent: 403", true, 403, nil, false},
		{"idempotent: 404", true, 404, nil, false},
		{"idempotent: 409", true, 409, nil, false},
		{"idempotent: 413", true, 413, nil, false},
		{"idempotent: 422 (key reused)", true, 422, nil, false},
		{"not idempotent: refused connection", false, 0, dial, true},
		{"not idempotent: reset after sending", false, 0, reset, false},
		{"not idempotent: timeout", false, 0, context.DeadlineExceeded, false},
		{"not idempotent: 500", false, 500, nil, false},
		{"not idempotent: 429", false, 429, nil, true},
	}
	for _, c := range cases {
		if got := shouldRetry(c.idempotent, c.status, c.err); got != c.want {
			t.Errorf("%s: shouldRetry = %v, want %v", c.name, got, c.want)
		}
	}
}

func TestBackoff(t *testing.T) {
	p := RetryPolicy{Base: 100 * time.Millisecond, Cap: time.Second, MaxRetryAfter: 5 * time.Second, Rand: func() float64 { return 0.5 }}.withDefaults()
	cases := []struct {
		n          int
		retryAfter time.Duration
		want       time.Duration
	}{
		{1, 0, 50 * time.Millisecond},
		{2, 0, 100 * time.Millisecond},
		{3, 0, 200 * time.Millisecond},
		{5, 0, 500 * time.Millisecond}, // capped at 1s, half of it
		{30, 0, 500 * time.Millisecond},
		{1, 2 * time.Second, 2 * time.Second}, // the server's Retry-After wins
		{1, time.Minute, 5 * time.Second},     // capped
		{4, 300 * time.Millisecond, 300 * time.Millisecond},
	}
	for _, c := range cases {
		if got := p.backoff(c.n, c.retryAfter); got != c.want {
			t.Errorf("backoff(%d, %v) = %v, want %v", c.n, c.retryAfter, got, c.want)
		}
	}
}

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	cases := map[string]time.Duration{
		"":                              0,
		"3":                             3 * time.Second,
		"0":                             0,
		"-1":                            0,
		"soon":                          0,
		"Thu, 01 Jan 2026 00:00:10 GMT": 10 * time.Second,
		"Wed, 31 Dec 2025 00:00:00 GMT": 0,
	}
	for in, want := range cases {
		if got := parseRetryAfter(in, now); got != want {
			t.Errorf("parseRetryAfter(%q) = %v, want %v", in, got, want)
		}
	}
}

func TestAPIErrorConditions(t *testing.T) {
	all := []error{ErrValidation, ErrIdempotencyKeyReused, ErrPayloadTooLarge, ErrUnauthorized, ErrForbidden, ErrNotFound, ErrConflict, ErrServer, ErrRateLimited}
	cases := []struct {
		status int
		code   string
		want   []error
	}{
		{400, "invalid_field", []error{ErrValidation}},
		{400, "invalid_idempotency_key", []error{ErrValidation}},
		{401, "", []error{ErrUnauthorized}},
		{403, "grant_does_not_cover", []error{ErrForbidden}},
		{404, "not_found", []error{ErrNotFound}},
		{409, "not_needs_human", []error{ErrConflict}},
		{413, "payload_too_large", []error{ErrValidation, ErrPayloadTooLarge}},
		{422, "idempotency_key_reused", []error{ErrIdempotencyKeyReused}},
		{422, "unknown_provider", []error{ErrValidation}},
		{429, "", []error{ErrRateLimited}},
		{500, "internal", []error{ErrServer}},
		{503, "", []error{ErrServer}},
	}
	for _, c := range cases {
		var err error = &SubmitError{Key: "k", Err: &APIError{Status: c.status, Code: c.code}}
		for _, s := range all {
			want := false
			for _, w := range c.want {
				want = want || w == s
			}
			if errors.Is(err, s) != want {
				t.Errorf("%d %s: errors.Is(%v) = %v, want %v", c.status, c.code, s, !want, want)
			}
		}
		var ae *APIError
		if !errors.As(err, &ae) || ae.Status != c.status {
			t.Errorf("%d: errors.As(*APIError) failed", c.status)
		}
	}
}

func TestKeyFor(t *testing.T) {
	if KeyFor("slack", "evt1", "reply") != "slack/evt1/reply" {
		t.Errorf("a printable id is used as is: %q", KeyFor("slack", "evt1", "reply"))
	}
	if KeyFor("a/b", "c") == KeyFor("a", "b/c") {
		t.Error("parts containing the separator must not collide")
	}
	long := KeyFor(string(make([]byte, 300)))
	if validKey(long) != nil || KeyFor(string(make([]byte, 300))) != long {
		t.Errorf("long or binary ids hash to a stable valid key: %q", long)
	}
	if NewKey() == NewKey() || validKey(NewKey()) != nil {
		t.Error("NewKey must be random and valid")
	}
}
