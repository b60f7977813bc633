package botlimit

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/botharness/outbox/core"
)

func TestParseBotRate(t *testing.T) {
	for _, c := range []struct {
		in   string
		want BotRate
		ok   bool
	}{
		{"", BotRate{}, true},
		{"50/1s", BotRate{50, time.Second}, true},
		{" 3000 / 1m ", BotRate{3000, time.Minute}, true},
		{"50", BotRate{}, false},
		{"0/1s", BotRate{}, false},
		{"-5/1s", BotRate{}, false},
		{"5/100ms", BotRate{}, false},
		{"5/2h", BotRate{}, false},
		{"five/1s", BotRate{}, false},
	} {
		got, err := ParseBotRate(c.in)
		if (err == nil) != c.ok || got != c.want {
			t.Errorf("ParseBotRate(%q) = %+v, %v; want %+v ok=%v", c.in, got, err, c.want, c.ok)
		}
	}
}

// TestLimitShards: one counter shard per RatePerShardTarget intents/s, at
// least 1 and at most MaxLimitShards (the scale rule: a bot at 2,000/s
// writes each of its 16 counter items 125 times a second).
func TestLimitShards(t *testing.T) {
	for _, c := range []struct {
		l    BotLimits
		want int
	}{
		{BotLimits{Rate: BotRate{50, time.Second}}, 1},
		{BotLimits{Rate: BotRate{100, time.Second}}, 1},
		{BotLimits{Rate: BotRate{101, time.Second}}, 2},
		{BotLimits{Rate: BotRate{600, time.Minute}}, 1},
		{BotLimits{Rate: BotRate{2000, time.Second}}, 16},
		{BotLimits{Rate: BotRate{100000, time.Second}}, MaxLimitShards},
		{BotLimits{MaxOpen: 10}, MaxLimitShards},
		{BotLimits{Rate: BotRate{50, time.Second}, MaxOpen: 10}, 1},
	} {
		if got := LimitShards(c.l); got != c.want {
			t.Errorf("LimitShards(%+v) = %d, want %d", c.l, got, c.want)
		}
	}
}

// TestPlanLimitSplitsWithoutOvershoot: the shards' quotas never add up to
// more than the limit (floor), each is at least 1, and the window is the
// one holding now.
func TestPlanLimitSplitsWithoutOvershoot(t *testing.T) {
	now := time.Date(2030, 1, 1, 9, 0, 0, 700_000_000, time.UTC)
	for _, l := range []BotLimits{
		{Rate: BotRate{50, time.Second}},
		{Rate: BotRate{2000, time.Second}, MaxOpen: 1000},
		{Rate: BotRate{250, time.Second}, MaxOpen: 7},
		{MaxOpen: 100},
		{MaxOpen: 3},
	} {
		p := PlanLimit(l, "it_x", now)
		if p.Shard < 0 || p.Shard >= p.Shards {
			t.Fatalf("%+v: shard %d of %d", l, p.Shard, p.Shards)
		}
		if l.Rate.N > 0 {
			if p.RateQuota < 1 || (l.Rate.N >= p.Shards && p.RateQuota*p.Shards > l.Rate.N) {
				t.Errorf("%+v: rate quota %d x %d shards", l, p.RateQuota, p.Shards)
			}
			if !p.WindowEnd.After(now) || p.WindowEnd.Sub(now) > l.Rate.Per {
				t.Errorf("%+v: window ends %v, now %v", l, p.WindowEnd, now)
			}
		} else if p.RateQuota != 0 {
			t.Errorf("%+v: rate quota without a rate", l)
		}
		if l.MaxOpen > 0 && (p.OpenQuota < 1 || (l.MaxOpen >= p.Shards && p.OpenQuota*p.Shards > l.MaxOpen)) {
			t.Errorf("%+v: open quota %d x %d shards", l, p.OpenQuota, p.Shards)
		}
	}
	// Ids spread over every shard.
	l := BotLimits{Rate: BotRate{2000, time.Second}}
	seen := map[int]bool{}
	for i := 0; i < 1000; i++ {
		seen[PlanLimit(l, fmt.Sprintf("it_%d", i), now).Shard] = true
	}
	if len(seen) != 16 {
		t.Fatalf("1000 ids used %d of 16 shards", len(seen))
	}
}

// TestLimitRefusal: the counter rule, case by case.
func TestLimitRefusal(t *testing.T) {
	now := time.Date(2030, 1, 1, 9, 0, 0, 250_000_000, time.UTC)
	p := PlanLimit(BotLimits{Rate: BotRate{5, time.Second}, MaxOpen: 3}, "it_1", now)
	for _, c := range []struct {
		name  string
		c     LimitCounter
		code  string
		after time.Duration
	}{
		{"empty shard", LimitCounter{}, "", 0},
		{"under both", LimitCounter{Window: p.Window, InWindow: 4, Open: 2}, "", 0},
		{"rate full in this window", LimitCounter{Window: p.Window, InWindow: 5, Open: 0}, CodeRateLimited, 750 * time.Millisecond},
		{"rate full in an older window", LimitCounter{Window: p.Window - 1, InWindow: 5, Open: 0}, "", 0},
		{"open full", LimitCounter{Window: p.Window, InWindow: 1, Open: 3}, CodeTooManyOpenIntents, OpenRetryAfter},
		{"both full: the rate answers", LimitCounter{Window: p.Window, InWindow: 9, Open: 9}, CodeRateLimited, 750 * time.Millisecond},
	} {
		r := p.Refusal(c.c, now)
		switch {
		case c.code == "" && (r != nil || !p.Admits(c.c)):
			t.Errorf("%s: refused %v", c.name, r)
		case c.code != "" && (r == nil || r.Code != c.code || r.RetryAfter != c.after || p.Admits(c.c)):
			t.Errorf("%s: %+v, want %s after %v", c.name, r, c.code, c.after)
		case r != nil && (!errors.Is(r, core.ErrLimited) || !core.IsLimitRefusal(fmt.Errorf("wrapped: %w", r))):
			t.Errorf("%s: a refusal must match ErrLimited", c.name)
		}
	}
	// No limits configured: nothing refuses.
	none := PlanLimit(BotLimits{}, "it_1", now)
	if r := none.Refusal(LimitCounter{Window: 1, InWindow: 1e6, Open: 1e6}, now); r != nil {
		t.Fatalf("no limits refused: %v", r)
	}
}

func TestClosesOpenSlot(t *testing.T) {
	counted := func(s core.Status) *core.Intent { return &core.Intent{Status: s, OpenSlot: 3} }
	for _, c := range []struct {
		before core.Status
		after  *core.Intent
		want   bool
	}{
		{core.StatusInFlight, counted(core.StatusSucceeded), true},
		{core.StatusNeedsHuman, counted(core.StatusAbandoned), true},
		{core.StatusPending, counted(core.StatusExpired), true},
		{core.StatusPending, counted(core.StatusInFlight), false},
		{core.StatusInFlight, counted(core.StatusNeedsHuman), false},
		{core.StatusSucceeded, counted(core.StatusSucceeded), false},             // already given back
		{core.StatusInFlight, &core.Intent{Status: core.StatusSucceeded}, false}, // never counted
		{"", counted(core.StatusSucceeded), false},                               // a restore, not an ending
	} {
		if got := ClosesOpenSlot(c.before, c.after); got != c.want {
			t.Errorf("%s -> %s (slot %d): %v, want %v", c.before, c.after.Status, c.after.OpenSlot, got, c.want)
		}
	}
}

// TestOpenRecountRules: which shards are recounted, what holds a count, and
// the correction (only ever down).
func TestOpenRecountRules(t *testing.T) {
	now := time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)
	settle, every := OpenRecountSettle, OpenRecountEvery
	for _, c := range []struct {
		name string
		s    OpenShard
		due  bool
	}{
		{"quiet, counting, never recounted", OpenShard{Open: 2, LastWrite: now.Add(-settle)}, true},
		{"written within the settle time", OpenShard{Open: 2, LastWrite: now.Add(-settle + time.Second)}, false},
		{"counts nothing", OpenShard{Open: 0, LastWrite: now.Add(-time.Hour)}, false},
		{"no last write known", OpenShard{Open: 3}, false},
		{"recounted lately", OpenShard{Open: 2, LastWrite: now.Add(-time.Hour), Recounted: now.Add(-every + time.Second)}, false},
		{"recounted long ago", OpenShard{Open: 2, LastWrite: now.Add(-2 * every), Recounted: now.Add(-every)}, true},
	} {
		if got := DueForOpenRecount(c.s, now, settle, every); got != c.due {
			t.Errorf("%s: due %v, want %v", c.name, got, c.due)
		}
	}
	ended := func(slot int, st core.Status, at time.Time) *core.Intent {
		return &core.Intent{OpenSlot: slot, Status: st, UpdatedAt: at, EndedAt: &at}
	}
	intents := []*core.Intent{
		{OpenSlot: 3, Status: core.StatusPending},                    // open on shard 2
		{OpenSlot: 3, Status: core.StatusNeedsHuman},                 // open on shard 2
		ended(3, core.StatusSucceeded, now.Add(-settle+time.Second)), // ended lately: its give-back may come
		ended(3, core.StatusFailed, now.Add(-settle)),                // ended long ago: given back or lost
		{OpenSlot: 1, Status: core.StatusPending},                    // another shard
		{OpenSlot: 0, Status: core.StatusPending},                    // not counted at all
		{OpenSlot: 3, Status: core.StatusSucceeded, Pruned: &core.Pruned{}},
		nil,
	}
	if got := HeldOpen(intents, 2, now, settle); got != 3 {
		t.Fatalf("HeldOpen = %d, want 3 (two open, one ended within the settle time)", got)
	}
	if got := HeldOpen(intents, 0, now, settle); got != 1 {
		t.Fatalf("HeldOpen shard 0 = %d, want 1", got)
	}
	if to, ok := OpenRecountTo(OpenShard{Open: 5}, 3); !ok || to != 3 {
		t.Fatalf("5 counted, 3 held: %d %v, want lowered to 3", to, ok)
	}
	if to, ok := OpenRecountTo(OpenShard{Open: 3}, 5); ok || to != 3 {
		t.Fatalf("3 counted, 5 held: %d %v, want left alone (never raised)", to, ok)
	}
	if _, ok := OpenRecountTo(OpenShard{Open: 3}, 3); ok {
		t.Fatal("a right count is not rewritten")
	}
}
