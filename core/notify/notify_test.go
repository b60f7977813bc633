package notify

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/botharness/outbox/core"
)

func TestOperatorEventFor(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	base := func(st core.Status, attempts int, res ...core.Resolution) *core.Intent {
		return &core.Intent{ID: "it_a", Bot: "b", Provider: "sandbox", Account: "acct", Action: "send", Status: st,
			StatusReason: "why", AttemptCount: attempts, CreatedAt: t0, UpdatedAt: t0.Add(time.Hour), Resolutions: res}
	}
	decision := core.Resolution{At: t0.Add(30 * time.Minute), Decision: "retry"}
	recommend := core.Resolution{At: t0.Add(40 * time.Minute), Decision: "abandon", Recommend: true}
	cases := []struct {
		name     string
		old, cur *core.Intent
		wantID   string
		wantType string
	}{
		{"insert straight into needs-human", nil, base(core.StatusNeedsHuman, 1), "it_a.needs-human.1", core.OperatorEventNeedsHuman},
		{"enters needs-human", base(core.StatusInFlight, 1), base(core.StatusNeedsHuman, 1), "it_a.needs-human.1", core.OperatorEventNeedsHuman},
		{"a recommendation is the same episode", base(core.StatusNeedsHuman, 1), base(core.StatusNeedsHuman, 1, recommend), "it_a.needs-human.1", core.OperatorEventNeedsHuman},
		{"after a decision it is the next episode", base(core.StatusUnknownOutcome, 2, decision), base(core.StatusNeedsHuman, 2, decision), "it_a.needs-human.2", core.OperatorEventNeedsHuman},
		{"failed", base(core.StatusRetryableFailure, 3), base(core.StatusFailed, 3), "it_a.failed", core.OperatorEventFailed},
		{"failed, repeated record", base(core.StatusFailed, 3), base(core.StatusFailed, 3), "it_a.failed", core.OperatorEventFailed},
		{"expired after attempts", base(core.StatusRetryableFailure, 2), base(core.StatusExpired, 2), "it_a.expired", core.OperatorEventExpired},
		{"expired before any attempt: no event", base(core.StatusPending, 0), base(core.StatusExpired, 0), "", ""},
		{"pending: no event", nil, base(core.StatusPending, 0), "", ""},
		{"succeeded: no event", base(core.StatusNeedsHuman, 1), base(core.StatusSucceeded, 1), "", ""},
		{"abandoned: no event", base(core.StatusNeedsHuman, 1), base(core.StatusAbandoned, 1, decision), "", ""},
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

// memLedger is an in-memory OperatorEventLedger with the same conditional
// semantics as the DynamoDB one.
type memLedger struct {
	mu   sync.Mutex
	recs map[string]*memClaim
}

type memClaim struct {
	ev        core.OperatorEvent
	owner     string
	until     time.Time
	published bool
}

func (l *memLedger) Claim(_ context.Context, ev core.OperatorEvent, owner string, now, until time.Time) (ClaimResult, error) {
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

func (l *memLedger) MarkPublished(_ context.Context, ev core.OperatorEvent, owner string, _ time.Time) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if c := l.recs[ev.ID]; c != nil && c.owner == owner {
		c.published = true
		return nil
	}
	return core.ErrConflict
}

func (l *memLedger) Release(_ context.Context, ev core.OperatorEvent, owner string, now time.Time) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if c := l.recs[ev.ID]; c != nil && c.owner == owner && !c.published {
		c.until = now
	}
	return nil
}

func (l *memLedger) Unpublished(_ context.Context, now time.Time, _ int) ([]core.OperatorEvent, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []core.OperatorEvent
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

func (p *countingSubscriber) Publish(_ context.Context, ev core.OperatorEvent) error {
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
	clock := core.ClockFunc(func() time.Time { return now })
	ledger := &memLedger{}
	pub := &countingSubscriber{}
	a := &OperatorNotifier{Ledger: ledger, Subscriber: pub, Clock: clock, Owner: "a", Lease: 10 * time.Second}
	ev := core.OperatorEvent{ID: "it_x.needs-human.1", Type: core.OperatorEventNeedsHuman, IntentID: "it_x"}

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
	ev2 := core.OperatorEvent{ID: "it_y.needs-human.1", Type: core.OperatorEventNeedsHuman, IntentID: "it_y"}
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
	ev3 := core.OperatorEvent{ID: "it_z.failed", Type: core.OperatorEventFailed, IntentID: "it_z"}
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
	n := &OperatorNotifier{Ledger: ledger, Subscriber: sub, Metrics: metrics, Clock: core.ClockFunc(func() time.Time { return now }), Owner: "w"}
	opened := core.BreakerEvent(core.EventBreakerOpened, "sandbox", "a1", now, "3 failures")
	closed := core.BreakerEvent(core.EventBreakerClosed, "sandbox", "a1", now.Add(time.Second), "ok")
	for _, ev := range []core.OperatorEvent{opened, closed} {
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
