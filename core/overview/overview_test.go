package overview

import (
	"github.com/botharness/outbox/core/gate"
	"testing"
	"time"

	"github.com/botharness/outbox/core"
)

func TestBreakerPhase(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	later, earlier := now.Add(time.Minute), now.Add(-time.Minute)
	for _, c := range []struct {
		name string
		b    gate.Breaker
		want string
	}{
		{"closed", gate.Breaker{}, BreakerClosed},
		{"closed with a streak", gate.Breaker{Failures: 3}, BreakerClosed},
		{"open, cooling down", gate.Breaker{Open: true, OpenUntil: &later}, BreakerOpen},
		{"open, cooldown over: a probe may go", gate.Breaker{Open: true, OpenUntil: &earlier}, BreakerHalfOpen},
		{"open, probe out", gate.Breaker{Open: true, OpenUntil: &earlier, ProbeUntil: &later}, BreakerHalfOpen},
	} {
		if got := BreakerPhase(c.b, now); got != c.want {
			t.Errorf("%s: %s, want %s", c.name, got, c.want)
		}
	}
}

func TestLastGateMove(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	ev := &gate.Event{Kind: gate.EventBreakerOpened, At: t0, Detail: "5 failures"}
	o := &gate.PaceOverride{Reason: "slow down", By: "ops", At: t0.Add(time.Second)}
	if m := LastGateMove(gate.GateState{}, nil); m != nil {
		t.Fatalf("nothing recorded: %+v, want nil", m)
	}
	if m := LastGateMove(gate.GateState{}, ev); m == nil || m.Kind != gate.EventBreakerOpened || !m.At.Equal(t0) {
		t.Fatalf("event only: %+v", m)
	}
	if m := LastGateMove(gate.GateState{Override: o}, ev); m == nil || m.Kind != GateMovePaceOverride || !m.At.Equal(o.At) {
		t.Fatalf("override after the event: %+v, want the override", m)
	}
	ev2 := *ev
	ev2.At = t0.Add(time.Hour)
	if m := LastGateMove(gate.GateState{Override: o}, &ev2); m == nil || m.Kind != gate.EventBreakerOpened {
		t.Fatalf("event after the override: %+v, want the event", m)
	}
}

func TestSummarizeNeedsHuman(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	mk := func(id, prov, acct string, ago time.Duration, st core.Status) *core.Intent {
		return &core.Intent{ID: id, Provider: prov, Account: acct, Status: st, CreatedAt: t0.Add(-ago), UpdatedAt: t0.Add(-ago)}
	}
	s := SummarizeNeedsHuman([]*core.Intent{
		mk("a1", "sandbox", "a", time.Minute, core.StatusNeedsHuman),
		mk("b1", "sandbox", "b", time.Hour, core.StatusNeedsHuman),
		mk("a2", "sandbox", "a", 2*time.Hour, core.StatusNeedsHuman),
		mk("c1", "slack", "c", 3*time.Hour, core.StatusSucceeded), // the index lagged a decision
	}, true)
	if s.Total != 3 || !s.Truncated || s.OldestIntent != "a2" || !s.OldestSince.Equal(t0.Add(-2*time.Hour)) {
		t.Fatalf("summary: %+v", s)
	}
	if len(s.ByAccount) != 2 {
		t.Fatalf("groups: %+v", s.ByAccount)
	}
	if g := s.ByAccount[0]; g.Account != "a" || g.Count != 2 || g.OldestIntent != "a2" {
		t.Fatalf("first group (oldest wait first): %+v", g)
	}
	if g := s.ByAccount[1]; g.Account != "b" || g.Count != 1 {
		t.Fatalf("second group: %+v", g)
	}
	if e := SummarizeNeedsHuman(nil, false); e.Total != 0 || e.OldestSince != nil || e.ByAccount == nil {
		t.Fatalf("empty: %+v (byAccount must be [] not null)", e)
	}
}

func TestEpisodeHours(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 30, 0, 0, time.UTC)
	marks := []EpisodeMark{
		{At: now.Add(-time.Minute), Type: core.OperatorEventNeedsHuman},
		{At: now.Add(-20 * time.Minute), Type: core.OperatorEventNeedsHuman}, // 12:10, same hour
		{At: now.Add(-40 * time.Minute), Type: core.OperatorEventFailed},     // 11:50
		{At: now.Add(-OverviewWindow + time.Minute), Type: core.OperatorEventExpired},
		{At: now.Add(-OverviewWindow - time.Minute), Type: core.OperatorEventNeedsHuman}, // before the window
		{At: now.Add(time.Minute), Type: core.OperatorEventNeedsHuman},                   // after now (clock skew)
		{At: now.Add(-time.Hour), Type: core.EventBreakerOpened},
		{At: now.Add(-time.Hour), Type: "something.else"},
	}
	hours, tot := EpisodeHours(marks, now, OverviewWindow)
	if len(hours) != 169 { // 7 days of hours plus the current, partial one
		t.Fatalf("%d hours, want 169", len(hours))
	}
	if !hours[0].Start.Equal(time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)) || !hours[168].Start.Equal(time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)) {
		t.Fatalf("window: %v .. %v", hours[0].Start, hours[168].Start)
	}
	if hours[168].NeedsHuman != 2 || hours[167].Failed != 1 || hours[167].BreakerOpened != 1 || hours[0].Expired != 1 {
		t.Fatalf("buckets: last %+v, before %+v, first %+v", hours[168], hours[167], hours[0])
	}
	if tot != (EpisodeCounts{NeedsHuman: 2, Failed: 1, Expired: 1, BreakerOpened: 1}) {
		t.Fatalf("totals: %+v", tot)
	}
}

func TestRecentEpisodesNameTheirIntents(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	marks := []EpisodeMark{
		{At: t0, Type: core.OperatorEventNeedsHuman, ID: "i1.needs-human.2"},
		{At: t0.Add(time.Minute), Type: core.OperatorEventFailed, ID: "i2.failed"},
		{At: t0.Add(2 * time.Minute), Type: core.OperatorEventExpired, ID: "i3.expired"},
		{At: t0.Add(3 * time.Minute), Type: core.EventBreakerOpened, ID: "gate.sandbox/a.breaker.opened.1"},
	}
	got := RecentEpisodes(marks, 3)
	if len(got) != 3 || got[0].Type != core.EventBreakerOpened || got[0].IntentID != "" || got[1].IntentID != "i3" || got[2].IntentID != "i2" {
		t.Fatalf("recent: %+v", got)
	}
	if all := RecentEpisodes(marks, 10); len(all) != 4 || all[3].IntentID != "i1" {
		t.Fatalf("all: %+v", all)
	}
	if e := RecentEpisodes(nil, 5); e == nil || len(e) != 0 {
		t.Fatalf("empty: %#v, want []", e)
	}
}
