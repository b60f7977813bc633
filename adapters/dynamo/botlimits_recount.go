package dynamo

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/botharness/outbox/core"
	"github.com/botharness/outbox/core/botlimit"
)

// OpenRecount repairs open counters a lost give-back left too high
// (core.OpenRecounter; the rule is core's "The open-count recount"). It
// runs in the sweeper:
//
//  1. the bots are the owners of bot tokens (the TOKENS listing on gsi1);
//     each bot's core.MaxLimitShards counter items are read in one
//     eventually consistent BatchGetItem per 6 bots;
//  2. a bot with a shard due for a recount (core.DueForOpenRecount: counts
//     something, unwritten for the settle time, not recounted lately) has
//     its intents read through its profile listing (gsi2, keys only, then
//     one consistent batched read of the intent items);
//  3. each due shard is read again (consistent) and lowered to what the
//     intents hold (core.HeldOpen, core.OpenRecountTo) by a write
//     conditional on its last write being the one just read, so an
//     admission or give-back in between cancels the correction; a shard
//     found right is marked recounted (rc) under the same condition.
//
// Cost per scan (at most one per ScanEvery per sweeper instance): one token
// listing page per 100 tokens + 0.5 RCU per counter item (16 per bot). Per
// recount of a bot (a quiet shard counting something, at most once per
// core.OpenRecountEvery): its profile keys (gsi2 pages) + 1 RCU per intent
// item it still holds in the table + 1 write per due shard.
type OpenRecount struct {
	db     API
	table  string
	store  *Store
	tokens *Tokens
	// Settle and Every are core.OpenRecountSettle and core.OpenRecountEvery
	// unless set (tests shorten them).
	Settle, Every time.Duration
	// ScanEvery is how often the counters are scanned at most (default 5
	// minutes; the sweeper runs every minute).
	ScanEvery time.Duration

	mu       sync.Mutex
	lastScan time.Time
}

// OpenRecountScanEvery is OpenRecount's default ScanEvery.
const OpenRecountScanEvery = 5 * time.Minute

// NewOpenRecount recounts the counters of store's table.
func NewOpenRecount(store *Store, tokens *Tokens) *OpenRecount {
	return &OpenRecount{db: store.db, table: store.table, store: store, tokens: tokens}
}

var _ core.OpenRecounter = (*OpenRecount)(nil)

// RecountOpen makes one scan (if ScanEvery has passed since the last one).
func (r *OpenRecount) RecountOpen(ctx context.Context, now time.Time) (int, error) {
	r.mu.Lock()
	if !r.lastScan.IsZero() && now.Sub(r.lastScan) < core.OrDefault(r.ScanEvery, OpenRecountScanEvery) && now.After(r.lastScan) {
		r.mu.Unlock()
		return 0, nil
	}
	r.lastScan = now
	r.mu.Unlock()
	settle, every := core.OrDefault(r.Settle, botlimit.OpenRecountSettle), core.OrDefault(r.Every, botlimit.OpenRecountEvery)
	bots, err := r.bots(ctx)
	if err != nil {
		return 0, err
	}
	shards, err := r.readShards(ctx, bots, false)
	if err != nil {
		return 0, err
	}
	due := map[string][]botlimit.OpenShard{}
	var order []string
	for _, s := range shards {
		if botlimit.DueForOpenRecount(s, now, settle, every) {
			if due[s.Bot] == nil {
				order = append(order, s.Bot)
			}
			due[s.Bot] = append(due[s.Bot], s)
		}
	}
	corrected := 0
	var errs []error
	for _, bot := range order {
		n, err := r.recountBot(ctx, bot, due[bot], now, settle, every)
		corrected += n
		errs = append(errs, err)
	}
	return corrected, errors.Join(errs...)
}

// bots lists the owners of bot tokens.
func (r *OpenRecount) bots(ctx context.Context) ([]string, error) {
	seen := map[string]bool{}
	var out []string
	cursor := ""
	for {
		toks, next, err := r.tokens.ListTokens(ctx, cursor, 100)
		if err != nil {
			return nil, err
		}
		for _, t := range toks {
			if t.Kind == string(core.PrincipalBot) && t.Owner != "" && !seen[t.Owner] {
				seen[t.Owner] = true
				out = append(out, t.Owner)
			}
		}
		if next == "" {
			return out, nil
		}
		cursor = next
	}
}

// readShards reads every counter shard of bots that exists.
func (r *OpenRecount) readShards(ctx context.Context, bots []string, consistent bool) ([]botlimit.OpenShard, error) {
	var keys []map[string]types.AttributeValue
	for _, b := range bots {
		for i := 0; i < botlimit.MaxLimitShards; i++ {
			keys = append(keys, botLimitKey(b, i))
		}
	}
	var out []botlimit.OpenShard
	for start := 0; start < len(keys); start += 100 {
		req := map[string]types.KeysAndAttributes{r.table: {Keys: keys[start:min(start+100, len(keys))], ConsistentRead: aws.Bool(consistent)}}
		for tries := 0; len(req) > 0; tries++ {
			if tries == 10 {
				return nil, errors.New("read bot-limit counters: unprocessed keys remain")
			}
			res, err := r.db.BatchGetItem(ctx, &dynamodb.BatchGetItemInput{RequestItems: req})
			if err != nil {
				return nil, fmt.Errorf("read bot-limit counters: %w", err)
			}
			for _, item := range res.Responses[r.table] {
				if s, ok := openShardOf(item); ok {
					out = append(out, s)
				}
			}
			req = res.UnprocessedKeys
		}
	}
	return out, nil
}

// openShardOf reads a counter item (pk BOTLIMIT#<bot>#<shard>).
func openShardOf(item map[string]types.AttributeValue) (botlimit.OpenShard, bool) {
	pk := attrS(item, "pk")
	const pfx = "BOTLIMIT#"
	if len(pk) <= len(pfx) {
		return botlimit.OpenShard{}, false
	}
	rest := pk[len(pfx):]
	i := len(rest) - 1
	for i >= 0 && rest[i] != '#' {
		i--
	}
	if i <= 0 {
		return botlimit.OpenShard{}, false
	}
	shard, err := strconv.Atoi(rest[i+1:])
	if err != nil {
		return botlimit.OpenShard{}, false
	}
	ms := func(name string) time.Time {
		v, ok := item[name].(*types.AttributeValueMemberN)
		if !ok {
			return time.Time{}
		}
		n, _ := strconv.ParseInt(v.Value, 10, 64)
		return time.UnixMilli(n)
	}
	return botlimit.OpenShard{Bot: rest[:i], Shard: shard, Open: counterOf(item).Open, LastWrite: ms("lw"), Recounted: ms("rc")}, true
}

// recountBot reads the bot's intents once and corrects its due shards.
func (r *OpenRecount) recountBot(ctx context.Context, bot string, due []botlimit.OpenShard, now time.Time, settle, every time.Duration) (int, error) {
	var intents []*core.Intent
	err := r.store.ProfileKeys(ctx, bot, func(keys []map[string]types.AttributeValue) error {
		var ik []map[string]types.AttributeValue
		for _, k := range keys {
			if attrS(k, "sk") == intentSK {
				ik = append(ik, k)
			}
		}
		items, err := hydrate(ctx, r.db, r.table, ik)
		if err != nil {
			return err
		}
		for _, it := range items {
			in, err := UnmarshalIntent(it)
			if err != nil {
				return err
			}
			if in.Bot == bot {
				intents = append(intents, in)
			}
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("recount %s: %w", bot, err)
	}
	corrected := 0
	var errs []error
	for _, d := range due {
		// Read again, consistently: the correction is conditional on this
		// read's last write, and the shard must still be due.
		res, err := r.db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(r.table), Key: botLimitKey(bot, d.Shard), ConsistentRead: aws.Bool(true)})
		if err != nil {
			errs = append(errs, fmt.Errorf("recount %s: %w", BotLimitPK(bot, d.Shard), err))
			continue
		}
		cur, ok := openShardOf(res.Item)
		if !ok || !botlimit.DueForOpenRecount(cur, now, settle, every) {
			continue
		}
		to, lower := botlimit.OpenRecountTo(cur, botlimit.HeldOpen(intents, d.Shard, now, settle))
		set := "SET #rc = :now"
		vals := map[string]types.AttributeValue{":now": avN(now.UnixMilli()), ":lw": avN(cur.LastWrite.UnixMilli()), ":o": avN(int64(cur.Open))}
		if lower {
			set += ", #o = :to"
			vals[":to"] = avN(int64(to))
		}
		_, err = r.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
			TableName: aws.String(r.table), Key: botLimitKey(bot, d.Shard),
			UpdateExpression:          aws.String(set),
			ConditionExpression:       aws.String("#lw = :lw AND #o = :o"),
			ExpressionAttributeNames:  map[string]string{"#rc": "rc", "#o": "open", "#lw": "lw"},
			ExpressionAttributeValues: vals,
		})
		var ccf *types.ConditionalCheckFailedException
		switch {
		case errors.As(err, &ccf):
			// Written meanwhile: no longer quiet; a later scan looks again.
		case err != nil:
			errs = append(errs, fmt.Errorf("recount %s: %w", BotLimitPK(bot, d.Shard), err))
		case lower:
			corrected++
		}
	}
	return corrected, errors.Join(errs...)
}
