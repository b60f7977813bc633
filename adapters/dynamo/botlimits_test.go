package dynamo

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/botharness/outbox/core"
	"github.com/botharness/outbox/core/botlimit"
)

func limitedIntent(bot string, i int, now time.Time) *core.Intent {
	return &core.Intent{ID: core.IntentID(bot, fmt.Sprintf("k-%d", i)), Bot: bot, IdempotencyKey: fmt.Sprintf("k-%d", i),
		Kind: core.KindReply, Provider: "p", Account: "a", Action: "send", Target: "t", Payload: []byte(`{}`),
		PayloadHash: "h", RequestHash: "r", Grant: core.GrantRef{ID: "g", Version: 1}, Status: core.StatusPending,
		Version: 1, CreatedAt: now, UpdatedAt: now, Attempts: []core.Attempt{}}
}

// TestBotLimiterRateOnDynamoDB: concurrent admissions in one window admit
// exactly the rate, the rest are rate_limited with the rest of the window
// as Retry-After, and the next window admits again.
func TestBotLimiterRateOnDynamoDB(t *testing.T) {
	db, table := testTable(t, "botlimit")
	lim := NewBotLimiter(db, table, botlimit.BotLimitConfig{Default: botlimit.BotLimits{Rate: botlimit.BotRate{N: 20, Per: time.Minute}}})
	ctx := context.Background()
	now := time.Date(2030, 1, 1, 9, 0, 10, 0, time.UTC)
	var mu sync.Mutex
	admitted, limited := 0, 0
	var wg sync.WaitGroup
	for i := 0; i < 40; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			_, err := lim.Admit(ctx, limitedIntent("bot-r", i, now), now)
			var le *botlimit.LimitError
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				admitted++
			case errors.As(err, &le) && le.Code == botlimit.CodeRateLimited && le.RetryAfter == 50*time.Second:
				limited++
			default:
				t.Errorf("admit %d: %v", i, err)
			}
		}(i)
	}
	wg.Wait()
	if admitted != 20 || limited != 20 {
		t.Fatalf("admitted %d, limited %d; want 20 and 20", admitted, limited)
	}
	// A fresh instance (no local memory) sees the same count.
	other := NewBotLimiter(db, table, lim.Limits())
	if _, err := other.Admit(ctx, limitedIntent("bot-r", 99, now), now); !core.IsLimitRefusal(err) {
		t.Fatalf("another instance in the same window: %v", err)
	}
	// Another bot is not affected.
	if _, err := other.Admit(ctx, limitedIntent("bot-other", 1, now), now); err != nil {
		t.Fatalf("another bot: %v", err)
	}
	// The next window admits again.
	later := now.Add(time.Minute)
	if _, err := lim.Admit(ctx, limitedIntent("bot-r", 100, later), later); err != nil {
		t.Fatalf("next window: %v", err)
	}
	if _, err := other.Admit(ctx, limitedIntent("bot-r", 101, later), later); err != nil {
		t.Fatalf("next window, other instance: %v", err)
	}
}

// TestBotLimiterOpenCapOnDynamoDB: the open cap counts at admission, gives
// back on release (not created) and when the store ends the intent.
func TestBotLimiterOpenCapOnDynamoDB(t *testing.T) {
	db, table := testTable(t, "botopen")
	cfg := botlimit.BotLimitConfig{Default: botlimit.BotLimits{MaxOpen: 1000}, PerBot: map[string]botlimit.BotLimits{"bot-o": {MaxOpen: 16}}}
	lim := NewBotLimiter(db, table, cfg)
	store := New(db, table)
	ctx := context.Background()
	now := time.Date(2030, 1, 1, 9, 0, 0, 0, time.UTC)
	// 16 shards with a quota of 1 each: fill shards until one refuses.
	var open []*core.Intent
	var refusedOn *core.Intent
	for i := 0; i < 200 && refusedOn == nil; i++ {
		in := limitedIntent("bot-o", i, now)
		release, err := lim.Admit(ctx, in, now)
		var le *botlimit.LimitError
		switch {
		case errors.As(err, &le):
			if le.Code != botlimit.CodeTooManyOpenIntents || le.RetryAfter != botlimit.OpenRetryAfter {
				t.Fatalf("refusal %+v", le)
			}
			refusedOn = in
		case err != nil:
			t.Fatal(err)
		default:
			if in.OpenSlot == 0 || release == nil {
				t.Fatalf("admitted without an open slot")
			}
			if _, _, err := store.Create(ctx, in); err != nil {
				t.Fatal(err)
			}
			open = append(open, in)
		}
	}
	if refusedOn == nil || len(open) > 16 {
		t.Fatalf("open %d, refused %v: the cap of 16 must hold", len(open), refusedOn != nil)
	}
	// End the intent holding the refused one's shard: its count is given
	// back and the refused intent is admitted.
	var holder *core.Intent
	for _, in := range open {
		if botlimit.PlanLimit(cfg.For("bot-o"), in.ID, now).Shard == botlimit.PlanLimit(cfg.For("bot-o"), refusedOn.ID, now).Shard {
			holder = in
		}
	}
	if holder == nil {
		t.Fatal("no admitted intent shares the refused one's shard")
	}
	if _, err := store.Update(ctx, holder.ID, func(in *core.Intent) error {
		in.Status, in.UpdatedAt = core.StatusAbandoned, now
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	release, err := lim.Admit(ctx, refusedOn, now)
	if err != nil {
		t.Fatalf("after its shard's intent ended: %v", err)
	}
	// Not created after all: released, so the next one fits again.
	release(ctx)
	again := limitedIntent("bot-o", 0, now)
	again.ID = refusedOn.ID
	if _, err := lim.Admit(ctx, again, now); err != nil {
		t.Fatalf("after release: %v", err)
	}
	counters, err := lim.Counters(ctx, "bot-o")
	if err != nil || len(counters) != 16 {
		t.Fatalf("counters %v %v", counters, err)
	}
	total := 0
	for _, c := range counters {
		if c.Open < 0 || c.Open > 1 {
			t.Fatalf("a shard counts %d open intents, quota 1", c.Open)
		}
		total += c.Open
	}
	if total != len(open) {
		t.Fatalf("counters hold %d open intents, want %d", total, len(open))
	}
}
