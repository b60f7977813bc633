package core

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/botharness/outbox/core/gate"
)

// AttemptPolicy is every duration and count that shapes an intent's
// attempts, in one place: when a failure is retried, how long an attempt may
// run before it is taken for a crash, how long reconciliation asks the
// provider, how the account gate pauses and breaks. It is set once per
// process (wire.Config.Policy; in the stack and locally the variable
// OUTBOX_ATTEMPT_POLICY, a JSON document over DefaultAttemptPolicy; in tests
// the same struct) and checked once, by Resolve, when the app is assembled.
//
// The fields move each other: the comment on each says what it trades and
// what else it moves. docs/decisions.md ("The attempt policy") gives each
// default and the test that fails without it.
type AttemptPolicy struct {
	// Backoff spaces the automatic retries of failures with proof of no
	// effect, and of unknown outcomes a provider's idempotency key covers.
	// Shorter delays recover from a blip sooner and press a failing
	// provider harder (the breaker is the other guard). Longer delays, a
	// larger MaxAttempts or MaxAge move a keyed retry later: a retry due
	// past the key's retention (Capabilities.KeyRetention: 24 h for
	// Stripe, 2 min for Discord's nonce) is no longer covered, so
	// DecideResend answers key-expired and the intent goes to a person
	// instead of being retried. With the defaults Cap never binds: the
	// largest delay is Base × 2^(MaxAttempts−2) = 2 s × 2⁶ = 128 s, so only
	// MaxAge (24 h) and a provider's long Retry-After can reach a key's
	// retention. A delay above MaxQueueDelay (SQS's longest) is re-delayed
	// in hops.
	Backoff BackoffPolicy
	// Reconcile bounds how long an unknown outcome is looked up at a
	// provider that offers lookup before a person is asked. A shorter
	// Settle retries a keyless send sooner after an "absent" lookup, and
	// must stay above the longest time a request can be in flight (the
	// provider timeout): below it, a late request could land after its
	// retry. A longer Window asks people less and later.
	Reconcile ReconcilePolicy
	// Lease is how long a claimed attempt is its worker's. It must outlive
	// the longest attempt (the provider timeout, and the timeout of every
	// function that attempts: the intake's 20 s for inline delivery): a
	// live attempt taken for a crashed one is recorded as lease-expired, an
	// unknown outcome. A longer lease leaves a crashed worker's intent
	// longer before the sweeper takes it. It also moves the repair entry's
	// due time (Lease + SweepGrace) and the window a send must fit in
	// (DecideResend judges a resend's key coverage until now + Lease: a key
	// retained for less than the lease never covers a resend).
	Lease time.Duration
	// SweepGrace is how long past Lease the sweeper leaves an intent to its
	// normal road (the stream, the queue) before repairing it. Shorter
	// repairs sooner and races the stream more often (a race costs writes,
	// never a send: every claim is conditional).
	SweepGrace time.Duration
	// DefaultRetryAfter pauses a provider account after a 429 that named
	// no Retry-After. Longer wastes fewer sends on a limit still in force
	// and delays every intent of the account that long.
	DefaultRetryAfter time.Duration
	// Breaker opens an account's circuit after consecutive transient
	// failures. Fewer Failures or a longer Cooldown stop sending into an
	// outage sooner and longer, and hold back healthy sends after a blip.
	// ProbeLease must outlive a provider call, or two probes overlap.
	// Failures 0 turns the breaker off (a zero Breaker is the default).
	Breaker gate.BreakerPolicy
	// BarrierRecheck is how long a claim a backup barrier held waits before
	// it is tried again (never past the barrier's expiry). Shorter reads
	// the barrier more often; longer delivers later after a backup.
	BarrierRecheck time.Duration
}

// DefaultAttemptPolicy is the production policy; its backoff jitters with
// math/rand/v2's global source.
var DefaultAttemptPolicy = AttemptPolicy{
	Backoff:           DefaultBackoff(rand.Float64),
	Reconcile:         DefaultReconcile,
	Lease:             60 * time.Second,
	SweepGrace:        30 * time.Second,
	DefaultRetryAfter: time.Second,
	Breaker:           gate.DefaultBreaker,
	BarrierRecheck:    15 * time.Second,
}

// Resolve is the policy to run with: every field left zero takes
// DefaultAttemptPolicy's (a zero Backoff, Reconcile or Breaker as a whole),
// then the result is checked. It is the one check; an error names every
// field out of bounds.
func (p AttemptPolicy) Resolve() (AttemptPolicy, error) {
	def := DefaultAttemptPolicy
	if p.Backoff.Base == 0 && p.Backoff.Cap == 0 && p.Backoff.MaxAttempts == 0 && p.Backoff.MaxAge == 0 {
		p.Backoff = def.Backoff
	}
	if p.Reconcile == (ReconcilePolicy{}) {
		p.Reconcile = def.Reconcile
	}
	if p.Breaker == (gate.BreakerPolicy{}) {
		p.Breaker = def.Breaker
	}
	for _, f := range []struct{ v, def *time.Duration }{
		{&p.Lease, &def.Lease}, {&p.SweepGrace, &def.SweepGrace},
		{&p.DefaultRetryAfter, &def.DefaultRetryAfter}, {&p.BarrierRecheck, &def.BarrierRecheck},
	} {
		if *f.v == 0 {
			*f.v = *f.def
		}
	}
	var errs []error
	bad := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }
	b, r, k := p.Backoff, p.Reconcile, p.Breaker
	if b.Base <= 0 || b.Cap < b.Base {
		bad("backoff: base %v must be positive and cap %v at least base", b.Base, b.Cap)
	}
	if b.MaxAttempts < 1 || b.MaxAge <= 0 {
		bad("backoff: maxAttempts %d must be at least 1 and maxAge %v positive", b.MaxAttempts, b.MaxAge)
	}
	if r.Delay <= 0 || r.Window < r.Delay {
		bad("reconcile: delay %v must be positive and window %v at least delay", r.Delay, r.Window)
	}
	if r.Settle <= 0 || r.Settle > r.Window {
		bad("reconcile: settle %v must be positive and at most window %v (past the window a person decides before an absent lookup is ever trusted)", r.Settle, r.Window)
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"lease", p.Lease}, {"sweepGrace", p.SweepGrace}, {"defaultRetryAfter", p.DefaultRetryAfter}, {"barrierRecheck", p.BarrierRecheck}} {
		if d.v < 0 {
			bad("%s %v must be positive", d.name, d.v)
		}
	}
	if k.Failures < 0 || (k.Failures > 0 && (k.Cooldown <= 0 || k.MaxCooldown < k.Cooldown || k.ProbeLease <= 0)) {
		bad("breaker: failures %d must not be negative; with failures, cooldown %v and probeLease %v positive and maxCooldown %v at least cooldown",
			k.Failures, k.Cooldown, k.ProbeLease, k.MaxCooldown)
	}
	if err := errors.Join(errs...); err != nil {
		return p, fmt.Errorf("attempt policy: %w", err)
	}
	return p, nil
}

// ReconcilePolicy bounds reconciliation with a provider that offers lookup.
type ReconcilePolicy struct {
	// Delay before the first lookup and between polls.
	Delay time.Duration
	// Window after the attempt ended within which a pending/erroring lookup is
	// polled again; past it the intent goes to a human.
	Window time.Duration
	// Settle is how long after the attempt an "absent" lookup is trusted for a
	// provider without idempotency keys: by then the original request can no
	// longer land, so a retry cannot duplicate it.
	Settle time.Duration
}

// DefaultReconcile is the production reconciliation policy.
var DefaultReconcile = ReconcilePolicy{Delay: 5 * time.Second, Window: 15 * time.Minute, Settle: 2 * time.Minute}
