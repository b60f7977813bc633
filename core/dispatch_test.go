package core

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/botharness/outbox/core/clocktest"
)

type rig struct {
	store *memStore
	queue *memQueue
	prov  *fakeProvider
	clock *fakeClock
	in    *Intake
	d     *Dispatcher
}

func newRig(caps Capabilities, script ...error) *rig {
	r := &rig{store: newMemStore(), queue: &memQueue{}, prov: &fakeProvider{caps: caps, script: script},
		clock: clocktest.New(time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC))}
	provs := ProviderMap{"fake": r.prov}
	r.in = &Intake{Store: r.store, Providers: provs, Clock: r.clock}
	r.d = &Dispatcher{Store: r.store, Queue: r.queue, Providers: provs, Clock: r.clock, Owner: "w1",
		Policy: AttemptPolicy{Lease: time.Minute,
			Backoff:        BackoffPolicy{Base: time.Second, Cap: time.Minute, MaxAttempts: 3, MaxAge: time.Hour},
			Reconcile:      ReconcilePolicy{Delay: time.Second, Window: 10 * time.Minute, Settle: time.Minute},
			BarrierRecheck: DefaultAttemptPolicy.BarrierRecheck},
		Log: slog.New(slog.DiscardHandler)}
	return r
}

const body = `{"kind":"reply","provider":"fake","account":"a1","action":"send","target":"c1","payload":{"text":"hi"},"grant":{"id":"g1","version":1}}`

func (r *rig) submit(t *testing.T) *Intent {
	t.Helper()
	res, err := r.in.Submit(context.Background(), "bot1", "k1", []byte(body))
	if err != nil {
		t.Fatal(err)
	}
	return res.Intent
}

// drain runs queued retry messages (advancing the clock by their delays) until none remain.
func (r *rig) drain(t *testing.T) {
	t.Helper()
	for i := 0; i < 50; i++ {
		msgs := r.queue.take()
		if len(msgs) == 0 {
			return
		}
		for _, m := range msgs {
			r.clock.Advance(m.delay)
			if err := r.d.HandleRetry(context.Background(), m.msg); err != nil {
				t.Fatal(err)
			}
		}
	}
	t.Fatal("queue never drained")
}

func (r *rig) get(t *testing.T, id string) *Intent {
	t.Helper()
	in, err := r.store.Get(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return in
}

func TestHappyPathCostsThreeWrites(t *testing.T) {
	r := newRig(Capabilities{})
	in := r.submit(t)
	if err := attemptID(context.Background(), r.d, in.ID, "stream"); err != nil {
		t.Fatal(err)
	}
	got := r.get(t, in.ID)
	if got.Status != StatusSucceeded || got.ExternalID != "ext-1" || len(got.Attempts) != 1 {
		t.Fatalf("got %s %q attempts=%d", got.Status, got.ExternalID, len(got.Attempts))
	}
	if r.store.puts != 3 {
		t.Fatalf("writes = %d, want 3 (intake, claim, outcome)", r.store.puts)
	}
}

func TestDuplicateTriggerMakesOneSend(t *testing.T) {
	r := newRig(Capabilities{})
	in := r.submit(t)
	for i := 0; i < 3; i++ {
		if err := attemptID(context.Background(), r.d, in.ID, "stream"); err != nil {
			t.Fatal(err)
		}
	}
	if r.prov.sends != 1 {
		t.Fatalf("sends = %d, want 1", r.prov.sends)
	}
}

func TestTransientFailureRetriesThenSucceeds(t *testing.T) {
	r := newRig(Capabilities{}, &RetryableError{Class: ClassTransient, Err: errors.New("503")})
	in := r.submit(t)
	mustAttempt(t, r.d, in.ID)
	if got := r.get(t, in.ID); got.Status != StatusRetryableFailure || got.NextAttemptAt == nil {
		t.Fatalf("after 503: %s", got.Status)
	}
	r.drain(t)
	got := r.get(t, in.ID)
	if got.Status != StatusSucceeded || r.prov.sends != 2 || len(got.Attempts) != 2 {
		t.Fatalf("got %s sends=%d attempts=%d", got.Status, r.prov.sends, len(got.Attempts))
	}
}

func TestRetryNotDueIsRedelayed(t *testing.T) {
	r := newRig(Capabilities{}, &RetryableError{Class: ClassRateLimited, RetryAfter: time.Hour / 2, Err: errors.New("429")})
	in := r.submit(t)
	mustAttempt(t, r.d, in.ID)
	msgs := r.queue.take()
	if len(msgs) != 1 || msgs[0].delay != 30*time.Minute {
		t.Fatalf("want one message delayed 30m, got %+v", msgs)
	}
	// The queue delivers after its 15-minute cap: not due yet -> re-delayed, no send.
	r.clock.Advance(MaxQueueDelay)
	if err := r.d.HandleRetry(context.Background(), msgs[0].msg); err != nil {
		t.Fatal(err)
	}
	if r.prov.sends != 1 {
		t.Fatalf("early delivery caused a send")
	}
	again := r.queue.take()
	if len(again) != 1 || again[0].delay != 15*time.Minute {
		t.Fatalf("want re-delay of 15m, got %+v", again)
	}
}

func TestRetryCapEndsFailedWithHistory(t *testing.T) {
	e := &RetryableError{Class: ClassTransient, Err: errors.New("503")}
	r := newRig(Capabilities{}, e, e, e, e)
	in := r.submit(t)
	mustAttempt(t, r.d, in.ID)
	r.drain(t)
	got := r.get(t, in.ID)
	if got.Status != StatusFailed || len(got.Attempts) != 3 || r.prov.sends != 3 {
		t.Fatalf("got %s attempts=%d sends=%d", got.Status, len(got.Attempts), r.prov.sends)
	}
	if !strings.Contains(got.StatusReason, "exhausted") {
		t.Fatalf("reason %q", got.StatusReason)
	}
}

func TestPermanentFailureIsNotRetried(t *testing.T) {
	r := newRig(Capabilities{}, &PermanentError{Class: ClassRejectedInput, Err: errors.New("400")})
	in := r.submit(t)
	mustAttempt(t, r.d, in.ID)
	r.drain(t)
	if got := r.get(t, in.ID); got.Status != StatusFailed || r.prov.sends != 1 {
		t.Fatalf("got %s sends=%d", got.Status, r.prov.sends)
	}
}

func TestUnknownOutcomeRouting(t *testing.T) {
	unknown := &UnknownOutcomeError{Err: errors.New("timeout")}
	cases := []struct {
		name      string
		caps      Capabilities
		lookup    LookupResult
		advance   time.Duration
		want      Status
		wantSends int
	}{
		{"neither -> needs-human", Capabilities{}, LookupResult{}, 0, StatusNeedsHuman, 1},
		{"keys within retention -> retry same key", Capabilities{IdempotencyKeys: true, KeyRetention: 24 * time.Hour}, LookupResult{}, 0, StatusSucceeded, 2},
		{"keys, retention too short -> needs-human", Capabilities{IdempotencyKeys: true, KeyRetention: time.Millisecond}, LookupResult{}, 0, StatusNeedsHuman, 1},
		{"lookup found -> succeeded, no resend", Capabilities{Lookup: true}, LookupResult{State: LookupFound, ExternalID: "ext-found"}, 0, StatusSucceeded, 1},
		{"lookup absent with valid key -> retry", Capabilities{Lookup: true, IdempotencyKeys: true, KeyRetention: time.Hour}, LookupResult{State: LookupAbsent}, 0, StatusSucceeded, 2},
		{"lookup pending forever -> needs-human", Capabilities{Lookup: true}, LookupResult{State: LookupPending}, 0, StatusNeedsHuman, 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := newRig(c.caps, unknown)
			r.prov.lookup = c.lookup
			in := r.submit(t)
			mustAttempt(t, r.d, in.ID)
			for i := 0; i < 1000; i++ {
				msgs := r.queue.take()
				if len(msgs) == 0 {
					break
				}
				for _, m := range msgs {
					r.clock.Advance(m.delay + time.Second)
					if err := r.d.HandleRetry(context.Background(), m.msg); err != nil {
						t.Fatal(err)
					}
				}
			}
			got := r.get(t, in.ID)
			if got.Status != c.want || r.prov.sends != c.wantSends {
				t.Fatalf("got %s sends=%d, want %s sends=%d (reason %q)", got.Status, r.prov.sends, c.want, c.wantSends, got.StatusReason)
			}
			if c.lookup.State == LookupFound && got.ExternalID != "ext-found" {
				t.Fatalf("external id %q", got.ExternalID)
			}
		})
	}
}

// claimThenExpire claims the intent as worker w1 (attempt 1, a minute's
// lease), lets the lease run out and sweeps; it returns the claimed intent.
func (r *rig) claimThenExpire(t *testing.T, id string) *Intent {
	t.Helper()
	claimed, err := r.store.Update(context.Background(), id, func(i *Intent) error {
		i.Status, i.AttemptCount, i.Lease = StatusInFlight, 1, &Lease{Owner: "w1", Until: r.clock.Now().Add(time.Minute)}
		t := r.clock.Now()
		i.FirstAttemptAt = &t
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	r.clock.Advance(2 * time.Minute)
	if _, err := (&Sweeper{D: r.d, Index: r.store}).Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	return claimed
}

// lateSuccess records attempt 1 of the claimed intent succeeding (late-1).
func (r *rig) lateSuccess(t *testing.T, claimed *Intent) {
	t.Helper()
	if _, err := r.d.record(context.Background(), claimed, Attempt{N: 1, Trigger: "stream"}, &SendResult{ExternalID: "late-1"}, nil, Capabilities{}, r.d.log()); err != nil {
		t.Fatal(err)
	}
}

func TestLateSuccessAfterLeaseExpiryIsKept(t *testing.T) {
	r := newRig(Capabilities{})
	in := r.submit(t)
	// Claim, then let the sweeper expire the lease before the outcome lands.
	claimed := r.claimThenExpire(t, in.ID)
	if got := r.get(t, in.ID); got.Status != StatusNeedsHuman {
		t.Fatalf("after lease expiry: %s", got.Status)
	}
	r.lateSuccess(t, claimed)
	got := r.get(t, in.ID)
	if got.Status != StatusSucceeded || got.ExternalID != "late-1" || len(got.Attempts) != 2 {
		t.Fatalf("got %s %q attempts=%d", got.Status, got.ExternalID, len(got.Attempts))
	}
}

func TestDeadlinePassedExpiresWithoutSend(t *testing.T) {
	r := newRig(Capabilities{})
	b := strings.Replace(body, `"grant"`, `"deadline":"2026-03-02T09:05:00Z","grant"`, 1)
	res, err := r.in.Submit(context.Background(), "bot1", "k-deadline", []byte(b))
	if err != nil {
		t.Fatal(err)
	}
	r.clock.Advance(10 * time.Minute)
	mustAttempt(t, r.d, res.Intent.ID)
	if got := r.get(t, res.Intent.ID); got.Status != StatusExpired || r.prov.sends != 0 {
		t.Fatalf("got %s sends=%d", got.Status, r.prov.sends)
	}
}

type blockSecond struct{ calls int }

func (b *blockSecond) Revalidate(context.Context, *Intent) (*Checks, *Blocked, error) {
	b.calls++
	if b.calls >= 2 {
		return &Checks{Result: "blocked"}, &Blocked{Status: StatusGrantRevoked, Reason: "grant g1 revoked"}, nil
	}
	return &Checks{Result: "ok"}, nil, nil
}

func TestBlockedRetryAfterUnknownOutcomeGoesToHuman(t *testing.T) {
	// Attempt 1 may have gone out (covered by the key); the retry is then blocked.
	r := newRig(Capabilities{IdempotencyKeys: true, KeyRetention: 24 * time.Hour}, &UnknownOutcomeError{Err: errors.New("timeout")})
	r.d.Revalidator = &blockSecond{}
	in := r.submit(t)
	mustAttempt(t, r.d, in.ID)
	r.drain(t)
	got := r.get(t, in.ID)
	if got.Status != StatusNeedsHuman || r.prov.sends != 1 {
		t.Fatalf("got %s sends=%d: a block must not hide an uncertain attempt", got.Status, r.prov.sends)
	}
	// Without an uncertain attempt, the block is terminal.
	r2 := newRig(Capabilities{}, &RetryableError{Class: ClassTransient, Err: errors.New("503")})
	r2.d.Revalidator = &blockSecond{}
	in2 := r2.submit(t)
	mustAttempt(t, r2.d, in2.ID)
	r2.drain(t)
	if got := r2.get(t, in2.ID); got.Status != StatusGrantRevoked {
		t.Fatalf("got %s", got.Status)
	}
}

// crashAfterClaim is a store whose process dies after the claim: the claim
// is written, every later write fails.
type crashAfterClaim struct{ *memStore }

func (c crashAfterClaim) Update(context.Context, string, func(*Intent) error) (*Intent, error) {
	return nil, errors.New("process crashed")
}

// TestExpiredRetryAttemptKeepsItsClaimTime: when the sweeper expires the
// lease of a retry attempt, the attempt it records started at that retry's
// claim, not at the sweep and not at the first attempt.
func TestExpiredRetryAttemptKeepsItsClaimTime(t *testing.T) {
	ctx := context.Background()
	r := newRig(Capabilities{}, &RetryableError{Class: ClassTransient, Err: errors.New("503")})
	in := r.submit(t)
	firstClaim := r.clock.Now()
	if err := attemptID(ctx, r.d, in.ID, "stream"); err != nil {
		t.Fatal(err)
	}
	if got := r.get(t, in.ID); got.Status != StatusRetryableFailure {
		t.Fatalf("after a transient failure: %s", got.Status)
	}
	r.clock.Advance(10 * time.Second)
	retryClaim := r.clock.Now()
	r.d.Store = crashAfterClaim{r.store}
	if err := attemptID(ctx, r.d, in.ID, "retry"); err == nil || !strings.Contains(err.Error(), "process crashed") {
		t.Fatalf("the crashed retry returned %v, want the failed outcome write", err)
	}
	r.d.Store = r.store
	if got := r.get(t, in.ID); got.Status != StatusInFlight || got.Lease == nil || !got.Lease.Since.Equal(retryClaim) {
		t.Fatalf("after the crash: %s lease %+v, want in flight since %s", got.Status, got.Lease, retryClaim)
	}
	r.clock.Advance(3 * time.Minute) // past the one-minute lease
	sweptAt := r.clock.Now()
	s := &Sweeper{D: r.d, Index: r.store}
	if rep, err := s.Run(ctx); err != nil || rep.LeasesExpired != 1 {
		t.Fatalf("sweep: %+v %v, want one expired lease", rep, err)
	}
	got := r.get(t, in.ID)
	if len(got.Attempts) != 2 {
		t.Fatalf("history has %d entries, want 2", len(got.Attempts))
	}
	first, expired := got.Attempts[0], got.Attempts[1]
	if !first.StartedAt.Equal(firstClaim) {
		t.Errorf("first attempt started %s, want %s", first.StartedAt, firstClaim)
	}
	if expired.Result != ResultLeaseExpired || expired.N != 2 || !expired.StartedAt.Equal(retryClaim) || !expired.EndedAt.Equal(sweptAt) {
		t.Fatalf("expired attempt #%d %s started %s ended %s; want #2 lease-expired started at the retry's claim %s, ended at the sweep %s",
			expired.N, expired.Result, expired.StartedAt, expired.EndedAt, retryClaim, sweptAt)
	}
}

// A late success that lands while a retry under the key is already scheduled
// keeps the provider's message id: a later success (even one an operator
// accepts without an id) names the effect that happened.
func TestLateSuccessWhileRetryScheduledKeepsExternalID(t *testing.T) {
	r := newRig(Capabilities{IdempotencyKeys: true, KeyRetention: time.Hour})
	in := r.submit(t)
	claimed := r.claimThenExpire(t, in.ID)
	if got := r.get(t, in.ID); got.Status != StatusRetryableFailure {
		t.Fatalf("after lease expiry under a valid key: %s", got.Status)
	}
	r.lateSuccess(t, claimed)
	if got := r.get(t, in.ID); got.ExternalID != "late-1" {
		t.Fatalf("external id %q after a late success, want late-1 (status %s)", got.ExternalID, got.Status)
	}
}

// capsOrder is the fake provider with its declaration and sends logged in
// order; with overlap set, the declaration is answered only once a send has
// started (or after a second): a first attempt must not wait for it.
type capsOrder struct {
	*fakeProvider
	overlap bool
	mu      sync.Mutex
	log     []string
	sending chan struct{}
	once    sync.Once
}

func (p *capsOrder) note(s string) { p.mu.Lock(); p.log = append(p.log, s); p.mu.Unlock() }

func (p *capsOrder) Capabilities(ctx context.Context, account, action string) (Capabilities, error) {
	if p.overlap {
		select {
		case <-p.sending:
		case <-time.After(time.Second):
		}
	}
	p.note("caps")
	return p.fakeProvider.Capabilities(ctx, account, action)
}

func (p *capsOrder) Send(ctx context.Context, r SendRequest) (SendResult, error) {
	p.note("send")
	p.once.Do(func() { close(p.sending) })
	return p.fakeProvider.Send(ctx, r)
}

// A first attempt reads the provider's declaration side by side with its
// send (nothing can have taken effect, so the send is safe whatever it
// declares; the declaration only decides the outcome): not one round trip
// before it. A retry after an uncertain attempt reads it first, since
// whether it may be sent at all depends on it (DecideResend).
func TestCapabilitiesBesideAFirstSendBeforeAnUncertainRetry(t *testing.T) {
	r := newRig(Capabilities{IdempotencyKeys: true, KeyRetention: 24 * time.Hour}, &UnknownOutcomeError{Err: errors.New("timeout")})
	p := &capsOrder{fakeProvider: r.prov, overlap: true, sending: make(chan struct{})}
	r.d.Providers = ProviderMap{"fake": p}
	in := r.submit(t)
	mustAttempt(t, r.d, in.ID)
	p.mu.Lock()
	first := append([]string(nil), p.log...)
	p.log, p.overlap = nil, false
	p.mu.Unlock()
	if len(first) != 2 || first[0] != "send" || first[1] != "caps" {
		t.Fatalf("first attempt: %v, want the send under way before the declaration answered", first)
	}
	if got := r.get(t, in.ID); got.Status != StatusUnknownOutcome && got.Status != StatusRetryableFailure {
		t.Fatalf("after an unknown outcome with keys: %s", got.Status)
	}
	r.drain(t)
	p.mu.Lock()
	retry := append([]string(nil), p.log...)
	p.mu.Unlock()
	sendAt := -1
	for i, s := range retry {
		if s == "send" {
			sendAt = i
			break
		}
	}
	if sendAt < 1 || retry[sendAt-1] != "caps" {
		t.Fatalf("retry after an uncertain attempt: %v, want the declaration read before the send", retry)
	}
	if got := r.get(t, in.ID); got.Status != StatusSucceeded || r.prov.sends != 2 {
		t.Fatalf("got %s after %d sends", got.Status, r.prov.sends)
	}
}
