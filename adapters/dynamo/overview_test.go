package dynamo

import (
	"context"
	"testing"
	"time"

	"github.com/botharness/outbox/core"
	"github.com/botharness/outbox/core/notify"
	"github.com/botharness/outbox/core/overview"
)

// The sweeper's oldest-wait gauge reads the HUMAN# entries' sort keys: the
// older of two waiting intents wins; with none waiting, ok is false.
func TestOldestNeedsHumanReadsTheHumanListing(t *testing.T) {
	db, table := testTable(t, "oldest_human")
	ctx := context.Background()
	s := New(db, table)
	if _, ok, err := s.OldestNeedsHuman(ctx); err != nil || ok {
		t.Fatalf("empty table: ok=%v err=%v", ok, err)
	}
	t0 := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	for i, at := range []time.Time{t0.Add(time.Hour), t0} {
		in := retriedIntent()
		in.ID = core.IntentID("bench-bot", "oldest-"+string(rune('a'+i)))
		in.IdempotencyKey = "oldest-" + string(rune('a'+i))
		in.Status, in.ExternalID, in.RepairAt, in.CreatedAt, in.UpdatedAt = core.StatusNeedsHuman, "", at, at, at
		if _, _, err := s.Create(ctx, in); err != nil {
			t.Fatal(err)
		}
	}
	got, ok, err := s.OldestNeedsHuman(ctx)
	if err != nil || !ok || !got.Equal(t0) {
		t.Fatalf("oldest = %v ok=%v err=%v, want %v", got, ok, err, t0)
	}
}

// The ledger's claim lists the episode in its timeline (no extra write):
// EpisodesSince returns what began in the window, by type and id.
func TestLedgerTimelineListsEpisodesSince(t *testing.T) {
	db, table := testTable(t, "ledger_timeline")
	ctx := context.Background()
	l := NewOperatorEventLedger(db, table)
	now := time.Now().UTC()
	for _, ev := range []core.OperatorEvent{
		{ID: "i1.needs-human.1", Type: core.OperatorEventNeedsHuman, At: now.Add(-time.Hour), IntentID: "i1"},
		{ID: "i2.failed", Type: core.OperatorEventFailed, At: now.Add(-2 * time.Hour), IntentID: "i2"},
		{ID: "i3.needs-human.1", Type: core.OperatorEventNeedsHuman, At: now.Add(-9 * 24 * time.Hour), IntentID: "i3"},
	} {
		if res, err := l.Claim(ctx, ev, "me", now, now.Add(time.Minute)); err != nil || res != notify.ClaimedToPublish {
			t.Fatalf("claim %s: %v %v", ev.ID, res, err)
		}
	}
	if err := l.MarkPublished(ctx, core.OperatorEvent{ID: "i1.needs-human.1", Type: core.OperatorEventNeedsHuman}, "me", now); err != nil {
		t.Fatal(err)
	}
	marks, truncated, err := l.EpisodesSince(ctx, now.Add(-overview.OverviewWindow), 1000)
	if err != nil || truncated {
		t.Fatalf("since: %v truncated=%v", err, truncated)
	}
	got := map[string]string{}
	for _, m := range marks {
		got[m.ID] = m.Type
	}
	if len(got) != 2 || got["i1.needs-human.1"] != core.OperatorEventNeedsHuman || got["i2.failed"] != core.OperatorEventFailed {
		t.Fatalf("timeline %v, want the published needs-human and the failed episode (not the 9-day-old one)", marks)
	}
}
