package dynamo

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/botharness/outbox/core"
	"github.com/botharness/outbox/core/auth"
	"github.com/botharness/outbox/core/botlimit"
)

// loseGiveBacks is the table client of a process that crashes right after
// the write that ends an intent: the open-count give-back that follows it
// never reaches the table.
type loseGiveBacks struct {
	API
	lose atomic.Bool
	lost atomic.Int64
}

func (l *loseGiveBacks) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, opt ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	if l.lose.Load() && aws.ToString(in.UpdateExpression) == "SET #lw = :lw ADD #o :m" {
		l.lost.Add(1)
		return nil, errors.New("crashed before the give-back")
	}
	return l.API.UpdateItem(ctx, in, opt...)
}

// TestOpenRecountRepairsALostGiveBack: a give-back lost after its intent
// ended keeps the shard full, so the cap refuses; the sweeper's recount
// lowers the shard to what the bot's intents hold once nothing has written
// it for the settle time, and the cap admits again. A shard whose intent
// ended within the settle time (its give-back may still come) and one
// holding an open intent are left alone.
func TestOpenRecountRepairsALostGiveBack(t *testing.T) {
	db, table := testTable(t, "botrecount")
	faulty := &loseGiveBacks{API: db}
	cfg := botlimit.BotLimitConfig{Default: botlimit.BotLimits{MaxOpen: 16}} // 16 shards, 1 each
	lim := NewBotLimiter(faulty, table, cfg)
	store := New(faulty, table)
	tokens := NewTokens(db, table)
	ctx := context.Background()
	start := time.Now().UTC()
	if _, _, err := auth.IssueToken(ctx, tokens, auth.TokenIssue{Kind: core.PrincipalBot, Owner: "bot-rc"}, start); err != nil {
		t.Fatal(err)
	}
	shardOf := func(in *core.Intent) int { return botlimit.PlanLimit(cfg.For("bot-rc"), in.ID, start).Shard }
	// Three admitted intents on three shards, and a fourth sharing the
	// first one's shard.
	var held [3]*core.Intent
	var waiting *core.Intent
	used := map[int]int{}
	for i := 0; waiting == nil || held[2] == nil; i++ {
		if i > 500 {
			t.Fatal("no ids spread as needed")
		}
		in := limitedIntent("bot-rc", i, start)
		s := shardOf(in)
		switch n, ok := used[s]; {
		case !ok && held[2] == nil:
			if _, err := lim.Admit(ctx, in, start); err != nil {
				t.Fatal(err)
			}
			if _, _, err := store.Create(ctx, in); err != nil {
				t.Fatal(err)
			}
			held[len(used)] = in
			used[s] = len(used)
		case ok && n == 0 && waiting == nil:
			waiting = in
		}
	}
	if _, err := lim.Admit(ctx, waiting, start); !core.IsLimitRefusal(err) {
		t.Fatalf("the shard's quota of 1 is taken, yet: %v", err)
	}
	// held[0] ends and its give-back is lost; held[1] ends later (within
	// the settle time of the recount below) and loses it too; held[2]
	// stays open.
	faulty.lose.Store(true)
	end := func(in *core.Intent, at time.Time) {
		if _, err := store.Update(ctx, in.ID, func(c *core.Intent) error {
			c.Status, c.UpdatedAt = core.StatusSucceeded, at
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	end(held[0], start)
	later := start.Add(botlimit.OpenRecountSettle + time.Minute)
	end(held[1], later.Add(-time.Minute))
	faulty.lose.Store(false)
	if faulty.lost.Load() != 2 {
		t.Fatalf("%d give-backs lost, want 2", faulty.lost.Load())
	}
	if _, err := lim.Admit(ctx, waiting, start); !core.IsLimitRefusal(err) {
		t.Fatalf("after a lost give-back the cap should still refuse (the drift): %v", err)
	}

	rc := NewOpenRecount(store, tokens)
	// Right away nothing is corrected: the shards were written just now
	// (an admission's put or a give-back could be under way).
	if n, err := rc.RecountOpen(ctx, time.Now()); err != nil || n != 0 {
		t.Fatalf("recount right after the writes corrected %d (%v), want 0", n, err)
	}
	// The sweeper's scan is throttled (ScanEvery): a second call at once
	// reads nothing.
	if n, err := rc.RecountOpen(ctx, time.Now().Add(time.Second)); err != nil || n != 0 {
		t.Fatalf("throttled scan: %d %v", n, err)
	}
	// Once the shards are settled: held[0]'s shard is lowered to 0; held[1]
	// ended a minute ago (its give-back could still come) and held[2] is
	// open, so both stay at 1.
	if n, err := rc.RecountOpen(ctx, later); err != nil || n != 1 {
		t.Fatalf("recount after the settle time corrected %d (%v), want 1", n, err)
	}
	counters, err := lim.Counters(ctx, "bot-rc")
	if err != nil {
		t.Fatal(err)
	}
	for i, in := range held {
		want := 1
		if i == 0 {
			want = 0
		}
		if got := counters[shardOf(in)].Open; got != want {
			t.Fatalf("shard of held[%d] counts %d, want %d", i, got, want)
		}
	}
	// The cap admits again on the repaired shard.
	if _, err := lim.Admit(ctx, waiting, start); err != nil {
		t.Fatalf("after the recount the cap still refuses: %v", err)
	}
	// A recount within OpenRecountEvery leaves the shards alone, even the
	// one just admitted to.
	rc.ScanEvery = time.Nanosecond
	if n, err := rc.RecountOpen(ctx, later.Add(botlimit.OpenRecountSettle)); err != nil || n != 0 {
		t.Fatalf("second recount corrected %d (%v)", n, err)
	}
}

// countGiveBacks counts the give-back writes that reach the table.
type countGiveBacks struct {
	API
	n atomic.Int64
}

func (c *countGiveBacks) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, opt ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	if aws.ToString(in.UpdateExpression) == "SET #lw = :lw ADD #o :m" {
		c.n.Add(1)
	}
	return c.API.UpdateItem(ctx, in, opt...)
}

// TestCoalescedGiveBacksOneWritePerShard: intents ended in one batch give
// their open counts back in one write per counter shard at the flush (not
// before: the count stays high, refusing early, never late), and a shard
// counting fewer than the batch owes is taken to zero, never below.
func TestCoalescedGiveBacksOneWritePerShard(t *testing.T) {
	db, table := testTable(t, "botcoalesce")
	counting := &countGiveBacks{API: db}
	cfg := botlimit.BotLimitConfig{Default: botlimit.BotLimits{Rate: botlimit.BotRate{N: 50, Per: time.Second}, MaxOpen: 10}} // one shard
	lim := NewBotLimiter(counting, table, cfg)
	store := New(counting, table)
	ctx := context.Background()
	now := time.Now().UTC()
	admit := func(from, n int) []*core.Intent {
		var out []*core.Intent
		for i := from; i < from+n; i++ {
			in := limitedIntent("bot-co", i, now)
			if _, err := lim.Admit(ctx, in, now); err != nil {
				t.Fatal(err)
			}
			if _, _, err := store.Create(ctx, in); err != nil {
				t.Fatal(err)
			}
			out = append(out, in)
		}
		return out
	}
	endAll := func(ctx context.Context, ins []*core.Intent) {
		for _, in := range ins {
			if _, err := store.Update(ctx, in.ID, func(c *core.Intent) error {
				c.Status, c.UpdatedAt = core.StatusSucceeded, now
				return nil
			}); err != nil {
				t.Fatal(err)
			}
		}
	}
	open := func() int {
		cs, err := lim.Counters(ctx, "bot-co")
		if err != nil || len(cs) != 1 {
			t.Fatalf("counters %v %v", cs, err)
		}
		return cs[0].Open
	}
	batch := admit(0, 5)
	bctx, flush := store.CoalesceGiveBacks(ctx)
	endAll(bctx, batch)
	if counting.n.Load() != 0 || open() != 5 {
		t.Fatalf("before the flush: %d give-back writes, open %d; want 0 and 5", counting.n.Load(), open())
	}
	flush(bctx)
	if counting.n.Load() != 1 || open() != 0 {
		t.Fatalf("after the flush: %d give-back writes, open %d; want 1 and 0", counting.n.Load(), open())
	}
	// A short count (e.g. restored intents) is taken to zero, never below.
	short := admit(10, 3)
	if _, err := db.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: aws.String(table), Key: botLimitKey("bot-co", 0),
		UpdateExpression: aws.String("SET #o = :one"), ExpressionAttributeNames: map[string]string{"#o": "open"},
		ExpressionAttributeValues: map[string]types.AttributeValue{":one": avN(1)}}); err != nil {
		t.Fatal(err)
	}
	bctx, flush = store.CoalesceGiveBacks(ctx)
	endAll(bctx, short)
	flush(bctx)
	if got := open(); got != 0 {
		t.Fatalf("a short count ends at %d, want 0", got)
	}
	// Outside a batch, each end gives back at once.
	single := admit(20, 1)
	counting.n.Store(0)
	endAll(ctx, single)
	if counting.n.Load() != 1 || open() != 0 {
		t.Fatalf("unbatched end: %d writes, open %d", counting.n.Load(), open())
	}
}
