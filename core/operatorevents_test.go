package core

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"
)

func TestOperatorEventFor(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	base := func(st Status, attempts int, res ...Resolution) *Intent {
		return &Intent{ID: "it_a", Bot: "b", Provider: "sandbox", Account: "acct", Action: "send", Status: st,
			StatusReason: "why", AttemptCount: attempts, CreatedAt: t0, UpdatedAt: t0.Add(time.Hour), Resolutions: res}
	}
	decision := Resolution{At: t0.Add(30 * time.Minute), Decision: "retry"}
	recommend := Resolution{At: t0.Add(40 * time.Minute), Decision: "abandon", Recommend: true}
	cases := []struct {
		name     string
		old, cur *Intent
		wantID   string
		wantType string
	}{
		{"insert straight into needs-human", nil, base(StatusNeedsHuman, 1), "it_a.needs-human.1", OperatorEventNeedsHuman},
		{"enters needs-human", base(StatusInFlight, 1), base(StatusNeedsHuman, 1), "it_a.needs-human.1", OperatorEventNeedsHuman},
		{"a recommendation is the same episode", base(StatusNeedsHuman, 1), base(StatusNeedsHuman, 1, recommend), "it_a.needs-human.1", OperatorEventNeedsHuman},
		{"after a decision it is the next episode", base(StatusUnknownOutcome, 2, decision), base(StatusNeedsHuman, 2, decision), "it_a.needs-human.2", OperatorEventNeedsHuman},
		{"failed", base(StatusRetryableFailure, 3), base(StatusFailed, 3), "it_a.failed", OperatorEventFailed},
		{"failed, repeated record", base(StatusFailed, 3), base(StatusFailed, 3), "it_a.failed", OperatorEventFailed},
		{"expired after attempts", base(StatusRetryableFailure, 2), base(StatusExpired, 2), "it_a.expired", OperatorEventExpired},
		{"expired before any attempt: no event", base(StatusPending, 0), base(StatusExpired, 0), "", ""},
		{"pending: no event", nil, base(StatusPending, 0), "", ""},
		{"succeeded: no event", base(StatusNeedsHuman, 1), base(StatusSucceeded, 1), "", ""},
		{"abandoned: no event", base(StatusNeedsHuman, 1), base(StatusAbandoned, 1, decision), "", ""},
		{"nil: no event", nil, nil, "", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ev, ok := OperatorEventFor(c.old, c.cur)
			if ok != (c.wantID != "") || ev.ID != c.wantID || ev.Type != c.wantType {
				t.Fatalf("got %v %q %q, want %q %q", ok, ev.ID, ev.Type, c.wantID, c.wantType)
			}
			if ok && (ev.IntentID != "it_a" || ev.Bot != "b" || ev.Provider != "sandbox" || ev.Account != "acct" || ev.Reason != "why") {
				t.Fatalf("event fields: %+v", ev)
			}
		})
	}
}

func TestNeedsHumanSince(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	in := &Intent{CreatedAt: t0}
	if got := NeedsHumanSince(in); !got.Equal(t0) {
		t.Fatalf("no attempts: %v", got)
	}
	in.Attempts = []Attempt{{EndedAt: t0.Add(time.Minute)}}
	if got := NeedsHumanSince(in); !got.Equal(t0.Add(time.Minute)) {
		t.Fatalf("after attempt: %v", got)
	}
	in.Resolutions = []Resolution{{At: t0.Add(5 * time.Minute), Recommend: true}}
	if got := NeedsHumanSince(in); !got.Equal(t0.Add(time.Minute)) {
		t.Fatalf("a recommendation must not restart the wait: %v", got)
	}
	in.Resolutions = append(in.Resolutions, Resolution{At: t0.Add(7 * time.Minute)})
	if got := NeedsHumanSince(in); !got.Equal(t0.Add(7 * time.Minute)) {
		t.Fatalf("after a decision: %v", got)
	}
}

// memLedger is an in-memory OperatorEventLedger with the same conditional
// semantics as the DynamoDB one.
type memLedger struct {
	mu   sync.Mutex
	recs map[string]*memClaim
}

type memClaim struct {
	ev        OperatorEvent
	owner     string
	until     time.Time
	published bool
}

func (l *memLedger) Claim(_ context.Context, ev OperatorEvent, owner string, now, until time.Time) (ClaimResult, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.recs == nil {
		l.recs = map[string]*memClaim{}
	}
	c, ok := l.recs[ev.ID]
	switch {
	case !ok:
		l.recs[ev.ID] = &memClaim{ev: ev, owner: owner, until: until}
		return ClaimedToPublish, nil
	case c.published:
		return AlreadyPublished, nil
	case now.Before(c.until):
		return HeldByOther, nil
	}
	c.owner, c.until = owner, until
	return ClaimedToPublish, nil
}

func (l *memLedger) MarkPublished(_ context.Context, ev OperatorEvent, owner string, _ time.Time) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if c := l.recs[ev.ID]; c != nil && c.owner == owner {
		c.published = true
		return nil
	}
	return ErrConflict
}

func (l *memLedger) Release(_ context.Context, ev OperatorEvent, owner string, now time.Time) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if c := l.recs[ev.ID]; c != nil && c.owner == owner && !c.published {
		c.until = now
	}
	return nil
}

func (l *memLedger) Unpublished(_ context.Context, now time.Time, _ int) ([]OperatorEvent, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []OperatorEvent
	for _, c := range l.recs {
		if !c.published && !now.Before(c.until) {
			out = append(out, c.ev)
		}
	}
	return out, nil
}

type countingSubscriber struct {
	mu    sync.Mutex
	ids   []string
	fails int
}

func (p *countingSubscriber) Publish(_ context.Context, ev OperatorEvent) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.fails > 0 {
		p.fails--
		return errors.New("subscriber endpoint down")
	}
	p.ids = append(p.ids, ev.ID)
	return nil
}

func TestOperatorNotifierOncePerID(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clock := ClockFunc(func() time.Time { return now })
	ledger := &memLedger{}
	pub := &countingSubscriber{}
	a := &OperatorNotifier{Ledger: ledger, Subscriber: pub, Clock: clock, Owner: "a", Lease: 10 * time.Second}
	ev := OperatorEvent{ID: "it_x.needs-human.1", Type: OperatorEventNeedsHuman, IntentID: "it_x"}

	// Duplicate deliveries of the same episode publish once.
	for i := 0; i < 3; i++ {
		if err := a.Publish(context.Background(), ev); err != nil {
			t.Fatal(err)
		}
	}
	if len(pub.ids) != 1 {
		t.Fatalf("published %d times, want 1", len(pub.ids))
	}

	// A crash after the claim, before publishing: another worker is told to
	// wait while the lease lives, then the sweeper's redrive publishes once.
	ev2 := OperatorEvent{ID: "it_y.needs-human.1", Type: OperatorEventNeedsHuman, IntentID: "it_y"}
	if res, _ := ledger.Claim(context.Background(), ev2, "crashed", now, now.Add(10*time.Second)); res != ClaimedToPublish {
		t.Fatal("claim")
	}
	b := &OperatorNotifier{Ledger: ledger, Subscriber: pub, Clock: clock, Owner: "b", Lease: 10 * time.Second}
	if err := b.Publish(context.Background(), ev2); !errors.Is(err, ErrOperatorEventHeld) {
		t.Fatalf("live claim: %v", err)
	}
	if n, _ := b.Redrive(context.Background(), 10); n != 0 {
		t.Fatalf("redrive before the lease ran out published %d", n)
	}
	now = now.Add(11 * time.Second)
	if n, err := b.Redrive(context.Background(), 10); err != nil || n != 1 {
		t.Fatalf("redrive: %d %v", n, err)
	}
	if err := a.Publish(context.Background(), ev2); err != nil {
		t.Fatal(err)
	}
	if len(pub.ids) != 2 || pub.ids[1] != ev2.ID {
		t.Fatalf("published %v", pub.ids)
	}

	// A publish error releases the claim: the next try publishes at once.
	pub.fails = 1
	ev3 := OperatorEvent{ID: "it_z.failed", Type: OperatorEventFailed, IntentID: "it_z"}
	if err := a.Publish(context.Background(), ev3); err == nil {
		t.Fatal("want the publish error")
	}
	if err := b.Publish(context.Background(), ev3); err != nil {
		t.Fatal(err)
	}
	if len(pub.ids) != 3 {
		t.Fatalf("published %v", pub.ids)
	}
}

type countMetrics map[string]int

func (m countMetrics) Count(name string, n int) { m[name] += n }

// TestOperatorNotifierPublishesAStoreRecordedEventOnce: a breaker move the
// gate store recorded as an unpublished claim whose lease is over (the
// event's only record) is published, logged and counted once by the
// worker that made the move, not again by the sweeper; one whose worker
// died first is published by the sweeper.
func TestOperatorNotifierPublishesAStoreRecordedEventOnce(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	ledger := &memLedger{}
	sub := &countingSubscriber{}
	metrics := countMetrics{}
	n := &OperatorNotifier{Ledger: ledger, Subscriber: sub, Metrics: metrics, Clock: ClockFunc(func() time.Time { return now }), Owner: "w"}
	opened := BreakerEvent(EventBreakerOpened, "sandbox", "a1", now, "3 failures")
	closed := BreakerEvent(EventBreakerClosed, "sandbox", "a1", now.Add(time.Second), "ok")
	for _, ev := range []OperatorEvent{opened, closed} {
		if res, _ := ledger.Claim(context.Background(), ev, "", ev.At, ev.At); res != ClaimedToPublish {
			t.Fatal("the store's record")
		}
	}
	now = now.Add(time.Second)
	if err := n.Publish(context.Background(), opened); err != nil {
		t.Fatal(err)
	}
	if got, err := n.Redrive(context.Background(), 10); err != nil || got != 1 {
		t.Fatalf("redrive of the dead worker's move: %d %v", got, err)
	}
	if got, _ := n.Redrive(context.Background(), 10); got != 0 {
		t.Fatalf("second redrive published %d", got)
	}
	if len(sub.ids) != 2 || sub.ids[0] != opened.ID || sub.ids[1] != closed.ID {
		t.Fatalf("published %v", sub.ids)
	}
	if metrics["breaker_opened"] != 1 || metrics["breaker_closed"] != 1 {
		t.Fatalf("metrics %v", metrics)
	}
}

func TestBreakerEvent(t *testing.T) {
	at := time.Date(2026, 1, 1, 0, 0, 0, 5, time.UTC)
	n := BreakerEvent(EventBreakerOpened, "sandbox", "a1", at, "3 failures")
	if n.ID != "gate.sandbox/a1.breaker.opened.1767225600000000005" || n.Type != EventBreakerOpened || n.Reason != "3 failures" || n.Provider != "sandbox" || n.Account != "a1" || !n.At.Equal(at) {
		t.Fatalf("%+v", n)
	}
	if BreakerEvent(EventBreakerOpened, "sandbox", "a1", at, "other words").ID != n.ID {
		t.Fatal("the id must be stable for the same gate event")
	}
	if BreakerEvent(EventBreakerClosed, "sandbox", "a1", at, "3 failures").ID == n.ID {
		t.Fatal("closing is another event")
	}
}
