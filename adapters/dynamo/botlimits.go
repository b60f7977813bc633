package dynamo

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/botharness/outbox/core"
	"github.com/botharness/outbox/core/botlimit"
)

// Bot-limit counters (issue 24 finding 6, core/botlimit):
//
//	BOTLIMIT#<bot>#<shard>, BOTLIMIT   win (rate window index), wn (intents
//	                                   counted in it), open (open intents),
//	                                   lw (last write, epoch ms: every count,
//	                                   release and give-back sets it), rc
//	                                   (last recount, epoch ms)
//
// One conditional UpdateItem per new intent of a limited bot counts it on
// its shard, or fails with the shard's state (ALL_OLD), from which
// core.LimitPlan.Refusal says which limit refused. The write that ends a
// counted intent gives its open count back (Store.closeOpenSlot).

const botLimitSK = "BOTLIMIT"

// BotLimitPK is the partition key of a bot's counter shard.
func BotLimitPK(bot string, shard int) string { return "BOTLIMIT#" + bot + "#" + strconv.Itoa(shard) }

func botLimitKey(bot string, shard int) map[string]types.AttributeValue {
	return key(BotLimitPK(bot, shard), botLimitSK)
}

// BotLimiter implements core.BotLimiter on the table.
type BotLimiter struct {
	db     API
	table  string
	limits botlimit.BotLimitConfig

	// refused remembers, per counter shard, until when it refuses for the
	// rate: a bot hammering past its limit costs one failed write per
	// shard and window per instance, not one per request.
	mu      sync.Mutex
	refused map[string]time.Time
	// windows is the rate window each shard was last seen counting: the
	// write is "add to this window" or "start this window", and a wrong
	// guess costs one failed write, which returns the real state.
	windows map[string]int64
}

// NewBotLimiter counts on table's items.
func NewBotLimiter(db API, table string, limits botlimit.BotLimitConfig) *BotLimiter {
	return &BotLimiter{db: db, table: table, limits: limits, refused: map[string]time.Time{}, windows: map[string]int64{}}
}

// Limits returns the configured limits.
func (b *BotLimiter) Limits() botlimit.BotLimitConfig { return b.limits }

var _ core.BotLimiter = (*BotLimiter)(nil)

// Admit counts in on its shard, or refuses it (*botlimit.LimitError).
func (b *BotLimiter) Admit(ctx context.Context, in *core.Intent, now time.Time) (func(context.Context), error) {
	l := b.limits.For(in.Bot)
	if !l.Enabled() {
		return nil, nil
	}
	p := botlimit.PlanLimit(l, in.ID, now)
	key := BotLimitPK(in.Bot, p.Shard)
	if p.RateQuota > 0 {
		b.mu.Lock()
		until, ok := b.refused[key]
		b.mu.Unlock()
		if ok && now.Before(until) {
			return nil, &botlimit.LimitError{Code: botlimit.CodeRateLimited, RetryAfter: until.Sub(now),
				Message: "this bot is over its rate of new intents; try again after Retry-After with the same Idempotency-Key"}
		}
	}
	// At most two tries: the window this shard counts may have to move on.
	for try := 0; try < 2; try++ {
		old, err := b.count(ctx, in.Bot, p)
		if err == nil {
			if p.OpenQuota > 0 {
				in.OpenSlot = p.Shard + 1
			}
			return func(ctx context.Context) { b.release(ctx, in.Bot, p) }, nil
		}
		if !errors.Is(err, errCounterRefused) {
			return nil, err
		}
		if r := p.Refusal(old, now); r != nil {
			if r.Code == botlimit.CodeRateLimited {
				b.remember(key, p.WindowEnd)
			}
			return nil, r
		}
		// The condition failed on a state that admits: the window moved
		// under us (another writer reset it). Try once more.
	}
	return nil, fmt.Errorf("count intent %s on %s: the counter kept changing", in.ID, key)
}

var errCounterRefused = errors.New("counter condition failed")

// count is the one conditional write: add the intent to the shard's window
// and open count if both are under their quotas. A shard still counting an
// older window starts the plan's window at 1.
func (b *BotLimiter) count(ctx context.Context, bot string, p botlimit.LimitPlan) (botlimit.LimitCounter, error) {
	names := map[string]string{"#lw": "lw"}
	vals := map[string]types.AttributeValue{":one": avN(1), ":lw": avN(time.Now().UnixMilli())}
	set := []string{"#lw = :lw"} // the recount's "nothing under way" (core.OpenRecountSettle)
	var add, cond []string
	if p.RateQuota > 0 {
		names["#w"], names["#n"] = "win", "wn"
		vals[":w"] = avN(p.Window)
	}
	if p.OpenQuota > 0 {
		names["#o"] = "open"
		vals[":oq"] = avN(int64(p.OpenQuota))
		add = append(add, "#o :one")
		cond = append(cond, "(attribute_not_exists(#o) OR #o < :oq)")
	}
	old := b.current(bot, p)
	if p.RateQuota > 0 {
		if old.Window == p.Window {
			add = append(add, "#n :one")
			vals[":rq"] = avN(int64(p.RateQuota))
			cond = append(cond, "#w = :w AND #n < :rq")
		} else {
			set = append(set, "#w = :w", "#n = :one")
			cond = append(cond, "(attribute_not_exists(#w) OR #w < :w)")
		}
	}
	expr := "SET " + strings.Join(set, ", ")
	if len(add) > 0 {
		expr += " ADD " + strings.Join(add, ", ")
	}
	_, err := b.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: aws.String(b.table), Key: botLimitKey(bot, p.Shard),
		UpdateExpression: aws.String(expr), ConditionExpression: aws.String(strings.Join(cond, " AND ")),
		ExpressionAttributeNames: names, ExpressionAttributeValues: vals,
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	})
	if err == nil {
		if p.RateQuota > 0 {
			b.learn(bot, p, botlimit.LimitCounter{Window: p.Window})
		}
		return botlimit.LimitCounter{}, nil
	}
	var ccf *types.ConditionalCheckFailedException
	if !errors.As(err, &ccf) {
		return botlimit.LimitCounter{}, fmt.Errorf("count on %s: %w", BotLimitPK(bot, p.Shard), err)
	}
	b.learn(bot, p, counterOf(ccf.Item))
	return counterOf(ccf.Item), errCounterRefused
}

// current is what this instance last learnt of the shard's window (no read:
// a wrong guess only costs the retry in Admit, whose failed write returns
// the real state).
func (b *BotLimiter) current(bot string, p botlimit.LimitPlan) botlimit.LimitCounter {
	b.mu.Lock()
	defer b.mu.Unlock()
	return botlimit.LimitCounter{Window: b.windows[BotLimitPK(bot, p.Shard)]}
}

func (b *BotLimiter) learn(bot string, p botlimit.LimitPlan, c botlimit.LimitCounter) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.windows) > 100_000 {
		b.windows = map[string]int64{}
	}
	b.windows[BotLimitPK(bot, p.Shard)] = c.Window
}

func (b *BotLimiter) remember(key string, until time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.refused) > 100_000 {
		b.refused = map[string]time.Time{}
	}
	b.refused[key] = until
}

// release gives back what count added for an intent that was not created
// (best effort: a lost release leaves the shard counting one too many,
// which refuses early, never late).
func (b *BotLimiter) release(ctx context.Context, bot string, p botlimit.LimitPlan) {
	if p.RateQuota > 0 {
		_, _ = b.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
			TableName: aws.String(b.table), Key: botLimitKey(bot, p.Shard),
			UpdateExpression:          aws.String("SET #lw = :lw ADD #n :m"),
			ConditionExpression:       aws.String("#w = :w AND #n > :z"),
			ExpressionAttributeNames:  map[string]string{"#w": "win", "#n": "wn", "#lw": "lw"},
			ExpressionAttributeValues: map[string]types.AttributeValue{":m": avN(-1), ":w": avN(p.Window), ":z": avN(0), ":lw": avN(time.Now().UnixMilli())},
		})
	}
	if p.OpenQuota > 0 {
		closeOpen(ctx, b.db, b.table, bot, p.Shard)
	}
}

// closeOpen takes one from a shard's open count, never below zero.
func closeOpen(ctx context.Context, db API, table, bot string, shard int) {
	closeOpenN(ctx, db, table, bot, shard, 1)
}

// closeOpenN takes n from a shard's open count in one write when it counts
// at least n; otherwise one at a time, each never below zero (a count that
// is short, e.g. of restored intents, is taken to zero, never under).
func closeOpenN(ctx context.Context, db API, table, bot string, shard, n int) {
	if n > 1 {
		_, err := db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
			TableName: aws.String(table), Key: botLimitKey(bot, shard),
			UpdateExpression:          aws.String("SET #lw = :lw ADD #o :m"),
			ConditionExpression:       aws.String("#o >= :n"),
			ExpressionAttributeNames:  map[string]string{"#o": "open", "#lw": "lw"},
			ExpressionAttributeValues: map[string]types.AttributeValue{":m": avN(int64(-n)), ":n": avN(int64(n)), ":lw": avN(time.Now().UnixMilli())},
		})
		var ccf *types.ConditionalCheckFailedException
		if err == nil || !errors.As(err, &ccf) {
			return
		}
		for i := 0; i < n; i++ {
			closeOpen(ctx, db, table, bot, shard)
		}
		return
	}
	_, _ = db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: aws.String(table), Key: botLimitKey(bot, shard),
		UpdateExpression:          aws.String("SET #lw = :lw ADD #o :m"),
		ConditionExpression:       aws.String("#o > :z"),
		ExpressionAttributeNames:  map[string]string{"#o": "open", "#lw": "lw"},
		ExpressionAttributeValues: map[string]types.AttributeValue{":m": avN(-1), ":z": avN(0), ":lw": avN(time.Now().UnixMilli())},
	})
}

// closeOpenSlot gives the open count of an intent back when the write that
// stored it ended it (core.ClosesOpenSlot). A lost give-back overcounts:
// the cap may refuse early, never late. Under CoalesceGiveBacks the give-
// back waits for the batch's flush.
func (s *Store) closeOpenSlot(ctx context.Context, before core.Status, in *core.Intent) {
	if !botlimit.ClosesOpenSlot(before, in) {
		return
	}
	if g, ok := ctx.Value(giveBacksKey{}).(*giveBacks); ok && g != nil {
		g.add(in.Bot, in.OpenSlot-1)
		return
	}
	closeOpen(ctx, s.db, s.table, in.Bot, in.OpenSlot-1)
}

// giveBacks are the give-backs a batch owes, per counter shard.
type giveBacks struct {
	mu sync.Mutex
	n  map[giveBackShard]int
}

type giveBackShard struct {
	bot   string
	shard int
}

type giveBacksKey struct{}

func (g *giveBacks) add(bot string, shard int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.n[giveBackShard{bot, shard}]++
}

// CoalesceGiveBacks is for a worker invocation that ends several intents
// (the retrier's batch): the open-count give-backs of intents ended under
// the returned context are collected and made by flush, one write per
// counter shard (ADD open -n) instead of one per intent. Until the flush
// the counts stay high, so the cap may refuse early for the rest of the
// batch, never late; a crash before the flush loses them like any lost
// give-back, and the sweeper's recount repairs them (OpenRecount).
func (s *Store) CoalesceGiveBacks(ctx context.Context) (context.Context, func(context.Context)) {
	g := &giveBacks{n: map[giveBackShard]int{}}
	flush := func(ctx context.Context) {
		g.mu.Lock()
		owed := g.n
		g.n = map[giveBackShard]int{}
		g.mu.Unlock()
		var wg sync.WaitGroup
		for k, n := range owed {
			wg.Add(1)
			go func() {
				defer wg.Done()
				closeOpenN(ctx, s.db, s.table, k.bot, k.shard, n)
			}()
		}
		wg.Wait()
	}
	return context.WithValue(ctx, giveBacksKey{}, g), flush
}

func counterOf(item map[string]types.AttributeValue) botlimit.LimitCounter {
	n := func(name string) int64 {
		v, ok := item[name].(*types.AttributeValueMemberN)
		if !ok {
			return 0
		}
		x, _ := strconv.ParseInt(v.Value, 10, 64)
		return x
	}
	return botlimit.LimitCounter{Window: n("win"), InWindow: int(n("wn")), Open: int(n("open"))}
}

// Counters reads a bot's counter shards (admin view).
func (b *BotLimiter) Counters(ctx context.Context, bot string) ([]botlimit.LimitCounter, error) {
	n := botlimit.LimitShards(b.limits.For(bot))
	out := make([]botlimit.LimitCounter, n)
	for i := range out {
		r, err := b.db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(b.table), Key: botLimitKey(bot, i), ConsistentRead: aws.Bool(true)})
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", BotLimitPK(bot, i), err)
		}
		out[i] = counterOf(r.Item)
	}
	return out, nil
}
