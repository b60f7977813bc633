// Package contract is the adapter contract suite: one set of checks every
// provider adapter must pass, run against a local fake of its provider.
//
// It checks what the core relies on:
//
//   - Send succeeds with an external id, and exactly one effect happens.
//   - Each failure class arrives typed, with proof of "no effect" where the
//     class claims it: rejected input and revoked authorisation are
//     *core.PermanentError; 429 is *core.RetryableError{ClassRateLimited}
//     with the provider's delay; a refused connection is
//     *core.RetryableError{ClassTransient}.
//   - The dangerous failures are never reported as safe: a response dropped
//     after the provider committed, and a response that never comes before
//     the timeout, are *core.UnknownOutcomeError, and the provider performed
//     exactly one effect (no hidden transport retry).
//   - Capabilities are what the provider's documentation justifies, and the
//     fake behaves accordingly: with idempotency keys, the same request twice
//     is one effect; without them, two. With lookup: found after a committed
//     send (also one whose response was lost), absent when nothing was
//     committed.
package contract

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/botharness/outbox/core"
)

// FaultKind is a fault the suite asks the fake to inject into the next send.
type FaultKind string

const (
	Reject          FaultKind = "reject"
	Unauthorized    FaultKind = "unauthorized"
	RateLimit       FaultKind = "rate_limit"
	DropAfterCommit FaultKind = "drop_after_commit"
	// HangAfterCommit: the provider commits, and the response does not come
	// before the client's timeout.
	HangAfterCommit FaultKind = "hang_after_commit"
)

// Fault is one injected fault.
type Fault struct {
	Kind       FaultKind
	RetryAfter time.Duration
}

// Fake is the control surface of a provider fake for one test.
type Fake interface {
	// Inject makes the next send fail with f.
	Inject(f Fault)
	// Effects is how many side effects the provider performed for req.
	Effects(req core.SendRequest) int
	// Release lets held responses go.
	Release()
}

// Env is one test's fake and adapter.
type Env struct {
	Fake Fake
	// BaseURL is what New points the adapter at.
	BaseURL string
}

// Subject describes one adapter under test.
type Subject struct {
	Name string
	// Start starts the provider fake for one (sub)test.
	Start func(t *testing.T) Env
	// New builds the adapter against baseURL with the given per-request timeout.
	New func(t *testing.T, baseURL string, timeout time.Duration) core.Provider
	// Request returns a valid request; n makes intents distinct.
	Request func(n int) core.SendRequest
	// Documented is the capability declaration the provider's documentation
	// justifies for the account Request uses.
	Documented core.Capabilities
	// ConfiguredAccounts: the adapter knows its accounts from configuration,
	// so a request for another account must be rejected without any call.
	// (The sandbox creates accounts on first use, so it does not.)
	ConfiguredAccounts bool
	// ClientChosenID: the adapter names the effect with an id derived from
	// the intent (Google Calendar's event id), so the provider refuses a
	// second effect with it; the refusal is not proof, so the repeat must be
	// an unknown outcome that lookup settles. Requires Documented.Lookup.
	ClientChosenID bool
	// NoRetryAfter: the provider documents no delay with its 429 (Stripe),
	// so the adapter must not invent one (the core's backoff decides).
	NoRetryAfter bool
}

// Timeout is the per-request timeout the suite gives adapters.
const Timeout = 2 * time.Second

// shortTimeout is used where the suite waits for a timeout on purpose.
const shortTimeout = 300 * time.Millisecond

// Run runs the suite.
func Run(t *testing.T, s Subject) {
	t.Helper()
	ctx := context.Background()
	setup := func(t *testing.T, timeout time.Duration) (Env, core.Provider) {
		env := s.Start(t)
		return env, s.New(t, env.BaseURL, timeout)
	}
	t.Run("declares documented capabilities", func(t *testing.T) {
		_, p := setup(t, Timeout)
		req := s.Request(1)
		if p.Name() == "" {
			t.Fatal("empty provider name")
		}
		if !p.SupportsAction(req.Action) {
			t.Fatalf("SupportsAction(%q) = false", req.Action)
		}
		got, err := p.Capabilities(ctx, req.Account, req.Action)
		if err != nil {
			t.Fatalf("Capabilities: %v", err)
		}
		if !got.IdempotencyKeys {
			got.KeyRetention = 0 // meaningless without keys
		}
		if got != s.Documented {
			t.Fatalf("Capabilities = %+v, documented %+v", got, s.Documented)
		}
		if got.IdempotencyKeys && got.KeyRetention <= 0 {
			t.Fatal("idempotency keys declared without a retention")
		}
	})
	t.Run("success with external id", func(t *testing.T) {
		env, p := setup(t, Timeout)
		req := s.Request(2)
		res, err := p.Send(ctx, req)
		if err != nil {
			t.Fatalf("Send: %v", err)
		}
		if res.ExternalID == "" {
			t.Fatal("success without an external id")
		}
		wantEffects(t, env, req, 1)
	})
	// Faults refused before any effect.
	for _, c := range []struct {
		name  string
		n     int
		fault Fault
		check func(t *testing.T, err error)
	}{
		{"rejected input is permanent", 3, Fault{Kind: Reject}, func(t *testing.T, err error) { wantPermanent(t, err, core.ClassRejectedInput) }},
		{"revoked authorisation is permanent", 4, Fault{Kind: Unauthorized}, func(t *testing.T, err error) { wantPermanent(t, err, core.ClassUnauthorized) }},
		{"429 is rate limited with the provider's delay", 5, Fault{Kind: RateLimit, RetryAfter: 7 * time.Second}, func(t *testing.T, err error) {
			want := 7 * time.Second
			if s.NoRetryAfter {
				want = 0
			}
			if re := wantRetryable(t, err, core.ClassRateLimited); re.RetryAfter != want {
				t.Fatalf("RetryAfter = %v, want %v", re.RetryAfter, want)
			}
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			env, p := setup(t, Timeout)
			req := s.Request(c.n)
			env.Fake.Inject(c.fault)
			_, err := p.Send(ctx, req)
			c.check(t, err)
			wantEffects(t, env, req, 0)
		})
	}
	t.Run("connection refused is transient", func(t *testing.T) {
		p := s.New(t, refusedURL(t), Timeout)
		_, err := p.Send(ctx, s.Request(6))
		wantRetryable(t, err, core.ClassTransient)
	})
	t.Run("response dropped after commit is unknown outcome", func(t *testing.T) {
		env, p := setup(t, Timeout)
		// Warm a keep-alive connection first: a dead reused connection is
		// where net/http would replay a request behind our back.
		warm := s.Request(7)
		if _, err := p.Send(ctx, warm); err != nil {
			t.Fatalf("warm-up send: %v", err)
		}
		req := s.Request(8)
		env.Fake.Inject(Fault{Kind: DropAfterCommit})
		_, err := p.Send(ctx, req)
		wantUnknown(t, err)
		wantEffects(t, env, req, 1)
	})
	t.Run("timeout after send is unknown outcome", func(t *testing.T) {
		env, p := setup(t, shortTimeout)
		req := s.Request(9)
		env.Fake.Inject(Fault{Kind: HangAfterCommit})
		start := time.Now()
		_, err := p.Send(ctx, req)
		wantUnknown(t, err)
		if d := time.Since(start); d > 10*shortTimeout {
			t.Fatalf("Send took %v; the adapter does not apply its timeout", d)
		}
		env.Fake.Release()
		waitEffects(t, env, req, 1)
	})
	if s.ConfiguredAccounts {
		t.Run("unknown account is rejected without a request", func(t *testing.T) {
			env, p := setup(t, Timeout)
			req := s.Request(10)
			req.Account = "no-such-account"
			_, err := p.Send(ctx, req)
			wantPermanent(t, err, core.ClassRejectedInput)
			wantEffects(t, env, req, 0)
			if _, err := p.Capabilities(ctx, req.Account, req.Action); err == nil {
				t.Fatal("Capabilities of an unknown account must fail (the core then assumes neither keys nor lookup)")
			}
		})
	}
	if s.Documented.IdempotencyKeys {
		t.Run("same key twice is one effect", func(t *testing.T) {
			env, p := setup(t, Timeout)
			req := s.Request(11)
			r1, err := p.Send(ctx, req)
			if err != nil {
				t.Fatalf("first send: %v", err)
			}
			again := req
			again.Attempt++
			r2, err := p.Send(ctx, again)
			if err != nil {
				t.Fatalf("second send: %v", err)
			}
			if r1.ExternalID != r2.ExternalID {
				t.Fatalf("external ids differ: %q vs %q", r1.ExternalID, r2.ExternalID)
			}
			wantEffects(t, env, req, 1)
		})
		t.Run("retry after lost response is deduplicated", func(t *testing.T) {
			env, p := setup(t, Timeout)
			req := s.Request(12)
			env.Fake.Inject(Fault{Kind: DropAfterCommit})
			_, err := p.Send(ctx, req)
			wantUnknown(t, err)
			res, err := p.Send(ctx, req)
			if err != nil || res.ExternalID == "" {
				t.Fatalf("retry with the same key: %v (id %q)", err, res.ExternalID)
			}
			wantEffects(t, env, req, 1)
		})
	} else if s.ClientChosenID {
		t.Run("client-chosen id: the same request twice is one effect, the repeat unknown and found by lookup", func(t *testing.T) {
			env, p := setup(t, Timeout)
			req := s.Request(13)
			r1, err := p.Send(ctx, req)
			if err != nil {
				t.Fatalf("first send: %v", err)
			}
			again := req
			again.Attempt++
			_, err = p.Send(ctx, again)
			wantUnknown(t, err)
			wantEffects(t, env, req, 1)
			if lr := wantLookup(t, p, req, core.LookupFound); lr.ExternalID != r1.ExternalID {
				t.Fatalf("lookup external id %q, send said %q", lr.ExternalID, r1.ExternalID)
			}
		})
	} else {
		t.Run("no keys declared: the same request twice is two effects", func(t *testing.T) {
			env, p := setup(t, Timeout)
			req := s.Request(13)
			for i := 0; i < 2; i++ {
				if _, err := p.Send(ctx, req); err != nil {
					t.Fatalf("send %d: %v", i, err)
				}
			}
			// This is why the declaration must say "no keys": the provider
			// duplicates, so the core must never retry an unknown outcome.
			wantEffects(t, env, req, 2)
		})
	}
	if s.Documented.Lookup {
		t.Run("lookup finds a committed send", func(t *testing.T) {
			_, p := setup(t, Timeout)
			req := s.Request(14)
			res, err := p.Send(ctx, req)
			if err != nil {
				t.Fatalf("send: %v", err)
			}
			if lr := wantLookup(t, p, req, core.LookupFound); lr.ExternalID != res.ExternalID {
				t.Fatalf("lookup external id %q, send said %q", lr.ExternalID, res.ExternalID)
			}
		})
		t.Run("lookup finds a send whose response was lost", func(t *testing.T) {
			env, p := setup(t, Timeout)
			req := s.Request(15)
			env.Fake.Inject(Fault{Kind: DropAfterCommit})
			_, err := p.Send(ctx, req)
			wantUnknown(t, err)
			if lr := wantLookup(t, p, req, core.LookupFound); lr.ExternalID == "" {
				t.Fatalf("Lookup = %+v; want found with an external id", lr)
			}
		})
		t.Run("lookup is absent when nothing was committed", func(t *testing.T) {
			env, p := setup(t, Timeout)
			wantLookup(t, p, s.Request(16), core.LookupAbsent) // never sent
			rejected := s.Request(17)
			env.Fake.Inject(Fault{Kind: Reject})
			_, err := p.Send(ctx, rejected)
			wantPermanent(t, err, core.ClassRejectedInput)
			wantLookup(t, p, rejected, core.LookupAbsent)
		})
	}
}

func wantPermanent(t *testing.T, err error, class core.ErrorClass) {
	t.Helper()
	var pe *core.PermanentError
	if !errors.As(err, &pe) || pe.Class != class {
		t.Fatalf("want PermanentError %s, got %T %v", class, err, err)
	}
}

func wantRetryable(t *testing.T, err error, class core.ErrorClass) *core.RetryableError {
	t.Helper()
	var re *core.RetryableError
	if !errors.As(err, &re) || re.Class != class {
		t.Fatalf("want RetryableError %s, got %T %v", class, err, err)
	}
	return re
}

// wantLookup looks req up and wants state (and no error).
func wantLookup(t *testing.T, p core.Provider, req core.SendRequest, state core.LookupState) core.LookupResult {
	t.Helper()
	lr, err := p.Lookup(context.Background(), req)
	if err != nil || lr.State != state {
		t.Fatalf("Lookup(%s) = %+v, %v; want %s", req.IntentID, lr, err, state)
	}
	return lr
}

func wantUnknown(t *testing.T, err error) {
	t.Helper()
	var ue *core.UnknownOutcomeError
	if !errors.As(err, &ue) {
		t.Fatalf("want UnknownOutcomeError, got %T %v", err, err)
	}
	if core.ClassOf(err) != core.ClassUnknownOutcome {
		t.Fatalf("ClassOf = %s", core.ClassOf(err))
	}
}

func wantEffects(t *testing.T, env Env, req core.SendRequest, n int) {
	t.Helper()
	if got := env.Fake.Effects(req); got != n {
		t.Fatalf("provider performed %d effects for %s, want %d", got, req.IntentID, n)
	}
}

func waitEffects(t *testing.T, env Env, req core.SendRequest, n int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for env.Fake.Effects(req) != n && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	wantEffects(t, env, req, n)
}

// refusedURL returns a loopback URL nothing listens on.
func refusedURL(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	return "http://" + addr
}
